//! Connecting: the URL, TLS (rustls; `sslmode=require` asks for it) and the pool.

use super::{gather, PostgresStore, StoreError, StoreResult};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::{path::PathBuf, sync::Arc, time::Duration};
use tokio_postgres::config::SslMode;

/// How to reach the database, besides its URL.
#[derive(Debug, Clone)]
pub struct Options {
    /// The most connections this instance holds (every store call takes one for its duration).
    pub pool_size: usize,
    /// PEM certificates to trust besides the public roots (a cloud's own CA: RDS, Cloud SQL,
    /// Azure), used when the URL asks for TLS.
    pub ca_file: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pool_size: 16,
            ca_file: None,
        }
    }
}

/// Opening a connection (or checking a pooled one) that takes longer than this fails the call
/// as unavailable: the database is down or unreachable. A call that waits for a busy pool's
/// next free connection is not timed out: a burst queues as it does for SQLite's threads.
const WAIT: Duration = Duration::from_secs(10);

fn config_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("database configuration: {e}"))
}

impl PostgresStore {
    /// Connect to `url` (`postgres://user:password@host:port/db?sslmode=require`), bring the
    /// schema up to date and check it (see `schema`). TLS when `sslmode=require`: the server's
    /// certificate must verify against the public roots or [`Options::ca_file`], for its host
    /// name (stricter than libpq's `require`, which encrypts without checking who answers).
    pub async fn connect(url: &str, options: &Options) -> StoreResult<Self> {
        let store = Self::pool(url, options)?;
        let mut client = store.first_client().await?;
        super::schema::migrate(&mut client).await?;
        Ok(store)
    }

    /// The first connection, whose failure says which part of the URL to look at.
    async fn first_client(&self) -> StoreResult<super::Pooled> {
        self.client().await.map_err(|e| match e {
            StoreError::Unavailable(why) => StoreError::Unavailable(reaching(&self.pg, &why)),
            other => other,
        })
    }

    /// The store at `url` as it is, for `verify`: nothing is created or migrated. A database
    /// (its `search_path` schema) without countersign's tables is [`StoreError::Absent`]; one
    /// at another version than this binary's is refused with what to do.
    ///
    /// [`StoreError::Absent`]: crate::store::StoreError::Absent
    pub async fn connect_existing(url: &str, options: &Options) -> StoreResult<Self> {
        let store = Self::pool(url, options)?;
        super::schema::existing(&store.first_client().await?).await?;
        Ok(store)
    }

    /// The pool for `url`; no connection is made yet.
    fn pool(url: &str, options: &Options) -> StoreResult<Self> {
        let (url, options) = libpq(url, options)?;
        let options = &options;
        let pg: tokio_postgres::Config = url
            .parse()
            .map_err(|e| config_error(format!("the database URL: {}", super::causes(&e))))?;
        let manager = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let tls = match pg.get_ssl_mode() {
            SslMode::Require => Some(tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(
                options,
            )?)),
            _ => None,
        };
        let manager = match &tls {
            Some(tls) => Manager::from_config(pg.clone(), tls.clone(), manager),
            None => Manager::from_config(pg.clone(), tokio_postgres::NoTls, manager),
        };
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(WAIT))
            .recycle_timeout(Some(WAIT))
            .build()
            .map_err(config_error)?;
        Ok(PostgresStore {
            commits: super::commit::commits(pool.clone()),
            loads: gather::reads(pool.clone(), gather::ACTIONS),
            stops: gather::reads(pool.clone(), gather::STOPS),
            with_stops: gather::reads(pool.clone(), gather::WITH_STOPS),
            pool,
            pg,
            tls,
            grant_memo: Default::default(),
        })
    }
}

/// The URL with libpq's spellings the driver lacks made its own: `sslmode=verify-full` and
/// `verify-ca` are `require` here (TLS here always verifies the certificate and the host name:
/// `verify-full`'s meaning), and `sslrootcert=<file>` is the CA file. Any other `sslmode` than
/// libpq's is named.
fn libpq(url: &str, options: &Options) -> StoreResult<(String, Options)> {
    let mut options = options.clone();
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), options));
    };
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslmode", "disable" | "prefer" | "require")) => kept.push(pair.to_owned()),
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require".into()),
            Some(("sslmode", other)) => {
                return Err(config_error(format!(
                    "sslmode={other} in the database URL: use disable, prefer, require, \
                     verify-ca or verify-full (TLS verifies the certificate and host name in \
                     all of the last three)"
                )))
            }
            Some(("sslrootcert", file)) => {
                options.ca_file.get_or_insert_with(|| PathBuf::from(file));
            }
            _ => kept.push(pair.to_owned()),
        }
    }
    let url = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((url, options))
}

/// A failed first connection, with where it went and which setting to look at.
fn reaching(pg: &tokio_postgres::Config, why: &str) -> String {
    use tokio_postgres::config::Host;
    let host = match pg.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let hint = if why.contains("password") {
        "check the user and password in the database URL"
    } else if why.contains("certificate") || why.contains("UnknownIssuer") {
        "the server's certificate did not verify: give its CA (--database-ca-file, or \
         sslrootcert= in the database URL)"
    } else if why.contains("does not exist") {
        "check the database (and user) named in the database URL"
    } else {
        "check the host and port in the database URL, and that the server runs there"
    };
    format!("cannot connect to the database at {host}:{port}: {why} ({hint})")
}

/// rustls with ring, the public roots and the configured CA file.
fn tls_config(options: &Options) -> StoreResult<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &options.ca_file {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| config_error(format!("CA file {}: {e}", path.display())))?;
        for cert in certs {
            let cert =
                cert.map_err(|e| config_error(format!("CA file {}: {e}", path.display())))?;
            roots.add(cert).map_err(config_error)?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(config_error)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
