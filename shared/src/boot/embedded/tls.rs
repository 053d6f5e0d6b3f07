//! HTTPS served by the local server itself (`[server] tls_cert`, `tls_key`): rustls in front of
//! the same router. The certificate and key are read at start (a pair that does not load stops
//! the start), and again when either file changes or the process gets SIGHUP; a pair that does
//! not load then is logged and the one in use kept, so a renewal that goes wrong never takes
//! HTTPS down. A handshake runs on a task of its own (bounded in time), so a slow client holds
//! up no other.

use crate::config::TlsFiles;
use rustls::{
    crypto::{ring, CryptoProvider},
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
    ServerConfig,
};
use std::{
    net::SocketAddr,
    sync::{Arc, RwLock},
    time::{Duration, SystemTime},
};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::mpsc,
    task::JoinHandle,
};
use tokio_rustls::{server::TlsStream, TlsAcceptor};

/// How often the files are looked at for a change (two `stat`s).
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);
/// Connections accepted and shaken hands with, waiting for the server to take them.
const READY_QUEUE: usize = 64;

/// The TLS side of the server's listener: what `axum::serve` accepts connections from.
pub(super) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task ended (the server is stopping): no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// HTTPS on `tcp` with the pair in `files`, and the tasks that accept connections and reload
/// the pair (the server stops them with its other background tasks).
pub(super) fn listen(
    tcp: TcpListener,
    files: &TlsFiles,
) -> Result<(TlsListener, Vec<JoinHandle<()>>), String> {
    let current = Arc::new(Current(RwLock::new(Arc::new(load(files)?))));
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(current.clone());
    // The router speaks HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let addr = tcp.local_addr().map_err(|e| e.to_string())?;
    // Registered now, before the start returns: a SIGHUP from then on reloads, never kills.
    let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| format!("cannot listen for SIGHUP: {e}"))?;
    let (tx, ready) = mpsc::channel(READY_QUEUE);
    let tasks = vec![
        tokio::spawn(accept(tcp, TlsAcceptor::from(Arc::new(config)), tx)),
        tokio::spawn(reload(current, files.clone(), hangup)),
    ];
    Ok((TlsListener { ready, addr }, tasks))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// The pair in use, swapped whole by a reload; each handshake takes the one in use then.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// Read and check the pair: PEM certificates (the server's first) and a PEM private key that
/// belongs to the first certificate.
fn load(files: &TlsFiles) -> Result<CertifiedKey, String> {
    let (cert, key) = (files.cert.display(), files.key.display());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect())
        .map_err(|e| format!("server.tls_cert {cert}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("server.tls_cert {cert}: no PEM certificate in it"));
    }
    let private = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("server.tls_key {key}: {e}"))?;
    CertifiedKey::from_der(chain, private, &provider())
        .map_err(|e| format!("server.tls_key {key} does not go with server.tls_cert {cert}: {e}"))
}

/// Accept TCP connections and shake hands with each on a task of its own.
async fn accept(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: pause rather than spin.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if ready.is_closed() {
            return;
        }
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_WITHIN, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// When each file was last written, and its size: a change of either is a new pair to read.
fn stamp(files: &TlsFiles) -> [Option<(SystemTime, u64)>; 2] {
    [&files.cert, &files.key].map(|path| {
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    })
}

/// Read the pair again when a file changes or on SIGHUP; keep the one in use if it fails.
async fn reload(current: Arc<Current>, files: TlsFiles, mut hangup: tokio::signal::unix::Signal) {
    let mut seen = stamp(&files);
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            _ = tick.tick() => {
                let now = stamp(&files);
                if now == seen {
                    continue;
                }
                seen = now;
                "a file changed"
            }
            Some(()) = hangup.recv() => "SIGHUP",
        };
        match load(&files) {
            Ok(pair) => {
                *current.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(pair);
                tracing::info!(why, cert = %files.cert.display(), "TLS certificate reloaded");
            }
            Err(e) => {
                tracing::error!(why, error = %e, "TLS certificate not reloaded; keeping the one in use");
            }
        }
    }
}
