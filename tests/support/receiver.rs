//! A notification receiver for tests: a real HTTP server that records every delivery and checks
//! its signature with its own HMAC-SHA256 (RFC 2104 over `sha2`), not production's function, so a
//! change of the signing format fails the tests.

use axum::{body::Bytes, extract::State, http::HeaderMap, http::StatusCode, routing::post, Router};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};
use tokio::sync::Semaphore;

pub const NOTIFY_SECRET_ENV: &str = "COUNTERSIGN_TEST_NOTIFY_SECRET";
pub const NOTIFY_SECRET: &str = "notify-secret-81d0";

/// One delivery as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub event_id: Option<String>,
    pub signature_ok: bool,
    /// The `Countersign-Signature` header as sent.
    pub signature: Option<String>,
    pub body: Value,
    /// The status the receiver answered (503 while down).
    pub status: u16,
    /// When it arrived.
    pub at: std::time::Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answer 503 to everything.
    Down,
    /// Answer 200.
    Up,
    /// Take the request, never answer until released.
    Hang,
}

#[derive(Clone)]
struct Shared {
    mode: Arc<Mutex<Mode>>,
    seen: Arc<Mutex<Vec<Delivery>>>,
    hang: Arc<Semaphore>,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Shared,
}

impl Receiver {
    pub async fn start(mode: Mode) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, mode)
    }

    /// Serve on an already bound listener (a receiver that comes up on a known port later).
    pub fn serve(listener: tokio::net::TcpListener, mode: Mode) -> Receiver {
        std::env::set_var(NOTIFY_SECRET_ENV, NOTIFY_SECRET);
        let shared = Shared {
            mode: Arc::new(Mutex::new(mode)),
            seen: Arc::default(),
            hang: Arc::new(Semaphore::new(0)),
        };
        let app = Router::new()
            .route("/{*path}", post(receive))
            .with_state(shared.clone());
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { addr, shared }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn set(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
        if mode != Mode::Hang {
            self.shared.hang.add_permits(1_000_000);
        }
    }

    pub fn seen(&self) -> Vec<Delivery> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Deliveries taken in but not answered yet (a hanging receiver).
    pub fn held(&self) -> usize {
        self.seen().iter().filter(|d| d.status == 0).count()
    }

    /// Deliveries answered 2xx, by event id.
    pub fn taken(&self, id: &str) -> Vec<Delivery> {
        self.seen()
            .into_iter()
            .filter(|d| d.status == 200 && d.event_id.as_deref() == Some(id))
            .collect()
    }

    /// Poll until `ids` were all taken (or `secs` pass); true if they were.
    pub async fn wait_taken(&self, ids: &[String], secs: u64) -> bool {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < until {
            if ids.iter().all(|id| !self.taken(id).is_empty()) {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        false
    }
}

/// The notification config for tenant `acme`: one JSON endpoint at `url` for both events.
/// Append it to [`crate::config_toml`]'s document (it only adds tables).
pub fn notify_toml(url: &str, first_retry: &str, attempts: u32) -> String {
    std::env::set_var(NOTIFY_SECRET_ENV, NOTIFY_SECRET);
    format!(
        r#"
[notify]
first_retry = "{first_retry}"
max_pause = "{first_retry}"
attempts = {attempts}

[[tenants.acme.notify]]
url = "{url}"
secret_env = "{NOTIFY_SECRET_ENV}"
events = ["approval_requested", "action_sealed"]
format = "json"
"#
    )
}

async fn receive(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let mode = *shared.mode.lock().unwrap();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let status = match mode {
        Mode::Down => 503,
        Mode::Up | Mode::Hang => 200,
    };
    let delivery = Delivery {
        event_id: header("countersign-event-id"),
        signature_ok: header("countersign-signature")
            .is_some_and(|sig| verify(NOTIFY_SECRET.as_bytes(), &sig, &body)),
        signature: header("countersign-signature"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        status,
        at: std::time::Instant::now(),
    };
    if mode == Mode::Hang {
        // Held: status 0 until released, then answered 200.
        let index = {
            let mut seen = shared.seen.lock().unwrap();
            seen.push(Delivery {
                status: 0,
                ..delivery
            });
            seen.len() - 1
        };
        let _ = shared.hang.acquire().await;
        shared.seen.lock().unwrap()[index].status = 200;
        return StatusCode::OK;
    }
    shared.seen.lock().unwrap().push(delivery);
    StatusCode::from_u16(status).unwrap()
}

/// `t=<unix>,v1=<hex>` with v1 = HMAC-SHA256(secret, "<t>.<body>").
pub fn verify(secret: &[u8], header: &str, body: &[u8]) -> bool {
    let Some((t, v1)) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
    else {
        return false;
    };
    let mut message = format!("{t}.").into_bytes();
    message.extend_from_slice(body);
    hex::encode(hmac_sha256(secret, &message)) == v1
}

/// RFC 2104: H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m)), block size 64.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            hex::encode(super::hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
