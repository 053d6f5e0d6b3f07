//! The store-wide invariant check behind `countersign-local verify` (countersign::invariants),
//! on SQLite and on DynamoDB (LocalStack): a store written by the engine passes; each kind of
//! damage is reported against the record it is about.

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_support::AwsWorld;
use countersign::{
    config::Config,
    domain::Transition,
    embedded::Server,
    invariants::{self, Rule},
    store::{sqlite::SqliteStore, Store},
    Clock, SystemClock,
};
use countersign_tests::{config_toml, in_secs, keys, temp_db, Api, ToolServer};
use jiff::SignedDuration;
use serde_json::{json, Value};
use std::sync::Arc;

fn rules(report: &invariants::Report) -> Vec<(String, Rule)> {
    let mut found: Vec<(String, Rule)> = report
        .violations
        .iter()
        .map(|v| (v.action_id.clone(), v.rule))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn invariants_hold_on_sqlite_and_each_damage_is_named() {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let db = temp_db("verify");
    let server = Server::start(config.clone(), &db, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    let (_, ran) = api
        .submit(keys::AGENT, json!({"tool": "search.web", "args": {"q": 1}}))
        .await;
    let (_, pending) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let (_, scheduled) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {}, "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}))
        .await;
    let (_, cancelled) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {"c": 1}, "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}))
        .await;
    api.cancel(&id(&cancelled), keys::AGENT).await;
    server.shutdown().await.unwrap();

    let tenants: Vec<String> = config.tenants.keys().cloned().collect();
    let store = SqliteStore::open(&db).unwrap();
    let now = SystemClock.now();
    let clean = invariants::check(&store, &tenants, now).await.unwrap();
    assert!(clean.ok(), "{clean:?}");
    assert_eq!((clean.tenants, clean.actions), (2, 4), "{clean:?}");
    assert_eq!(clean.states["succeeded"], 1);
    assert_eq!(clean.states["approved"], 1);
    assert!(clean.events >= clean.actions, "{clean:?}");

    // A worker claimed and died long ago: executing on a lapsed lease.
    let waiting = store.load("acme", &id(&scheduled)).await.unwrap().unwrap();
    let past = now.checked_sub(SignedDuration::from_secs(60)).unwrap();
    let claim = Transition::claim(
        &waiting,
        "wrk_dead",
        past,
        past.checked_sub(SignedDuration::from_secs(1)).unwrap(),
    )
    .unwrap();
    store.commit(&claim).await.unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    // An edited audit event.
    let body: Vec<u8> = conn
        .query_row(
            "SELECT body FROM events WHERE action_id = ?1 AND seq = 1",
            [id(&ran)],
            |r| r.get(0),
        )
        .unwrap();
    let mut event: Value = serde_json::from_slice(&body).unwrap();
    event["reason"] = json!("forged");
    let tampered = event.to_string();
    conn.execute(
        "UPDATE events SET body = ?1 WHERE action_id = ?2 AND seq = 1",
        rusqlite::params![tampered.into_bytes(), id(&ran)],
    )
    .unwrap();
    // A record that does not load.
    conn.execute(
        "UPDATE actions SET body = ?1 WHERE id = ?2",
        rusqlite::params![b"{not json".to_vec(), id(&pending)],
    )
    .unwrap();

    let damaged = invariants::check(&store, &tenants, now).await.unwrap();
    let mut expected = vec![
        (id(&ran), Rule::AuditChain),
        (id(&pending), Rule::Unreadable),
        (id(&scheduled), Rule::ExpiredLease),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(rules(&damaged), expected, "{damaged:?}");
    assert!(!damaged.ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invariants_hold_on_dynamodb_and_an_edited_event_is_named() {
    let w = AwsWorld::new("verify").await;
    let ran = w
        .v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(json!({"tool": "search.web", "args": {"q": 1}})),
        )
        .await;
    assert_eq!(ran.body["state"], "succeeded", "{:?}", ran.body);
    let pending = w
        .v2(
            "POST",
            "/v1/actions",
            keys::AGENT,
            Some(json!({"tool": "mail.send", "args": {}})),
        )
        .await;
    assert_eq!(pending.status, 202);
    let store = countersign::store::dynamodb::DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&w.sdk),
        &w.table,
    );
    let tenants: Vec<String> = w.settings.config.tenants.keys().cloned().collect();
    let clean = invariants::check(&store, &tenants, w.now()).await.unwrap();
    assert!(clean.ok(), "{clean:?}");
    assert_eq!(clean.actions, 2, "{clean:?}");

    // Edit the first audit event of the run (found by scan: the key layout is the adapter's).
    let client = aws_sdk_dynamodb::Client::new(&w.sdk);
    // The adapter keeps an action's events in its state item (`A#<id>#S`), list `e`, reason `r`.
    let scanned = client
        .scan()
        .table_name(&w.table)
        .filter_expression("sk = :sk")
        .expression_attribute_values(":sk", AttributeValue::S(format!("A#{}#S", id(&ran.body))))
        .send()
        .await
        .unwrap();
    let mut item = scanned.items().first().expect("the state item").clone();
    let Some(AttributeValue::L(events)) = item.get_mut("e") else {
        panic!("events")
    };
    let Some(AttributeValue::M(first)) = events.first_mut() else {
        panic!("the first event")
    };
    first.insert("r".into(), AttributeValue::S("forged".into()));
    client
        .put_item()
        .table_name(&w.table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
    let damaged = invariants::check(&store, &tenants, w.now()).await.unwrap();
    assert_eq!(
        rules(&damaged),
        [(id(&ran.body), Rule::AuditChain)],
        "{damaged:?}"
    );
}
