//! SC-MCP-09 and SC-MCP-11, what `tools/list` tells a model: names every major model API
//! accepts, and descriptions and schemas that say what the policy does with a call, rule by rule.

use super::{once, post_modern, tools_call, world, world_with, world_with_rules, World};
use countersign_tests::{in_secs, keys};
use serde_json::{json, Value};

/// `^[a-zA-Z0-9_-]{1,64}$`: the tool names OpenAI's and Anthropic's APIs accept.
pub(super) fn model_api_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One string field of each object of an array (a listing's names, a page's tools).
pub(super) fn field<'v>(items: &'v Value, name: &str) -> Vec<&'v str> {
    let items = items
        .as_array()
        .unwrap_or_else(|| panic!("an array: {items}"));
    items.iter().map(|t| t[name].as_str().unwrap()).collect()
}

/// Caught on main (issue 30, item 1): every listed name had a dot (`mail.send`), which OpenAI's
/// and Anthropic's APIs refuse, so an agent framework that passes MCP names through (the Agents
/// SDK, LangChain) failed on its first model call. Listed names are model-API names now; a call
/// by the listed name or by the catalog name is the same call of the catalog's tool, and the
/// action keeps the catalog name.
#[tokio::test]
async fn sc_mcp_09_listed_names_are_model_api_names_and_call_the_catalog_tool() {
    let w = world().await;
    // sc_mcp_02 holds the exact names; each is a model-API name, in both revisions.
    for mode in ["modern", "legacy"] {
        let v = once(&w, keys::AGENT, mode, "list", &[]).await;
        let names = field(&v["tools"], "name");
        assert!(names.iter().all(|n| model_api_name(n)), "{mode}: {names:?}");
        assert!(names.contains(&"search_web"), "{mode}: {names:?}");
    }
    for (mode, name) in [
        ("modern", "search_web"),
        ("legacy", "search_web"),
        // The catalog name still works, for clients written before the names changed.
        ("modern", "search.web"),
    ] {
        let v = tools_call(&w, mode, name, r#"{"q":"rust"}"#).await;
        assert_eq!(
            v["result"]["structuredContent"],
            json!({"sent": true}),
            "{v}"
        );
    }
    let (_, page) = w.api.get("/v1/actions?limit=10", keys::AGENT).await;
    assert_eq!(
        field(&page["data"], "tool"),
        ["search.web"; 3],
        "the action keeps the catalog name"
    );
    let ran = w.tools.received();
    assert_eq!(ran.len(), 3);
    assert!(
        ran.iter().all(|r| r.body["tool"] == "search.web"),
        "{ran:?}"
    );
}

/// SC-MCP-09: an explicit `mcp_name` is the listed name and calls the tool; the catalog name
/// still does.
#[tokio::test]
async fn sc_mcp_09_an_explicit_mcp_name_is_listed_and_called() {
    let named = "[tenants.acme.tools.\"search.named\"]\nexecutor = \"builtin.echo\"\nmcp_name = \"findThings\"\n";
    let w = world_with(named).await;
    let (_, v) = post_modern(&w, "tools/list", None, json!({})).await;
    let names = field(&v["result"]["tools"], "name");
    assert!(names.contains(&"findThings"), "{names:?}");
    assert!(!names.contains(&"search_named"), "{names:?}");
    for name in ["findThings", "search.named"] {
        let (_, v) = post_modern(
            &w,
            "tools/call",
            Some(name),
            json!({"name": name, "arguments": {"q": "x"}}),
        )
        .await;
        assert_eq!(
            v["result"]["structuredContent"]["echo"],
            json!({"q": "x"}),
            "{v}"
        );
    }
    // The other tool's listed name is not this one's.
    let (_, v) = post_modern(
        &w,
        "tools/call",
        Some("search_named"),
        json!({"name": "search_named", "arguments": {}}),
    )
    .await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

/// Rules before the shared ones (`mail.*` countersigned, `report.*` scheduled, `search.*`
/// allowed): a condition that lets some mail run at once, a tool a condition refuses, and one
/// that is countersigned above an amount and scheduled below it.
pub(super) const RULES: &str = r#"  { name = "mail inside acme", tool = "mail.send", when = "has(args.to) && args.to.endsWith('@acme.example')", decision = "allow" },
  { tool = "deploy.service", when = "args.env == 'prod'", decision = "deny" },
  { tool = "deploy.service", decision = "allow" },
  { tool = "pay.transfer", when = "args.amount > 1000", decision = "require_approval" },
  { tool = "pay.transfer", decision = "schedule" },"#;

/// Their tools, with closed schemas (as a strict function schema needs them).
pub(super) const RULE_TOOLS: &str = r#"[tenants.acme.tools."deploy.service"]
executor = "builtin.echo"
input_schema = { type = "object", properties = { env = { type = "string" } }, required = ["env"], additionalProperties = false }

[tenants.acme.tools."pay.transfer"]
executor = "builtin.echo"
input_schema = { type = "object", properties = { amount = { type = "number" } }, required = ["amount"], additionalProperties = false }
"#;

/// The listed tool for a catalog name (listed under its MCP name, or on main its catalog name).
fn listed(tools: &Value, catalog: &str) -> Value {
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == catalog || t["name"] == catalog.replace('.', "_"))
        .cloned()
        .unwrap_or_else(|| panic!("{catalog} is listed: {tools}"))
}

fn description(tool: &Value) -> &str {
    tool["description"].as_str().unwrap()
}

async fn call(w: &World, name: &str, args: Value) -> Value {
    let (_, v) = post_modern(
        w,
        "tools/call",
        Some(name),
        json!({"name": name, "arguments": args}),
    )
    .await;
    v["result"].clone()
}

/// Caught on main (issue 30, item 3): a tool's description and schema followed only the first
/// rule that could defer it. `mail.send` told the model that each call is countersigned and to
/// pass `countersign_window` to run later, though mail inside acme runs at once (and a window
/// that opens later refuses it); `report.build` called the window optional though its rule
/// needs one, and its error said "give schedule"; `deploy.service` said nothing of the calls a
/// condition refuses. Descriptions and schemas now follow every rule, in the gate's order.
#[tokio::test]
async fn sc_mcp_11_descriptions_and_schemas_follow_every_rule_of_the_tool() {
    let w = world_with_rules(RULES, RULE_TOOLS).await;
    let (_, v) = post_modern(&w, "tools/list", None, json!({})).await;
    let tools = &v["result"]["tools"];

    let mail = listed(tools, "mail.send");
    let text = description(&mail);
    for says in [
        "mail inside acme",
        "runs at once",
        "otherwise",
        "countersign",
    ] {
        assert!(text.contains(says), "mail.send says {says:?}: {text}");
    }
    assert!(!text.contains("each call"), "not every call waits: {text}");
    let window = &mail["inputSchema"]["properties"]["countersign_window"];
    assert!(
        window.is_object(),
        "a countersigned call may take a window: {mail}"
    );
    assert!(mail["inputSchema"]["required"].is_null(), "{mail}");

    let report = listed(tools, "report.build");
    assert_eq!(
        report["inputSchema"]["required"],
        json!(["countersign_window"]),
        "every call needs its window: {report}"
    );
    let window = &report["inputSchema"]["properties"]["countersign_window"];
    assert!(
        !window["description"].as_str().unwrap().contains("Optional"),
        "{window}"
    );

    let deploy = listed(tools, "deploy.service");
    let text = description(&deploy);
    for says in ["args.env == 'prod'", "refused", "otherwise", "runs at once"] {
        assert!(text.contains(says), "deploy.service says {says:?}: {text}");
    }
    assert!(
        deploy["inputSchema"]["properties"]["countersign_window"].is_null(),
        "it never waits: {deploy}"
    );

    let pay = listed(tools, "pay.transfer");
    let text = description(&pay);
    for says in ["args.amount > 1000", "countersign", "otherwise", "window"] {
        assert!(text.contains(says), "pay.transfer says {says:?}: {text}");
    }
    assert_eq!(pay["inputSchema"]["required"], json!(["amount"]), "{pay}");
    let window = &pay["inputSchema"]["properties"]["countersign_window"];
    assert_eq!(window["type"], json!(["object", "null"]), "{pay}");

    // What the descriptions say is what happens.
    let r = call(&w, "report.build", json!({})).await;
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["param"], "countersign_window", "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("countersign_window") && !text.contains("schedule"),
        "the error names the MCP argument: {text}"
    );
    let r = call(&w, "mail.send", json!({"to": "ops@acme.example"})).await;
    assert_eq!(
        r["structuredContent"],
        json!({"sent": true}),
        "runs at once: {r}"
    );
    let later = json!({"not_before": in_secs(600), "not_after": in_secs(1200)});
    let r = call(
        &w,
        "mail.send",
        json!({"to": "ops@acme.example", "countersign_window": later}),
    )
    .await;
    assert_eq!(
        r["structuredContent"]["code"], "schedule_needs_approval",
        "{r}"
    );
    let r = call(&w, "mail.send", json!({"to": "ops@example.com"})).await;
    assert_eq!(r["structuredContent"]["state"], "pending_approval", "{r}");
    let r = call(&w, "deploy.service", json!({"env": "prod"})).await;
    assert_eq!(r["structuredContent"]["code"], "denied", "{r}");
}
