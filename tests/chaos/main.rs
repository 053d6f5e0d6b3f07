//! The bounded chaos run (`scripts/chaos.sh [SECONDS]`): agents submit (through the API and
//! MCP), approvers approve or deny, some clients hang up before the answer, cancels and a stop
//! race the workers, tools misbehave (slow, 5xx, refused, a 10 MB body, invalid JSON; MCP
//! tools that leave their stream open, frame with CRLF, or report progress and then an error),
//! the store fails writes now and then (the `faults` seam), and the local server is killed with SIGKILL (or stopped with SIGTERM) and restarted mid-run. Afterwards the
//! store's invariants are checked and the tool server's record of every attempt is held to the
//! rules: none before `not_before`, none after the deadline, none after an answered stop, none
//! twice except for `retry` tools. The outcomes are held to what happened: none sealed
//! `outcome_unknown` unless a SIGKILL fell while it was claimed or an attempt reached the tool
//! and was never answered (an answer the tool gave is never lost, whoever hung up),
//! and no cancel answered 409 for an action its cancel sealed. Prints a summary; exits 1 on any
//! violation.
//!
//! The approval channels go through it too (`channels.rs`): every request is posted to a Slack
//! stand-in and mailed over SMTP, each of which is slow, refuses and goes down for a quarter
//! of the run; afterwards no notice may be lost and every mail keeps its notice's Message-ID.
//!
//! `chaos run --seconds N --dir D [--store postgres --instances N]` drives; `chaos serve (--db F
//! | --database-url URL) --config C` is the server process it starts (the embedded server with
//! a fault-injecting store). On Postgres, N servers share one fresh schema, each request goes
//! to the next server, and the restarts take one server after another while the others serve.

mod channels;

use axum::{body::Bytes, extract::Path, http::HeaderMap, routing::post, Router};
use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    domain::{Action, State},
    operate::invariants,
    store::{ListQuery, Store},
};
use countersign_tests::faults::{Chaos, FaultyStore};
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::{
    collections::{BTreeMap, HashMap},
    io::{BufRead, BufReader},
    path::{Path as FsPath, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, OnceLock, RwLock},
    time::Duration,
};

const SECRET_ENV: &str = "CHAOS_TOOL_SECRET";
const AGENT: &str = "chaos-agent";
const STOPPED_AGENT: &str = "chaos-agent-stopped";
const APPROVER: &str = "chaos-approver";
const ADMIN: &str = "chaos-admin";
/// Tool kinds the tool server plays; `refused` points at a port nothing listens on.
const KINDS: [&str; 6] = ["ok", "slow", "5xx", "refused", "big", "badjson"];
/// MCP tools the tool server plays (SC-MCP-06), each answering in SSE: `mcpopen` sends its
/// result and leaves the stream open, `mcpcrlf` frames a notification and its result with CRLF,
/// `mcperror` reports progress and then a result with `isError`.
const MCP_KINDS: [&str; 3] = ["mcpopen", "mcpcrlf", "mcperror"];
/// Every kind the agents pick from.
const ALL_KINDS: [&str; 9] = [
    "ok", "slow", "5xx", "refused", "big", "badjson", "mcpopen", "mcpcrlf", "mcperror",
];
/// When an attempt started is read from its signature's `t` (the worker's clock when it signed
/// the request, whole seconds, rounded down): `t > not_after` is an attempt started late, with no
/// false alarm. The tool server's arrival stamp trails the start by transit and by this
/// process's own load (it also builds 10 MB answers), so arrival is held only to a loose bound
/// that catches gross lateness without failing on a busy 2-core machine.
const TRANSIT: SignedDuration = SignedDuration::from_secs(5);
/// How long a hasty client waits before it hangs up (less than the `slow` tool takes).
const HASTY: Duration = Duration::from_millis(300);

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    match args.get(1).map(String::as_str) {
        Some("serve") => {
            let database = match (flag("--db"), flag("--database-url")) {
                (_, Some(url)) => Database::Postgres {
                    url,
                    options: countersign::store::postgres::Options::default(),
                },
                (Some(db), None) => Database::Sqlite(db.into()),
                (None, None) => panic!("serve --db F | --database-url URL"),
            };
            let faults = !args.iter().any(|a| a == "--no-faults");
            serve(database, flag("--config").unwrap(), faults).await
        }
        Some("run") => {
            let seconds = flag("--seconds").map_or(20, |s| s.parse().expect("--seconds N"));
            let dir = PathBuf::from(flag("--dir").unwrap_or_else(|| "target/chaos".into()));
            let instances = flag("--instances").map_or(1, |n| n.parse().expect("--instances N"));
            let postgres = flag("--store").is_some_and(|s| s == "postgres");
            run(seconds, &dir, postgres, instances.max(1)).await
        }
        _ => {
            eprintln!("usage: chaos run [--seconds N] [--dir D] [--store sqlite|postgres] [--instances N] | chaos serve (--db F | --database-url URL) --config C [--no-faults]");
            std::process::ExitCode::from(2)
        }
    }
}

/// How long before the final stop a lapsed lease must have been recovered by (see `run`).
const RECOVERY_SLACK: SignedDuration = SignedDuration::from_secs(10);

fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The channels' secrets, in the servers' environment.
const CHANNEL_ENV: [(&str, &str); 3] = [
    ("CHAOS_SLACK_TOKEN", "xoxb-chaos"),
    ("CHAOS_SLACK_SECRET", "chaos-signing-secret"),
    (
        "CHAOS_LINK_KEY",
        "chaos-link-key-0123456789abcdef0123456789",
    ),
];

fn config(tools: &str, slack: &str) -> String {
    let mut toml = format!(
        r#"
# Retried within the run, so that a channel's quarter down is made up before it ends.
[notify]
first_retry = "1s"
max_pause = "2s"
attempts = 1000

[limits]
min_window = "10s"
sweep_interval = "1s"
run_deadline = "30s"
rate_per_key = 1000000
burst_per_key = 1000000
rate_per_tenant = 1000000
burst_per_tenant = 1000000

[tenants.acme]
time_zone = "UTC"
approval_ttl = "1h"
allow_http_hosts = ["127.0.0.1"]
allow_private_hosts = ["127.0.0.1"]
keys = [
  {{ id = "{AGENT}", role = "agent", sha256 = "{}" }},
  {{ id = "{STOPPED_AGENT}", role = "agent", sha256 = "{}" }},
  {{ id = "{APPROVER}", role = "approver", sha256 = "{}", email = "approver@chaos.example", slack_user = "UCHAOS001" }},
  {{ id = "{ADMIN}", role = "admin", sha256 = "{}" }},
]
policy = [
  {{ tool = "mail.*", decision = "require_approval" }},
  {{ tool = "report.*", decision = "schedule" }},
  {{ tool = "search.*", decision = "allow" }},
]

[tenants.acme.slack]
bot_token_env = "CHAOS_SLACK_TOKEN"
signing_secret_env = "CHAOS_SLACK_SECRET"
channel = "C0CHAOS01"
api_url = "{slack}"

[tenants.acme.email]
smtp_url_env = "CHAOS_SMTP_URL"
from = "countersign <approvals@chaos.example>"
link_secret_env = "CHAOS_LINK_KEY"
insecure_plaintext = true
"#,
        hash(AGENT),
        hash(STOPPED_AGENT),
        hash(APPROVER),
        hash(ADMIN)
    );
    for (family, recovery) in [("search", "fail"), ("mail", "fail"), ("report", "retry")] {
        for kind in KINDS {
            let url = match kind {
                "refused" => "http://127.0.0.1:9/refused".to_owned(),
                _ => format!("{tools}/{kind}"),
            };
            toml.push_str(&format!(
                "\n[tenants.acme.tools.\"{family}.{kind}\"]\nexecutor = \"webhook\"\nurl = \"{url}\"\nsecret_env = \"{SECRET_ENV}\"\ntimeout = \"1s\"\nrecovery = \"{recovery}\"\n"
            ));
        }
        for kind in MCP_KINDS {
            toml.push_str(&format!(
                "\n[tenants.acme.tools.\"{family}.{kind}\"]\nexecutor = \"mcp\"\nurl = \"{tools}/mcp/{kind}\"\ntool = \"{kind}\"\nsecret_env = \"{SECRET_ENV}\"\ntimeout = \"1s\"\nrecovery = \"{recovery}\"\n"
            ));
        }
    }
    toml
}

// ---------- the server process ----------

/// One server process; `faults`: its store fails writes now and then. Prints `WORKER <id>`
/// (its leases' owner prefix) and `ADDR <addr>` once serving, then `FAULTS <failed>
/// <ambiguous>` every 200 ms.
async fn serve(database: Database, config: String, faults: bool) -> std::process::ExitCode {
    let config = Arc::new(Config::from_file(FsPath::new(&config)).expect("chaos config"));
    let slot: Arc<OnceLock<Arc<FaultyStore>>> = Arc::default();
    let keep = slot.clone();
    let parts = Parts {
        wrap_store: Box::new(move |s| {
            let f = Arc::new(FaultyStore::new(s));
            f.chaos(faults.then(|| Chaos {
                fail: 0.03,
                ambiguous: 0.03,
                seed: Timestamp::now().as_nanosecond() as u64,
            }));
            keep.set(f.clone()).ok();
            f
        }),
        ..Parts::default()
    };
    let server = Server::start_on(config, &database, "127.0.0.1:0".parse().unwrap(), parts)
        .await
        .expect("the server starts");
    println!("WORKER {}", server.engine.worker_id());
    println!("ADDR {}", server.addr);
    let faults = slot.get().cloned().expect("wrapped");
    tokio::spawn(async move {
        loop {
            let n = faults.injected();
            println!("FAULTS {} {}", n.failed, n.ambiguous);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    term.recv().await;
    server.shutdown().await.ok();
    println!("STOPPED");
    std::process::ExitCode::SUCCESS
}

/// The server child: its address and the store faults it injected so far.
struct Child_ {
    child: Child,
    /// Store writes failed / failed ambiguously (applied, then an error) so far.
    faults: Arc<Mutex<(usize, usize)>>,
}

/// Start server `i` on the store `store` names (`--db F` or `--database-url URL`); its
/// address goes into `bases[i]`.
fn start_server(
    store: &[String],
    config: &FsPath,
    bases: &RwLock<Vec<String>>,
    i: usize,
) -> Child_ {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("serve")
        .args(store)
        .arg("--config")
        .arg(config)
        .env(SECRET_ENV, "chaos-secret")
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server prints its address")
            .unwrap();
        if let Some(addr) = line.strip_prefix("ADDR ") {
            break addr.to_owned();
        }
    };
    bases.write().unwrap()[i] = format!("http://{addr}");
    let faults = Arc::new(Mutex::new((0, 0)));
    let seen = faults.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(n) = line.strip_prefix("FAULTS ") {
                let mut n = n.split(' ').map(|x| x.parse().unwrap_or(0));
                *seen.lock().unwrap() = (n.next().unwrap_or(0), n.next().unwrap_or(0));
            }
        }
    });
    Child_ { child, faults }
}

// ---------- the tool server ----------

#[derive(Clone, Debug)]
struct Attempt {
    action_id: String,
    attempt: u64,
    /// Arrival at the tool server.
    at: Timestamp,
    /// The signature's `t`: when the worker signed (started) the attempt, in whole seconds.
    signed: Option<Timestamp>,
    /// When the tool server had its answer ready (`None`: the request was dropped first).
    answered: Option<Timestamp>,
}

/// The record of an attempt as it arrives: a webhook's body and signature, or an MCP
/// `tools/call` naming the action and attempt in `_meta`.
fn arrival(headers: &HeaderMap, body: &Value) -> Attempt {
    let action = &body["params"]["_meta"]["io.countersign/action"];
    let (action_id, attempt) = if action.is_object() {
        (&action["action_id"], action["attempt"].as_u64())
    } else {
        (
            &body["action_id"],
            headers
                .get("countersign-attempt")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()),
        )
    };
    Attempt {
        action_id: action_id.as_str().unwrap_or_default().to_owned(),
        attempt: attempt.unwrap_or(0),
        at: Timestamp::now(),
        signed: signed_at(headers),
        answered: None,
    }
}

/// `t` of `Countersign-Signature: t=<unix>,v1=<hex>`.
fn signed_at(headers: &HeaderMap) -> Option<Timestamp> {
    let value = headers.get("countersign-signature")?.to_str().ok()?;
    let t = value.split(',').find_map(|part| part.strip_prefix("t="))?;
    Timestamp::from_second(t.parse().ok()?).ok()
}

type Attempts = Arc<Mutex<Vec<Attempt>>>;

async fn tool_server(attempts: Attempts) -> String {
    let record = |attempts: &Attempts, headers: &HeaderMap, body: &Bytes| {
        let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let mut all = attempts.lock().unwrap();
        all.push(arrival(headers, &parsed));
        (all.len() - 1, parsed)
    };
    let answered = |attempts: &Attempts, index: usize| {
        attempts.lock().unwrap()[index].answered = Some(Timestamp::now());
    };
    let webhook = {
        let attempts = attempts.clone();
        move |Path(kind): Path<String>, headers: HeaderMap, body: Bytes| {
            let attempts = attempts.clone();
            async move {
                let (index, _) = record(&attempts, &headers, &body);
                let answer = answer(&kind).await;
                answered(&attempts, index);
                answer
            }
        }
    };
    let mcp = move |Path(kind): Path<String>, headers: HeaderMap, body: Bytes| {
        let attempts = attempts.clone();
        async move {
            let (index, parsed) = record(&attempts, &headers, &body);
            let answer = mcp_answer(&kind, &parsed["id"]);
            answered(&attempts, index);
            answer
        }
    };
    let app = Router::new()
        .route("/{kind}", post(webhook))
        .route("/mcp/{kind}", post(mcp));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn answer(kind: &str) -> (axum::http::StatusCode, String) {
    use axum::http::StatusCode;
    match kind {
        "slow" => {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            (StatusCode::OK, json!({"slow": true}).to_string())
        }
        "5xx" => (StatusCode::SERVICE_UNAVAILABLE, "{}".into()),
        "big" => (
            StatusCode::OK,
            json!({"pad": "x".repeat(10 * 1024 * 1024)}).to_string(),
        ),
        "badjson" => (StatusCode::OK, "{not json".into()),
        _ => (StatusCode::OK, json!({"ok": true}).to_string()),
    }
}

/// An MCP tool's SSE answer to the request `id`: a notification first, then the response.
fn mcp_answer(kind: &str, id: &Value) -> axum::response::Response {
    use axum::response::IntoResponse;
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1, "total": 2}});
    let failed = kind == "mcperror";
    let result = json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": kind}], "isError": failed}});
    let eol = if kind == "mcpcrlf" { "\r\n" } else { "\n" };
    let events = format!("data: {progress}{eol}{eol}data: {result}{eol}{eol}");
    let head = futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from(events))]);
    let body = if kind == "mcpopen" {
        // The stream stays open after the response: the reader must stop at it.
        axum::body::Body::from_stream(futures_util::StreamExt::chain(
            head,
            futures_util::stream::pending(),
        ))
    } else {
        axum::body::Body::from_stream(head)
    };
    ([("content-type", "text/event-stream")], body).into_response()
}

// ---------- the drivers ----------

/// A tiny deterministic generator (xorshift): reproducible choices without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Default)]
struct Tally {
    submitted: usize,
    approved: usize,
    denied: usize,
    cancel_won: usize,
    cancel_lost: usize,
    /// The actions whose cancel was answered 409 (a conflict: executing or sealed already).
    cancel_refused: Vec<String>,
    unavailable: usize,
    refused_by_server: usize,
    /// Submits (API and MCP) and approves whose client hung up before the answer.
    hung_up: usize,
    /// When the stop of STOPPED_AGENT was answered.
    stop_answered: Option<Timestamp>,
}

struct Client {
    http: reqwest::Client,
    /// Every server's address; each request goes to the next one.
    bases: Arc<RwLock<Vec<String>>>,
    next: std::sync::atomic::AtomicUsize,
}

impl Client {
    /// One request; `None` when the server is down (being restarted) or did not answer in time.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> Option<(u16, Value)> {
        self.call_within(method, path, key, body, &[], Duration::from_secs(30))
            .await
    }

    /// A POST by a client that gives up after [`HASTY`] (a proxy's timeout, a closed tab): it
    /// hangs up mid-request whenever the server takes longer, e.g. while a slow tool runs.
    async fn hang_up(&self, path: &str, key: &str, body: Value, headers: &[(&str, &str)]) {
        self.call_within(reqwest::Method::POST, path, key, Some(body), headers, HASTY)
            .await;
    }

    async fn call_within(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
        within: Duration,
    ) -> Option<(u16, Value)> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let url = {
            let bases = self.bases.read().unwrap();
            format!("{}{path}", bases[n % bases.len()])
        };
        let mut req = self
            .http
            .request(method, url)
            .bearer_auth(key)
            .timeout(within);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.ok()?;
        let status = res.status().as_u16();
        let value = res.json().await.unwrap_or(Value::Null);
        Some((status, value))
    }
}

/// The call `body` (an API submit's) as an MCP `tools/call` (2026-07-28, stateless) by a client
/// that hangs up before the answer.
async fn mcp_call_hanging_up(client: &Client, key: &str, body: Value) {
    let tool = body["tool"].as_str().unwrap_or_default().to_owned();
    let mut arguments = body["args"].clone();
    if !body["schedule"].is_null() {
        arguments["countersign_window"] = body["schedule"].clone();
    }
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool.as_str()),
        ("accept", "application/json, text/event-stream"),
    ];
    client.hang_up("/mcp", key, rpc, &headers).await;
}

fn window(from_now: i64, length: i64) -> Value {
    let at = |s: i64| {
        Timestamp::now()
            .checked_add(SignedDuration::from_secs(s))
            .unwrap()
            .round(jiff::Unit::Second)
            .unwrap()
            .to_string()
    };
    json!({"not_before": at(from_now), "not_after": at(from_now + length)})
}

async fn agent(
    client: Arc<Client>,
    tally: Arc<Mutex<Tally>>,
    until: std::time::Instant,
    seed: u64,
) {
    let mut rng = Rng(seed);
    while std::time::Instant::now() < until {
        let kind = *rng.pick(&ALL_KINDS);
        let who = if rng.chance(15) { STOPPED_AGENT } else { AGENT };
        let body = match rng.next() % 3 {
            0 => json!({"tool": format!("search.{kind}"), "args": {"n": rng.next() % 1000}}),
            // Some without a window: its approval claims and runs it at once (SC-EDGE-07).
            1 if rng.chance(30) => {
                json!({"tool": format!("mail.{kind}"), "args": {"n": rng.next() % 1000}})
            }
            1 => json!({"tool": format!("mail.{kind}"), "args": {"n": rng.next() % 1000},
                        "schedule": window(1 + (rng.next() % 3) as i64, 10)}),
            _ => json!({"tool": format!("report.{kind}"), "args": {"n": rng.next() % 1000},
                        "schedule": window(1 + (rng.next() % 3) as i64, 10)}),
        };
        // Some clients hang up before the answer (SC-EDGE-12), through the API or MCP.
        if rng.chance(15) {
            if rng.chance(50) {
                client.hang_up("/v1/actions", who, body, &[]).await;
            } else {
                mcp_call_hanging_up(&client, who, body).await;
            }
            tally.lock().unwrap().hung_up += 1;
            continue;
        }
        let answer = client
            .call(reqwest::Method::POST, "/v1/actions", who, Some(body))
            .await;
        let Some((status, action)) = answer else {
            tally.lock().unwrap().unavailable += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if !(200..300).contains(&status) {
            let mut t = tally.lock().unwrap();
            if status == 503 {
                t.unavailable += 1;
            } else {
                t.refused_by_server += 1;
            }
            continue;
        }
        tally.lock().unwrap().submitted += 1;
        let id = action["id"].as_str().unwrap_or_default().to_owned();
        // An approver decides (most pending ones), and a cancel races the worker (some).
        if action["state"] == "pending_approval" {
            let digest = action["approval"]["context_digest"].clone();
            let (path, body) = if rng.chance(80) {
                (
                    format!("/v1/actions/{id}/approve"),
                    json!({"context_digest": digest}),
                )
            } else {
                (
                    format!("/v1/actions/{id}/deny"),
                    json!({"reason": "chaos says no"}),
                )
            };
            if rng.chance(20) {
                client.hang_up(&path, APPROVER, body, &[]).await;
                tally.lock().unwrap().hung_up += 1;
            } else if let Some((200, _)) = client
                .call(reqwest::Method::POST, &path, APPROVER, Some(body))
                .await
            {
                let mut t = tally.lock().unwrap();
                if path.ends_with("approve") {
                    t.approved += 1;
                } else {
                    t.denied += 1;
                }
            }
        }
        if rng.chance(30) {
            let client = client.clone();
            let tally = tally.clone();
            let delay = rng.next() % 4000;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                let path = format!("/v1/actions/{id}/cancel");
                match client
                    .call(reqwest::Method::POST, &path, ADMIN, Some(json!({})))
                    .await
                {
                    Some((200, _)) => tally.lock().unwrap().cancel_won += 1,
                    Some((409, _)) => {
                        let mut t = tally.lock().unwrap();
                        t.cancel_lost += 1;
                        t.cancel_refused.push(id);
                    }
                    _ => {}
                }
            });
        }
    }
}

// ---------- the run ----------

/// The run on SQLite (one server) or on Postgres (`instances` servers sharing a fresh schema).
async fn run(
    seconds: u64,
    dir: &FsPath,
    postgres: bool,
    instances: usize,
) -> std::process::ExitCode {
    std::fs::create_dir_all(dir).unwrap();
    // One database per run, named so `scripts/chaos.sh` can verify it with the CLI afterwards.
    let (database, store_args) = if postgres {
        let url = countersign_tests::postgres::fresh_url("chaos").await;
        std::fs::write(dir.join("database_url"), &url).unwrap();
        let database = Database::Postgres {
            url: url.clone(),
            options: countersign::store::postgres::Options::default(),
        };
        (database, vec!["--database-url".to_owned(), url])
    } else {
        let db = dir.join("chaos.db");
        for stale in ["chaos.db", "chaos.db-wal", "chaos.db-shm"] {
            let _ = std::fs::remove_file(dir.join(stale));
        }
        let arg = db.display().to_string();
        (Database::Sqlite(db), vec!["--db".to_owned(), arg])
    };
    let instances = if postgres { instances } else { 1 };
    let attempts: Attempts = Arc::default();
    let tools = tool_server(attempts.clone()).await;
    // The channels: down from a quarter of the run to its half (servers inherit the secrets).
    let taken: channels::Taken = Arc::default();
    let now = std::time::Instant::now();
    let down = channels::Down {
        from: now + Duration::from_secs(seconds) / 4,
        until: now + Duration::from_secs(seconds) / 2,
    };
    let slack = channels::slack(taken.clone(), down).await;
    std::env::set_var("CHAOS_SMTP_URL", channels::smtp(taken.clone(), down));
    for (name, value) in CHANNEL_ENV {
        std::env::set_var(name, value);
    }
    let config_path = dir.join("chaos.toml");
    std::fs::write(&config_path, config(&tools, &slack)).unwrap();
    std::env::set_var(SECRET_ENV, "chaos-secret");
    let bases = Arc::new(RwLock::new(vec![String::new(); instances]));
    let mut servers: Vec<Child_> = (0..instances)
        .map(|i| start_server(&store_args, &config_path, &bases, i))
        .collect();
    let client = Arc::new(Client {
        http: reqwest::Client::new(),
        bases: bases.clone(),
        next: Default::default(),
    });
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = std::time::Instant::now();
    let until = started + Duration::from_secs(seconds);
    let drivers: Vec<_> = (0..4)
        .map(|i| tokio::spawn(agent(client.clone(), tally.clone(), until, 0x9E37_79B9 + i)))
        .collect();

    // Restarts: every quarter of the run, alternately SIGKILL and SIGTERM (graceful drain), of
    // one server after another (the others keep serving and take over its tickets).
    let (mut kills, mut graceful, mut faults) = (0, 0, (0, 0));
    // When each SIGKILL was sent: a claim held across one may end `outcome_unknown` unsent.
    let mut killed_at = Vec::new();
    let mut stopped = false;
    for round in 1..=3u64 {
        let at = started + Duration::from_secs(seconds * round / 4);
        tokio::time::sleep_until(at.into()).await;
        if !stopped && round == 2 {
            let answer = client
                .call(
                    reqwest::Method::POST,
                    "/v1/stops",
                    ADMIN,
                    Some(json!({"agent_id": STOPPED_AGENT})),
                )
                .await;
            if let Some((201, _)) = answer {
                tally.lock().unwrap().stop_answered = Some(Timestamp::now());
                stopped = true;
            }
        }
        let i = (round as usize - 1) % instances;
        let server = &mut servers[i];
        let f = *server.faults.lock().unwrap();
        faults = (faults.0 + f.0, faults.1 + f.1);
        if round % 2 == 1 {
            killed_at.push(Timestamp::now());
            server.child.kill().ok(); // SIGKILL
            kills += 1;
        } else {
            Command::new("kill")
                .arg("-TERM")
                .arg(server.child.id().to_string())
                .status()
                .ok();
            graceful += 1;
        }
        server.child.wait().ok();
        *server = start_server(&store_args, &config_path, &bases, i);
    }
    for d in drivers {
        d.await.ok();
    }
    // Let cancels in flight land and runs under way finish, then stop gracefully.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for server in &servers {
        let f = *server.faults.lock().unwrap();
        faults = (faults.0 + f.0, faults.1 + f.1);
    }
    // Leases are judged as of the last instant a sweep could still recover them: no sweep runs
    // once the server drains, and a pass that re-runs retry tools takes seconds. A lease that
    // lapses later (a claim just before the last SIGKILL lapses ≈ 36 s on) is the next start's
    // to recover, not a violation; runs longer than the lease showed such false alarms.
    let as_of = Timestamp::now() - RECOVERY_SLACK;
    std::fs::write(dir.join("checked_at"), as_of.to_string()).unwrap();
    for server in &servers {
        Command::new("kill")
            .arg("-TERM")
            .arg(server.child.id().to_string())
            .status()
            .ok();
    }
    for server in &mut servers {
        server.child.wait().ok();
    }

    let store = database.open().await.unwrap();
    let store = store.as_ref();
    let report = invariants::check(store, &["acme".to_owned()], as_of)
        .await
        .unwrap();
    let attempts = attempts.lock().unwrap().clone();
    let stop_answered = tally.lock().unwrap().stop_answered;
    let (mut broken, per_kind) = check_attempts(store, &attempts, stop_answered).await;
    let all = all_actions(store).await;
    let refused = tally.lock().unwrap().cancel_refused.clone();
    let (wrong, outcomes) = check_outcomes(store, &all, &attempts, &killed_at, &refused).await;
    broken.extend(wrong);
    broken.extend(check_mcp_answers(&all));
    let took = std::mem::take(&mut *taken.lock().unwrap());
    let (lost, delivered) = channels::check(store, &all, &took).await;
    broken.extend(lost);
    let t = tally.lock().unwrap();
    let actions = actions_per_kind(&all);
    let states: Vec<String> = report
        .states
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    let on = match &database {
        Database::Sqlite(db) => format!("db {}", db.display()),
        Database::Postgres { .. } => format!("Postgres, {instances} instances"),
    };
    println!("chaos: {seconds} s, {on}");
    println!(
        "chaos: actions {} ({}); submitted {}, approved {}, denied {}, cancels won {} lost {}, answers 503 {}, clients that hung up {}",
        report.actions,
        states.join(", "),
        t.submitted,
        t.approved,
        t.denied,
        t.cancel_won,
        t.cancel_lost,
        t.unavailable,
        t.hung_up
    );
    println!(
        "chaos: tool attempts {}; restarts {} (SIGKILL {kills}, SIGTERM {graceful}); store faults injected {} failed + {} ambiguous; stop answered: {}",
        attempts.len(),
        kills + graceful,
        faults.0,
        faults.1,
        stop_answered.is_some()
    );
    let kinds: Vec<String> = per_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("chaos: tool attempts per kind: {}", kinds.join(", "));
    println!("chaos: {outcomes}");
    println!("chaos: {delivered}");
    if let Some(latest) = latest_arrival(&all, &attempts) {
        println!("chaos: latest arrival relative to its window's end: {latest}");
    }
    let kinds: Vec<String> = actions.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!(
        "chaos: actions per tool kind (faults played by the tool server): {}",
        kinds.join(", ")
    );
    let violations = report.violations.len() + broken.len();
    for v in &report.violations {
        println!(
            "violation (store): {}/{} {:?}: {}",
            v.tenant, v.action_id, v.rule, v.detail
        );
    }
    for b in &broken {
        println!("violation (tools): {b}");
    }
    println!("chaos: invariant violations: {violations}");
    if violations == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}

/// Every action of the run, newest first.
async fn all_actions(store: &dyn Store) -> Vec<Action> {
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list(
                "acme",
                &ListQuery {
                    limit: 100,
                    before: before.take(),
                    ..ListQuery::default()
                },
            )
            .await
            .unwrap();
        all.extend(page.actions);
        match page.next {
            Some(next) => before = Some(next),
            None => return all,
        }
    }
}

/// The latest a scheduled action's attempt reached the tool server, relative to its window's
/// end (negative: before it). Each attempt ends by then (SC-EDGE-01); the stamp trails by the
/// tool server's own scheduling.
fn latest_arrival(all: &[Action], attempts: &[Attempt]) -> Option<String> {
    let windows: HashMap<&str, Timestamp> = all
        .iter()
        .filter_map(|a| a.call().schedule().map(|w| (a.id(), w.not_after)))
        .collect();
    let (late, a) = attempts
        .iter()
        .filter_map(|a| {
            let end = windows.get(a.action_id.as_str())?;
            Some((a.at.duration_since(*end), a))
        })
        .max_by_key(|(late, _)| *late)?;
    Some(format!(
        "{late:#} ({} attempt {}, signed at {:?})",
        a.action_id, a.attempt, a.signed
    ))
}

/// How many actions used each tool kind (`refused` ones never reach the tool server).
fn actions_per_kind(all: &[Action]) -> BTreeMap<String, usize> {
    let mut per_kind = BTreeMap::new();
    for a in all {
        let kind = a
            .call()
            .tool()
            .split('.')
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        *per_kind.entry(kind).or_default() += 1;
    }
    per_kind
}

/// Outcomes held to what happened.
/// - `outcome_unknown` says an attempt may have reached the tool: the tool server must have
///   received one, or a SIGKILL must have fallen between the first claim and the seal (a
///   worker that died may have sent it). Otherwise nobody ran a committed call and the sweep
///   sealed it unknown (issue 14, defect 1). `refused` tools are held to it too: their
///   attempts never reach the tool server, but fail at once and commit their answer. And
///   with no SIGKILL in between, an attempt the tool answered must not end unknown: the
///   worker lived to read it, whatever its client did (SC-EDGE-12).
/// - A cancel answered 409 is a cancel that lost: the action must not then be sealed by a
///   cancel (`cancelled`, reason `cancelled`; a missed window also seals `cancelled`, with
///   its own reason), else the winning cancel was told it lost (defect 2).
async fn check_outcomes(
    store: &dyn Store,
    all: &[Action],
    attempts: &[Attempt],
    killed_at: &[Timestamp],
    cancel_refused: &[String],
) -> (Vec<String>, String) {
    let mut broken = Vec::new();
    let (mut unknown, mut reached_tool, mut across_kill) = (0, 0, 0);
    for a in all.iter().filter(|a| a.reason() == Some("outcome_unknown")) {
        unknown += 1;
        let events = store.events(a.tenant(), a.id()).await.unwrap_or_default();
        let claimed = events
            .iter()
            .find(|e| e.to == State::Executing)
            .map(|e| e.at);
        let sealed = events.last().map(|e| e.at);
        let held =
            |k: &Timestamp| claimed.is_some_and(|c| c <= *k) && sealed.is_some_and(|s| *k <= s);
        if killed_at.iter().any(held) {
            across_kill += 1;
            continue;
        }
        // No SIGKILL: the worker that sent an attempt lived to read its answer (or its
        // timeout). An answer the tool gave is never left unknown — a client hanging up does not
        // end the run (SC-EDGE-12).
        let mine: Vec<&Attempt> = attempts.iter().filter(|t| t.action_id == a.id()).collect();
        if let Some(t) = mine.iter().find(|t| t.answered.is_some()) {
            broken.push(format!(
                "{}: sealed outcome_unknown, but the tool answered attempt {} at {:?} and no SIGKILL fell while it was claimed",
                a.id(), t.attempt, t.answered
            ));
        } else if !mine.is_empty() {
            reached_tool += 1;
        } else {
            broken.push(format!(
                "{}: sealed outcome_unknown, but no attempt reached the tool and no SIGKILL fell while it was claimed (claimed {claimed:?}, sealed {sealed:?})",
                a.id()
            ));
        }
    }
    for id in cancel_refused {
        if let Some(a) = all.iter().find(|a| a.id() == id) {
            if a.state() == State::Cancelled && a.reason() == Some("cancelled") {
                broken.push(format!(
                    "{id}: its cancel was answered 409, yet a cancel sealed it"
                ));
            }
        }
    }
    let summary = format!(
        "sealed outcome_unknown {unknown} (claimed across a SIGKILL {across_kill}, an attempt reached the tool and never answered {reached_tool}); cancels answered 409 {}",
        cancel_refused.len()
    );
    (broken, summary)
}

/// The MCP tools' answers read as they were given (SC-MCP-06): a tool that reported progress and
/// then `isError` never succeeded; an answer framed with CRLF or on a stream left open is never
/// an invalid response. A timeout of those can be the loaded machine's (the `ok` webhook times
/// out now and then too, in bursts after a restart), but not most of them: before the reader
/// stopped at its response, every call to a stream left open timed out.
fn check_mcp_answers(all: &[Action]) -> Vec<String> {
    let mut broken = Vec::new();
    let (mut open, mut open_timeouts) = (0, 0);
    for a in all.iter().filter(|a| a.state().is_sealed()) {
        let kind = a.call().tool().split('.').nth(1).unwrap_or_default();
        let error = a
            .outcome()
            .and_then(|o| o.error.as_ref())
            .and_then(|e| e["kind"].as_str())
            .unwrap_or_default();
        if kind == "mcpopen" && matches!(a.state(), State::Succeeded | State::Failed) {
            open += 1;
            open_timeouts += usize::from(error == "timeout");
        }
        match kind {
            "mcperror" if a.state() == State::Succeeded => broken.push(format!(
                "{}: an MCP tool answered isError, yet the action succeeded",
                a.id()
            )),
            "mcpopen" | "mcpcrlf" if error == "mcp_invalid_response" => broken.push(format!(
                "{}: an MCP tool's {kind} answer was read as an invalid response",
                a.id()
            )),
            _ => {}
        }
    }
    if open_timeouts * 2 > open {
        broken.push(format!(
            "{open_timeouts} of {open} calls to an MCP tool that leaves its stream open timed out"
        ));
    }
    broken
}

/// The tool server's record against the rules.
async fn check_attempts(
    store: &dyn Store,
    attempts: &[Attempt],
    stop_answered: Option<Timestamp>,
) -> (Vec<String>, BTreeMap<String, usize>) {
    let mut broken = Vec::new();
    let mut per_kind = BTreeMap::new();
    let mut by_action: HashMap<&str, Vec<&Attempt>> = HashMap::new();
    for a in attempts {
        by_action.entry(&a.action_id).or_default().push(a);
    }
    for (id, tries) in by_action {
        let Ok(Some(action)) = store.load("acme", id).await else {
            broken.push(format!(
                "{id}: an attempt for an action the store does not hold"
            ));
            continue;
        };
        let retry_tool = action.call().tool().starts_with("report.");
        let kind = action
            .call()
            .tool()
            .split('.')
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        *per_kind.entry(kind).or_default() += tries.len();
        if let Some(w) = action.call().schedule() {
            for a in &tries {
                if a.at < w.not_before {
                    broken.push(format!(
                        "{id}: attempt {} at {} before not_before {}",
                        a.attempt, a.at, w.not_before
                    ));
                }
                // An MCP attempt carries no signature: its arrival is held to the deadline below.
                let mcp = action.call().tool().contains(".mcp");
                if !mcp && a.signed.is_none_or(|t| t > w.not_after) {
                    broken.push(format!(
                        "{id}: attempt {} signed at {:?}, after the deadline {} (or unsigned)",
                        a.attempt, a.signed, w.not_after
                    ));
                }
                if a.at > w.not_after.checked_add(TRANSIT).unwrap() {
                    broken.push(format!(
                        "{id}: attempt {} arrived at {}, long after the deadline {}",
                        a.attempt, a.at, w.not_after
                    ));
                }
            }
        }
        if let (Some(stop), true) = (stop_answered, action.call().agent_id() == STOPPED_AGENT) {
            for a in &tries {
                if a.at > stop.checked_add(TRANSIT).unwrap() {
                    broken.push(format!(
                        "{id}: attempt {} at {} after the stop answered at {stop}",
                        a.attempt, a.at
                    ));
                }
            }
        }
        if !retry_tool && tries.len() > 1 {
            broken.push(format!(
                "{id}: {} attempts of a recovery=fail tool",
                tries.len()
            ));
        }
        let mut numbers: Vec<u64> = tries.iter().map(|a| a.attempt).collect();
        numbers.sort();
        numbers.dedup();
        if numbers.len() != tries.len() {
            broken.push(format!("{id}: an attempt number was sent twice"));
        }
        // Cancelled and denied actions never started an attempt (a cancel only wins before the
        // claim; a stopped claim is sealed before its first attempt).
        if matches!(action.state(), State::Cancelled | State::Denied) {
            broken.push(format!(
                "{id}: {} attempts although sealed {}",
                tries.len(),
                action.state()
            ));
        }
    }
    (broken, per_kind)
}
