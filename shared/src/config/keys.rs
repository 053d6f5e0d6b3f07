//! A tenant's deed signing key (SC-SEC-07). The document names it — an id and the environment
//! variable that holds the PKCS#8 PEM private key — and the process reads it where it boots
//! ([`super::Config::read_keys`]), so parsing a configuration reads no secret.

use super::parse::{bad, ConfigError};
use crate::domain::deed::DeedKey;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDeedKey {
    kid: String,
    secret_env: String,
}

/// A tenant's signing key: named by the document, then read by the booting process.
#[derive(Debug, Clone)]
pub enum DeedSigner {
    /// The key's id and the variable that holds it; nothing read yet.
    Named { kid: String, secret_env: String },
    /// The key, read at boot.
    Read(DeedKey),
}

impl DeedSigner {
    /// The key, once the process has read it.
    pub fn key(&self) -> Option<&DeedKey> {
        match self {
            DeedSigner::Read(key) => Some(key),
            DeedSigner::Named { .. } => None,
        }
    }
}

pub(super) fn named(at: &str, raw: RawDeedKey) -> Result<DeedSigner, ConfigError> {
    if raw.kid.trim().is_empty() {
        return Err(bad(format!("{at}.deed_key.kid"), "kid must not be empty"));
    }
    if raw.secret_env.trim().is_empty() {
        return Err(bad(
            format!("{at}.deed_key.secret_env"),
            "must name an environment variable",
        ));
    }
    Ok(DeedSigner::Named {
        kid: raw.kid,
        secret_env: raw.secret_env,
    })
}

/// Read a named key with `env` (the process environment at boot; a map in tests).
pub(super) fn read(
    at: &str,
    signer: DeedSigner,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<DeedSigner, ConfigError> {
    let DeedSigner::Named { kid, secret_env } = signer else {
        return Ok(signer);
    };
    let at = format!("{at}.deed_key.secret_env");
    let pem = env(&secret_env)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad(&at, format!("environment variable {secret_env} is not set")))?;
    let key = DeedKey::from_pem(&kid, &pem).map_err(|e| bad(&at, e))?;
    Ok(DeedSigner::Read(key))
}
