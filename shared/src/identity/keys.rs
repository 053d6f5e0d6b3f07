//! A provider's signing keys (SC-ID-02, SC-ID-04): found by OpenID discovery, fetched from its
//! JWKS, cached, and fetched again when a token names a key not in the cache — at most once per
//! `jwks_refresh`, so a stream of tokens with made-up `kid`s cannot make us hammer the provider.
//! Fetched keys serve for `jwks_max_age` while the provider cannot be reached; with none, token
//! callers are told to retry (503) and keys keep working.
//!
//! Fetches go out like every other request of the server ([`crate::target::direct`]: no proxy,
//! no redirect), bounded in time and size.

use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long one fetch (discovery or JWKS) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest discovery document or key set read.
const MAX_DOCUMENT: usize = 256 * 1024;
/// Keys this old are fetched again on the next token (a key the provider withdrew stops
/// verifying within this), while they still serve if the provider cannot be reached.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// One verification key of the provider.
struct Key {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

/// Why no key verifies a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The provider's keys are known and none has this `kid` (and algorithm).
    Unknown,
    /// No keys, or only keys past their age: the provider could not be reached.
    Unavailable,
}

#[derive(Default)]
struct Cache {
    keys: Vec<Key>,
    /// When the keys were last fetched.
    fetched: Option<Instant>,
    /// When a fetch was last tried, successful or not.
    tried: Option<Instant>,
    /// Which fetch the keys came from: a signature verified with an earlier set is verified
    /// again (the verifier's memory of checked tokens, `super::Verifier`).
    generation: u64,
}

/// One issuer's keys.
pub struct Provider {
    issuer: String,
    refresh: Duration,
    max_age: Duration,
    client: reqwest::Client,
    cache: tokio::sync::Mutex<Cache>,
}

impl Provider {
    pub fn new(issuer: &str, refresh: Duration, max_age: Duration) -> Provider {
        Provider {
            issuer: issuer.to_owned(),
            refresh,
            max_age,
            client: crate::target::direct()
                .timeout(FETCH_TIMEOUT)
                .build()
                .expect("an HTTP client builds"),
            cache: tokio::sync::Mutex::new(Cache::default()),
        }
    }

    /// A provider whose keys are `set` (a JWKS document) and that never fetches: for the
    /// token fuzz target and tests, which run the server's checks without a network.
    #[doc(hidden)]
    pub fn fixed(issuer: &str, set: &Value) -> Provider {
        let mut provider = Provider::new(issuer, Duration::MAX, Duration::MAX);
        let now = Instant::now();
        let keys = set.get("keys").and_then(Value::as_array);
        provider.cache = tokio::sync::Mutex::new(Cache {
            keys: keys.into_iter().flatten().filter_map(key).collect(),
            fetched: Some(now),
            tried: Some(now),
            generation: 0,
        });
        provider
    }

    /// The key that verifies a token signed with `alg` under `kid`, and the generation of the
    /// set it is from. One caller fetches while the others wait for its answer (one lock), so a
    /// burst asks the provider once.
    pub async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<(DecodingKey, u64), Lookup> {
        let mut cache = self.cache.lock().await;
        let stale = cache.fetched.is_none_or(|t| t.elapsed() >= STALE_AFTER);
        if let Some(key) = self.usable(&cache, kid, alg).filter(|_| !stale) {
            return Ok((key, cache.generation));
        }
        if cache.tried.is_none_or(|t| t.elapsed() >= self.refresh) {
            cache.tried = Some(Instant::now());
            match self.fetch().await {
                Ok(keys) => {
                    cache.keys = keys;
                    cache.fetched = Some(Instant::now());
                    cache.generation += 1;
                }
                Err(e) => {
                    tracing::warn!(issuer = %self.issuer, error = %e, "identity provider keys not fetched")
                }
            }
        }
        if !self.fresh(&cache) {
            return Err(Lookup::Unavailable);
        }
        let key = self.usable(&cache, kid, alg).ok_or(Lookup::Unknown)?;
        Ok((key, cache.generation))
    }

    fn fresh(&self, cache: &Cache) -> bool {
        cache.fetched.is_some_and(|t| t.elapsed() < self.max_age)
    }

    /// A cached key for `kid` and `alg`; a token without a `kid` is verified only by a set of
    /// one key for its algorithm.
    fn usable(&self, cache: &Cache, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        if !self.fresh(cache) {
            return None;
        }
        let mut candidates = cache.keys.iter().filter(|k| k.alg == alg);
        match kid {
            Some(kid) => candidates.find(|k| k.kid.as_deref() == Some(kid)),
            None => candidates.next().filter(|_| candidates.next().is_none()),
        }
        .map(|k| k.key.clone())
    }

    /// Discovery, then the key set it names.
    async fn fetch(&self) -> Result<Vec<Key>, String> {
        let discovery = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let document = self.json(&discovery).await?;
        // OpenID Discovery §4.3: the document names the issuer it was asked for, exactly.
        if document.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err("the discovery document names another issuer".into());
        }
        let jwks_uri = document
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or("the discovery document names no jwks_uri")?;
        let set = self.json(jwks_uri).await?;
        let keys = set
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("the key set has no keys")?;
        Ok(keys.iter().filter_map(key).collect())
    }

    /// GET a JSON document, at most [`MAX_DOCUMENT`] bytes, answered 200.
    async fn json(&self, url: &str) -> Result<Value, String> {
        let mut response = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            if body.len() + chunk.len() > MAX_DOCUMENT {
                return Err(format!("{url}: larger than {MAX_DOCUMENT} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    }
}

/// A JWK we verify with: RSA (RS256), EC P-256 (ES256) or Ed25519 (EdDSA), for signatures.
/// Others (encryption keys, other curves, symmetric keys) are passed over.
fn key(jwk: &Value) -> Option<Key> {
    let field = |name: &str| jwk.get(name).and_then(Value::as_str);
    if field("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let (alg, key) = match (field("kty")?, field("crv")) {
        ("RSA", _) => (
            Algorithm::RS256,
            DecodingKey::from_rsa_components(field("n")?, field("e")?).ok()?,
        ),
        ("EC", Some("P-256")) => (
            Algorithm::ES256,
            DecodingKey::from_ec_components(field("x")?, field("y")?).ok()?,
        ),
        ("OKP", Some("Ed25519")) => (
            Algorithm::EdDSA,
            DecodingKey::from_ed_components(field("x")?).ok()?,
        ),
        _ => return None,
    };
    // A key that names its algorithm is used for that one only.
    let named = field("alg");
    if named.is_some_and(|a| a != super::token::name(alg)) {
        return None;
    }
    Some(Key {
        kid: field("kid").map(str::to_owned),
        alg,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SC-ID-02: only signature keys of the three algorithms are kept; a symmetric key in a
    /// provider's set never becomes a verification key (HMAC is refused), nor does a key that
    /// names another algorithm.
    #[test]
    fn sc_id_02_only_asymmetric_signature_keys_are_kept() {
        let cases = [
            (
                json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"}),
                Some(Algorithm::RS256),
            ),
            (
                json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": "RS256", "use": "sig"}),
                Some(Algorithm::RS256),
            ),
            (
                json!({"kty": "EC", "crv": "P-256", "x": "AQAB", "y": "AQAB"}),
                Some(Algorithm::ES256),
            ),
            (
                json!({"kty": "OKP", "crv": "Ed25519", "x": "AQAB"}),
                Some(Algorithm::EdDSA),
            ),
            (
                json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "use": "enc"}),
                None,
            ),
            (
                json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": "RS512"}),
                None,
            ),
            (
                json!({"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": "HS256"}),
                None,
            ),
            (
                json!({"kty": "EC", "crv": "P-384", "x": "AQAB", "y": "AQAB"}),
                None,
            ),
            (json!({"kty": "OKP", "crv": "X25519", "x": "AQAB"}), None),
            (json!({"kty": "oct", "k": "c2VjcmV0"}), None),
            (json!({"kty": "RSA", "n": "AQAB"}), None),
            (json!({"kty": "RSA", "n": "not base64!", "e": "AQAB"}), None),
        ];
        for (jwk, expected) in cases {
            assert_eq!(key(&jwk).map(|k| k.alg), expected, "{jwk}");
        }
    }
}
