//! `[server] tls_cert`, `tls_key`: the local server's own HTTPS (the AWS functions sit behind
//! API Gateway, which terminates TLS, and ignore them). The paths are checked here; the files
//! are read where the server starts and again whenever they change (`embedded::tls`).

use super::{
    notify::RawServer,
    parse::{bad, ConfigError},
};
use std::path::PathBuf;

/// A PEM certificate chain (the server's certificate first) and its PEM private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Both paths, or neither (plain HTTP).
pub(super) fn tls(raw: &RawServer) -> Result<Option<TlsFiles>, ConfigError> {
    match (&raw.tls_cert, &raw.tls_key) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        })),
        (Some(_), None) => Err(bad("server.tls_key", "is required with tls_cert")),
        (None, Some(_)) => Err(bad("server.tls_cert", "is required with tls_key")),
    }
}
