//! Bytes the embedded server writes to disk per lifecycle (issue 19's new figure): the
//! process's `write_bytes` from `/proc/self/io` (bytes the kernel sent to the block layer for
//! this process — WAL frames, checkpointed database pages, fsyncs' data) over a run of `n`
//! lifecycles from `concurrency` clients (as the throughput bench drives it), divided by `n`,
//! after a warm-up and a checkpoint so the run's own checkpoints are counted. Two flows:
//! allow → run, and submit → approve → run. Durability as shipped (`synchronous=FULL`, WAL).
//! Where the bytes go: the same count per thread (`/proc/self/task/*/io`) parts the store's
//! writer (the log's frames: whole pages) from its checkpointer (pages copied back).

use crate::world;
use countersign::{boot::embedded::Server, config::Config, store::sqlite};
use serde_json::json;
use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

pub struct Disk {
    pub lifecycles: usize,
    pub concurrency: usize,
    pub allow: Bytes,
    pub approve: Bytes,
}

/// Bytes written per lifecycle: by the whole process, and of that by the store's writer (log
/// frames) and its checkpointer.
pub struct Bytes {
    pub total: f64,
    pub log: f64,
    pub checkpoints: f64,
}

/// `write_bytes` of an `io` file of /proc.
fn write_bytes(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

/// This process's bytes written to storage so far: in all, by the store's writer thread, by
/// its checkpoint thread (threads that ended are counted in all only).
fn written() -> [u64; 3] {
    let all = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io (Linux)");
    let mut counts = [
        write_bytes(&all).expect("write_bytes in /proc/self/io"),
        0,
        0,
    ];
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task (Linux)");
    for task in tasks.flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let slot = match name.trim() {
            n if n == sqlite::WRITER_THREAD => 1,
            n if n == sqlite::CHECKPOINT_THREAD => 2,
            _ => continue,
        };
        let io = std::fs::read_to_string(task.path().join("io")).unwrap_or_default();
        counts[slot] += write_bytes(&io).unwrap_or(0);
    }
    counts
}

#[derive(Clone, Copy)]
enum Flow {
    Allow,
    Approve,
}

pub async fn measure(n: usize, concurrency: usize) -> Disk {
    let (config, _tools) = world::config().await;
    let db = world::TempDb::new("disk");
    let server = Server::start(
        Arc::new(Config::from_toml(&config).expect("bench config")),
        &db.path,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("start the embedded server");
    let base = format!("http://{}", server.addr);
    let run = |flow, n| run(base.clone(), flow, n, concurrency);
    run(Flow::Allow, n / 10 + 1).await;
    run(Flow::Approve, n / 10 + 1).await;
    let mut per = Vec::new();
    for flow in [Flow::Allow, Flow::Approve] {
        // Let the checkpoints of what came before run first (the store checkpoints at most
        // every 250 ms), and those of this run before reading the count.
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let before = written();
        run(flow, n).await;
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let after = written();
        let per_lifecycle = |i: usize| (after[i] - before[i]) as f64 / n as f64;
        per.push(Bytes {
            total: per_lifecycle(0),
            log: per_lifecycle(1),
            checkpoints: per_lifecycle(2),
        });
    }
    server.shutdown().await.unwrap();
    let [allow, approve] = <[Bytes; 2]>::try_from(per).ok().expect("two flows");
    Disk {
        lifecycles: n,
        concurrency,
        allow,
        approve,
    }
}

/// `n` lifecycles of `flow` from `concurrency` clients.
async fn run(base: String, flow: Flow, n: usize, concurrency: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let http = reqwest::Client::new();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, base, next) = (http.clone(), base.clone(), next.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    match flow {
                        Flow::Allow => allow_run(&http, &base).await,
                        Flow::Approve => approve_run(&http, &base).await,
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("a client finished");
    }
}

async fn allow_run(http: &reqwest::Client, base: &str) {
    let v = post(
        http,
        base,
        "/v1/actions",
        world::BENCH_AGENT,
        json!({"tool": "search.instant", "args": {"q": "x"}}),
    )
    .await;
    assert_eq!(v["state"], "succeeded", "{v}");
}

async fn approve_run(http: &reqwest::Client, base: &str) {
    let v = post(
        http,
        base,
        "/v1/actions",
        world::BENCH_AGENT,
        json!({"tool": "mail.instant", "args": {"to": "a@example.com"}}),
    )
    .await;
    let (id, digest) = (
        v["id"].as_str().expect("an id"),
        &v["next_action"]["context_digest"],
    );
    let path = format!("/v1/actions/{id}/approve");
    let v = post(
        http,
        base,
        &path,
        world::BENCH_APPROVER,
        json!({"context_digest": digest}),
    )
    .await;
    assert_eq!(v["state"], "succeeded", "approved and run inline: {v}");
}

async fn post(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    key: &str,
    body: serde_json::Value,
) -> serde_json::Value {
    http.post(format!("{base}{path}"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("the server answers")
        .json()
        .await
        .expect("JSON")
}
