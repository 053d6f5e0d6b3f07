//! SC-CAN-03 on the AWS path: the real cancel handler (an HTTP API v2 event through
//! `lambda_http`) races the real resume handler (the Scheduler's stored input) on DynamoDB.
//! Every action ends with exactly one outcome; the tool runs at most once, and never after a
//! winning cancel. Pairs run concurrently in batches.

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_support::AwsWorld;
use countersign_tests::keys;
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::{sync::Arc, time::Instant};

const PAIRS: usize = 200;
const BATCH: usize = 20;

/// SC-CAN-03: ≥ 200 racing pairs of cancel and resume against DynamoDB conditional writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_can_03_cancel_races_the_worker_on_dynamodb() {
    let w = Arc::new(AwsWorld::new("race").await);
    let (not_before, not_after) = (w.at(120), w.at(900));
    let body = json!({
        "tool": "report.build",
        "args": {"quarter": "Q3"},
        "schedule": {"not_before": not_before, "not_after": not_after}
    });

    // Committed tickets, each armed with its own schedule (policy `schedule`, SC-INT-09).
    let started = Instant::now();
    let mut tickets: Vec<(String, String)> = Vec::new();
    for _ in 0..PAIRS / BATCH {
        let batch = (0..BATCH).map(|_| {
            let w = w.clone();
            let body = body.clone();
            async move {
                let r = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
                assert_eq!(r.status, 201, "{:?}", r.body);
                let id = r.body["id"].as_str().unwrap().to_owned();
                let wake = w.wake_of(&id).await;
                let schedule = w.schedule(&wake).await.expect("armed");
                (id, schedule.target().unwrap().input().unwrap().to_owned())
            }
        });
        tickets.extend(join_all(batch).await);
    }
    let setup = started.elapsed();

    // The window opens; the Scheduler's delivery and a cancel arrive together.
    let due: Timestamp = not_before.parse().unwrap();
    w.clock
        .set(due.checked_add(SignedDuration::from_secs(5)).unwrap());
    let started = Instant::now();
    let mut results = Vec::new();
    for (n, chunk) in tickets.chunks(BATCH).enumerate() {
        let pairs = chunk.iter().enumerate().map(|(i, (id, input))| {
            let w = w.clone();
            let (id, input) = (id.clone(), input.clone());
            let cancel_path = format!("/v1/actions/{id}/cancel");
            let key = if i % 2 == 0 {
                keys::AGENT
            } else {
                keys::APPROVER
            };
            let resume_first = (n + i) % 2 == 0;
            async move {
                // Stagger the cancel by 0–20 ms so it lands before, during and after the claim.
                let stagger = std::time::Duration::from_millis(5 * (i as u64 % 5));
                let cancel = async {
                    tokio::time::sleep(stagger).await;
                    w.v2("POST", &cancel_path, key, None).await
                };
                let resume = w.deliver(&input);
                let (cancelled, resumed) = if resume_first {
                    let (r, c) = tokio::join!(resume, cancel);
                    (c, r)
                } else {
                    tokio::join!(cancel, resume)
                };
                (id, cancelled, resumed)
            }
        });
        results.extend(join_all(pairs).await);
    }
    let race = started.elapsed();

    let (mut cancel_won, mut worker_won) = (0, 0);
    for (id, cancelled, resumed) in results {
        let resumed = resumed.unwrap_or_else(|e| panic!("{id}: resume failed: {e}"));
        let got = w
            .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
            .await;
        let events = w
            .v2(
                "GET",
                &format!("/v1/actions/{id}/events"),
                keys::AGENT,
                None,
            )
            .await;
        let to: Vec<String> = events.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["to"].as_str().unwrap().to_owned())
            .collect();
        let calls = w.tools.calls_for(&id);
        match cancelled.status {
            200 => {
                cancel_won += 1;
                assert_eq!(got.body["state"], "cancelled", "{id}");
                assert_eq!(calls.len(), 0, "{id}: the tool ran although the cancel won");
                assert_ne!(resumed["outcome"], "ran", "{id}: {resumed}");
                assert_eq!(to, ["approved", "cancelled"], "{id}");
            }
            409 => {
                worker_won += 1;
                let code = &cancelled.body["error"]["code"];
                assert!(
                    code == "action_executing"
                        || (code == "action_sealed"
                            && cancelled.body["error"]["state"] == "succeeded"),
                    "{id}: {:?}",
                    cancelled.body
                );
                assert_eq!(got.body["state"], "succeeded", "{id}");
                assert_eq!(
                    resumed,
                    json!({"outcome": "ran", "state": "succeeded"}),
                    "{id}"
                );
                assert_eq!(calls.len(), 1, "{id}: exactly one tool call");
                assert!(calls[0].signature_ok);
                assert_eq!(calls[0].idempotency_key.as_deref(), Some(id.as_str()));
                assert_eq!(to, ["approved", "executing", "succeeded"], "{id}");
            }
            other => panic!("{id}: cancel answered {other}: {:?}", cancelled.body),
        }
    }
    assert_eq!(cancel_won + worker_won, PAIRS);
    assert!(
        cancel_won > 0 && worker_won > 0,
        "both orders of the race were exercised"
    );
    assert_eq!(
        w.tools.received().len(),
        worker_won,
        "no tool call beyond the winners"
    );
    eprintln!(
        "SC-CAN-03 on DynamoDB: {PAIRS} pairs, cancel won {cancel_won}, worker won {worker_won}; \
         setup {setup:.1?}, race {race:.1?}"
    );
}

/// Run a batch on the runtime's worker threads at once, keeping the order of results.
async fn join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for (i, f) in futures.into_iter().enumerate() {
        set.spawn(async move { (i, f.await) });
    }
    let mut out: Vec<(usize, F::Output)> = set.join_all().await;
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, v)| v).collect()
}
