//! Who an OAuth access token is (SC-ID-01 … SC-ID-04): a JWT from a tenant's identity
//! provider, verified here against the provider's published keys — no call to the provider per
//! request, no introspection — and read as the same [`Principal`] a key names.
//!
//! The order is fixed and fails closed: the token's size and algorithm; its issuer, which names
//! the tenants that trust it; the signature, with that issuer's key; then its claims (type,
//! issuer, audience, expiry, start) for the tenant whose audience it names; then the role the
//! route needs, from its scopes. The token itself goes no further: tools never see it.

pub mod claims;
pub mod keys;
pub mod token;

pub use claims::Need;

use crate::config::{Config, Principal};
use sha2::{Digest, Sha256};
use std::{collections::HashMap, sync::Mutex};

/// How many checked signatures a verifier remembers; past it, it forgets them all and starts
/// again (a bound on memory; the next request of each token checks its signature once more).
const REMEMBERED: usize = 10_000;

/// Why a bearer token is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// 401 `invalid_token`.
    #[error("{0}")]
    Invalid(String),
    /// 403 `insufficient_scope`: the scope the route needs.
    #[error("the token lacks the scope {0}")]
    Scope(String),
    /// 503: the provider's keys cannot be had right now.
    #[error("the identity provider cannot be reached; retry shortly")]
    Unavailable,
}

fn invalid(e: impl std::fmt::Display) -> TokenError {
    TokenError::Invalid(e.to_string())
}

/// Every configured issuer's keys: built once per process (per container on Lambda, so warm
/// invocations keep the keys).
pub struct Verifier {
    providers: HashMap<String, keys::Provider>,
    /// Tokens whose signature verified, by the SHA-256 of the whole token, with the generation
    /// of the issuer's key set that verified it. An agent sends one token for its lifetime, and
    /// the signature (a public-key operation) was most of a token's cost per request
    /// (BENCHMARKS.md, identity). Only the signature's verdict is kept: the claims — expiry,
    /// audience, type, scopes — are checked on every request, and a fetched key set (rotation)
    /// makes every token prove its signature again.
    verified: Mutex<HashMap<[u8; 32], u64>>,
}

impl Verifier {
    pub fn new(config: &Config) -> Verifier {
        let mut providers = HashMap::new();
        for id in config.tenants.values().filter_map(|t| t.identity.as_ref()) {
            providers.entry(id.issuer.clone()).or_insert_with(|| {
                keys::Provider::new(
                    &id.issuer,
                    id.jwks_refresh.unsigned_abs(),
                    id.jwks_max_age.unsigned_abs(),
                )
            });
        }
        Verifier::of(providers)
    }

    fn of(providers: HashMap<String, keys::Provider>) -> Verifier {
        Verifier {
            providers,
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// A verifier whose every configured issuer has the keys of `set` (a JWKS document) and
    /// never fetches: the server's checks, whole, without a network (the token fuzz target).
    #[doc(hidden)]
    pub fn fixed(config: &Config, set: &serde_json::Value) -> Verifier {
        let providers = config
            .tenants
            .values()
            .filter_map(|t| t.identity.as_ref())
            .map(|id| (id.issuer.clone(), keys::Provider::fixed(&id.issuer, set)))
            .collect();
        Verifier::of(providers)
    }

    /// The principal `bearer` (a JWT) names, for a route that needs `need`, at `now`.
    pub async fn principal(
        &self,
        config: &Config,
        bearer: &str,
        need: Need,
        now: jiff::Timestamp,
    ) -> Result<Principal, TokenError> {
        let unverified = token::read(bearer).map_err(invalid)?;
        let issuer = unverified.claims.get("iss").and_then(|v| v.as_str());
        let provider = issuer
            .and_then(|iss| self.providers.get(iss))
            .ok_or_else(|| invalid("no tenant trusts the token's issuer"))?;
        let (key, generation) = provider
            .key(unverified.kid.as_deref(), unverified.alg)
            .await
            .map_err(|lookup| match lookup {
                keys::Lookup::Unknown => invalid("the token's key is not the issuer's"),
                keys::Lookup::Unavailable => TokenError::Unavailable,
            })?;
        let digest: [u8; 32] = Sha256::digest(bearer.as_bytes()).into();
        if !self.checked(&digest, generation) {
            token::verify(bearer, unverified.alg, &key).map_err(invalid)?;
            self.remember(digest, generation);
        }
        let claims = &unverified.claims;
        // The tenants of this issuer: the one whose audience the token names.
        let mut refused = claims::Refused::Audience;
        for tenant in config.tenants.values() {
            let Some(id) = tenant
                .identity
                .as_ref()
                .filter(|i| Some(i.issuer.as_str()) == issuer)
            else {
                continue;
            };
            match claims::check(unverified.typ.as_deref(), claims, id, now) {
                Ok(()) => {}
                Err(claims::Refused::Audience) => continue,
                Err(other) => {
                    refused = other;
                    break;
                }
            }
            let role = claims::role(claims, id, need).map_err(TokenError::Scope)?;
            return claims::principal(&tenant.name, claims, id, role).map_err(invalid);
        }
        Err(invalid(refused))
    }

    /// Did this token's signature verify with the key set of `generation`?
    fn checked(&self, digest: &[u8; 32], generation: u64) -> bool {
        let verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        verified.get(digest) == Some(&generation)
    }

    fn remember(&self, digest: [u8; 32], generation: u64) {
        let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if verified.len() >= REMEMBERED {
            verified.clear();
        }
        verified.insert(digest, generation);
    }
}

#[cfg(test)]
mod tests;
