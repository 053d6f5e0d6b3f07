//! Bearer-key authentication: the key's SHA-256 names a principal in the config.

use super::rate::RateLimits;
use crate::{config::Principal, Engine, Error};
use axum::{extract::FromRequestParts, http::request::Parts};
use std::sync::Arc;

/// The authenticated caller.
pub struct Caller(pub Principal);

impl FromRequestParts<Arc<Engine>> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, engine: &Arc<Engine>) -> Result<Self, Error> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(Error::Unauthenticated)?;
        let key = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .ok_or(Error::Unauthenticated)?;
        let who = engine
            .config()
            .principal(key)
            .cloned()
            .ok_or(Error::Unauthenticated)?;
        // Every authenticated request spends from its key's and its tenant's bucket.
        if let Some(limits) = parts.extensions.get::<Arc<RateLimits>>() {
            limits.admit(&who)?;
        }
        Ok(Caller(who))
    }
}
