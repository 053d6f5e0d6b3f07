//! A restart loses nothing: committed waiting tickets survive the process and run in their
//! windows after a new start (the in-process waker rediscovers them from the store).

use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, in_secs, keys, temp_db, Api, ToolServer};
use serde_json::json;
use std::sync::Arc;

#[tokio::test]
async fn restart_rediscovers_committed_tickets_sc_rec_01() {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let db = temp_db("restart");
    let first = Server::start(config.clone(), &db, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(first.addr);

    // One ticket whose window opens while the server is down, one that opens after the restart,
    // one approved by a person, and one still waiting for its approval.
    let (s, early) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {"k": "early"}, "schedule": {"not_before": in_secs(2), "not_after": in_secs(60)}}))
        .await;
    assert_eq!(s, 201, "{early}");
    let (_, late) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {"k": "late"}, "schedule": {"not_before": in_secs(6), "not_after": in_secs(60)}}))
        .await;
    let (_, mail) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"k": "approved"}, "schedule": {"not_before": in_secs(3), "not_after": in_secs(60)}}))
        .await;
    let (s, approved) = api
        .approve(
            mail["id"].as_str().unwrap(),
            mail["approval"]["context_digest"].as_str().unwrap(),
        )
        .await;
    assert_eq!((s, approved["state"].as_str()), (200, Some("approved")));
    let (_, pending) = api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"k": "pending"}}),
        )
        .await;

    first.shutdown().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(
        tools.received().is_empty(),
        "nothing ran while the server was down"
    );

    let second = Server::start(config, &db, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(second.addr);
    for v in [&early, &late, &mail] {
        let id = v["id"].as_str().unwrap();
        let done = api.wait_sealed(id, 30).await;
        assert_eq!(done["state"], "succeeded", "{done}");
        let calls = tools.calls_for(id);
        assert_eq!(calls.len(), 1, "ran exactly once after the restart");
        let not_before: jiff::Timestamp = v["schedule"]["not_before"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(calls[0].at >= not_before, "never before not_before");
    }
    assert_eq!(
        api.action(pending["id"].as_str().unwrap()).await["state"],
        "pending_approval"
    );
    second.shutdown().await.unwrap();
}

/// A second server refuses a SQLite file another server holds, and names it; once the first
/// has stopped, the file is free. Caught on main: both started on one file, each with its own
/// timers and sweep — and each would recover the other's live claims as lapsed leases.
#[tokio::test]
async fn second_server_refuses_a_sqlite_file_another_holds() {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "1m", "2s")).unwrap());
    let db = temp_db("held");
    let any = "127.0.0.1:0".parse().unwrap();
    let first = Server::start(config.clone(), &db, any).await.unwrap();
    let refused = Server::start(config.clone(), &db, any).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("in use by another countersign server") && message.contains("held"),
        "the second server names the file it cannot have: {message:?}"
    );
    first.shutdown().await.unwrap();
    let again = Server::start(config, &db, any).await.unwrap();
    again.shutdown().await.unwrap();
}
