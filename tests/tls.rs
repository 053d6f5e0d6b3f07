//! SC-OPS-05, HTTPS served by the local server itself (`[server] tls_cert`, `tls_key`), over real
//! HTTPS with certificates the test makes (rcgen) and a client that trusts only the test's CA:
//! the API answers, plain HTTP does not, and the certificate is reloaded when its files change
//! or on SIGHUP, a pair that does not load keeping the one in use.
//!
//! Its own test binary: it sends SIGHUP to itself, which only the server's handler may see.

use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, keys, temp_db, ToolServer};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

/// A CA of the test's own, and a certificate it signs for `localhost`.
struct Ca {
    pem: String,
    params: CertificateParams,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca { pem, params, key }
    }

    /// A certificate for `localhost` and its key, both PEM.
    fn issue(&self) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Every PEM file the test writes is this long.
const PADDED: usize = 4096;

/// The server's certificate and key files.
struct Files {
    cert: PathBuf,
    key: PathBuf,
}

impl Files {
    fn new(dir: &Path) -> Files {
        Files {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        }
    }

    /// Write a pair as a renewal does: the key, then the certificate. Each file is padded with
    /// blank lines (which PEM allows) to one size, so only a file's time tells a change.
    fn write(&self, (cert, key): &(String, String)) {
        let padded = |pem: &str| format!("{pem}{}", "\n".repeat(PADDED - pem.len()));
        std::fs::write(&self.key, padded(key)).unwrap();
        std::fs::write(&self.cert, padded(cert)).unwrap();
    }
}

async fn start(files: &Files) -> Result<Server, String> {
    let tools = ToolServer::start().await;
    let text = config_toml(&tools, "10s", "5s")
        + &format!(
            "\n[server]\ntls_cert = {:?}\ntls_key = {:?}\n",
            files.cert, files.key
        );
    let config = Arc::new(Config::from_toml(&text).map_err(|e| e.to_string())?);
    Server::start(config, &temp_db("tls"), "127.0.0.1:0".parse().unwrap())
        .await
        .map_err(|e| e.to_string())
}

/// A client that trusts only `ca`, and reaches `localhost` at the server's address.
fn client(ca: &Ca, server: &Server) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem.as_bytes()).unwrap())
        .resolve("localhost", server.addr)
        .https_only(true)
        .build()
        .unwrap()
}

/// `GET /v1/actions` over HTTPS with the agent key: its status, or the client's error.
async fn list(client: &reqwest::Client, server: &Server) -> Result<u16, String> {
    let url = format!("https://localhost:{}/v1/actions", server.addr.port());
    let res = client
        .get(url)
        .bearer_auth(keys::AGENT)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(res.status().as_u16())
}

/// Ask until `client` gets through, for at most 15 s (a reload is looked for every second).
async fn until_served(client: &reqwest::Client, server: &Server) -> Result<u16, String> {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        match list(client, server).await {
            Ok(status) => return Ok(status),
            Err(e) if Instant::now() > until => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn hangup() {
    let pid = std::process::id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn sc_ops_05_https_is_served_and_its_certificate_reloads_on_change_and_on_sighup() {
    let dir = temp_db("tls-files");
    let files = Files::new(dir.parent().unwrap());
    let (first, second, third) = (Ca::new("first"), Ca::new("second"), Ca::new("third"));
    files.write(&first.issue());
    let server = start(&files).await.unwrap();

    // HTTPS with the first certificate; a client that does not trust it, or plain HTTP, fails.
    assert_eq!(list(&client(&first, &server), &server).await, Ok(200));
    assert!(list(&client(&second, &server), &server).await.is_err());
    let plain = reqwest::get(format!("http://{}/v1/actions", server.addr)).await;
    assert!(plain.is_err(), "plain HTTP is not served: {plain:?}");

    // A renewal: the files change, and new connections get the new certificate.
    files.write(&second.issue());
    assert_eq!(
        until_served(&client(&second, &server), &server).await,
        Ok(200)
    );
    assert!(list(&client(&first, &server), &server).await.is_err());

    // A broken pair (a key that is not the certificate's) is refused and the one in use kept.
    let (cert, _) = third.issue();
    let (_, other_key) = third.issue();
    files.write(&(cert, other_key));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(list(&client(&second, &server), &server).await, Ok(200));
    assert!(list(&client(&third, &server), &server).await.is_err());

    // SIGHUP reads the files again even when they look unchanged (same size, same time).
    let before =
        [&files.cert, &files.key].map(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    files.write(&third.issue());
    for (path, at) in [&files.cert, &files.key].into_iter().zip(before) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(at).unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let fresh = client(&third, &server);
    assert!(
        list(&fresh, &server).await.is_err(),
        "unchanged files are not read again"
    );
    hangup();
    assert_eq!(until_served(&fresh, &server).await, Ok(200));
    assert!(list(&client(&second, &server), &server).await.is_err());
    server.shutdown().await.unwrap();
}

/// SC-OPS-05: a pair that does not load stops the start with the file named; half a pair is a
/// config error.
#[tokio::test]
async fn sc_ops_05_a_bad_certificate_or_half_a_pair_stops_the_start() {
    let dir = temp_db("tls-bad");
    let files = Files::new(dir.parent().unwrap());
    std::fs::write(&files.cert, "not a certificate").unwrap();
    std::fs::write(&files.key, "not a key").unwrap();
    let e = start(&files).await.err().expect("refused");
    assert!(
        e.contains("server.tls_cert") || e.contains("server.tls_key"),
        "{e}"
    );
    let ca = Ca::new("ca");
    let (cert, _) = ca.issue();
    let (_, key) = ca.issue();
    files.write(&(cert, key));
    let e = start(&files).await.err().expect("refused");
    assert!(e.contains("does not go with server.tls_cert"), "{e}");

    let tools = ToolServer::start().await;
    let text = config_toml(&tools, "10s", "5s") + "\n[server]\ntls_cert = \"cert.pem\"\n";
    let e = Config::from_toml(&text).expect_err("refused").to_string();
    assert!(
        e.contains("server.tls_key: is required with tls_cert"),
        "{e}"
    );
}
