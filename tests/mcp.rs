//! MCP at `/mcp` (docs/mcp.md) over real HTTP, with the official SDKs as the clients — the
//! Python SDK (`mcp` 2.x, tests/mcp/py_client.py) in both its modes, its 1.x line (2025-06-18
//! and 2025-03-26, tests/mcp/py1_client.py), the TypeScript SDK (1.x, 2025-11-25 with its
//! experimental tasks, tests/mcp/ts_client.mjs), agent frameworks over them
//! (tests/mcp/frameworks.py), FastMCP's client (tests/mcp/fastmcp_client.py) and Claude Code
//! (tests/mcp/claude_code.rs); `scripts/mcp-sdks.sh` installs them — and tools over real HTTP
//! that count their calls. Each test names its SC-MCP scenario.

use countersign::{
    boot::embedded::{Parts, Server},
    config::Config,
};
use countersign_tests::faults::FaultyStore;
use countersign_tests::{config_toml, in_secs, keys, temp_db, Api, Behaviour, ToolServer};
use serde_json::{json, Value};
use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::sync::mpsc;

#[path = "mcp/downstream.rs"]
mod downstream;
use downstream::{Downstream, Serve};
#[path = "mcp/batch.rs"]
mod batch;
#[path = "mcp/claude_code.rs"]
mod claude_code;
#[path = "mcp/compat.rs"]
mod compat;
#[path = "mcp/listing.rs"]
mod listing;
#[path = "mcp/outbound.rs"]
mod outbound;

struct World {
    tools: ToolServer,
    api: Api,
    url: String,
    server: Server,
}

/// The shared test config plus: a tool no rule allows (never listed), a tool with catalog
/// fields, a set-result tool, and a short request budget for `tasks/result`.
async fn world() -> World {
    world_with("").await
}

/// The world, with more catalog entries (TOML tables for tenant acme; `{tool_server}` is the
/// counting tool server's URL).
async fn world_with(more_tools: &str) -> World {
    let tools = ToolServer::start().await;
    tools.behave(Behaviour::default());
    let text = world_toml(&tools, more_tools);
    World::start(tools, &text, &temp_db("mcp")).await
}

/// The world, with policy rules before the shared ones (inline TOML tables, each ending in a
/// comma) and more catalog entries.
async fn world_with_rules(first_rules: &str, more_tools: &str) -> World {
    let tools = ToolServer::start().await;
    tools.behave(Behaviour::default());
    let text = world_toml(&tools, more_tools).replacen(
        "policy = [\n",
        &format!("policy = [\n{first_rules}\n"),
        1,
    );
    World::start(tools, &text, &temp_db("mcp")).await
}

fn world_toml(tools: &ToolServer, more_tools: &str) -> String {
    config_toml(tools, "10s", "5s").replacen("[limits]\n", "[limits]\nrequest_budget = \"6s\"\n", 1)
        + r#"
[tenants.acme.tools."shell.exec"]
executor = "builtin.echo"

[tenants.acme.tools."search.docs"]
executor = "builtin.echo"
description = "Search the team's documents."
input_schema = { type = "object", properties = { q = { type = "string" } }, required = ["q"] }
annotations = { readOnlyHint = true }

[tenants.acme.tools."sandbox.try"]
executor = "builtin.echo"
"# + &more_tools.replace("{tool_server}", &tools.url("mcp"))
}

impl World {
    async fn start(tools: ToolServer, text: &str, db: &std::path::Path) -> World {
        let config = Arc::new(Config::from_toml(text).unwrap());
        let server = Server::start(config, db, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let api = Api::new(server.addr);
        World {
            url: format!("http://{}/mcp", server.addr),
            tools,
            api,
            server,
        }
    }
}

/// An official SDK's client, driven by tests/mcp/*: one JSON line per event.
struct SdkClient {
    child: Child,
    stdin: ChildStdin,
    /// Its stdout, line by line, read on a thread of its own.
    lines: mpsc::UnboundedReceiver<String>,
}

impl Drop for SdkClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn python() -> String {
    venv_python("COUNTERSIGN_MCP_PYTHON", "venv")
}

/// A Python of scripts/mcp-sdks.sh: the variable it exports, else its default place.
fn venv_python(var: &str, venv: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        format!(
            "{}/.cache/countersign/mcp/{venv}/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    })
}

impl SdkClient {
    fn start(w: &World, key: &str, mode: &str, scenario: &str, args: &[&str]) -> SdkClient {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/mcp/py_client.py");
        let mut command = Command::new(python());
        command
            .arg(script)
            .args([w.url.as_str(), key, mode, scenario])
            .args(args);
        SdkClient::spawn(command)
    }

    /// A client script of tests/mcp/ run by this Python (another SDK line, a framework).
    fn start_script(python: &str, script: &str, args: &[&str]) -> SdkClient {
        let mut command = Command::new(python);
        command
            .arg(format!("{}/mcp/{script}", env!("CARGO_MANIFEST_DIR")))
            .args(args);
        SdkClient::spawn(command)
    }

    /// The TypeScript SDK's client: the script runs from the SDK's folder, where its imports
    /// resolve (a copy of its own per client).
    fn start_ts(w: &World, key: &str, scenario: &str, tool: &str, args: &str) -> SdkClient {
        let dir = std::env::var("COUNTERSIGN_MCP_NODE_DIR").unwrap_or_else(|_| {
            format!(
                "{}/.cache/countersign/mcp/node",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let script = format!("{dir}/ts_client-{}.mjs", ulid::Ulid::new());
        std::fs::copy(
            concat!(env!("CARGO_MANIFEST_DIR"), "/mcp/ts_client.mjs"),
            &script,
        )
        .expect("the MCP TypeScript SDK is installed (source scripts/mcp-sdks.sh)");
        let mut command = Command::new("node");
        command
            .arg(&script)
            .args([w.url.as_str(), key, scenario, tool, args]);
        SdkClient::spawn(command)
    }

    fn spawn(mut command: Command) -> SdkClient {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the MCP SDKs are installed (source scripts/mcp-sdks.sh)");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        SdkClient {
            child,
            stdin,
            lines,
        }
    }

    /// The next event the client printed, which must be `event`.
    async fn next(&mut self, event: &str) -> Value {
        let v = self.next_any(event).await;
        assert_eq!(v["event"], event, "{v}");
        v
    }

    async fn next_any(&mut self, event: &str) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.recv())
            .await
            .expect("the client answers within a minute")
            .unwrap_or_else(|| panic!("the client ended before printing {event:?}"));
        serde_json::from_str(&line).unwrap()
    }

    /// Let a waiting scenario go on.
    async fn go(&mut self) {
        self.stdin.write_all(b"go\n").unwrap();
        self.stdin.flush().unwrap();
    }

    async fn finish(mut self) {
        let until = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "the client exits cleanly");
                return;
            }
            assert!(std::time::Instant::now() < until, "the client exits");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One scenario that prints `connected` then one `event`, in this revision.
async fn once(w: &World, key: &str, mode: &str, scenario: &str, args: &[&str]) -> Value {
    let mut c = SdkClient::start(w, key, mode, scenario, args);
    let connected = c.next("connected").await;
    let want = if mode == "legacy" {
        "2025-11-25"
    } else {
        "2026-07-28"
    };
    assert_eq!(connected["protocol_version"], want);
    let v = match scenario {
        "list" => c.next("tools").await,
        "call" => c.next("result").await,
        // A task, or the error that says there is none.
        _ => c.next_any("task").await,
    };
    c.finish().await;
    v
}

/// One `tools/call` by agent-1's client in this revision: the result event.
async fn tools_call(w: &World, mode: &str, tool: &str, args: &str) -> Value {
    once(w, keys::AGENT, mode, "call", &[tool, args]).await
}

/// A raw JSON-RPC POST, for the transport's own rules.
async fn post(w: &World, headers: &[(&str, &str)], body: &[u8]) -> (u16, Value) {
    let (status, v, _) = w
        .api
        .send(
            reqwest::Method::POST,
            "/mcp",
            None,
            Some(body.to_vec()),
            headers,
        )
        .await;
    (status, v)
}

const AGENT: (&str, &str) = ("authorization", "Bearer key-agent-1");

fn modern(
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (Vec<(&'static str, String)>, Vec<u8>) {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name.to_owned()));
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    (headers, body.to_string().into_bytes())
}

async fn post_modern(w: &World, method: &str, name: Option<&str>, params: Value) -> (u16, Value) {
    let (headers, body) = modern(method, name, params);
    let mut all: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.push(AGENT);
    post(w, &all, &body).await
}

#[tokio::test]
async fn sc_mcp_01_one_endpoint_serves_both_revisions_behind_the_api_guards() {
    let w = world().await;
    // The official SDK connects in its default (2026-07-28, server/discover) and legacy modes.
    for mode in ["modern", "legacy"] {
        let tools = once(&w, keys::AGENT, mode, "list", &[]).await;
        assert!(tools["tools"].as_array().unwrap().len() > 1, "{tools}");
    }
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    // Origin (DNS rebinding): another site's page is refused; loopback origins are not.
    let (s, v) = post(&w, &[AGENT, ("origin", "https://evil.example")], init).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (403, Some(-32000)), "{v}");
    let (s, _) = post(&w, &[AGENT, ("origin", "http://localhost:6274")], init).await;
    assert_eq!(s, 200);
    // The API's keys: none → 401, a non-agent key → 403.
    let (s, _) = post(&w, &[], init).await;
    assert_eq!(s, 401);
    let (s, _) = post(&w, &[("authorization", "Bearer key-approver-1")], init).await;
    assert_eq!(s, 403);
    // Strict JSON (SC-SEC-03): a duplicate key is a parse error, as on the API.
    let dup = br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}"#;
    let (s, v) = post(&w, &[AGENT], dup).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32700)), "{v}");
    // The body limit.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(300 * 1024)
    );
    let (s, _) = post(&w, &[AGENT], big.as_bytes()).await;
    assert_eq!(s, 413);
    // A notification is accepted with no body.
    let (s, v) = post(
        &w,
        &[AGENT],
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    assert_eq!((s, v), (202, Value::Null));
    // 2026-07-28: headers must mirror the body; unknown versions are named.
    let (headers, body) = modern("tools/list", None, json!({}));
    let mut wrong: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    wrong[1] = ("mcp-method", "tools/call");
    wrong.push(AGENT);
    let (s, v) = post(&w, &wrong, &body).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32020)), "{v}");
    let old = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}"#;
    let (s, v) = post(&w, &[AGENT, ("mcp-protocol-version", "1900-01-01")], old).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (400, Some(-32022)), "{v}");
    assert_eq!(
        v["error"]["data"]["supported"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"])
    );
    // server/discover and every 2026-07-28 result carry resultType.
    let (s, v) = post_modern(&w, "server/discover", None, json!({})).await;
    assert_eq!(s, 200);
    assert_eq!(v["result"]["resultType"], "complete");
    assert!(v["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object());
}

#[tokio::test]
async fn sc_mcp_02_tools_list_is_the_tenants_catalog_in_order_without_denied_tools() {
    let w = world().await;
    for mode in ["modern", "legacy"] {
        let v = once(&w, keys::AGENT, mode, "list", &[]).await;
        let tools = v["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        // Name order; shell.exec (no rule allows it) is not listed; the status tool comes last.
        assert_eq!(
            names,
            [
                "mail_send",
                "report_build",
                "sandbox_try",
                "search_docs",
                "search_web",
                "countersign_status"
            ],
            "{mode}"
        );
        let docs = &tools[3];
        assert_eq!(docs["description"], "Search the team's documents.");
        assert_eq!(docs["inputSchema"]["required"], json!(["q"]));
        assert_eq!(docs["annotations"]["readOnlyHint"], true);
        // Deferrable tools carry the optional window and say so (2025-11-25: taskSupport).
        let mail = &tools[0];
        let window = &mail["inputSchema"]["properties"]["countersign_window"];
        assert_eq!(
            window["properties"]["not_before"]["format"], "date-time",
            "{mail}"
        );
        assert!(mail["description"]
            .as_str()
            .unwrap()
            .contains("countersigns"));
        assert!(docs["inputSchema"]["properties"]["countersign_window"].is_null());
        let task_support = mail["execution"]["taskSupport"].as_str();
        match mode {
            "legacy" => assert_eq!(task_support, Some("optional")),
            _ => assert_eq!(task_support, None),
        }
        assert!(docs["execution"].is_null());
    }
}

#[tokio::test]
async fn sc_mcp_03_tools_call_answers_each_decision_of_the_same_gate() {
    let w = world().await;
    for mode in ["modern", "legacy"] {
        // allow → runs now: the tool's JSON result as structuredContent and as text.
        let v = tools_call(&w, mode, "search_web", r#"{"q":"rust"}"#).await;
        let r = &v["result"];
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"], json!({"sent": true}));
        assert_eq!(r["content"][0]["text"], r#"{"sent":true}"#);
        // deny → isError naming the code and the recorded action; the tool never runs.
        let v = tools_call(&w, mode, "shell_exec", r#"{"cmd":"ls"}"#).await;
        let r = &v["result"];
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["structuredContent"]["code"], "denied");
        let id = r["structuredContent"]["action_id"].as_str().unwrap();
        assert_eq!(w.api.action(id).await["state"], "denied");
        assert!(r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("policy denies"));
        // set_result → that result.
        let v = tools_call(&w, mode, "sandbox_try", "{}").await;
        assert_eq!(
            v["result"]["structuredContent"],
            json!({"shadow": true}),
            "{v}"
        );
        // schedule without a window → a readable validation error on countersign_window.
        let v = tools_call(&w, mode, "report_build", "{}").await;
        let r = &v["result"];
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["structuredContent"]["param"], "countersign_window");
        // require_approval for a client without tasks → a plain result that says how to follow it.
        let v = tools_call(&w, mode, "mail_send", r#"{"to":"a@example.com"}"#).await;
        let r = &v["result"];
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"]["state"], "pending_approval");
        assert_eq!(
            r["structuredContent"]["follow"]["tool"],
            "countersign_status"
        );
        assert!(r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("waiting for a countersignature"));
    }
    // A tool failure → isError naming its kind.
    w.tools.behave(Behaviour {
        status: 422,
        ..Behaviour::default()
    });
    let v = tools_call(&w, "modern", "search_web", "{}").await;
    let r = &v["result"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["code"], "tool_failed");
    assert_eq!(r["structuredContent"]["error"]["kind"], "http");
    // Every search.web call above reached the tool exactly once (2 allowed + 1 failed).
    let searches = w
        .tools
        .received()
        .iter()
        .filter(|r| r.body["tool"] == "search.web")
        .count();
    assert_eq!(searches, 3);
}

/// The approver countersigns over the REST API what the MCP client submitted.
async fn approve(w: &World, id: &str) {
    let digest = w.api.action(id).await["next_action"]["context_digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, v) = w.api.approve(id, &digest).await;
    assert_eq!(s, 200, "{v}");
}

/// A mail call whose window opens in 3 s and closes in 20 s, with the window as the model gives it.
fn windowed_mail() -> String {
    json!({"to": "ops@example.com", "countersign_window": {"not_before": in_secs(3), "not_after": in_secs(20)}}).to_string()
}

#[tokio::test]
async fn sc_mcp_04_a_window_from_the_model_is_taken_out_validated_and_kept() {
    let w = world().await;
    let args = windowed_mail();
    // The plain path (most clients): legacy SDK, no tasks; the model follows with countersign_status.
    let mut c = SdkClient::start(&w, keys::AGENT, "legacy", "status", &["mail_send", &args]);
    c.next("connected").await;
    let waiting = c.next("waiting").await;
    let id = waiting["action_id"].as_str().unwrap().to_owned();
    let text = waiting["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("once approved it runs between"), "{text}");
    let action = w.api.action(&id).await;
    // The window is the action's schedule and in the approval context; the args lost it.
    assert!(action["schedule"]["not_before"].is_string(), "{action}");
    assert!(action["args"].get("countersign_window").is_none());
    let summary = action["approval"]["context"]["schedule"]["summary"]
        .as_str()
        .unwrap();
    assert!(
        text.contains(summary),
        "the model reads what the approver reads: {text}"
    );
    approve(&w, &id).await;
    c.go().await;
    let last = c.next("final").await;
    c.finish().await;
    assert_eq!(
        last["result"]["structuredContent"]["state"], "succeeded",
        "{last}"
    );
    let calls = w.tools.calls_for(&id);
    assert_eq!(calls.len(), 1, "exactly once");
    let nb: jiff::Timestamp = action["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls[0].at >= nb, "never before not_before");
    assert!(
        calls[0].body["args"].get("countersign_window").is_none(),
        "the tool never sees it"
    );
    // SC-INT-02 validates it: a window too narrow is a readable tool error.
    let narrow =
        json!({"countersign_window": {"not_before": in_secs(60), "not_after": in_secs(62)}});
    let v = tools_call(&w, "modern", "mail_send", &narrow.to_string()).await;
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(
        v["result"]["structuredContent"]["param"],
        "countersign_window"
    );
}

/// Caught on main (issue 28, item 12a): models send `null` for an optional property they leave
/// out, and `countersign_window: null` was a validation error the model could not fix. It is
/// no window: the call goes through the gate as if the property were absent (SC-MCP-04).
#[tokio::test]
async fn sc_mcp_04_a_null_window_is_no_window() {
    let w = world().await;
    // allow: runs now, and the tool never sees the property.
    let args = json!({"q": "rust", "countersign_window": null});
    let (s, v) = post_modern(
        &w,
        "tools/call",
        Some("search.web"),
        json!({"name": "search.web", "arguments": args}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["result"]["isError"], false, "{v}");
    let calls = w.tools.received();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].body["args"], json!({"q": "rust"}));
    // require_approval: waits for a countersignature with no window, as without the property.
    let args = json!({"to": "a@example.com", "countersign_window": null});
    let (_, v) = post_modern(
        &w,
        "tools/call",
        Some("mail.send"),
        json!({"name": "mail.send", "arguments": args}),
    )
    .await;
    let r = &v["result"];
    assert_eq!(r["isError"], false, "{v}");
    assert_eq!(r["structuredContent"]["state"], "pending_approval", "{v}");
    let id = r["structuredContent"]["action_id"].as_str().unwrap();
    let action = w.api.action(id).await;
    assert!(action["schedule"].is_null(), "{action}");
    assert_eq!(action["args"], json!({"to": "a@example.com"}));
}

#[tokio::test]
async fn sc_mcp_05_a_task_completes_when_the_countersigned_call_runs_in_its_window() {
    let w = world().await;
    let args = windowed_mail();
    // 2026-07-28 with the tasks extension advertised: a task, polled with tasks/get.
    let mut c = SdkClient::start(&w, keys::AGENT, "modern", "task", &["mail_send", &args]);
    c.next("connected").await;
    let created = c.next("created").await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["status"], "working");
    assert!(task["statusMessage"]
        .as_str()
        .unwrap()
        .contains("waiting for a countersignature"));
    assert!(
        task["ttlMs"].as_i64().unwrap() > 20_000,
        "outlives the window"
    );
    let id = task["taskId"].as_str().unwrap().to_owned();
    // Durably created before the answer: the API has it.
    assert_eq!(w.api.action(&id).await["state"], "pending_approval");
    approve(&w, &id).await;
    c.go().await;
    let last = c.next("final").await;
    c.finish().await;
    assert_eq!(last["result"]["status"], "completed", "{last}");
    assert_eq!(
        last["result"]["result"]["structuredContent"],
        json!({"sent": true})
    );
    assert_eq!(w.tools.count_for(&id), 1);

    // 2025-11-25 core tasks (raw JSON-RPC: the Python SDK has no task-augmented call).
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "mail.send", "arguments": {"to": "b@example.com"}, "task": {"ttl": 60000}}});
    let (s, v) = post(&w, &[AGENT], call.to_string().as_bytes()).await;
    assert_eq!(s, 200);
    let id = v["result"]["task"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(v["result"]["task"]["status"], "working", "{v}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/list"});
    let (_, v) = post(&w, &[AGENT], list.to_string().as_bytes()).await;
    assert!(
        v["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == id.as_str()),
        "{v}"
    );
    // tasks/result waits, but never past the request budget (6 s here).
    let result =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}});
    let started = std::time::Instant::now();
    let (_, v) = post(&w, &[AGENT], result.to_string().as_bytes()).await;
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_eq!(v["error"]["data"]["status"], "working", "{v}");
    approve(&w, &id).await;
    let (_, v) = post(&w, &[AGENT], result.to_string().as_bytes()).await;
    assert_eq!(
        v["result"]["structuredContent"],
        json!({"sent": true}),
        "{v}"
    );
    assert_eq!(w.tools.count_for(&id), 1);

    // The TypeScript SDK's experimental tasks: callToolStream creates the task (the tool is
    // listed with taskSupport), polls tasks/get at pollInterval, then reads tasks/result.
    let args = windowed_mail();
    let mut c = SdkClient::start_ts(&w, keys::AGENT, "stream", "mail_send", &args);
    assert_eq!(c.next("connected").await["protocol_version"], "2025-11-25");
    c.next("tools").await;
    let created = c.next("created").await;
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["task"]["status"], "working", "{created}");
    approve(&w, &id).await;
    c.go().await;
    let result = loop {
        let v = c.next_any("result").await;
        match v["event"].as_str() {
            Some("status") => assert!(
                ["working", "completed"].contains(&v["task"]["status"].as_str().unwrap()),
                "{v}"
            ),
            Some("result") => break v,
            _ => panic!("{v}"),
        }
    };
    c.finish().await;
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"sent": true}),
        "{result}"
    );
    let calls = w.tools.calls_for(&id);
    assert_eq!(calls.len(), 1, "exactly once");
    let action = w.api.action(&id).await;
    let nb: jiff::Timestamp = action["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls[0].at >= nb, "never before not_before");
}

/// Caught on main before the fix (issue 28, item 12b): `tasks/result` checked the budget, slept,
/// then read the store once more, so a slow store carried its answer past
/// `limits.request_budget` by a read (here a 2 s budget and 1.5 s reads: answered after ~3.3 s).
/// Each read now gets only what is left of the budget, a read slower than the whole budget too.
/// SC-MCP-05, SC-EDGE-07.
#[tokio::test]
async fn sc_mcp_05_tasks_result_answers_within_the_request_budget_on_a_slow_store() {
    let tools = ToolServer::start().await;
    let text =
        world_toml(&tools, "").replacen("request_budget = \"6s\"", "request_budget = \"2s\"", 1);
    let config = Arc::new(Config::from_toml(&text).unwrap());
    let slot: Arc<Mutex<Option<Arc<FaultyStore>>>> = Arc::default();
    let kept = slot.clone();
    let parts = Parts {
        wrap_store: Box::new(move |store| {
            let faulty = Arc::new(FaultyStore::new(store));
            *kept.lock().unwrap() = Some(faulty.clone());
            faulty
        }),
        ..Parts::default()
    };
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start_with(config, &temp_db("mcp-budget"), listen, parts)
        .await
        .unwrap();
    let store = slot.lock().unwrap().clone().unwrap();
    let w = World {
        url: format!("http://{}/mcp", server.addr),
        api: Api::new(server.addr),
        tools,
        server,
    };
    let (_, v) = w
        .api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = v["id"].as_str().unwrap();
    let budget = Duration::from_secs(2);
    let result =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}});
    for read in [Duration::from_millis(1500), Duration::from_millis(2500)] {
        store.slow_loads(Some(read));
        let started = std::time::Instant::now();
        let (_, v) = post(&w, &[AGENT], result.to_string().as_bytes()).await;
        let took = started.elapsed();
        eprintln!("tasks/result with reads of {read:?}: answered after {took:?}");
        assert_eq!(v["error"]["code"], -32000, "{v}");
        assert_eq!(v["error"]["data"]["taskId"], id, "{v}");
        // The budget, plus what answering takes (a margin far below one slow read).
        assert!(
            took < budget + Duration::from_millis(400),
            "reads of {read:?}: answered after {took:?}, past the {budget:?} budget"
        );
    }
    store.slow_loads(None);
}

#[tokio::test]
async fn sc_mcp_05_tasks_cancel_is_the_engines_cancel() {
    let w = world().await;
    let args = json!({"to": "ops@example.com"}).to_string();
    let mut c = SdkClient::start(&w, keys::AGENT, "modern", "cancel", &["mail_send", &args]);
    c.next("connected").await;
    let id = c.next("created").await["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    c.go().await;
    c.next("cancelled").await;
    let last = c.next("final").await;
    c.finish().await;
    assert_eq!(last["result"]["status"], "cancelled", "{last}");
    let action = w.api.action(&id).await;
    assert_eq!(
        (
            action["state"].as_str(),
            action["outcome"]["reason"].as_str()
        ),
        (Some("cancelled"), Some("cancelled"))
    );
    // SC-CAN-01: sealed, so an approval now is refused and the tool never runs.
    let (s, _) = w.api.approve(&id, "sha256:whatever").await;
    assert_eq!(s, 409);
    assert_eq!(w.tools.count_for(&id), 0);
    // The TypeScript SDK's cancelTask (2025-11-25) answers the cancelled task.
    let mut c = SdkClient::start_ts(&w, keys::AGENT, "cancel", "mail_send", &args);
    c.next("connected").await;
    c.next("tools").await;
    let ts_id = c.next("created").await["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    c.go().await;
    assert_eq!(c.next("cancelled").await["task"]["status"], "cancelled");
    assert_eq!(c.next("final").await["task"]["status"], "cancelled");
    c.finish().await;
    assert_eq!(w.api.action(&ts_id).await["state"], "cancelled");
    assert_eq!(w.tools.count_for(&ts_id), 0);
    // 2025-11-25 refuses to cancel a terminal task with -32602.
    let cancel =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"taskId": id}});
    let (_, v) = post(&w, &[AGENT], cancel.to_string().as_bytes()).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

#[tokio::test]
async fn sc_mcp_07_another_agents_or_tenants_task_answers_as_a_missing_one() {
    let w = world().await;
    let (_, v) = w
        .api
        .submit(
            keys::AGENT,
            json!({"tool": "mail.send", "args": {"to": "x@example.com"}}),
        )
        .await;
    let id = v["id"].as_str().unwrap().to_owned();
    let missing = "act_01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let own = once(&w, keys::AGENT, "modern", "get", &[&id]).await;
    assert_eq!(own["result"]["status"], "working", "{own}");
    let mut answers = Vec::new();
    for key in [keys::AGENT_2, keys::OTHER_TENANT_AGENT] {
        for task in [id.as_str(), missing] {
            let v = once(&w, key, "modern", "get", &[task]).await;
            answers.push((v["event"].clone(), v["code"].clone(), v["message"].clone()));
        }
    }
    assert!(answers.iter().all(|a| *a == answers[1]), "{answers:?}");
    assert_eq!(answers[1].1, -32602);
    // countersign_status and tasks/cancel say the same of it.
    let status = json!({"action_id": id});
    let v = once(
        &w,
        keys::AGENT_2,
        "legacy",
        "call",
        &["countersign_status", &status.to_string()],
    )
    .await;
    assert_eq!(v["result"]["structuredContent"]["code"], "not_found", "{v}");
    let cancel =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"taskId": id}});
    let (_, v) = post(
        &w,
        &[("authorization", "Bearer key-agent-2")],
        cancel.to_string().as_bytes(),
    )
    .await;
    assert_eq!(v["error"]["message"], "Task not found");
    // tasks/result neither waits on it nor answers it (the engine's read rule, SC-SEC-01);
    // every endpoint on every store: tests/hostile.rs.
    let result =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": {"taskId": id}});
    let (_, v) = post(
        &w,
        &[("authorization", "Bearer key-agent-2")],
        result.to_string().as_bytes(),
    )
    .await;
    assert_eq!(v["error"]["message"], "Task not found", "{v}");
    assert_eq!(w.api.action(&id).await["state"], "pending_approval");
}

#[tokio::test]
async fn sc_mcp_08_protocol_errors_are_json_rpc_errors_tool_errors_are_results() {
    let w = world().await;
    // An unknown method: 404 on 2026-07-28, 200 on 2025-11-25, -32601 in both.
    let (s, v) = post_modern(&w, "prompts/list", None, json!({})).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (404, Some(-32601)), "{v}");
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"prompts/list"}"#;
    let (s, v) = post(&w, &[AGENT], body).await;
    assert_eq!((s, v["error"]["code"].as_i64()), (200, Some(-32601)), "{v}");
    // An unknown tool is a protocol error (-32602); nothing is recorded.
    let (s, v) = post_modern(
        &w,
        "tools/call",
        Some("nope.tool"),
        json!({"name": "nope.tool", "arguments": {}}),
    )
    .await;
    assert_eq!((s, v["error"]["code"].as_i64()), (200, Some(-32602)), "{v}");
    // A task for a tool that runs at once (2025-11-25, no taskSupport) → -32601.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search.web", "arguments": {}, "task": {}}});
    let (_, v) = post(&w, &[AGENT], body.to_string().as_bytes()).await;
    assert_eq!(v["error"]["code"], -32601, "{v}");
    // Bad arguments are a tool error the model can read.
    let (_, v) = post_modern(
        &w,
        "tools/call",
        Some("mail.send"),
        json!({"name": "mail.send", "arguments": {"countersign_window": "tomorrow"}}),
    )
    .await;
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(
        v["result"]["structuredContent"]["code"],
        "validation_failed"
    );
}

#[tokio::test]
async fn sc_mcp_06_a_downstream_mcp_servers_tool_runs_once_with_the_committed_arguments() {
    let down = Downstream::start().await;
    let flaky = "\n[tenants.acme.tools.\"search.flaky\"]\nexecutor = \"mcp\"\nurl = \"{tool_server}\"\nsecret_env = \"COUNTERSIGN_TEST_TOOL_SECRET\"\ntimeout = \"1s\"\nrecovery = \"retry\"\n";
    let more = flaky.to_owned()
        + &down.tool("search.parcel", "deliver")
        + &down.tool("mail.parcel", "deliver")
        + &down.tool("search.refuse", "refuse");
    let w = world_with(&more).await;
    // allow → runs now on the downstream server: its structuredContent is the result.
    let v = tools_call(&w, "modern", "search_parcel", r#"{"to":"Berlin"}"#).await;
    let r = &v["result"];
    assert_eq!(
        r["structuredContent"],
        json!({"delivered": "Berlin"}),
        "{r}"
    );
    let (_, page) = w.api.get("/v1/actions?limit=1", keys::AGENT).await;
    let id = page["data"][0]["id"].as_str().unwrap().to_owned();
    let calls = down.calls_for(&id);
    assert_eq!(calls.len(), 1, "exactly once");
    let call = &calls[0];
    assert_eq!(call["idempotency_key"], id.as_str());
    assert_eq!(
        call["authorization"],
        format!("Bearer {}", countersign_tests::SECRET)
    );
    assert_eq!(call["body"]["params"]["name"], "deliver");
    assert_eq!(call["body"]["params"]["arguments"], json!({"to": "Berlin"}));
    assert_eq!(
        call["body"]["params"]["_meta"]["io.countersign/action"]["attempt"],
        1
    );
    // isError downstream → failed, naming the kind.
    let v = tools_call(&w, "modern", "search_refuse", r#"{"to":"Mars"}"#).await;
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(
        v["result"]["structuredContent"]["error"]["kind"],
        "tool_error"
    );
    // Countersigned, in a window: once, never before not_before, the arguments as committed.
    let args = json!({"to": "Paris", "countersign_window": {"not_before": in_secs(3), "not_after": in_secs(20)}});
    let v = tools_call(&w, "legacy", "mail_parcel", &args.to_string()).await;
    let id = v["result"]["structuredContent"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    approve(&w, &id).await;
    let sealed = w.api.wait_sealed(&id, 30).await;
    assert_eq!(sealed["state"], "succeeded", "{sealed}");
    assert_eq!(sealed["outcome"]["result"], json!({"delivered": "Paris"}));
    let calls = down.calls_for(&id);
    assert_eq!(calls.len(), 1, "exactly once");
    let nb: jiff::Timestamp = sealed["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        calls[0]["at"].as_f64().unwrap() >= nb.as_millisecond() as f64 / 1000.0,
        "never before not_before"
    );
    assert_eq!(
        calls[0]["body"]["params"]["arguments"],
        json!({"to": "Paris"})
    );

    // A 5xx is retried per `recovery` (here 3 attempts), with the same arguments every time.
    w.tools.behave(Behaviour {
        status: 503,
        ..Behaviour::default()
    });
    let v = tools_call(&w, "modern", "search_flaky", r#"{"q":"x"}"#).await;
    let id = v["result"]["structuredContent"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let sealed = w.api.wait_sealed(&id, 30).await;
    assert_eq!(sealed["state"], "failed", "{sealed}");
    assert_eq!(sealed["outcome"]["error"]["status"], 503);
    let attempts: Vec<_> = w
        .tools
        .received()
        .into_iter()
        .filter(|r| r.body["params"]["_meta"]["io.countersign/action"]["action_id"] == id.as_str())
        .collect();
    assert_eq!(attempts.len(), 3, "three attempts");
    for (n, a) in attempts.iter().enumerate() {
        assert_eq!(a.idempotency_key.as_deref(), Some(id.as_str()));
        assert_eq!(a.body["params"]["arguments"], json!({"q": "x"}));
        assert_eq!(
            a.body["params"]["_meta"]["io.countersign/action"]["attempt"],
            n as u64 + 1
        );
    }
}

/// SC-MCP-06 with SC-RES-04: `tools import` brings the downstream tool's description and schema
/// into the catalog, where they are part of its fingerprint. The same server imports the same
/// TOML (so a re-import alone changes nothing); once the downstream tool changes (same URL, new
/// schema) and is re-imported, an approved call waiting for its window is sealed
/// `catalog_changed` and never reaches the changed tool.
#[tokio::test]
async fn sc_mcp_06_imported_downstream_schema_is_fingerprinted_a_change_seals_catalog_changed() {
    use countersign::tools::{import, mcp};
    let down = Downstream::start().await;
    let spec = import::Import {
        url: &down.url(),
        tenant: "acme",
        prefix: "mail.",
        secret_env: countersign_tests::SECRET_ENV,
    };
    let token = Some(countersign_tests::SECRET);
    let refused = mcp::list_tools(&down.url(), None).await;
    assert!(refused.unwrap_err().contains("401"), "the token is sent");
    let listed = mcp::list_tools(&down.url(), token).await.unwrap();
    let (before, warnings) = import::catalog_toml(&spec, &listed);
    assert!(warnings.is_empty(), "{warnings:?}");
    let again = mcp::list_tools(&down.url(), token).await.unwrap();
    assert_eq!(
        import::catalog_toml(&spec, &again).0,
        before,
        "deterministic"
    );

    let tools = ToolServer::start().await;
    tools.behave(Behaviour::default());
    let db = temp_db("mcp-import");
    let text = world_toml(&tools, &before);
    let w = World::start(tools, &text, &db).await;
    // Listed to MCP clients with the downstream server's own description and schema.
    let (_, v) = post_modern(&w, "tools/list", None, json!({})).await;
    let entry = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mail_deliver")
        .cloned()
        .unwrap_or_default();
    assert!(
        entry["description"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Deliver a parcel."),
        "{entry}"
    );
    assert_eq!(entry["inputSchema"]["required"], json!(["to"]), "{entry}");
    assert_eq!(entry["inputSchema"]["properties"]["to"]["type"], "string");

    // Countersigned for a window ahead (wide: the SDK client starts a Python first), then the
    // server stops before the window opens.
    let not_before = in_secs(20);
    let args = json!({"to": "Paris", "countersign_window": {"not_before": not_before, "not_after": in_secs(120)}});
    let v = tools_call(&w, "legacy", "mail_deliver", &args.to_string()).await;
    let id = v["result"]["structuredContent"]["action_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned();
    approve(&w, &id).await;
    assert_eq!(w.api.action(&id).await["state"], "approved");
    let World { tools, server, .. } = w;
    server.shutdown().await.unwrap();
    let opens: jiff::Timestamp = not_before.parse().unwrap();
    assert!(jiff::Timestamp::now() < opens, "stopped before the window");

    // The downstream tool changes; the operator re-imports and restarts on the same store.
    let down = down.change().await;
    let changed = mcp::list_tools(&down.url(), token).await.unwrap();
    let (after, _) = import::catalog_toml(&spec, &changed);
    assert_ne!(after, before, "the new schema is in the entry");
    let text = world_toml(&tools, &after);
    let w = World::start(tools, &text, &db).await;
    let sealed = w.api.wait_sealed(&id, 60).await;
    assert_eq!(sealed["outcome"]["reason"], "catalog_changed", "{sealed}");
    assert!(
        down.calls_for(&id).is_empty(),
        "never sent to the changed tool"
    );
}
