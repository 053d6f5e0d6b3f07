//! A compact JWS access token, read before and after its signature is checked (SC-ID-02).
//! Only asymmetric algorithms are accepted: `none` cannot be named (the JOSE library has no such
//! algorithm) and HMAC is refused here, so a token "signed" with a provider's public key as an
//! HMAC secret never reaches a key.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

/// The largest token read: several kilobytes of groups fit; an oversized header is refused
/// before anything is decoded.
pub const MAX_TOKEN: usize = 16 * 1024;

/// Why a token could not be read or its signature is bad: each is a 401 `invalid_token`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("the token is larger than {MAX_TOKEN} bytes")]
    TooLarge,
    #[error("the token is not a JWT")]
    Malformed,
    #[error("the token's algorithm is not RS256, ES256 or EdDSA")]
    Algorithm,
    #[error("the token's signature does not verify")]
    Signature,
}

/// A token's header and unverified claims: enough to find the key, nothing to trust.
pub struct Unverified {
    pub alg: Algorithm,
    pub kid: Option<String>,
    pub typ: Option<String>,
    pub claims: Map<String, Value>,
}

/// Does this bearer look like a JWT (three base64url parts), rather than an API key?
pub fn looks_like_jwt(bearer: &str) -> bool {
    bearer.split('.').count() == 3 && bearer.starts_with("ey")
}

/// The header, checked for size and algorithm, and the payload, parsed but not trusted.
pub fn read(token: &str) -> Result<Unverified, Unreadable> {
    if token.len() > MAX_TOKEN {
        return Err(Unreadable::TooLarge);
    }
    let header = jsonwebtoken::decode_header(token).map_err(|_| Unreadable::Malformed)?;
    if !matches!(
        header.alg,
        Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA
    ) {
        return Err(Unreadable::Algorithm);
    }
    let payload = token.split('.').nth(1).ok_or(Unreadable::Malformed)?;
    let bytes = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| Unreadable::Malformed)?;
    // Bounded by MAX_TOKEN, and serde_json stops at 128 levels of nesting.
    let claims = match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => map,
        _ => return Err(Unreadable::Malformed),
    };
    Ok(Unverified {
        alg: header.alg,
        kid: header.kid,
        typ: header.typ,
        claims,
    })
}

/// Check the signature with `key`; the claims are checked by [`super::claims::check`].
pub fn verify(token: &str, alg: Algorithm, key: &DecodingKey) -> Result<(), Unreadable> {
    let mut validation = Validation::new(alg);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    jsonwebtoken::decode::<Value>(token, key, &validation)
        .map(|_| ())
        .map_err(|_| Unreadable::Signature)
}

/// The JOSE name of an algorithm we accept.
pub fn name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        _ => "unaccepted",
    }
}
