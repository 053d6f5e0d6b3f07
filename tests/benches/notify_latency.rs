//! Benchmark (reported figures, no assertions): what notifications cost a transition and how
//! soon they arrive, on the local server over real HTTP (SC-NOT-02: delivery never delays a
//! transition). Three runs of N sequential submits of a pending action (each raises an
//! `approval_requested`): no endpoint; an endpoint that answers at once (also: the lag from the
//! submit's answer to the notice's arrival); an endpoint that never answers (each try times out).
//!
//!   cargo bench -p countersign-tests --bench notify_latency [-- N]

use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{
    config_toml, keys,
    receiver::{notify_toml, Mode, Receiver},
    temp_db, Api, ToolServer,
};
use serde_json::json;
use std::{collections::HashMap, sync::Arc, time::Instant};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut ms: Vec<f64>) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{name}: n={} p50={:.2}ms p90={:.2}ms p99={:.2}ms max={:.2}ms",
        ms.len(),
        percentile(&ms, 0.5),
        percentile(&ms, 0.9),
        percentile(&ms, 0.99),
        ms.last().unwrap()
    );
}

/// Submit `n` pending actions one after another; (latency ms, answered-at) per action id.
async fn submits(api: &Api, n: usize) -> (Vec<f64>, HashMap<String, Instant>) {
    let (mut ms, mut answered) = (Vec::new(), HashMap::new());
    for i in 0..n {
        let t = Instant::now();
        let (status, body) = api
            .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"i": i}}))
            .await;
        let done = Instant::now();
        assert_eq!(status, 202, "{body}");
        ms.push((done - t).as_secs_f64() * 1000.0);
        answered.insert(body["id"].as_str().unwrap().to_owned(), done);
    }
    (ms, answered)
}

async fn server(extra: &str, tools: &ToolServer) -> (Server, Api) {
    let text = config_toml(tools, "30s", "2s") + extra;
    let config = Arc::new(Config::from_toml(&text).unwrap());
    let server = Server::start(
        config,
        &temp_db("notify-bench"),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let api = Api::new(server.addr);
    (server, api)
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let tools = ToolServer::start().await;

    let (none, api) = server("", &tools).await;
    report("submit, no endpoint", submits(&api, n).await.0);
    none.shutdown().await.unwrap();

    let up = Receiver::start(Mode::Up).await;
    let (server_up, api) = server(&notify_toml(&up.url(), "10s", 20), &tools).await;
    let (ms, answered) = submits(&api, n).await;
    report("submit, endpoint up", ms);
    let ids: Vec<String> = answered
        .keys()
        .map(|id| format!("ntf_{}_1", id.strip_prefix("act_").unwrap()))
        .collect();
    assert!(up.wait_taken(&ids, 60).await, "every notice arrives");
    let lag: Vec<f64> = answered
        .iter()
        .map(|(id, at)| {
            let notice = format!("ntf_{}_1", id.strip_prefix("act_").unwrap());
            let arrived = up.taken(&notice)[0].at;
            arrived.saturating_duration_since(*at).as_secs_f64() * 1000.0
        })
        .collect();
    report(
        "notice arrival after the submit's answer (worker polls every 1 s)",
        lag,
    );
    server_up.shutdown().await.unwrap();

    let hang = Receiver::start(Mode::Hang).await;
    let (server_hang, api) = server(&notify_toml(&hang.url(), "10s", 20), &tools).await;
    report("submit, endpoint hanging", submits(&api, n).await.0);
    println!("held deliveries at the end: {}", hang.held());
    hang.set(Mode::Up);
    server_hang.shutdown().await.unwrap();
}
