//! Notifications on the AWS path against LocalStack (SC-NOT-01/02): the HTTP functions' handler
//! commits transitions to DynamoDB, the notice rides in the same `UpdateItem`, and the resume
//! function's sweep (its `{"sweep":{}}` input, as the minute schedule sends it) delivers it. The
//! test clock is manual, so retries come due when the test says. The outbox's store contract is
//! checked on both stores at the end.

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_support::AwsWorld;
use countersign::{
    clock::ManualClock,
    config::Config,
    domain::{notice::OutboxEntry, Actor, SealReason, State, Transition},
    faults::{Fault, FaultyStore, Matching, Write},
    store::{dynamodb::DynamoStore, sqlite::SqliteStore, Store, StoreError},
    tools::Executors,
    Clock, Engine,
};
use countersign_tests::{
    keys,
    receiver::{notify_toml, Mode, Receiver},
    submission, temp_db, RecordingWaker,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};
use std::sync::Arc;

const SWEEP: &str = r#"{"sweep":{}}"#;

async fn world(label: &str, receiver: &Receiver, attempts: u32) -> AwsWorld {
    AwsWorld::with_config(label, &notify_toml(&receiver.url(), "30s", attempts)).await
}

async fn submit(w: &AwsWorld, body: Value) -> Value {
    let r = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert!(
        r.status < 300 || r.status == 403,
        "{} {:?}",
        r.status,
        r.body
    );
    r.body
}

/// The notices an action raised, by the wire contract (entering pending, every sealing).
async fn notices_of(w: &AwsWorld, action_id: &str) -> Vec<(String, &'static str)> {
    let r = w
        .v2(
            "GET",
            &format!("/v1/actions/{action_id}/events"),
            keys::AGENT,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let ulid = action_id.strip_prefix("act_").unwrap();
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let to = e["to"].as_str().unwrap();
            let kind = if ["succeeded", "failed", "cancelled", "denied"].contains(&to) {
                "action_sealed"
            } else if e["from"].is_null() && to == "pending_approval" {
                "approval_requested"
            } else {
                return None;
            };
            Some((format!("ntf_{ulid}_{}", e["seq"]), kind))
        })
        .collect()
}

/// One minute later, the sweep: what the resume function does every minute.
async fn next_sweep(w: &AwsWorld) {
    w.clock.advance(SignedDuration::from_secs(60));
    w.deliver(SWEEP).await.expect("the sweep answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_not_01_sc_not_02_dynamodb_receiver_down_then_up_gets_every_event_signed_with_stable_ids(
) {
    let receiver = Receiver::start(Mode::Down).await;
    let w = world("ntf-down", &receiver, 1000).await;

    // Every kind of notifying transition, all answered while the receiver is down.
    let denied = submit(&w, json!({"tool": "mail.send", "args": {"n": 1}})).await;
    let waiting = submit(&w, json!({"tool": "mail.send", "args": {"n": 2}})).await;
    let cancelled = submit(&w, json!({"tool": "mail.send", "args": {"n": 3}})).await;
    let ran = submit(&w, json!({"tool": "search.web", "args": {"q": "x"}})).await;
    assert_eq!(ran["state"], "succeeded", "{ran}");
    let refused = submit(&w, json!({"tool": "shell.exec", "args": {}})).await;
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
    let r = w
        .v2(
            "POST",
            &format!("/v1/actions/{}/deny", id(&denied)),
            keys::APPROVER,
            Some(json!({"reason": "not today"})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = w
        .v2(
            "POST",
            &format!("/v1/actions/{}/cancel", id(&cancelled)),
            keys::AGENT,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let mut expected = Vec::new();
    for action in [
        id(&denied),
        id(&waiting),
        id(&cancelled),
        id(&ran),
        refused["error"]["action_id"].as_str().unwrap().to_owned(),
    ] {
        expected.extend(notices_of(&w, &action).await);
    }
    assert_eq!(expected.len(), 7, "{expected:?}");
    let ids: Vec<String> = expected.iter().map(|(id, _)| id.clone()).collect();
    assert!(
        receiver.seen().is_empty(),
        "nothing is sent inside a transition"
    );

    // Two sweeps while down: every notice tried twice, refused.
    w.deliver(SWEEP).await.unwrap();
    next_sweep(&w).await;
    for notice in &ids {
        let tries = receiver
            .seen()
            .iter()
            .filter(|d| d.event_id.as_deref() == Some(notice))
            .count();
        assert_eq!(tries, 2, "{notice} tried at each sweep while down");
    }
    receiver.set(Mode::Up);
    next_sweep(&w).await;
    assert!(receiver.wait_taken(&ids, 10).await, "{:?}", receiver.seen());
    let delivered = receiver.seen().len();
    next_sweep(&w).await;
    assert_eq!(
        receiver.seen().len(),
        delivered,
        "a delivered notice leaves the outbox"
    );

    let seen = receiver.seen();
    assert!(seen.iter().all(|d| d.signature_ok));
    for (notice, kind) in &expected {
        let copies: Vec<_> = seen
            .iter()
            .filter(|d| d.event_id.as_deref() == Some(notice))
            .collect();
        assert_eq!(copies[0].body["id"], json!(notice));
        assert_eq!(copies[0].body["type"], json!(kind));
        assert!(
            copies.iter().all(|c| c.body == copies[0].body),
            "every try sends the same notice"
        );
    }
    let requested = &receiver.taken(&notices_of(&w, &id(&waiting)).await[0].0)[0].body;
    assert_eq!(
        requested["data"]["context_digest"],
        waiting["approval"]["context_digest"]
    );
    assert_eq!(requested["data"]["context"], waiting["approval"]["context"]);
    assert_eq!(
        requested["data"]["page_url"],
        json!(format!("/ui/#action={}", id(&waiting)))
    );
    let sealed = &receiver.taken(&notices_of(&w, &id(&denied)).await[1].0)[0].body;
    assert_eq!(
        sealed["data"],
        json!({"state": "denied", "reason": "not today", "outcome_kind": "reason"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_not_02_dynamodb_dead_letters_are_listed_and_redelivered() {
    let receiver = Receiver::start(Mode::Down).await;
    let w = world("ntf-dead", &receiver, 2).await;
    let action = submit(&w, json!({"tool": "mail.send", "args": {"n": 1}})).await;
    let notice = notices_of(&w, action["id"].as_str().unwrap()).await[0]
        .0
        .clone();
    w.deliver(SWEEP).await.unwrap();
    next_sweep(&w).await;
    next_sweep(&w).await;
    assert_eq!(receiver.seen().len(), 2, "parked after its two tries");

    let dead = w
        .v2("GET", "/v1/notifications/dead", keys::ADMIN, None)
        .await;
    assert_eq!(dead.status, 200, "{:?}", dead.body);
    let letters = dead.body["data"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "{:?}", dead.body);
    assert_eq!(
        (letters[0]["id"].as_str(), letters[0]["last_error"].as_str()),
        (Some(notice.as_str()), Some("http 503"))
    );
    let r = w
        .v2("GET", "/v1/notifications/dead", keys::APPROVER, None)
        .await;
    assert_eq!(r.status, 403);

    receiver.set(Mode::Up);
    let r = w
        .v2(
            "POST",
            &format!("/v1/notifications/{notice}/redeliver"),
            keys::ADMIN,
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.body["attempts"].as_u64()),
        (202, Some(0)),
        "{:?}",
        r.body
    );
    next_sweep(&w).await;
    assert_eq!(receiver.taken(&notice).len(), 1);
    let dead = w
        .v2("GET", "/v1/notifications/dead", keys::ADMIN, None)
        .await;
    assert_eq!(dead.body["data"], json!([]));
    let r = w
        .v2(
            "POST",
            &format!("/v1/notifications/{notice}/redeliver"),
            keys::ADMIN,
            None,
        )
        .await;
    assert_eq!(r.status, 404, "delivered: gone from the outbox");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_not_01_dynamodb_a_crash_right_after_the_transition_still_notifies() {
    let receiver = Receiver::start(Mode::Up).await;
    let w = world("ntf-crash", &receiver, 1000).await;
    let config: Arc<Config> = w.settings.config.clone();

    // An API function that commits a pending action, then dies right after committing its
    // denial (the write lands, the answer never comes). It has no delivery worker at all.
    let dynamo = DynamoStore::new(aws_sdk_dynamodb::Client::new(&w.sdk), &w.table);
    let store = Arc::new(FaultyStore::new(Arc::new(dynamo.clone())));
    let dying = Arc::new(Engine::new(
        config.clone(),
        store.clone(),
        Arc::new(RecordingWaker::default()),
        Arc::new(Executors::new()),
        w.clock.clone() as Arc<dyn Clock>,
    ));
    let agent = config.principal(keys::AGENT).unwrap().clone();
    let approver = config.principal(keys::APPROVER).unwrap().clone();
    let request = submission(json!({"tool": "mail.send", "args": {"n": "crash"}}));
    let action = dying.submit(&agent, request, None).await.unwrap().action;
    let seal = Matching {
        write: Some(Write::Commit),
        to: Some(State::Denied),
        ..Matching::default()
    };
    store.inject(seal.of(action.id()), Fault::StopAfter, 1);
    let call = tokio::spawn({
        let (engine, id) = (dying.clone(), action.id().to_owned());
        async move { engine.deny(&approver, &id, "no").await }
    });
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while dynamo
        .load("acme", action.id())
        .await
        .unwrap()
        .unwrap()
        .state()
        != State::Denied
    {
        assert!(std::time::Instant::now() < until, "the denial commits");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    call.abort();
    drop(dying);
    assert!(receiver.seen().is_empty());

    // The resume function's next sweep (another process) delivers both.
    w.deliver(SWEEP).await.unwrap();
    let ids: Vec<String> = notices_of(&w, action.id())
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(receiver.wait_taken(&ids, 10).await, "{:?}", receiver.seen());
    assert!(receiver.seen().iter().all(|d| d.signature_ok));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_not_02_dynamodb_a_hanging_receiver_never_delays_a_transition() {
    let receiver = Receiver::start(Mode::Hang).await;
    let w = Arc::new(world("ntf-hang", &receiver, 1000).await);
    let first = submit(&w, json!({"tool": "mail.send", "args": {"n": 1}})).await;
    // A sweep whose notification pass hangs on the receiver.
    let sweep = tokio::spawn({
        let w = w.clone();
        async move { w.deliver(SWEEP).await }
    });
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while receiver.held() == 0 {
        assert!(
            std::time::Instant::now() < until,
            "the notice reaches the receiver"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // While it hangs, transitions answer (a transition that waited would hang: the guard fails it).
    let transitions = async {
        let second = submit(&w, json!({"tool": "mail.send", "args": {"n": 2}})).await;
        let r = w
            .v2(
                "POST",
                &format!("/v1/actions/{}/deny", second["id"].as_str().unwrap()),
                keys::APPROVER,
                Some(json!({"reason": "no"})),
            )
            .await;
        assert_eq!(r.status, 200);
        let r = w
            .v2(
                "POST",
                &format!("/v1/actions/{}/cancel", first["id"].as_str().unwrap()),
                keys::AGENT,
                None,
            )
            .await;
        assert_eq!(r.status, 200);
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), transitions)
        .await
        .expect("transitions never wait for a notification");
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&w.sdk), &w.table);
    let entry = store
        .outbox_entry("acme", first["id"].as_str().unwrap(), 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.attempts, 0, "the hanging try had not even settled");
    receiver.set(Mode::Up);
    sweep.await.unwrap().unwrap();
}

// ---------- the outbox's store contract, on both stores ----------

async fn stores(label: &str) -> Vec<(&'static str, Arc<dyn Store>)> {
    let w = AwsWorld::new(label).await;
    vec![
        (
            "sqlite",
            Arc::new(SqliteStore::open(&temp_db(label)).unwrap()) as Arc<dyn Store>,
        ),
        (
            "dynamodb",
            Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(&w.sdk),
                &w.table,
            )),
        ),
        (
            "postgres",
            Arc::new(countersign_tests::postgres::store(label).await),
        ),
    ]
}

/// A pending action committed through an engine over `store` (the real intake path).
async fn pending(
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    n: u32,
) -> countersign::domain::Action {
    let tools = countersign_tests::ToolServer::start().await;
    // An endpoint listens (nothing answers there): the engine writes the notices.
    let text = countersign_tests::config_toml(&tools, "1m", "5s")
        + &notify_toml("http://127.0.0.1:9/hook", "30s", 1000);
    let config = Arc::new(Config::from_toml(&text).unwrap());
    let engine = Arc::new(Engine::new(
        config.clone(),
        store,
        Arc::new(RecordingWaker::default()),
        Arc::new(Executors::new()),
        clock,
    ));
    let agent = config.principal(keys::AGENT).unwrap();
    let request = submission(json!({"tool": "mail.send", "args": {"n": n}}));
    engine.submit(agent, request, None).await.unwrap().action
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_not_01_outbox_lands_with_its_transition_or_not_at_all_on_both_stores() {
    for (name, store) in stores("ntf-store").await {
        let now = Timestamp::now();
        let clock = Arc::new(ManualClock::new(now));
        let a = pending(store.clone(), clock.clone(), 1).await;
        let due = store.outbox_due(now, 100).await.unwrap();
        let mine: Vec<&OutboxEntry> = due.iter().filter(|e| e.action_id == a.id()).collect();
        assert_eq!(mine.len(), 1, "{name}: the create wrote its notice");
        let requested = mine[0].clone();
        assert_eq!((requested.seq, requested.attempts), (1, 0), "{name}");

        // A transition that loses its condition writes no notice.
        let stale = Transition::seal(&a, Actor::system(), &SealReason::ApprovalExpired, now);
        let mut lost = stale.clone();
        lost.expected = (State::PendingApproval, 7);
        assert!(
            matches!(store.commit(&lost).await, Err(StoreError::Conflict)),
            "{name}"
        );
        assert_eq!(
            store.outbox_entry("acme", a.id(), 2).await.unwrap(),
            None,
            "{name}: a lost write leaves no notice"
        );
        // The winning one does, beside the first.
        store.commit(&stale).await.unwrap();
        let sealed = store
            .outbox_entry("acme", a.id(), 2)
            .await
            .unwrap()
            .expect("the seal's notice");
        assert_eq!(sealed.kind.as_str(), "action_sealed", "{name}");

        // Settling is conditional on the entry's revision.
        let rule = countersign::domain::notice::RetryRule {
            attempts: 1,
            ..Default::default()
        };
        let countersign::domain::notice::Settled::Again(dead) =
            requested.after_try(vec![], Some("http 500".into()), now, &rule)
        else {
            panic!("a failure is kept");
        };
        store.outbox_settle(&requested, Some(&dead)).await.unwrap();
        assert!(
            matches!(
                store.outbox_settle(&requested, None).await,
                Err(StoreError::Conflict)
            ),
            "{name}: a stale settle loses"
        );
        store.outbox_settle(&sealed, None).await.unwrap();
        assert_eq!(
            store.outbox_entry("acme", a.id(), 2).await.unwrap(),
            None,
            "{name}: delivered, removed"
        );
        let listed = store.outbox_dead("acme", 10).await.unwrap();
        assert!(
            listed.iter().any(|e| e.action_id == a.id() && e.seq == 1),
            "{name}: the dead letter is listed: {listed:?}"
        );
        assert!(
            store
                .outbox_due(now + SignedDuration::from_hours(100), 100)
                .await
                .unwrap()
                .iter()
                .all(|e| e.action_id != a.id()),
            "{name}: a dead letter is not due"
        );
        let revived = dead.revived(now);
        store.outbox_settle(&dead, Some(&revived)).await.unwrap();
        assert!(
            store
                .outbox_due(now, 100)
                .await
                .unwrap()
                .iter()
                .any(|e| e.action_id == a.id()),
            "{name}: redelivered, due again"
        );
        assert!(
            store
                .outbox_dead("acme", 10)
                .await
                .unwrap()
                .iter()
                .all(|e| e.action_id != a.id()),
            "{name}"
        );
    }
}
