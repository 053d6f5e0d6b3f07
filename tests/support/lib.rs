//! Test support: a counting tool server (real HTTP on 127.0.0.1), a test configuration, an
//! API client, and doubles for the wake port.

pub mod faults;
pub mod helper;
pub mod idp;
pub mod localstack;
pub mod postgres;
pub mod raw;
pub mod receiver;
pub mod rig;
pub mod stores;

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
    Router,
};
use countersign::{
    domain::resume::Wake,
    tools::webhook::signature,
    wake::{WakeError, Waker},
};
use jiff::Timestamp;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, Once},
};
use tokio::sync::Semaphore;

pub const SECRET_ENV: &str = "COUNTERSIGN_TEST_TOOL_SECRET";
pub const SECRET: &str = "test-secret-3f1c";

/// Tenant `acme`'s deed key (SC-SEC-07): the private half travels in this environment variable.
pub const DEED_KEY_ENV: &str = "COUNTERSIGN_TEST_DEED_KEY";
pub const DEED_KID: &str = "acme-test-1";
pub const DEED_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIAPMcH0raIkxYyLt09QFKwHyNuoId7ncXzmxgYqosXJT
-----END PRIVATE KEY-----
";
pub const DEED_PUBLIC_PEM: &str = "-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAeF6rXwcJYnBbHjTfCXBgcEdggyflqrQn674TbOiwdhE=
-----END PUBLIC KEY-----
";

/// The plaintext test keys (their hashes go into the config).
pub mod keys {
    pub const AGENT: &str = "key-agent-1";
    pub const AGENT_2: &str = "key-agent-2";
    pub const APPROVER: &str = "key-approver-1";
    /// An approver key whose identity is `agent-1` (SC-APP-01: no self-approval).
    pub const APPROVER_SELF: &str = "key-approver-self";
    pub const ADMIN: &str = "key-admin-1";
    pub const OTHER_TENANT_AGENT: &str = "key-globex-agent";
    pub const OTHER_TENANT_APPROVER: &str = "key-globex-approver";
}

fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// One request the tool server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub action_id: String,
    pub idempotency_key: Option<String>,
    /// The `Countersign-Attempt` header (0 if absent).
    pub attempt: u64,
    pub signature_ok: bool,
    /// The `Countersign-Signature` header as sent.
    pub signature: Option<String>,
    pub at: Timestamp,
    pub body: Value,
    /// The body's bytes as sent (SC-EDGE-06 compares them across attempts).
    pub raw: Vec<u8>,
}

/// How the tool server answers.
#[derive(Debug, Clone)]
pub struct Behaviour {
    pub status: u16,
    pub delay_ms: u64,
    pub answer: Value,
    /// A `Location` header to answer with (a redirect, SC-SEC-08).
    pub location: Option<String>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            status: 200,
            delay_ms: 0,
            answer: json!({"sent": true}),
            location: None,
        }
    }
}

#[derive(Clone, Default)]
struct ToolState {
    received: Arc<Mutex<Vec<Received>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    /// While set, every request waits for a permit (a crash mid-flight is a request that never returns).
    gate: Arc<Mutex<Option<Arc<Semaphore>>>>,
}

/// A downstream tool: counts calls per action and checks the signature and Idempotency-Key.
#[derive(Clone)]
pub struct ToolServer {
    pub addr: SocketAddr,
    state: ToolState,
}

impl ToolServer {
    pub async fn start() -> ToolServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind tool server");
        let (server, app) = Self::on(&listener);
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        server
    }

    /// A tool server slow to accept (SC-EDGE-01 at the receiver): nothing connects until
    /// [`Door::open`]. Its accept queue is held full, so the kernel drops a client's SYN and
    /// the client retries it a second later, as at a loaded server.
    pub async fn start_held() -> (ToolServer, Door) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(0).expect("listen");
        let (server, app) = Self::on(&listener);
        // Queue connections until one is not let in: then the queue is full.
        let mut queued = Vec::new();
        let wait = std::time::Duration::from_millis(200);
        while let Ok(c) = std::net::TcpStream::connect_timeout(&server.addr, wait) {
            queued.push(c);
            assert!(queued.len() < 64, "the accept queue never fills");
        }
        let door = Door {
            listener,
            app,
            queued,
        };
        (server, door)
    }

    fn on(listener: &tokio::net::TcpListener) -> (ToolServer, Router) {
        let state = ToolState::default();
        let app = Router::new()
            .route("/{*path}", post(receive))
            .with_state(state.clone());
        let addr = listener.local_addr().unwrap();
        (ToolServer { addr, state }, app)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    pub fn behave(&self, b: Behaviour) {
        *self.state.behaviour.lock().unwrap() = b;
    }

    /// Hold every request until [`ToolServer::release`].
    pub fn hold(&self) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        *self.state.gate.lock().unwrap() = Some(gate.clone());
        gate
    }

    pub fn release(&self) {
        if let Some(gate) = self.state.gate.lock().unwrap().take() {
            gate.add_permits(1_000_000);
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    pub fn calls_for(&self, action_id: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.action_id == action_id)
            .collect()
    }

    pub fn count_for(&self, action_id: &str) -> usize {
        self.calls_for(action_id).len()
    }
}

/// The held accept queue of [`ToolServer::start_held`].
pub struct Door {
    listener: tokio::net::TcpListener,
    app: Router,
    /// The connections that fill the queue.
    queued: Vec<std::net::TcpStream>,
}

impl Door {
    /// Start accepting: the queued connections are let go, and a client's retried SYN gets in.
    pub fn open(self) {
        let Door {
            listener,
            app,
            queued,
        } = self;
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        drop(queued);
    }
}

async fn receive(
    State(state): State<ToolState>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, String) {
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let signature_ok = headers
        .get("countersign-signature")
        .and_then(|v| v.to_str().ok())
        .and_then(|sig| {
            let t: i64 = sig.strip_prefix("t=")?.split(',').next()?.parse().ok()?;
            Some(signature(SECRET.as_bytes(), t, &body) == sig)
        })
        .unwrap_or(false);
    let sent = headers
        .get("countersign-signature")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    state.received.lock().unwrap().push(Received {
        action_id: parsed["action_id"].as_str().unwrap_or_default().to_owned(),
        idempotency_key: headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        attempt: headers
            .get("countersign-attempt")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        signature_ok,
        signature: sent,
        at: Timestamp::now(),
        body: parsed,
        raw: body.to_vec(),
    });
    let gate = state.gate.lock().unwrap().clone();
    if let Some(gate) = gate {
        let _permit = gate.acquire().await;
    }
    let b = state.behaviour.lock().unwrap().clone();
    if b.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(b.delay_ms)).await;
    }
    let mut answer_headers = HeaderMap::new();
    if let Some(location) = &b.location {
        answer_headers.insert("location", location.parse().unwrap());
    }
    (
        StatusCode::from_u16(b.status).unwrap(),
        answer_headers,
        b.answer.to_string(),
    )
}

/// The test configuration: tenant `acme` (tools served by `tools`) and tenant `globex`.
/// `min_window` narrows the 5-minute rule so tests finish in seconds.
pub fn config_toml(tools: &ToolServer, min_window: &str, timeout: &str) -> String {
    static SECRET_SET: Once = Once::new();
    SECRET_SET.call_once(|| {
        std::env::set_var(SECRET_ENV, SECRET);
        std::env::set_var(DEED_KEY_ENV, DEED_KEY_PEM);
    });
    format!(
        r#"
[limits]
min_window = "{min_window}"
sweep_interval = "1s"
run_deadline = "1m"
# Tests and benches drive the API far faster than people do; hostile.rs narrows these (SC-SEC-04).
rate_per_key = 1000000
burst_per_key = 1000000
rate_per_tenant = 1000000
burst_per_tenant = 1000000

[tenants.acme]
time_zone = "Europe/Berlin"
approval_ttl = "1h"
action_kinds = ["email", "report"]
# The test tool server listens on plain http on loopback: allowed explicitly (SC-SEC-08).
allow_http_hosts = ["127.0.0.1"]
allow_private_hosts = ["127.0.0.1"]
deed_key = {{ kid = "{DEED_KID}", secret_env = "{DEED_KEY_ENV}" }}
keys = [
  {{ id = "agent-1", role = "agent", sha256 = "{agent}" }},
  {{ id = "agent-2", role = "agent", sha256 = "{agent2}" }},
  {{ id = "approver-1", role = "approver", sha256 = "{approver}" }},
  {{ id = "agent-1", role = "approver", sha256 = "{approver_self}" }},
  {{ id = "admin-1", role = "admin", sha256 = "{admin}" }},
]
policy = [
  {{ tool = "mail.*", decision = "require_approval" }},
  {{ tool = "report.*", decision = "schedule" }},
  {{ tool = "search.*", decision = "allow" }},
  {{ tool = "sandbox.*", decision = "set_result", result = {{ shadow = true }} }},
]

[tenants.acme.tools."mail.send"]
executor = "webhook"
url = "{mail}"
secret_env = "{SECRET_ENV}"
timeout = "{timeout}"
recovery = "fail"

[tenants.acme.tools."report.build"]
executor = "webhook"
url = "{report}"
secret_env = "{SECRET_ENV}"
timeout = "{timeout}"
recovery = "retry"

[tenants.acme.tools."search.web"]
executor = "webhook"
url = "{search}"
secret_env = "{SECRET_ENV}"
timeout = "{timeout}"

[tenants.globex]
time_zone = "America/New_York"
keys = [
  {{ id = "g-agent", role = "agent", sha256 = "{g_agent}" }},
  {{ id = "g-approver", role = "approver", sha256 = "{g_approver}" }},
]
policy = [{{ tool = "*", decision = "require_approval" }}]

[tenants.globex.tools."mail.send"]
executor = "builtin.echo"
"#,
        agent = hash(keys::AGENT),
        agent2 = hash(keys::AGENT_2),
        approver = hash(keys::APPROVER),
        approver_self = hash(keys::APPROVER_SELF),
        admin = hash(keys::ADMIN),
        g_agent = hash(keys::OTHER_TENANT_AGENT),
        g_approver = hash(keys::OTHER_TENANT_APPROVER),
        mail = tools.url("mail"),
        report = tools.url("report"),
        search = tools.url("search"),
    )
}

/// A `POST /v1/actions` body as the engine takes it: read and shaped as the API does.
pub fn submission(body: Value) -> countersign::domain::Submission {
    serde_json::from_value::<countersign::api::body::SubmitRequest>(body)
        .unwrap()
        .into_submission()
        .unwrap()
}

/// RFC 3339 UTC, `secs` from now (negative for the past).
pub fn in_secs(secs: i64) -> String {
    Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap()
        .round(jiff::Unit::Second)
        .unwrap()
        .to_string()
}

/// A small JSON client for the API.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    http: reqwest::Client,
}

impl Api {
    pub fn new(addr: SocketAddr) -> Api {
        Api {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
        }
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        key: Option<&str>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> (u16, Value, reqwest::header::HeaderMap) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let res = req.send().await.expect("request reaches the server");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.unwrap();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("every answer is JSON")
        };
        (status, value, headers)
    }

    pub async fn post(&self, path: &str, key: &str, body: Value) -> (u16, Value) {
        let (s, v, _) = self
            .send(
                reqwest::Method::POST,
                path,
                Some(key),
                Some(body.to_string().into_bytes()),
                &[],
            )
            .await;
        (s, v)
    }

    pub async fn get(&self, path: &str, key: &str) -> (u16, Value) {
        let (s, v, _) = self
            .send(reqwest::Method::GET, path, Some(key), None, &[])
            .await;
        (s, v)
    }

    pub async fn cancel(&self, id: &str, key: &str) -> (u16, Value) {
        self.post(&format!("/v1/actions/{id}/cancel"), key, json!({}))
            .await
    }

    pub async fn delete(&self, path: &str, key: &str) -> u16 {
        let (s, _, _) = self
            .send(reqwest::Method::DELETE, path, Some(key), None, &[])
            .await;
        s
    }

    pub async fn submit(&self, key: &str, body: Value) -> (u16, Value) {
        self.post("/v1/actions", key, body).await
    }

    pub async fn action(&self, id: &str) -> Value {
        let (status, v) = self.get(&format!("/v1/actions/{id}"), keys::AGENT).await;
        assert_eq!(status, 200, "{v}");
        v
    }

    pub async fn approve(&self, id: &str, digest: &str) -> (u16, Value) {
        self.post(
            &format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            json!({"context_digest": digest}),
        )
        .await
    }

    /// Poll until the action is sealed (or `secs` pass); returns its last view.
    pub async fn wait_sealed(&self, id: &str, secs: u64) -> Value {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let v = self.action(id).await;
            if v["sealed_at"].is_string() || std::time::Instant::now() > until {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

/// A wake port that records what was armed and can be told to fail (SC-REC-01).
#[derive(Default)]
pub struct RecordingWaker {
    pub armed: Mutex<Vec<(Wake, Timestamp)>>,
    pub disarmed: Mutex<Vec<Wake>>,
    pub fail: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Waker for RecordingWaker {
    async fn arm(&self, wake: &Wake, at: Timestamp, _deadline: Timestamp) -> Result<(), WakeError> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(WakeError("injected: the wake service is down".into()));
        }
        self.armed.lock().unwrap().push((wake.clone(), at));
        Ok(())
    }
    async fn disarm(&self, wake: &Wake) -> Result<(), WakeError> {
        self.disarmed.lock().unwrap().push(wake.clone());
        Ok(())
    }
}

/// Serve the API over real HTTP from an engine over `store` wrapped in a [`faults::FaultyStore`] (which
/// counts list reads and injects faults on demand), with a recording wake port, no tools and the
/// system clock.
///
pub async fn counted_api(
    config: Arc<countersign::config::Config>,
    store: Arc<dyn countersign::store::Store>,
) -> (Api, Arc<faults::FaultyStore>) {
    let store = Arc::new(faults::FaultyStore::new(store));
    let engine = Arc::new(countersign::Engine::new(
        config,
        store.clone(),
        Arc::new(RecordingWaker::default()),
        Arc::new(countersign::tools::Executors::new()),
        Arc::new(countersign::SystemClock),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = countersign::api::router(engine);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (Api::new(addr), store)
}

/// Re-run this test binary as a child process serving the `#[ignore]`d test `child_test` (with
/// `env` set), and read the address it prints as `CHILD_ADDR <addr>` (a server to SIGKILL or
/// SIGTERM: SC-EDGE-03, SC-EDGE-05).
pub fn child_server(
    child_test: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, SocketAddr) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args(["--exact", child_test, "--ignored", "--nocapture"]);
    for (k, v) in env {
        child.env(k, v);
    }
    let mut child = child
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("the child prints its address").unwrap();
        if let Some(addr) = line.strip_prefix("CHILD_ADDR ") {
            break addr.parse().unwrap();
        }
    };
    // Keep reading: a child whose stdout is closed panics when it prints its test summary.
    std::thread::spawn(move || lines.for_each(drop));
    (child, addr)
}

/// A fresh temporary directory for a test's database.
pub fn temp_db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("countersign-test-{}-{}", name, ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("countersign.db")
}

/// The tests of one scenario, named by its SC id and their store: on SQLite, on DynamoDB and
/// on Postgres. `Backend` is [`stores::Backend`], in scope where the macro is called.
#[macro_export]
macro_rules! on_every_store {
    ($scenario:ident: $sqlite:ident, $dynamodb:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $sqlite() {
            $scenario(Backend::Sqlite).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $dynamodb() {
            $scenario(Backend::Dynamodb).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $postgres() {
            $scenario(Backend::Postgres).await;
        }
    };
}
