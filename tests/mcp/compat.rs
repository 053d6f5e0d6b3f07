//! SC-MCP-10, every revision a client may speak: the official Python SDK's 1.x line (2025-06-18
//! and 2025-03-26), its 2.x line (2025-11-25 and 2026-07-28), the TypeScript SDK, FastMCP's
//! client, agent frameworks and Claude Code, each over real HTTP, negotiated as each revision
//! specifies.

use super::{
    listing::{field, model_api_name},
    venv_python, world_with_rules, SdkClient, World,
};
use countersign_tests::keys;
use serde_json::{json, Value};

/// What every client does: list, then an allowed call, a call the policy refuses and a call that
/// waits for a countersignature, each by its listed name, and `countersign_status` on the last.
fn plan() -> String {
    json!({
        "allowed": ["search_web", {"q": "rust"}],
        "refused": ["deploy_service", {"env": "prod"}],
        "waiting": ["pay_transfer", {"amount": 5000}],
    })
    .to_string()
}

pub(super) async fn compat_world() -> World {
    world_with_rules(super::listing::RULES, super::listing::RULE_TOOLS).await
}

/// The events of one client's `compat` scenario: `connected`, `tools`, then each call; after
/// `countersign_status` on the waiting call the approver countersigns it over the API, and the
/// client follows `countersign_status` until it ran (the `ran` call).
async fn run_plan(w: &World, mut c: SdkClient) -> Vec<Value> {
    let mut events = vec![c.next("connected").await, c.next("tools").await];
    for _ in 0..4 {
        events.push(c.next("call").await);
    }
    let id = action_id(text(call(&events, "status")));
    super::approve(w, id).await;
    c.go().await;
    events.push(c.next("call").await);
    c.finish().await;
    events
}

/// The action a waiting call's text names (every client sees the text).
fn action_id(text: &str) -> &str {
    let at = text
        .find("act_")
        .unwrap_or_else(|| panic!("no action id: {text}"));
    &text[at..at + 30]
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
    let names = field(&events[1]["tools"], "name");
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
        text(status).contains("(pay.transfer): waiting for a countersignature"),
        "{status}"
    );
    let ran = call(events, "ran");
    assert!(ran_once(ran), "{ran}");
}

/// `countersign_status` on the approved call says it completed, with the echo tool's result.
fn ran_once(status: &Value) -> bool {
    let t = text(status);
    t.contains("(pay.transfer): completed.")
        && t.contains(r#""echo":{"amount":5000}"#)
        && status["isError"] != true
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
        let events = run_plan(&w, c).await;
        assert_eq!(events[0]["protocol_version"], revision, "{events:?}");
        check_plan(&events);
    }
}

/// How one client of the table is started against a world.
type Start = dyn Fn(&World) -> SdkClient;

/// The clients of docs/mcp.md's compatibility table, in its order: a row's name, and how the
/// client is started on the plan.
fn clients() -> Vec<(&'static str, Box<Start>)> {
    let script =
        |var: &'static str, venv: &'static str, file: &'static str, first: &'static str| {
            move |w: &World| {
                let python = venv_python(var, venv);
                let mut args = vec![w.url.as_str(), keys::AGENT];
                args.extend([first].into_iter().filter(|a| !a.is_empty()));
                let plan = plan();
                args.push(&plan);
                SdkClient::start_script(&python, file, &args)
            }
        };
    vec![
        (
            "Python SDK, default mode",
            Box::new(|w: &World| SdkClient::start(w, keys::AGENT, "modern", "compat", &[&plan()])),
        ),
        (
            "Python SDK, `mode=\"legacy\"`",
            Box::new(|w: &World| SdkClient::start(w, keys::AGENT, "legacy", "compat", &[&plan()])),
        ),
        (
            "TypeScript SDK",
            Box::new(|w: &World| SdkClient::start_ts(w, keys::AGENT, "compat", &plan(), "")),
        ),
        (
            "Python SDK 1.x (last of 2025-06-18)",
            Box::new(script(
                "COUNTERSIGN_MCP_PYTHON_2025_06_18",
                "py-2025-06-18",
                "py1_client.py",
                "compat",
            )),
        ),
        (
            "Python SDK 1.x (last of 2025-03-26)",
            Box::new(script(
                "COUNTERSIGN_MCP_PYTHON_2025_03_26",
                "py-2025-03-26",
                "py1_client.py",
                "compat",
            )),
        ),
        (
            "FastMCP client",
            Box::new(script(
                "COUNTERSIGN_MCP_PYTHON",
                "venv",
                "fastmcp_client.py",
                "",
            )),
        ),
        (
            "OpenAI Agents SDK, strict function schemas",
            Box::new(script(
                "COUNTERSIGN_MCP_PYTHON_FRAMEWORKS",
                "py-frameworks",
                "frameworks.py",
                "agents",
            )),
        ),
        (
            "LangChain MCP adapters",
            Box::new(script(
                "COUNTERSIGN_MCP_PYTHON_FRAMEWORKS",
                "py-frameworks",
                "frameworks.py",
                "langchain",
            )),
        ),
    ]
}

/// One row of the table, from what the client printed: each cell says what was seen, and a
/// cell that starts with ✗ is a failure.
fn row(name: &str, events: &[Value]) -> String {
    let connected = &events[0];
    let tools = events[1]["tools"].as_array().unwrap();
    let bad: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| !model_api_name(n))
        .collect();
    let mut listed = match bad.as_slice() {
        [] => format!("{} tools, names valid", tools.len()),
        bad => format!("✗ names {bad:?}"),
    };
    let strict = tools.iter().filter(|t| t["strict"] == true).count();
    if tools.iter().any(|t| t.get("strict").is_some()) {
        listed += &format!(", {strict} strict");
    }
    let allowed = call(events, "allowed");
    let allowed = match (text(allowed), &allowed["isError"]) {
        (r#"{"sent":true}"#, Value::Bool(false) | Value::Null) => "ran, result returned".to_owned(),
        (t, _) => format!("✗ {t}"),
    };
    let refused = call(events, "refused");
    let refused = match (&refused["isError"], text(refused).contains("policy denies")) {
        (Value::Bool(true), true) => "`isError` result".to_owned(),
        (Value::Null, true) => "refusal as the tool's text".to_owned(),
        _ => format!("✗ {refused}"),
    };
    let waits = text(call(events, "waiting")).contains("waiting for a countersignature")
        && text(call(events, "status")).contains("(pay.transfer): waiting for a countersignature");
    let waiting = if waits {
        "plain result, `countersign_status` follows".to_owned()
    } else {
        format!("✗ {events:?}")
    };
    let ran = match call(events, "ran") {
        ran if ran_once(ran) => {
            "`countersign_status` until it ran: completed, its result".to_owned()
        }
        ran => format!("✗ {ran}"),
    };
    let sdk = connected["sdk"].as_str().unwrap_or("?");
    let revision = connected["protocol_version"].as_str().unwrap_or("?");
    format!(
        "| {name} (`{sdk}`) | {revision} | {listed} | {allowed} | {refused} | {waiting} | {ran} |"
    )
}

const TABLE_START: &str = "<!-- compat-table:start (tests/mcp/compat.rs writes this table) -->";
const TABLE_END: &str = "<!-- compat-table:end -->";

/// SC-MCP-10: docs/mcp.md's compatibility table is what each pinned client did against the
/// local server, over real HTTP: the revision it negotiated, the names it listed, and how it
/// saw an allowed, a refused and a waiting call. The test fails when the doc's table differs;
/// `COUNTERSIGN_WRITE_DOCS=1` writes the table found instead.
#[tokio::test]
async fn sc_mcp_10_the_compatibility_table_in_docs_is_what_each_client_did() {
    let w = compat_world().await;
    let mut rows = vec![
        "| client (pinned) | revision | `tools/list` | allowed call | refused call | waiting call | approved over the API |".to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for (name, start) in clients() {
        let events = run_plan(&w, start(&w)).await;
        rows.push(row(name, &events));
    }
    let seen = super::claude_code::add_and_list(&w, keys::AGENT).await;
    rows.push(super::claude_code::row(&seen));
    let table = rows.join("\n");
    let failed: Vec<&String> = rows.iter().filter(|r| r.contains('✗')).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/mcp.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let (before, rest) = doc
        .split_once(TABLE_START)
        .expect("docs/mcp.md has the table's markers");
    let (written, after) = rest.split_once(TABLE_END).expect("the table's end marker");
    if std::env::var_os("COUNTERSIGN_WRITE_DOCS").is_some() {
        std::fs::write(
            path,
            format!("{before}{TABLE_START}\n{table}\n{TABLE_END}{after}"),
        )
        .unwrap();
        return;
    }
    assert_eq!(
        written.trim(),
        table,
        "docs/mcp.md's compatibility table is not what the clients did; \
         COUNTERSIGN_WRITE_DOCS=1 cargo test -p countersign-tests --test mcp compatibility writes it"
    );
}

/// A handshake-era request, with `MCP-Protocol-Version` when given.
async fn handshake(w: &World, version: Option<&str>, method: &str, params: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut headers = vec![super::AGENT];
    if let Some(v) = version {
        headers.push(("mcp-protocol-version", v));
    }
    super::post(w, &headers, body.to_string().as_bytes()).await
}

/// SC-MCP-10: `initialize` answers a served handshake revision as asked and any other with the
/// newest (2025-11-25; 2026-07-28 has no handshake), offering core tasks only where the revision
/// has them; a later request's revision is its header, and a revision without tasks gets the
/// plain result and no `tasks/*`; without a header, 2025-03-26, as the transport says to assume.
#[tokio::test]
async fn sc_mcp_10_each_handshake_revision_is_negotiated_and_served_as_it_specifies() {
    let w = compat_world().await;
    for (asked, answered, tasks) in [
        ("2025-11-25", "2025-11-25", true),
        ("2025-06-18", "2025-06-18", false),
        ("2025-03-26", "2025-03-26", false),
        ("2026-07-28", "2025-11-25", true),
        ("2024-11-05", "2025-11-25", true),
    ] {
        let init = json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        let (s, v) = handshake(&w, None, "initialize", init).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["result"]["protocolVersion"], answered, "{asked}: {v}");
        assert_eq!(
            v["result"]["capabilities"]["tasks"].is_object(),
            tasks,
            "{asked}: {v}"
        );
    }
    let (_, v) = handshake(&w, None, "initialize", json!({"capabilities": {}})).await;
    assert_eq!(
        v["error"]["code"], -32602,
        "protocolVersion is required: {v}"
    );

    // taskSupport is listed to 2025-11-25 only.
    let pay = |v: &Value| {
        let tools = v["result"]["tools"].as_array().unwrap();
        tools
            .iter()
            .find(|t| t["name"] == "pay_transfer")
            .cloned()
            .unwrap()
    };
    let (_, v) = handshake(&w, Some("2025-11-25"), "tools/list", json!({})).await;
    assert_eq!(pay(&v)["execution"]["taskSupport"], "optional", "{v}");
    for version in [Some("2025-06-18"), Some("2025-03-26"), None] {
        let (_, v) = handshake(&w, version, "tools/list", json!({})).await;
        assert!(pay(&v)["execution"].is_null(), "{version:?}: {v}");
    }
    // A task asked of 2025-06-18 is the plain result; tasks/* are not its methods.
    let call =
        json!({"name": "pay_transfer", "arguments": {"amount": 5000}, "task": {"ttl": 60000}});
    let (_, v) = handshake(&w, Some("2025-06-18"), "tools/call", call.clone()).await;
    assert!(v["result"]["task"].is_null(), "{v}");
    assert_eq!(
        v["result"]["structuredContent"]["state"], "pending_approval",
        "{v}"
    );
    let id = v["result"]["structuredContent"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, v) = handshake(&w, Some("2025-06-18"), "tasks/get", json!({"taskId": id})).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (200, Some(-32601)), "{v}");
    // 2025-11-25 (named, or shown by the request itself) keeps its core tasks.
    for version in [Some("2025-11-25"), None] {
        let (_, v) = handshake(&w, version, "tools/call", call.clone()).await;
        assert_eq!(v["result"]["task"]["status"], "working", "{version:?}: {v}");
        let (_, v) = handshake(&w, version, "tasks/get", json!({"taskId": id})).await;
        assert_eq!(v["result"]["status"], "working", "{version:?}: {v}");
    }
    // A revision not served is refused with the ones that are.
    let (s, v) = handshake(&w, Some("2024-11-05"), "tools/list", json!({})).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32022)), "{v}");
    assert_eq!(
        v["error"]["data"]["supported"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
}
