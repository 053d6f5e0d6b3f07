//! Postgres: allow → run throughput over HTTP with one server and with three sharing one
//! database (the durability as shipped: `fsync` and `synchronous_commit` on, read back from the
//! server), and a burst due in one second committed through three servers at random: claims
//! (the `executing` event's time) and tool calls received, relative to `not_before`; early and
//! duplicate claims or calls counted. The database is scripts/postgres.sh's (a fresh schema).

use crate::{
    embedded::{load, Via},
    stats::Summary,
    world,
};
use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    store::postgres::{Options, PostgresStore},
};
use countersign_tests::{
    keys,
    postgres::{commit_scheduled, fresh_url},
    Api,
};
use jiff::{SignedDuration, Timestamp};
use std::{collections::HashMap, sync::Arc, time::Instant};

pub struct Throughput {
    pub instances: usize,
    pub per_s: f64,
    pub latency: Summary,
}

pub struct Burst {
    pub n: usize,
    pub claims: Summary,
    pub calls: Summary,
    pub early: usize,
    pub duplicates: usize,
    pub not_succeeded: usize,
}

pub struct Figures {
    pub throughput: Vec<Throughput>,
    pub lifecycles: usize,
    pub concurrency: usize,
    pub fsync: String,
    pub synchronous_commit: String,
    pub burst: Burst,
}

/// Sizes: quick (CI, debug build) runs in seconds.
pub async fn measure(quick: bool) -> Figures {
    let (lifecycles, concurrency, due) = if quick {
        (200, 8, 50)
    } else {
        (5_000, 32, 1_000)
    };
    let probe = PostgresStore::connect(&fresh_url("bench_settings").await, &Options::default())
        .await
        .expect("Postgres (source scripts/postgres.sh)");
    let fsync = probe.setting("fsync").await.expect("fsync");
    let synchronous_commit = probe
        .setting("synchronous_commit")
        .await
        .expect("synchronous_commit");
    let mut throughput = Vec::new();
    for instances in [1, 3] {
        eprintln!("bench: Postgres allow → run, {instances} instance(s)…");
        throughput.push(lifecycles_per_s(instances, lifecycles, concurrency).await);
    }
    eprintln!("bench: Postgres, {due} due in one second over 3 instances…");
    let burst = burst(due).await;
    assert_eq!(
        (burst.early, burst.duplicates, burst.not_succeeded),
        (0, 0, 0),
        "no early or duplicate claim or call, and every action succeeds"
    );
    Figures {
        throughput,
        lifecycles,
        concurrency,
        fsync,
        synchronous_commit,
        burst,
    }
}

/// `instances` servers on one fresh schema, as a deployment runs them.
async fn cluster(label: &str, instances: usize) -> (Vec<Server>, countersign_tests::ToolServer) {
    let (config, tools) = world::config().await;
    let config = Arc::new(Config::from_toml(&config).expect("bench config"));
    let database = Database::Postgres {
        url: fresh_url(label).await,
        options: Options::default(),
    };
    let mut servers = Vec::new();
    for _ in 0..instances {
        let listen = "127.0.0.1:0".parse().unwrap();
        let server = Server::start_on(config.clone(), &database, listen, Parts::default())
            .await
            .expect("start a server on Postgres");
        servers.push(server);
    }
    (servers, tools)
}

/// Allow → run (builtin tool) from `concurrency` clients, request `i` to server `i % n`; after a
/// tenth as many to warm.
async fn lifecycles_per_s(instances: usize, n: usize, concurrency: usize) -> Throughput {
    let (servers, _tools) = cluster("bench_throughput", instances).await;
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("http://{}/v1/actions", s.addr))
        .collect();
    let http = reqwest::Client::new();
    let _ = load(&http, &urls, n / 10 + 1, concurrency, Via::Rest).await;
    let started = Instant::now();
    let ms = load(&http, &urls, n, concurrency, Via::Rest).await;
    let per_s = n as f64 / started.elapsed().as_secs_f64();
    for s in servers {
        s.shutdown().await.unwrap();
    }
    Throughput {
        instances,
        per_s,
        latency: Summary::of(ms),
    }
}

/// `n` scheduled webhook tickets due within one second, each committed through a random one of
/// three servers.
async fn burst(n: usize) -> Burst {
    let (servers, tools) = cluster("bench_burst", 3).await;
    let apis: Vec<Api> = servers.iter().map(|s| Api::new(s.addr)).collect();
    let start = Timestamp::now() + SignedDuration::from_millis(3_000 + 20 * n as i64);
    let due = |i: usize| start + SignedDuration::from_micros((i * 1_000_000 / n) as i64);
    let ids = commit_scheduled(&apis, n, due, SignedDuration::from_secs(600)).await;
    assert!(
        Timestamp::now() < start,
        "committing {n} tickets took longer than the lead: not all were armed before due"
    );
    let wait = start.duration_since(Timestamp::now()) + SignedDuration::from_millis(1_500);
    tokio::time::sleep(wait.unsigned_abs()).await;

    let mut calls_by: HashMap<String, Vec<Timestamp>> = HashMap::new();
    let (mut claims, mut calls) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut early, mut duplicates, mut not_succeeded) = (0, 0, 0);
    let api = &apis[0];
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    for (i, id) in ids.iter().enumerate() {
        let view = loop {
            let v = api.action(id).await;
            if v["sealed_at"].is_string() || Instant::now() > deadline {
                break v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        not_succeeded += usize::from(view["state"] != "succeeded");
        let (_, events) = api
            .get(&format!("/v1/actions/{id}/events"), keys::AGENT)
            .await;
        let claimed: Vec<Timestamp> = events["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["to"] == "executing")
            .map(|e| e["at"].as_str().unwrap().parse().unwrap())
            .collect();
        duplicates += claimed.len().saturating_sub(1);
        if let Some(at) = claimed.first() {
            let ms = at.duration_since(due(i)).as_secs_f64() * 1000.0;
            early += usize::from(ms < 0.0);
            claims.push(ms);
        }
    }
    for r in tools.received() {
        calls_by.entry(r.action_id.clone()).or_default().push(r.at);
    }
    for (i, id) in ids.iter().enumerate() {
        let mine = calls_by.get(id).map(Vec::as_slice).unwrap_or_default();
        duplicates += mine.len().saturating_sub(1);
        if let Some(at) = mine.first() {
            let ms = at.duration_since(due(i)).as_secs_f64() * 1000.0;
            early += usize::from(ms < 0.0);
            calls.push(ms);
        }
    }
    for s in servers {
        s.shutdown().await.unwrap();
    }
    Burst {
        n,
        claims: Summary::of(claims),
        calls: Summary::of(calls),
        early,
        duplicates,
        not_succeeded,
    }
}
