//! Notifications on the AWS path against LocalStack (SC-NOT-01/02): the HTTP functions' handler
//! commits transitions to DynamoDB, the notice rides in the same `UpdateItem`, and the resume
//! function's sweep (its `{"sweep":{}}` input, as the minute schedule sends it) delivers it. The
//! test clock is manual, so retries come due when the test says. The outbox's store contract
//! (every store) is in `store_conformance.rs`.

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_support::AwsWorld;
use countersign::{
    config::Config,
    domain::State,
    store::{dynamodb::DynamoStore, Actions, Outbox},
    tools::Executors,
    Clock, Engine,
};
use countersign_tests::faults::{Fault, FaultyStore, Matching, Write};
use countersign_tests::{
    keys,
    receiver::{notify_toml, Mode, Receiver},
    submission, RecordingWaker,
};
use jiff::SignedDuration;
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
