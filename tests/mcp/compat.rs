//! SC-MCP-10, every revision a client may speak: the official Python SDK's 1.x line (2025-06-18
//! and 2025-03-26), its 2.x line (2025-11-25 and 2026-07-28) and the TypeScript SDK, each over
//! real HTTP, negotiated as each revision specifies.

use super::{listing::model_api_name, venv_python, world_with_rules, SdkClient, World};
use countersign_tests::keys;
use serde_json::{json, Value};

/// What every client does: list, then an allowed call, a call the policy refuses and a call that
/// waits for a countersignature, each by its listed name, and `countersign_status` on the last.
fn plan() -> String {
    json!({
        "allowed": ["search_web", {"q": "rust"}],
        "refused": ["deploy_service", {"env": "prod"}],
        "waiting": ["mail_send", {"to": "ops@example.com"}],
    })
    .to_string()
}

async fn compat_world() -> World {
    world_with_rules(super::listing::RULES, super::listing::RULE_TOOLS).await
}

/// The events of one client's `compat` scenario: `connected`, `tools`, then each call.
async fn run_plan(mut c: SdkClient) -> Vec<Value> {
    let mut events = vec![c.next("connected").await, c.next("tools").await];
    for _ in 0..4 {
        events.push(c.next("call").await);
    }
    c.finish().await;
    events
}

fn call<'a>(events: &'a [Value], label: &str) -> &'a Value {
    let event = events.iter().find(|e| e["label"] == label);
    &event.unwrap_or_else(|| panic!("no {label} call: {events:?}"))["result"]
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// The plan went as the policy says, whatever the client's revision.
fn check_plan(events: &[Value]) {
    let names: Vec<&str> = events[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.iter().all(|n| model_api_name(n)), "{names:?}");
    let allowed = call(events, "allowed");
    assert_eq!(allowed["isError"], false, "{allowed}");
    assert_eq!(text(allowed), r#"{"sent":true}"#, "{allowed}");
    let refused = call(events, "refused");
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(refused).contains("policy denies"), "{refused}");
    let waiting = call(events, "waiting");
    assert_eq!(waiting["isError"], false, "{waiting}");
    assert!(
        text(waiting).contains("waiting for a countersignature"),
        "{waiting}"
    );
    let status = call(events, "status");
    assert!(
        text(status).contains("(mail.send): waiting for a countersignature"),
        "{status}"
    );
}

/// Caught on main (issue 30, item 2): the Python SDK 1.x, still in many deployed agents, could
/// not connect: `initialize` always answered 2025-11-25, and 1.22.0 (2025-06-18) failed with
/// "Unsupported protocol version from the server: 2025-11-25", as did 1.9.4 (2025-03-26). The
/// answer now echoes a supported requested version, and each client lists and calls.
#[tokio::test]
async fn sc_mcp_10_python_sdk_1x_clients_of_2025_06_18_and_2025_03_26_connect_and_call() {
    let w = compat_world().await;
    for (var, venv, revision) in [
        (
            "COUNTERSIGN_MCP_PYTHON_2025_06_18",
            "py-2025-06-18",
            "2025-06-18",
        ),
        (
            "COUNTERSIGN_MCP_PYTHON_2025_03_26",
            "py-2025-03-26",
            "2025-03-26",
        ),
    ] {
        let python = venv_python(var, venv);
        let c = SdkClient::start_script(
            &python,
            "py1_client.py",
            &[&w.url, keys::AGENT, "compat", &plan()],
        );
        let events = run_plan(c).await;
        assert_eq!(events[0]["protocol_version"], revision, "{events:?}");
        check_plan(&events);
    }
}
