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
use std::collections::HashMap;

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
        Verifier { providers }
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
        Verifier { providers }
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
        let key = provider
            .key(unverified.kid.as_deref(), unverified.alg)
            .await
            .map_err(|lookup| match lookup {
                keys::Lookup::Unknown => invalid("the token's key is not the issuer's"),
                keys::Lookup::Unavailable => TokenError::Unavailable,
            })?;
        token::verify(bearer, unverified.alg, &key).map_err(invalid)?;
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
}

#[cfg(test)]
mod tests;
