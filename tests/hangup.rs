//! SC-EDGE-12: a client that hangs up changes nothing. A run a request claimed (an allowed call,
//! the approval that commits a due ticket, an MCP `tools/call`) finishes and commits whatever
//! the client does; and a graceful shutdown (SIGTERM) waits for it (SC-EDGE-05). Over real HTTP
//! against the local server on SQLite and on Postgres, with a tool over real HTTP that answers
//! after 2 s and clients that give up after 0.5 s.
//!
//! Caught on main: the inline run was the request's own future, which axum drops when the
//! client disconnects — the tool got the call, its answer hit a broken pipe, the action sat
//! `executing` until its lease lapsed and was then sealed `failed/outcome_unknown`, or, for a
//! `retry` tool, run a second time by the sweep; a SIGTERM did not wait for such a run.

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    domain::State,
};
use countersign_tests::{
    child_server, config_toml, in_secs, keys, postgres, temp_db, Api, Behaviour, Received,
    ToolServer,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};
use std::{process::Command, sync::Arc, time::Duration};

/// How long the tool takes to answer, and how long the hasty clients wait.
const TOOL_MS: u64 = 2_000;
const CLIENT_GIVES_UP: Duration = Duration::from_millis(500);

/// The test configuration plus a `retry` tool that needs a countersignature (`mail.*`).
fn config(tools: &ToolServer) -> String {
    config_toml(tools, "10s", "5s")
        + &format!(
            r#"
[tenants.acme.tools."mail.retry"]
executor = "webhook"
url = "{}"
secret_env = "{}"
timeout = "5s"
recovery = "retry"
"#,
            tools.url("mail"),
            countersign_tests::SECRET_ENV
        )
}

async fn slow_tools() -> ToolServer {
    let tools = ToolServer::start().await;
    tools.behave(Behaviour {
        delay_ms: TOOL_MS,
        ..Behaviour::default()
    });
    tools
}

/// A client that sends `body` to `path` and hangs up before the answer. Returns when it has.
async fn hang_up(api: &Api, path: &str, key: &str, headers: &[(&str, String)], body: &Value) {
    let client = reqwest::Client::builder()
        .timeout(CLIENT_GIVES_UP)
        .build()
        .unwrap();
    let mut req = client
        .post(format!("{}{path}", api.base))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let sent = req.send().await;
    assert!(
        sent.as_ref().is_err_and(|e| e.is_timeout()),
        "the client was meant to give up before the tool answered: {sent:?}"
    );
}

/// The id of the one action the tool server saw since `before` calls, once it saw it.
async fn called(tools: &ToolServer, before: usize) -> Received {
    for _ in 0..500 {
        if let Some(r) = tools.received().get(before) {
            return r.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the tool was never called");
}

/// The action ran once and was sealed `succeeded` within a second of the tool's answer — not
/// after a lease lapsed, not by a second run.
async fn ran_once_and_committed(api: &Api, tools: &ToolServer, call: &Received, what: &str) {
    let answered = call.at + SignedDuration::from_millis(TOOL_MS as i64);
    let deadline = std::time::Instant::now() + Duration::from_millis(TOOL_MS + 3_000);
    let view = loop {
        let view = api.action(&call.action_id).await;
        if view["sealed_at"].is_string() || std::time::Instant::now() > deadline {
            break view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(view["state"], "succeeded", "{what}: {view}");
    let sealed: Timestamp = view["sealed_at"].as_str().unwrap().parse().unwrap();
    assert!(
        sealed < answered + SignedDuration::from_secs(1),
        "{what}: sealed at {sealed}, more than a second after the tool answered ({answered})"
    );
    // Long enough for a lapsed lease's recovery to have run it again, had the claim been lost.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tools.count_for(&call.action_id), 1, "{what}: called once");
}

async fn hung_up_runs_commit(db: Database) {
    let tools = slow_tools().await;
    let config = Arc::new(Config::from_toml(&config(&tools)).unwrap());
    let server = Server::start_on(
        config,
        &db,
        "127.0.0.1:0".parse().unwrap(),
        Parts::default(),
    )
    .await
    .unwrap();
    let api = Api::new(server.addr);
    let due_now = json!({"not_before": in_secs(-1), "not_after": in_secs(120)});

    // Through submit: an allowed call (`fail` recovery) and a scheduled one due now (`retry`).
    for (tool, body) in [
        (
            "search.web",
            json!({"tool": "search.web", "args": {"q": 1}}),
        ),
        (
            "report.build",
            json!({"tool": "report.build", "args": {"q": 2}, "schedule": due_now}),
        ),
    ] {
        let before = tools.received().len();
        hang_up(&api, "/v1/actions", keys::AGENT, &[], &body).await;
        let call = called(&tools, before).await;
        ran_once_and_committed(&api, &tools, &call, &format!("submit {tool}")).await;
    }

    // Through approve: the countersignature that commits a due ticket claims and runs it.
    for tool in ["mail.send", "mail.retry"] {
        let (s, pending) = api
            .submit(
                keys::AGENT,
                json!({"tool": tool, "args": {"to": "ops@example.com"}}),
            )
            .await;
        assert_eq!(s, 202, "{pending}");
        let id = pending["id"].as_str().unwrap();
        let digest = pending["approval"]["context_digest"].clone();
        let before = tools.received().len();
        hang_up(
            &api,
            &format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            &[],
            &json!({ "context_digest": digest }),
        )
        .await;
        let call = called(&tools, before).await;
        assert_eq!(call.action_id, id);
        ran_once_and_committed(&api, &tools, &call, &format!("approve {tool}")).await;
    }

    // Through MCP `tools/call` (2026-07-28, stateless).
    for (tool, arguments) in [
        ("search.web", json!({"q": 3})),
        (
            "report.build",
            json!({"q": 4, "countersign_window": due_now}),
        ),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let headers = [
            ("mcp-protocol-version", "2026-07-28".to_owned()),
            ("mcp-method", "tools/call".to_owned()),
            ("mcp-name", tool.to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
        ];
        let before = tools.received().len();
        hang_up(&api, "/mcp", keys::AGENT, &headers, &body).await;
        let call = called(&tools, before).await;
        ran_once_and_committed(&api, &tools, &call, &format!("MCP {tool}")).await;
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_12_hung_up_runs_commit_sqlite() {
    hung_up_runs_commit(Database::Sqlite(temp_db("hangup"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_12_hung_up_runs_commit_postgres() {
    hung_up_runs_commit(postgres::database("hangup").await).await;
}

// ---------------------------------------------------------------------------------------------
// SC-EDGE-05 with SC-EDGE-12: a SIGTERM while a hung-up client's run is under way waits for it.

/// Set in the child process: its database (a path, or a Postgres URL) and its config file.
const CHILD_DB: &str = "COUNTERSIGN_TEST_HANGUP_DB";
const CHILD_CONFIG: &str = "COUNTERSIGN_TEST_HANGUP_CONFIG";

async fn sigterm_waits_for_a_hung_up_run(db: Database) {
    let tools = slow_tools().await;
    let config_file = temp_db("hangup-config").with_extension("toml");
    std::fs::write(&config_file, config(&tools)).unwrap();
    let db_arg = match &db {
        Database::Sqlite(path) => path.display().to_string(),
        Database::Postgres { url, .. } => url.clone(),
    };
    let (mut child, addr) = child_server(
        "child_serves_until_sigterm",
        &[
            (CHILD_DB, db_arg.as_ref()),
            (CHILD_CONFIG, config_file.as_os_str()),
        ],
    );
    let api = Api::new(addr);
    hang_up(
        &api,
        "/v1/actions",
        keys::AGENT,
        &[],
        &json!({"tool": "search.web", "args": {"q": "x"}}),
    )
    .await;
    let call = called(&tools, 0).await;
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let exited = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(exited.success(), "the child stopped gracefully: {exited}");
    let answered = call.at + SignedDuration::from_millis(TOOL_MS as i64);
    assert!(
        Timestamp::now() >= answered,
        "the server exited before the tool answered"
    );
    let store = db.open().await.unwrap();
    let done = store.load("acme", &call.action_id).await.unwrap().unwrap();
    assert_eq!(
        done.state(),
        State::Succeeded,
        "the result committed before exit"
    );
    assert_eq!(tools.count_for(&call.action_id), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_05_sigterm_waits_for_a_hung_up_run_sqlite() {
    sigterm_waits_for_a_hung_up_run(Database::Sqlite(temp_db("hangup-term"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_05_sigterm_waits_for_a_hung_up_run_postgres() {
    sigterm_waits_for_a_hung_up_run(postgres::database("hangup-term").await).await;
}

/// Not a test of its own: the server process the SIGTERM tests start and stop (they re-run this
/// test binary with `--ignored --exact`). It stops on SIGTERM as `countersign-server` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the child process of sc_edge_05_sigterm_waits_for_a_hung_up_run_*"]
async fn child_serves_until_sigterm() {
    let (Some(db), Some(config)) = (std::env::var(CHILD_DB).ok(), std::env::var_os(CHILD_CONFIG))
    else {
        return;
    };
    let db = if db.starts_with("postgres") {
        Database::Postgres {
            url: db,
            options: Default::default(),
        }
    } else {
        Database::Sqlite(db.into())
    };
    let config = Arc::new(Config::from_file(std::path::Path::new(&config)).unwrap());
    let server = Server::start_on(
        config,
        &db,
        "127.0.0.1:0".parse().unwrap(),
        Parts::default(),
    )
    .await
    .unwrap();
    println!("CHILD_ADDR {}", server.addr);
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
    server
        .run_until(async move {
            term.recv().await;
        })
        .await
        .unwrap();
}
