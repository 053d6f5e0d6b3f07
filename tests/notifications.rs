//! Notifications on the embedded server (on SQLite and on Postgres, each test named by its
//! store): the outbox written with each transition, delivered at least once, signed, with stable
//! ids; retried, parked, redelivered (SC-NOT-01/02). The DynamoDB side of the same guarantees is
//! in `aws_notifications.rs`.

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    domain::State,
    store::Store,
    tools::Executors,
    Engine, SystemClock,
};
use countersign_tests::faults::{Fault, FaultyStore, Matching, Write};
use countersign_tests::{
    config_toml, keys, postgres,
    raw::Raw,
    receiver::{notify_toml, Mode, Receiver},
    stores::Backend,
    submission, temp_db, Api, RecordingWaker, ToolServer,
};
use serde_json::{json, Value};
use std::{sync::Arc, time::Duration};

fn config(tools: &ToolServer, receiver_url: &str, first_retry: &str, attempts: u32) -> Arc<Config> {
    let text = config_toml(tools, "30s", "2s") + &notify_toml(receiver_url, first_retry, attempts);
    Arc::new(Config::from_toml(&text).unwrap())
}

/// The tests of one scenario on the local server, named by their store.
macro_rules! on_both_stores {
    ($scenario:ident: $sqlite:ident, $postgres:ident) => {
        #[tokio::test]
        async fn $sqlite() {
            $scenario(Backend::Sqlite).await;
        }
        #[tokio::test]
        async fn $postgres() {
            $scenario(Backend::Postgres).await;
        }
    };
}

/// A fresh, empty database on `backend`.
async fn database(backend: Backend, label: &str) -> Database {
    match backend {
        Backend::Sqlite => Database::Sqlite(temp_db(label)),
        Backend::Postgres => postgres::database(label).await,
        Backend::Dynamodb => unreachable!("the DynamoDB side is aws_notifications.rs"),
    }
}

async fn start(config: Arc<Config>, db: &Database) -> (Server, Api) {
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start_on(config, db, listen, Parts::default())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    (server, api)
}

/// Another handle on the server's records (as a second process would open them).
async fn open(db: &Database) -> Arc<dyn Store> {
    db.open().await.unwrap()
}

/// The notices an action's audit trail must have raised, by the wire contract: entering
/// `pending_approval` and every sealing; id `ntf_<action ulid>_<event seq>`.
async fn expected_notices(api: &Api, action_id: &str) -> Vec<(String, &'static str)> {
    let (status, events) = api
        .get(&format!("/v1/actions/{action_id}/events"), keys::AGENT)
        .await;
    assert_eq!(status, 200, "{events}");
    let sealed = ["succeeded", "failed", "cancelled", "denied"];
    let ulid = action_id.strip_prefix("act_").unwrap();
    events["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let kind = if sealed.contains(&e["to"].as_str().unwrap()) {
                "action_sealed"
            } else if e["from"].is_null() && e["to"] == "pending_approval" {
                "approval_requested"
            } else {
                return None;
            };
            Some((format!("ntf_{ulid}_{}", e["seq"]), kind))
        })
        .collect()
}

fn pending(tool_args: Value) -> Value {
    json!({"tool": "mail.send", "args": tool_args})
}

async fn receiver_down_then_up_gets_every_event(backend: Backend) {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Down).await;
    let db = database(backend, "notify-down").await;
    let (server, api) = start(config(&tools, &receiver.url(), "300ms", 1000), &db).await;

    // Every kind of notifying transition, all answered while the receiver is down.
    let (s, denied_later) = api.submit(keys::AGENT, pending(json!({"n": 1}))).await;
    assert_eq!(s, 202, "{denied_later}");
    let (s, cancelled) = api.submit(keys::AGENT, pending(json!({"n": 2}))).await;
    assert_eq!(s, 202, "{cancelled}");
    let (s, waiting) = api.submit(keys::AGENT, pending(json!({"n": 3}))).await;
    assert_eq!(s, 202, "{waiting}");
    let (s, ran) = api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "x"}}),
        )
        .await;
    assert_eq!(
        (s, ran["state"].as_str()),
        (200, Some("succeeded")),
        "{ran}"
    );
    let (s, refused) = api
        .submit(keys::AGENT, json!({"tool": "shell.exec", "args": {}}))
        .await;
    assert_eq!(s, 403, "{refused}");
    let refused_id = refused["error"]["action_id"].as_str().unwrap().to_owned();
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
    let (s, _) = api
        .post(
            &format!("/v1/actions/{}/deny", id(&denied_later)),
            keys::APPROVER,
            json!({"reason": "not today"}),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = api.cancel(&id(&cancelled), keys::AGENT).await;
    assert_eq!(s, 200);

    let mut expected = Vec::new();
    for action in [
        id(&denied_later),
        id(&cancelled),
        id(&waiting),
        id(&ran),
        refused_id,
    ] {
        expected.extend(expected_notices(&api, &action).await);
    }
    assert_eq!(expected.len(), 7, "{expected:?}");
    let ids: Vec<String> = expected.iter().map(|(id, _)| id.clone()).collect();

    // While down: tried, refused, tried again with the same id.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !ids.iter().all(|id| {
        receiver
            .seen()
            .iter()
            .filter(|d| d.event_id.as_deref() == Some(id))
            .count()
            >= 2
    }) {
        assert!(
            std::time::Instant::now() < until,
            "every notice is retried while the receiver is down"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    receiver.set(Mode::Up);
    assert!(
        receiver.wait_taken(&ids, 30).await,
        "every notice arrives once the receiver is up: {:?}",
        receiver.seen()
    );

    let seen = receiver.seen();
    assert!(
        seen.iter().all(|d| d.signature_ok),
        "every delivery is signed with the endpoint's secret"
    );
    for (notice, kind) in &expected {
        let copies: Vec<_> = seen
            .iter()
            .filter(|d| d.event_id.as_deref() == Some(notice))
            .collect();
        let first = &copies[0].body;
        assert_eq!(
            first["id"],
            json!(notice),
            "the body carries the header's id"
        );
        assert_eq!(first["type"], json!(kind));
        assert_eq!(first["tenant"], "acme");
        for copy in &copies {
            assert_eq!(&copy.body, first, "every retry sends the same notice");
        }
    }
    assert!(
        seen.iter()
            .all(|d| ids.contains(d.event_id.as_ref().unwrap())),
        "no other notices"
    );

    // The payloads carry what the contract promises.
    let requested = &receiver.taken(&expected_notices(&api, &id(&waiting)).await[0].0)[0].body;
    let data = &requested["data"];
    assert_eq!(
        data["context_digest"],
        waiting["approval"]["context_digest"]
    );
    assert_eq!(data["context"], waiting["approval"]["context"]);
    assert_eq!(data["expires_at"], waiting["approval"]["expires_at"]);
    assert_eq!(
        (data["tool"].as_str(), data["agent_id"].as_str()),
        (Some("mail.send"), Some("agent-1"))
    );
    assert_eq!(data["args"], json!({"n": 3}));
    assert_eq!(
        data["page_url"],
        json!(format!(
            "http://{}/ui/#action={}",
            server.addr,
            id(&waiting)
        ))
    );
    let sealed = &receiver.taken(&expected_notices(&api, &id(&denied_later)).await[1].0)[0].body;
    assert_eq!(
        sealed["data"],
        json!({"state": "denied", "reason": "not today", "outcome_kind": "reason"})
    );
    let ran_notice = &receiver.taken(&expected_notices(&api, &id(&ran)).await[0].0)[0].body;
    assert_eq!(ran_notice["data"]["outcome_kind"], "result");
    assert_eq!(ran_notice["data"]["state"], "succeeded");

    let (s, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
    assert_eq!(
        (s, dead["data"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{dead}"
    );
    server.shutdown().await.unwrap();
}

on_both_stores!(receiver_down_then_up_gets_every_event:
    sc_not_01_sc_not_02_receiver_down_then_up_gets_every_event_signed_with_stable_ids_sqlite,
    sc_not_01_sc_not_02_receiver_down_then_up_gets_every_event_signed_with_stable_ids_postgres);

async fn dead_letters_are_listed_and_redelivered(backend: Backend) {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Down).await;
    let db = database(backend, "notify-dead").await;
    let (server, api) = start(config(&tools, &receiver.url(), "100ms", 2), &db).await;
    let (_, action) = api.submit(keys::AGENT, pending(json!({"n": 1}))).await;
    let notice = expected_notices(&api, action["id"].as_str().unwrap()).await[0]
        .0
        .clone();

    let until = std::time::Instant::now() + Duration::from_secs(30);
    let dead = loop {
        let (s, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
        assert_eq!(s, 200, "{dead}");
        if !dead["data"].as_array().unwrap().is_empty() {
            break dead;
        }
        assert!(
            std::time::Instant::now() < until,
            "the notice is parked after its tries"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let letter = &dead["data"][0];
    assert_eq!(
        (letter["id"].as_str(), letter["type"].as_str()),
        (Some(notice.as_str()), Some("approval_requested"))
    );
    assert_eq!(
        (letter["attempts"].as_u64(), letter["last_error"].as_str()),
        (Some(2), Some("http 503"))
    );
    assert!(
        !dead.to_string().contains(&receiver.addr.to_string()),
        "no endpoint URL in the list: {dead}"
    );
    assert_eq!(
        receiver.seen().len(),
        2,
        "parked after exactly its two tries"
    );

    // Admins only; another tenant's or a malformed id is not found.
    for key in [keys::AGENT, keys::APPROVER] {
        let (s, body) = api.get("/v1/notifications/dead", key).await;
        assert_eq!(
            (s, body["error"]["code"].as_str()),
            (403, Some("forbidden"))
        );
        let (s, _) = api
            .post(
                &format!("/v1/notifications/{notice}/redeliver"),
                key,
                json!({}),
            )
            .await;
        assert_eq!(s, 403);
    }
    let (s, _) = api
        .post(
            "/v1/notifications/ntf_nope/redeliver",
            keys::ADMIN,
            json!({}),
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = api
        .post(
            &format!("/v1/notifications/{notice}/redeliver"),
            keys::OTHER_TENANT_AGENT,
            json!({}),
        )
        .await;
    assert_eq!(s, 403);
    let (s, body) = api.get("/v1/notifications/dead?limit=0", keys::ADMIN).await;
    assert_eq!((s, body["error"]["param"].as_str()), (400, Some("limit")));

    receiver.set(Mode::Up);
    let (s, revived) = api
        .post(
            &format!("/v1/notifications/{notice}/redeliver"),
            keys::ADMIN,
            json!({}),
        )
        .await;
    assert_eq!(
        (s, revived["attempts"].as_u64()),
        (202, Some(0)),
        "{revived}"
    );
    assert!(receiver.wait_taken(std::slice::from_ref(&notice), 30).await);
    let taken = receiver.taken(&notice);
    assert!(taken[0].signature_ok);
    let (_, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
    assert_eq!(dead["data"], json!([]));
    // Delivered: gone from the outbox.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (s, _) = api
            .post(
                &format!("/v1/notifications/{notice}/redeliver"),
                keys::ADMIN,
                json!({}),
            )
            .await;
        if s == 404 {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "a delivered notice leaves the outbox"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.shutdown().await.unwrap();
}

on_both_stores!(dead_letters_are_listed_and_redelivered:
    sc_not_02_dead_letters_are_listed_and_redelivered_sqlite,
    sc_not_02_dead_letters_are_listed_and_redelivered_postgres);

async fn a_crash_right_after_the_transition_still_notifies(backend: Backend) {
    let tools = ToolServer::start().await;
    // The receiver's port is known, but it is not up yet.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let config = config(&tools, &url, "200ms", 1000);
    let db = database(backend, "notify-crash").await;

    // A process without any delivery worker, over the database: it commits a pending action and
    // then stops right after committing its denial (the write lands, its answer never comes).
    let store = Arc::new(FaultyStore::new(open(&db).await));
    let engine = Arc::new(Engine::new(
        config.clone(),
        store.clone(),
        Arc::new(RecordingWaker::default()),
        Arc::new(Executors::new()),
        Arc::new(SystemClock),
    ));
    let agent = config.principal(keys::AGENT).unwrap().clone();
    let approver = config.principal(keys::APPROVER).unwrap().clone();
    let request = submission(pending(json!({"n": "crash"})));
    let action = engine.submit(&agent, request, None).await.unwrap().action;
    let seal = Matching {
        write: Some(Write::Commit),
        to: Some(State::Denied),
        ..Matching::default()
    };
    store.inject(seal.of(action.id()), Fault::StopAfter, 1);
    let dying = tokio::spawn({
        let (engine, id) = (engine.clone(), action.id().to_owned());
        async move { engine.deny(&approver, &id, "no").await }
    });
    let stored = open(&db).await;
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while stored
        .load("acme", action.id())
        .await
        .unwrap()
        .unwrap()
        .state()
        != State::Denied
    {
        assert!(std::time::Instant::now() < until, "the denial commits");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    dying.abort();
    drop(engine);

    // The next process delivers both notices the dead one committed.
    let receiver = Receiver::serve(listener, Mode::Up);
    let (server, api) = start(config, &db).await;
    let notices = expected_notices(&api, action.id()).await;
    let ids: Vec<String> = notices.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(
        notices.iter().map(|(_, k)| *k).collect::<Vec<_>>(),
        ["approval_requested", "action_sealed"]
    );
    assert!(
        receiver.wait_taken(&ids, 30).await,
        "the restarted process delivers what the dead one committed"
    );
    let requested = &receiver.taken(&ids[0])[0];
    assert!(requested.signature_ok);
    assert_eq!(
        requested.body["data"]["context_digest"],
        json!(action.approval().unwrap().context_digest)
    );
    let sealed = &receiver.taken(&ids[1])[0];
    assert!(sealed.signature_ok);
    assert_eq!(sealed.body["data"]["state"], "denied");
    server.shutdown().await.unwrap();
}

on_both_stores!(a_crash_right_after_the_transition_still_notifies:
    sc_not_01_a_crash_right_after_the_transition_still_notifies_sqlite,
    sc_not_01_a_crash_right_after_the_transition_still_notifies_postgres);

async fn a_hanging_receiver_never_delays_a_transition(backend: Backend) {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Hang).await;
    let db = database(backend, "notify-hang").await;
    let (server, api) = start(config(&tools, &receiver.url(), "200ms", 1000), &db).await;
    let (s, first) = api.submit(keys::AGENT, pending(json!({"n": 1}))).await;
    assert_eq!(s, 202);
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while receiver.held() == 0 {
        assert!(
            std::time::Instant::now() < until,
            "the first notice reaches the receiver"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The receiver holds a delivery open; every transition still answers. A transition that
    // waited for delivery would hang here (the guard turns that into a failure).
    let transitions = async {
        let (s, second) = api.submit(keys::AGENT, pending(json!({"n": 2}))).await;
        assert_eq!(s, 202);
        let id = second["id"].as_str().unwrap();
        let (s, _) = api
            .post(
                &format!("/v1/actions/{id}/deny"),
                keys::APPROVER,
                json!({"reason": "no"}),
            )
            .await;
        assert_eq!(s, 200);
        let (s, _) = api.cancel(first["id"].as_str().unwrap(), keys::AGENT).await;
        assert_eq!(s, 200);
        second
    };
    let second = tokio::time::timeout(Duration::from_secs(60), transitions)
        .await
        .expect("transitions never wait for a notification");
    // The first try of the first notice has not even settled: the transitions did not wait for it.
    let store = open(&db).await;
    let first_id = first["id"].as_str().unwrap();
    let entry = store
        .outbox_entry("acme", first_id, 1)
        .await
        .unwrap()
        .expect("still in the outbox");
    assert_eq!((entry.attempts, receiver.held() >= 1), (0, true));

    receiver.set(Mode::Up);
    let mut ids = expected_notices(&api, first_id).await;
    ids.extend(expected_notices(&api, second["id"].as_str().unwrap()).await);
    let ids: Vec<String> = ids.into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 4);
    assert!(receiver.wait_taken(&ids, 30).await, "{:?}", receiver.seen());
    server.shutdown().await.unwrap();
}

on_both_stores!(a_hanging_receiver_never_delays_a_transition:
    sc_not_02_a_hanging_receiver_never_delays_a_transition_sqlite,
    sc_not_02_a_hanging_receiver_never_delays_a_transition_postgres);

/// Only what an endpoint listens for enters the outbox: tenant `globex` has no endpoints, so
/// its transitions pay no outbox write at all.
async fn only_listened_events_enter_the_outbox(backend: Backend) {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Down).await;
    let db = database(backend, "notify-listened").await;
    let (server, api) = start(config(&tools, &receiver.url(), "1h", 1000), &db).await;
    let (s, acme) = api.submit(keys::AGENT, pending(json!({"n": 1}))).await;
    assert_eq!(s, 202);
    let (s, globex) = api
        .submit(keys::OTHER_TENANT_AGENT, pending(json!({"n": 1})))
        .await;
    assert_eq!(s, 202, "{globex}");
    let store = open(&db).await;
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
    assert!(store
        .outbox_entry("acme", &id(&acme), 1)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        store.outbox_entry("globex", &id(&globex), 1).await.unwrap(),
        None
    );
    server.shutdown().await.unwrap();
}

on_both_stores!(only_listened_events_enter_the_outbox:
    sc_not_01_only_events_an_endpoint_listens_for_enter_the_outbox_sqlite,
    sc_not_01_only_events_an_endpoint_listens_for_enter_the_outbox_postgres);

/// SC-SEC-08 holds for notification endpoints as for webhooks: a name that resolves to a
/// loopback address is refused at every connection unless the tenant lists it, and the dead
/// letter says so without the URL.
#[tokio::test]
async fn sc_sec_08_a_notification_endpoint_resolving_inward_is_refused() {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Up).await;
    let inward = format!("https://localhost:{}/hook", receiver.addr.port());
    let db = database(Backend::Sqlite, "notify-inward").await;
    let (server, api) = start(config(&tools, &inward, "100ms", 1), &db).await;
    let (s, _) = api.submit(keys::AGENT, pending(json!({"n": 1}))).await;
    assert_eq!(s, 202);
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let dead = loop {
        let (_, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
        if !dead["data"].as_array().unwrap().is_empty() {
            break dead;
        }
        assert!(
            std::time::Instant::now() < until,
            "the refused notice is parked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(dead["data"][0]["last_error"], "target_refused", "{dead}");
    assert!(!dead.to_string().contains("localhost"), "{dead}");
    assert!(
        receiver.seen().is_empty(),
        "nothing reached the inward address"
    );
    server.shutdown().await.unwrap();
}

/// SC-EDGE-08 meets SC-NOT-02: a notice whose action record became unreadable fails its tries
/// like a dead receiver and is parked where admins see it — no hot loop, no crash.
async fn a_notice_of_an_unreadable_action_is_parked(backend: Backend) {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Down).await;
    let db = database(backend, "notify-unreadable").await;
    let (server, api) = start(config(&tools, &receiver.url(), "100ms", 2), &db).await;
    let (_, action) = api.submit(keys::AGENT, pending(json!({"n": 1}))).await;
    let id = action["id"].as_str().unwrap();
    // Its stored body overwritten with `{}` behind the store's back (SC-EDGE-08).
    Raw::open(&db).await.set_body(id, b"{}").await;
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let dead = loop {
        let (_, dead) = api.get("/v1/notifications/dead", keys::ADMIN).await;
        if !dead["data"].as_array().unwrap().is_empty() {
            break dead;
        }
        assert!(std::time::Instant::now() < until, "the notice is parked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let letter = &dead["data"][0];
    assert_eq!(
        (letter["action_id"].as_str(), letter["last_error"].as_str()),
        (Some(id), Some("action unreadable")),
        "{dead}"
    );
    server.shutdown().await.unwrap();
}

on_both_stores!(a_notice_of_an_unreadable_action_is_parked:
    sc_not_02_a_notice_of_an_unreadable_action_is_parked_sqlite,
    sc_not_02_a_notice_of_an_unreadable_action_is_parked_postgres);

/// A notice is signed at the engine's clock (the injected one, here a day ahead of the wall
/// clock), and the key to deduplicate on — the body's `id`, the action and its event seq — is
/// inside the signed bytes: the same body under another id fails the receiver's check.
async fn signed_at_the_engines_clock_over_the_dedupe_key(backend: Backend) {
    let tools = ToolServer::start().await;
    let receiver = Receiver::start(Mode::Up).await;
    let config = config(&tools, &receiver.url(), "1s", 10);
    let store = open(&database(backend, "notify-clock").await).await;
    let day_ahead = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    let clock = Arc::new(countersign::clock::ManualClock::new(day_ahead));
    let engine = Arc::new(Engine::new(
        config.clone(),
        store.clone(),
        Arc::new(RecordingWaker::default()),
        Arc::new(Executors::new()),
        clock.clone(),
    ));
    let agent = config.principal(keys::AGENT).unwrap().clone();
    let request = submission(pending(json!({"n": "clock"})));
    let action = engine.submit(&agent, request, None).await.unwrap().action;
    let notifier = Arc::new(countersign::notify::Notifier::new(
        config,
        store,
        clock.clone(),
        "http://page/",
    ));
    let report = notifier.deliver_due().await.unwrap();
    assert_eq!(report.delivered, 1, "{report:?}");
    let id = format!("ntf_{}_1", action.id().strip_prefix("act_").unwrap());
    let taken = &receiver.taken(&id)[0];
    let sent = taken.signature.clone().unwrap();
    let t = sent.strip_prefix("t=").and_then(|r| r.split(',').next());
    assert_eq!(t, Some(day_ahead.as_second().to_string().as_str()));
    assert!(taken.signature_ok);
    assert_eq!(taken.body["id"], json!(id));
    assert_eq!(taken.body["action_id"], json!(action.id()));
    let mut other = taken.body.clone();
    other["id"] = json!(format!("{id}0"));
    let forged = serde_json::to_vec(&other).unwrap();
    assert!(
        !countersign_tests::receiver::verify(
            countersign_tests::receiver::NOTIFY_SECRET.as_bytes(),
            &sent,
            &forged
        ),
        "another id breaks the signature"
    );
}

on_both_stores!(signed_at_the_engines_clock_over_the_dedupe_key:
    sc_not_01_signed_at_the_engines_clock_over_the_dedupe_key_sqlite,
    sc_not_01_signed_at_the_engines_clock_over_the_dedupe_key_postgres);
