//! SC-EDGE-09 Clock skew: a wake early by any amount re-arms a future wake (or leaves the ticket
//! to the sweep); it never runs early and never leaves a due ticket without a wake — with the
//! in-process waker (on SQLite, DynamoDB and Postgres) and with EventBridge Scheduler
//! (LocalStack, DynamoDB).

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_support::AwsWorld;
use countersign::{
    config::Config,
    domain::resume::Wake,
    engine::ResumeOutcome,
    store::dynamodb::DynamoStore,
    tools::Executors,
    wake::{in_process::InProcessWaker, scheduler::SchedulerWaker},
    Clock, Engine, SystemClock,
};
use countersign_tests::faults::SkewedClock;
use countersign_tests::{
    config_toml, in_secs, keys, on_every_store, stores, stores::Backend, submission, ToolServer,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::{sync::Arc, time::Duration};

/// The in-process waker's clock runs 3 s ahead of the worker's, so every timer fires 3 s early
/// by the worker's clock. Caught on the old main: the re-arm after an early wake was computed
/// by the waker's clock alone, so it fired at once, again and again, until the clocks agreed —
/// a hot loop of thousands of wakes (each a store read) instead of a future wake.
async fn in_process_early_wakes_rearm_in_the_future(backend: Backend) {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let store = stores::store(backend, "skew").await;
    let ahead = Arc::new(SkewedClock::new(
        Arc::new(SystemClock),
        SignedDuration::from_secs(3),
    ));
    let (waker, mut wakes) = InProcessWaker::new(ahead);
    let engine = Arc::new(Engine::new(
        config.clone(),
        store,
        Arc::new(waker),
        Arc::new(Executors::new()),
        Arc::new(SystemClock),
    ));
    let agent = config.principal(keys::AGENT).cloned().unwrap();
    let req = submission(json!({"tool": "report.build", "args": {},
        "schedule": {"not_before": in_secs(4), "not_after": in_secs(60)}}));
    let action = engine.submit(&agent, req, None).await.unwrap().action;
    let not_before = action.call().schedule().unwrap().not_before;

    let (mut early, mut ran) = (0, false);
    while !ran {
        let wake = tokio::time::timeout(Duration::from_secs(30), wakes.recv())
            .await
            .expect("a wake always comes: none is lost")
            .unwrap();
        match engine.resume(&wake).await.unwrap() {
            ResumeOutcome::Waiting { until } => {
                assert_eq!(until, not_before);
                early += 1;
                assert!(
                    early <= 10,
                    "each early wake re-arms in the future, not at once"
                );
            }
            ResumeOutcome::Ran { .. } => ran = true,
            other => panic!("{other:?}"),
        }
    }
    let calls = tools.calls_for(action.id());
    assert_eq!(calls.len(), 1);
    assert!(calls[0].at >= not_before, "never before not_before");
    assert!(early >= 1, "the skew made the first wake early");
    println!(
        "SC-EDGE-09 in-process on {backend:?}: {early} early wakes, each re-armed in the future"
    );
}

on_every_store!(in_process_early_wakes_rearm_in_the_future:
    sc_edge_09_in_process_early_wakes_rearm_in_the_future_and_never_run_early_sqlite,
    sc_edge_09_in_process_early_wakes_rearm_in_the_future_and_never_run_early_dynamodb,
    sc_edge_09_in_process_early_wakes_rearm_in_the_future_and_never_run_early_postgres);

/// The resume function's clock lags Scheduler's by 30 s. Scheduler fires the wake at
/// `not_before` by its clock; by the function's clock the wake is early, so it re-arms. Caught
/// on the old main: the schedule that had just fired still existed (Scheduler deletes it after
/// completion), its instant was "ahead" by the lagging clock, so the re-arm took it for a pending
/// one and kept it — no future wake; the ticket waited for the sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_edge_09_scheduler_early_wake_replaces_the_fired_schedule_with_a_later_one() {
    let w = AwsWorld::new("skew").await;
    let lagging: Arc<dyn Clock> = Arc::new(SkewedClock::new(
        Arc::new(SystemClock),
        SignedDuration::from_secs(-30),
    ));
    let waker = SchedulerWaker::new(
        aws_sdk_scheduler::Client::new(&w.sdk),
        w.settings.target.clone(),
    )
    .with_clock(lagging.clone());
    let engine = Arc::new(Engine::new(
        w.settings.config.clone(),
        Arc::new(DynamoStore::new(
            aws_sdk_dynamodb::Client::new(&w.sdk),
            &w.table,
        )),
        Arc::new(waker),
        Arc::new(Executors::new()),
        lagging.clone(),
    ));
    let agent = w.settings.config.principal(keys::AGENT).cloned().unwrap();
    let at = |secs: i64| {
        lagging
            .now()
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap()
            .round(jiff::Unit::Second)
            .unwrap()
    };
    // not_before is 3 s ahead in real time (33 s by the lagging clock).
    let req = submission(json!({"tool": "report.build", "args": {},
        "schedule": {"not_before": at(33).to_string(), "not_after": at(600).to_string()}}));
    let action = engine.submit(&agent, req, None).await.unwrap().action;
    let not_before = action.call().schedule().unwrap().not_before;
    let ticket = action.ticket().unwrap();
    let wake = Wake {
        tenant: action.tenant().to_owned(),
        action_id: action.id().to_owned(),
        correlation_id: ticket.correlation_id().to_owned(),
    };
    let instant = |s: &aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput| {
        let expr = s.schedule_expression().unwrap();
        format!("{}Z", &expr[3..expr.len() - 1])
            .parse::<Timestamp>()
            .unwrap()
    };
    let armed = w.schedule(&wake).await.expect("armed");
    assert_eq!(instant(&armed), not_before);

    // Scheduler's clock passes the instant: it fires (LocalStack never does; the test delivers
    // the stored input, exactly what Scheduler sends). The schedule still exists.
    while Timestamp::now() <= not_before {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let input = armed.target().unwrap().input().unwrap().to_owned();
    let event: countersign::boot::aws::ResumeEvent = serde_json::from_str(&input).unwrap();
    let countersign::boot::aws::ResumeEvent::Wake(delivered) = event else {
        panic!("{input}")
    };
    let outcome = engine.resume(&delivered).await.unwrap();
    assert!(
        matches!(outcome, ResumeOutcome::Waiting { until } if until == not_before),
        "early by the function's clock: {outcome:?}"
    );
    assert_eq!(w.tools.count_for(action.id()), 0, "never runs early");

    let rearmed = w.schedule(&wake).await.expect("a wake is armed");
    assert!(
        instant(&rearmed) > not_before,
        "the fired schedule ({not_before}) is replaced by a later one, got {}",
        instant(&rearmed)
    );
    assert!(
        instant(&rearmed) > Timestamp::now(),
        "the new wake lies in the future by Scheduler's clock"
    );
}
