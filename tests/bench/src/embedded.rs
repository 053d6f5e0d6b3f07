//! Embedded throughput: the engine's allow → run lifecycles per second over HTTP (submit, claim,
//! builtin tool, result: three transitions, each a conditional write with its audit event),
//! against the raw ceiling measured in the same run with the same durability: one thread
//! looping the same conditional writes (update on state + version, event insert), one
//! transaction (and one fsync) each.

use crate::{stats::Summary, world};
use countersign::{boot::embedded::Server, config::Config, store::sqlite};
use rusqlite::{params, Connection};
use serde_json::json;
use std::{
    path::Path,
    sync::{atomic::AtomicUsize, atomic::Ordering, Arc},
    time::Instant,
};

pub struct Throughput {
    /// Raw single-thread conditional transitions per second.
    pub raw_per_s: f64,
    /// Engine allow → run lifecycles per second over HTTP.
    pub lifecycles_per_s: f64,
    pub latency: Summary,
    /// The same allow → run lifecycles as MCP `tools/call`s at `/mcp` (docs/mcp.md).
    pub mcp_per_s: f64,
    pub mcp_latency: Summary,
    pub lifecycles: usize,
    pub concurrency: usize,
    pub synchronous: &'static str,
}

impl Throughput {
    pub fn ratio(&self) -> f64 {
        self.lifecycles_per_s / self.raw_per_s
    }

    /// MCP throughput ÷ REST throughput.
    pub fn mcp_ratio(&self) -> f64 {
        self.mcp_per_s / self.lifecycles_per_s
    }
}

pub async fn measure(lifecycles: usize, transitions: usize, concurrency: usize) -> Throughput {
    let raw_db = world::TempDb::new("raw");
    let raw_per_s = raw_ceiling(&raw_db.path, transitions);
    drop(raw_db);
    let [(lifecycles_per_s, latency), (mcp_per_s, mcp_latency)] =
        engine(lifecycles, concurrency).await;
    Throughput {
        raw_per_s,
        lifecycles_per_s,
        latency,
        mcp_per_s,
        mcp_latency,
        lifecycles,
        concurrency,
        synchronous: sqlite::SYNCHRONOUS,
    }
}

/// The store's own schema and journal, then a raw loop of `n` conditional transitions with the
/// store's durability (`sqlite::SYNCHRONOUS`), one transaction each.
fn raw_ceiling(db: &Path, n: usize) -> f64 {
    drop(sqlite::SqliteStore::open(db).expect("open the store (schema)"));
    let mut conn = Connection::open(db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", sqlite::SYNCHRONOUS)
        .unwrap();
    // Bodies of the engine's sizes: an action ≈ 1 KB, an event ≈ 300 bytes.
    let body = vec![b'a'; 1024];
    let event = vec![b'e'; 300];
    let ids: Vec<String> = (0..n.div_ceil(3))
        .map(|_| format!("act_{}", ulid::Ulid::new()))
        .collect();
    let tx = conn.transaction().unwrap();
    for id in &ids {
        tx.execute(
            "INSERT INTO actions (tenant, id, agent_id, state, version, sweep_at, body)
             VALUES ('bench', ?1, 'agent', 'approved', 1, NULL, ?2)",
            params![id, body],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let started = Instant::now();
    for i in 0..n {
        let (id, version) = (&ids[i / 3], (i % 3 + 1) as i64);
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        let changed = tx
            .execute(
                "UPDATE actions SET state = 'executing', version = ?1, sweep_at = NULL, body = ?2
                 WHERE tenant = 'bench' AND id = ?3 AND state = ?4 AND version = ?5",
                params![
                    version + 1,
                    body,
                    id,
                    if version == 1 {
                        "approved"
                    } else {
                        "executing"
                    },
                    version
                ],
            )
            .unwrap();
        assert_eq!(changed, 1, "the condition holds");
        tx.execute(
            "INSERT INTO events (tenant, action_id, seq, body) VALUES ('bench', ?1, ?2, ?3)",
            params![id, version + 1, event],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Allow → run over HTTP with `concurrency` clients, through `POST /v1/actions` and then as MCP
/// `tools/call`s; each after a tenth as many lifecycles to warm, and each on a server and
/// database of its own (the second path measured on the first one's database would pay for a
/// database and WAL grown by 22,000 actions). Run to run, either path still varies by ±15 % on
/// this machine's disk: compare several runs (BENCHMARKS.md).
async fn engine(n: usize, concurrency: usize) -> [(f64, Summary); 2] {
    let (config, _tools) = world::config().await;
    let config = Arc::new(Config::from_toml(&config).expect("bench config"));
    let http = reqwest::Client::new();
    let mut measured = Vec::new();
    for via in [Via::Rest, Via::Mcp] {
        let db = world::TempDb::new("engine");
        let server = Server::start(config.clone(), &db.path, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start the embedded server");
        let url = [format!("http://{}{}", server.addr, via.path())];
        let _ = load(&http, &url, n / 10 + 1, concurrency, via).await;
        let started = Instant::now();
        let ms = load(&http, &url, n, concurrency, via).await;
        measured.push((n as f64 / started.elapsed().as_secs_f64(), Summary::of(ms)));
        server.shutdown().await.unwrap();
    }
    let mcp = measured.pop().expect("measured");
    let rest = measured.pop().expect("measured");
    [rest, mcp]
}

#[derive(Clone, Copy)]
pub(crate) enum Via {
    Rest,
    Mcp,
}

impl Via {
    pub(crate) fn path(self) -> &'static str {
        match self {
            Via::Rest => "/v1/actions",
            Via::Mcp => "/mcp",
        }
    }

    fn body(self) -> serde_json::Value {
        match self {
            Via::Rest => json!({"tool": "search.instant", "args": {"q": "x"}}),
            Via::Mcp => json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search.instant", "arguments": {"q": "x"}}}),
        }
    }

    /// Whether `status` and `body` are the answer `answer` expects.
    fn answered(self, answer: Answer, status: u16, body: &serde_json::Value) -> bool {
        match (self, answer) {
            (Via::Rest, Answer::Ran) => status == 200 && body["state"] == "succeeded",
            (Via::Rest, Answer::Held) => status == 202 && body["state"] == "pending_approval",
            (Via::Mcp, Answer::Ran) => status == 200 && body["result"]["isError"] == false,
            (Via::Mcp, Answer::Held) => unimplemented!("the bench holds calls over REST only"),
        }
    }
}

/// What every answer of a load must be: anything else fails the run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// `200`, `succeeded`: allowed (by the policy or a grant), run inline.
    Ran,
    /// `202`, `pending_approval`: held for a person.
    Held,
}

/// The calls of a load: call `i` sends `bodies[i % len]` as the holder of `bearer`.
pub(crate) struct Calls<'a> {
    pub via: Via,
    pub bodies: &'a [serde_json::Value],
    pub bearer: &'a str,
    pub answer: Answer,
}

/// `n` allow → run submissions from `concurrency` workers, submission `i` to `urls[i % len]`
/// (several servers sharing a store: `postgres.rs`); each must come back `succeeded`.
pub(crate) async fn load(
    http: &reqwest::Client,
    urls: &[String],
    n: usize,
    concurrency: usize,
    via: Via,
) -> Vec<f64> {
    let calls = Calls {
        via,
        bodies: &[via.body()],
        bearer: world::BENCH_AGENT,
        answer: Answer::Ran,
    };
    load_as(http, urls, n, concurrency, &calls).await
}

/// The same with calls of the caller's (`gate.rs`: arguments its conditions read;
/// `identity.rs`: an access token; `grants.rs`: calls held, or allowed by a grant).
pub(crate) async fn load_as(
    http: &reqwest::Client,
    urls: &[String],
    n: usize,
    concurrency: usize,
    calls: &Calls<'_>,
) -> Vec<f64> {
    let next = Arc::new(AtomicUsize::new(0));
    let urls = Arc::new(urls.to_vec());
    let bodies = Arc::new(calls.bodies.to_vec());
    let bearer: Arc<str> = calls.bearer.into();
    let (via, answer) = (calls.via, calls.answer);
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, urls, next) = (http.clone(), urls.clone(), next.clone());
            let (bodies, bearer) = (bodies.clone(), bearer.clone());
            tokio::spawn(async move {
                let mut ms = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return ms;
                    }
                    let t = Instant::now();
                    let res = http
                        .post(&urls[i % urls.len()])
                        .bearer_auth(&bearer)
                        .json(&bodies[i % bodies.len()])
                        .send()
                        .await
                        .expect("the server answers");
                    let status = res.status().as_u16();
                    let body: serde_json::Value = res.json().await.expect("JSON");
                    assert!(via.answered(answer, status, &body), "{status} {body}");
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for w in workers {
        all.extend(w.await.unwrap());
    }
    all
}
