//! SC-MCP-12, JSON-RPC batches over real HTTP: revision 2025-03-26 lets one POST carry an
//! array of requests and notifications; 2025-06-18 removed them, and no later revision has them.

use super::{post, world, World, AGENT};
use serde_json::{json, Value};

/// A raw POST of `body` with the agent key and, when given, `MCP-Protocol-Version`.
async fn send(w: &World, version: Option<&str>, body: &Value) -> (u16, Value) {
    let mut headers = vec![AGENT];
    if let Some(v) = version {
        headers.push(("mcp-protocol-version", v));
    }
    post(w, &headers, body.to_string().as_bytes()).await
}

fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Caught on main: any array was refused (`-32600`, "batches are not supported"), though a
/// client of 2025-03-26 may send one. A batch of that revision (named, or without the header
/// its clients do not send) is answered by the array of its requests' responses, in order,
/// notifications left out; `initialize` stays out of a batch, and `tasks/*` are not
/// 2025-03-26's methods.
#[tokio::test]
async fn sc_mcp_12_a_2025_03_26_batch_is_answered_request_by_request() {
    let w = world().await;
    for version in [None, Some("2025-03-26")] {
        let batch = json!([
            request(json!(1), "tools/list", json!({})),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            request(json!("call"), "tools/call", json!({"name": "search_web", "arguments": {"q": "rust"}})),
            request(json!(3), "tasks/get", json!({"taskId": "act_x"})),
            request(json!(4), "initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}})),
        ]);
        let (s, v) = send(&w, version, &batch).await;
        assert_eq!(s, 200, "{version:?}: {v}");
        let replies = v.as_array().unwrap_or_else(|| panic!("an array: {v}"));
        let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
        assert_eq!(ids, [&json!(1), &json!("call"), &json!(3), &json!(4),]);
        let names = super::listing::field(&replies[0]["result"]["tools"], "name");
        assert!(names.contains(&"search_web"), "{names:?}");
        assert!(
            replies[0]["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["execution"].is_null()),
            "2025-03-26 lists no taskSupport: {v}"
        );
        assert_eq!(
            replies[1]["result"]["structuredContent"],
            json!({"sent": true}),
            "{v}"
        );
        assert_eq!(replies[2]["error"]["code"], -32601, "{v}");
        assert_eq!(replies[3]["error"]["code"], -32600, "{v}");
        assert!(
            replies[3]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("initialize must not be part of a batch"),
            "{v}"
        );
    }
    let ran = w.tools.received();
    assert_eq!(ran.len(), 2, "each batched call ran once: {ran:?}");

    // Notifications alone: accepted, nothing to answer.
    let notes = json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]);
    assert_eq!(send(&w, None, &notes).await, (202, Value::Null));
    // An empty batch is one error, not an array (JSON-RPC 2.0).
    let (s, v) = send(&w, None, &json!([])).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32600)), "{v}");
    // Anything but objects is refused whole, before any of it runs. Caught by schemathesis:
    // `[null, null]` was answered 200 (an error per element), a schema-violating body taken.
    let (s, v) = send(&w, None, &json!([null, null])).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32600)), "{v}");
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    for broken in [json!(7), json!({}), json!({"jsonrpc": "2.0", "id": 8})] {
        let (s, v) = send(&w, None, &json!([call, broken])).await;
        assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32600)), "{v}");
    }
}

/// SC-MCP-12: a batch in a revision without batches is refused whole with one JSON-RPC error
/// that says so, and nothing in it runs.
#[tokio::test]
async fn sc_mcp_12_revisions_without_batches_refuse_them_clearly() {
    let w = world().await;
    let call = request(
        json!(1),
        "tools/call",
        json!({"name": "search_web", "arguments": {"q": "rust"}}),
    );
    for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let (s, v) = send(&w, Some(version), &json!([call.clone()])).await;
        assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32600)), "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("not part of MCP {version}"))
                && message.contains("only 2025-03-26"),
            "{message}"
        );
    }
    // 2026-07-28's messages name their revision in `_meta`: refused in a batch too.
    let mut modern = call.clone();
    modern["params"]["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let (s, v) = send(&w, None, &json!([modern])).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v[0]["error"]["code"], -32600, "{v}");
    assert!(
        v[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not part of MCP 2026-07-28"),
        "{v}"
    );
    assert!(w.tools.received().is_empty(), "nothing ran");
}

/// SC-MCP-12 with SC-SEC-04: each message of a batch spends from the key's bucket as its own
/// POST would, so a batch is no way around the rate limit.
#[tokio::test]
async fn sc_mcp_12_each_message_of_a_batch_spends_from_the_rate_limit() {
    let tools = countersign_tests::ToolServer::start().await;
    tools.behave(countersign_tests::Behaviour::default());
    let text = super::world_toml(&tools, "")
        .replace("rate_per_key = 1000000", "rate_per_key = 0.001")
        .replace("burst_per_key = 1000000", "burst_per_key = 3");
    let w = World::start(tools, &text, &countersign_tests::temp_db("mcp-batch")).await;
    let batch: Vec<Value> = (1..=5)
        .map(|i| request(json!(i), "tools/list", json!({})))
        .collect();
    let (s, v) = send(&w, None, &json!(batch)).await;
    assert_eq!(s, 200, "{v}");
    let codes: Vec<Option<i64>> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["error"]["code"].as_i64())
        .collect();
    assert_eq!(codes, [None, None, None, Some(-32000), Some(-32000)], "{v}");
    // The bucket is spent: the next POST is refused as any would be.
    let (s, _) = send(&w, None, &request(json!(6), "tools/list", json!({}))).await;
    assert_eq!(s, 429);
}
