//! Benchmark (reported figures, no assertions): the local server over real HTTP with a real
//! HTTP tool. Measures intake latency and throughput for calls that run at once (allow → claim
//! → webhook → commit: 4 SQLite writes and one tool call each) and for the countersign path
//! (submit pending + approve-and-run).
//!
//!   cargo bench -p countersign-tests --bench local_throughput [-- N CONCURRENCY]

use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, keys, temp_db, Api, ToolServer};
use serde_json::json;
use std::{sync::Arc, time::Instant};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut ms: Vec<f64>, wall: std::time::Duration) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name}: n={} wall={:.2}s throughput={:.0}/s latency p50={:.2}ms p90={:.2}ms p99={:.2}ms max={:.2}ms",
        ms.len(),
        wall.as_secs_f64(),
        ms.len() as f64 / wall.as_secs_f64(),
        percentile(&ms, 0.5),
        percentile(&ms, 0.9),
        percentile(&ms, 0.99),
        ms.last().unwrap()
    );
}

async fn run<F, Fut>(n: usize, concurrency: usize, f: F) -> (Vec<f64>, std::time::Duration)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let f = Arc::new(f);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (f, next) = (f.clone(), next.clone());
            tokio::spawn(async move {
                let mut ms = Vec::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= n {
                        return ms;
                    }
                    let t = Instant::now();
                    f(i).await;
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap());
    }
    (all, start.elapsed())
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(1000);
    let concurrency = args.get(1).copied().unwrap_or(8);
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let server = Server::start(config, &temp_db("bench"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    println!(
        "local server benchmark: {n} requests per case, concurrency {concurrency}, 2-core machine"
    );

    let a = api.clone();
    let (ms, wall) = run(n, concurrency, move |i| {
        let a = a.clone();
        async move {
            let (s, v) = a
                .submit(keys::AGENT, json!({"tool": "search.web", "args": {"i": i}}))
                .await;
            assert_eq!((s, v["state"].as_str()), (200, Some("succeeded")));
        }
    })
    .await;
    report("allow → run now (submit, claim, webhook, commit)", ms, wall);

    let a = api.clone();
    let (ms, wall) = run(n, concurrency, move |i| {
        let a = a.clone();
        async move {
            let (s, v) = a
                .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"i": i}}))
                .await;
            assert_eq!(s, 202);
            let (s, v) = a
                .approve(
                    v["id"].as_str().unwrap(),
                    v["approval"]["context_digest"].as_str().unwrap(),
                )
                .await;
            assert_eq!((s, v["state"].as_str()), (200, Some("succeeded")));
        }
    })
    .await;
    report(
        "countersign (submit pending + approve, runs at once)",
        ms,
        wall,
    );

    let a = api.clone();
    let (ms, wall) = run(n, concurrency, move |_| {
        let a = a.clone();
        async move {
            let (s, _) = a.get("/v1/actions?limit=20", keys::AGENT).await;
            assert_eq!(s, 200);
        }
    })
    .await;
    report("list 20 actions", ms, wall);
    assert_eq!(
        tools.received().len(),
        2 * n,
        "every run reached the tool exactly once"
    );
    server.shutdown().await.unwrap();
}
