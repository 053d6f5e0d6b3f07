//! SC-EDGE-03 Durable commits: a transition that was answered, or after which a tool was
//! called, survives a crash of the process or of the host.

use countersign::{
    boot::embedded::Server, config::Config, store::sqlite::SqliteStore, store::Actions,
};
use countersign_tests::{child_server, config_toml, in_secs, keys, temp_db, Api, ToolServer};
use serde_json::json;
use std::sync::Arc;

/// Set in the child process: the database it serves.
const CHILD_DB: &str = "COUNTERSIGN_TEST_CHILD_DB";

/// Caught on the old main: the store ran WAL with `synchronous = NORMAL` (1), where a host
/// crash or power loss can roll back the last commits — a claim that already called a
/// `recovery = "fail"` tool could vanish and the tool run again. A host crash cannot be staged
/// in a test; the setting that decides it can be read on the store's own connection.
#[tokio::test]
async fn sc_edge_03_sqlite_syncs_every_commit_to_disk() {
    let store = SqliteStore::open(&temp_db("synchronous")).unwrap();
    assert_eq!(store.pragma("journal_mode").await.unwrap(), "wal");
    assert_eq!(
        store.pragma("synchronous").await.unwrap(),
        "2",
        "synchronous must be FULL (2): a WAL commit is synced before the transition is answered"
    );
}

/// A process crash (SIGKILL) right after the answers: every answered transition is in the
/// store when it is reopened. This guards the write path (e.g. a group commit must not answer
/// before its transaction committed).
#[tokio::test]
async fn sc_edge_03_answered_transitions_survive_kill_9() {
    let db = temp_db("kill9");
    let (mut child, addr) = child_server("child_serves_until_killed", &[(CHILD_DB, db.as_ref())]);
    let api = Api::new(addr);

    // Answered: a scheduled ticket committed (201), an approval (200), a cancel (200), and an
    // allowed call that ran its tool (200 succeeded).
    let (s, scheduled) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {}, "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}))
        .await;
    assert_eq!(s, 201, "{scheduled}");
    let (_, mail) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}, "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}))
        .await;
    let id = |v: &serde_json::Value| v["id"].as_str().unwrap().to_owned();
    let (s, approved) = api
        .approve(
            &id(&mail),
            mail["approval"]["context_digest"].as_str().unwrap(),
        )
        .await;
    assert_eq!((s, approved["state"].as_str()), (200, Some("approved")));
    let (s, cancelled) = api.cancel(&id(&scheduled), keys::AGENT).await;
    assert_eq!((s, cancelled["state"].as_str()), (200, Some("cancelled")));
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

    child.kill().unwrap(); // SIGKILL: no shutdown path runs
    child.wait().unwrap();

    let store = SqliteStore::open(&db).unwrap();
    for (v, state) in [
        (&cancelled, "cancelled"),
        (&approved, "approved"),
        (&ran, "succeeded"),
    ] {
        let a = store
            .load("acme", &id(v))
            .await
            .unwrap()
            .expect("committed");
        assert_eq!(a.state().as_str(), state);
        assert_eq!(a.version(), v["version"].as_u64().unwrap());
    }
}

/// Not a test of its own: the server process that `sc_edge_03_answered_transitions_survive_kill_9`
/// starts and kills (it re-runs this test binary with `--ignored --exact`).
#[tokio::test]
#[ignore = "the child process of sc_edge_03_answered_transitions_survive_kill_9"]
async fn child_serves_until_killed() {
    let Some(db) = std::env::var_os(CHILD_DB) else {
        return;
    };
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let server = Server::start(config, db.as_ref(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    println!("CHILD_ADDR {}", server.addr);
    std::future::pending::<()>().await;
}
