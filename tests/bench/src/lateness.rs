//! Wake lateness: `n` approved actions due in the same second on the embedded server. Claims are
//! read from each action's audit events (the `executing` event's time), tool calls from the
//! tool server's own receive times; both relative to `not_before`. Early and duplicate claims
//! or calls are counted (the goal is none of either).

use crate::{stats::Summary, world};
use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{keys, Api};
use jiff::{RoundMode, SignedDuration, Timestamp, TimestampRound, Unit};
use serde_json::{json, Value};
use std::sync::Arc;

/// Which tool the actions call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `builtin.echo`: the claim path alone.
    Builtin,
    /// A webhook to a real HTTP tool server.
    Webhook,
}

pub struct Lateness {
    pub n: usize,
    pub tool: Tool,
    /// Claim committed − `not_before`, ms.
    pub claims: Summary,
    /// Tool call received − `not_before`, ms (webhook only).
    pub calls: Option<Summary>,
    pub early: usize,
    pub duplicates: usize,
    /// Actions that did not end `succeeded`.
    pub not_succeeded: usize,
}

pub async fn measure(n: usize, tool: Tool) -> Lateness {
    let (config, tools) = world::config().await;
    let db = world::TempDb::new("lateness");
    let server = Server::start(
        Arc::new(Config::from_toml(&config).expect("bench config")),
        &db.path,
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("start the embedded server");
    let api = Api::new(server.addr);
    let (agent, approver, tool_name) = match tool {
        Tool::Builtin => (world::BENCH_AGENT, world::BENCH_APPROVER, "mail.instant"),
        Tool::Webhook => (keys::AGENT, keys::APPROVER, "mail.send"),
    };

    // Everything is submitted and approved before the second it is due in.
    let lead = SignedDuration::from_millis(2_000 + 8 * n as i64);
    // A whole second, as a client would write it.
    let not_before = Timestamp::now()
        .checked_add(lead + SignedDuration::from_secs(1))
        .unwrap()
        .round(
            TimestampRound::new()
                .smallest(Unit::Second)
                .mode(RoundMode::Trunc),
        )
        .unwrap();
    let not_after = not_before
        .checked_add(SignedDuration::from_mins(10))
        .unwrap();
    let window = json!({"not_before": not_before.to_string(), "not_after": not_after.to_string()});
    let ids = in_parallel(n, 32, |_| {
        let (api, window) = (api.clone(), window.clone());
        async move {
            let (s, v) = api
                .post(
                    "/v1/actions",
                    agent,
                    json!({"tool": tool_name, "args": {"n": 1}, "schedule": window}),
                )
                .await;
            assert_eq!(s, 202, "{v}");
            let id = v["id"].as_str().unwrap().to_owned();
            let digest = v["approval"]["context_digest"].as_str().unwrap().to_owned();
            let (s, v) = api
                .post(
                    &format!("/v1/actions/{id}/approve"),
                    approver,
                    json!({ "context_digest": digest }),
                )
                .await;
            assert_eq!((s, v["state"].as_str()), (200, Some("approved")), "{v}");
            id
        }
    })
    .await;
    assert!(
        Timestamp::now() < not_before,
        "submitting and approving {n} actions took longer than the lead of {lead}: the wakes were not all armed before they were due"
    );

    // Wait for the second to pass, then for every action to seal.
    let wait = not_before.duration_since(Timestamp::now()) + SignedDuration::from_millis(500);
    tokio::time::sleep(wait.unsigned_abs()).await;
    let views = in_parallel(n, 16, |i| {
        let (api, id) = (api.clone(), ids[i].clone());
        async move { sealed(&api, agent, &id).await }
    })
    .await;

    let mut claims = Vec::with_capacity(n);
    let (mut early, mut duplicates, mut not_succeeded) = (0, 0, 0);
    for (id, (view, events)) in ids.iter().zip(&views) {
        if view["state"] != "succeeded" {
            not_succeeded += 1;
        }
        let claimed: Vec<Timestamp> = events
            .iter()
            .filter(|e| e["to"] == "executing")
            .map(|e| e["at"].as_str().unwrap().parse().unwrap())
            .collect();
        duplicates += claimed.len().saturating_sub(1);
        if let Some(at) = claimed.first() {
            let ms = at.duration_since(not_before).as_secs_f64() * 1000.0;
            early += usize::from(ms < 0.0);
            claims.push(ms);
        } else {
            tracing::warn!(%id, "never claimed");
        }
    }
    let calls = (tool == Tool::Webhook).then(|| {
        let received = tools.received();
        let mut ms = Vec::with_capacity(n);
        for id in &ids {
            let mine: Vec<_> = received.iter().filter(|r| &r.action_id == id).collect();
            duplicates += mine.len().saturating_sub(1);
            if let Some(r) = mine.first() {
                let late = r.at.duration_since(not_before).as_secs_f64() * 1000.0;
                early += usize::from(late < 0.0);
                ms.push(late);
            }
        }
        Summary::of(ms)
    });
    server.shutdown().await.unwrap();
    Lateness {
        n,
        tool,
        claims: Summary::of(claims),
        calls,
        early,
        duplicates,
        not_succeeded,
    }
}

/// The action once sealed (or after 60 s) and its audit events.
async fn sealed(api: &Api, key: &str, id: &str) -> (Value, Vec<Value>) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let view = loop {
        let (_, v) = api.get(&format!("/v1/actions/{id}"), key).await;
        if v["sealed_at"].is_string() || std::time::Instant::now() > until {
            break v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let (_, events) = api.get(&format!("/v1/actions/{id}/events"), key).await;
    let events = events["data"].as_array().cloned().unwrap_or_default();
    (view, events)
}

/// Run `f(0..n)` with at most `width` in flight; results in index order.
async fn in_parallel<T, F, Fut>(n: usize, width: usize, f: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let gate = Arc::new(tokio::sync::Semaphore::new(width));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = gate.clone().acquire_owned().await.unwrap();
        let fut = f(i);
        tasks.push(tokio::spawn(async move {
            let out = fut.await;
            drop(permit);
            out
        }));
    }
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}
