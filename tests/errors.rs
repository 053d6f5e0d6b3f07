//! Errors that say what went wrong (issue 16, item 7), over real HTTP against the local server:
//! an unknown route is `route_not_found`, distinct from a resource that is `not_found`, and each
//! message names what was not found.

use countersign::{boot::embedded::Server, config::Config};
use countersign_tests::{config_toml, keys, temp_db, Api, ToolServer};
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;

async fn server() -> (Api, Server, ToolServer) {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let server = Server::start(config, &temp_db("errors"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (Api::new(server.addr), server, tools)
}

/// method, path, key, the code answered, what its message names.
type Case<'a> = (Method, &'a str, Option<&'a str>, &'a str, &'a [&'a str]);

fn code_and_message(v: &Value) -> (&str, &str) {
    (
        v["error"]["code"].as_str().unwrap_or_default(),
        v["error"]["message"].as_str().unwrap_or_default(),
    )
}

/// Caught on main: every one of these answered `404 not_found` "no such action" — an unknown
/// route, a missing page file, an unknown notification id, a stop that is not there.
#[tokio::test]
async fn issue16_each_404_names_what_was_not_found() {
    let (api, _server, _tools) = server().await;
    let cases: &[Case] = &[
        (
            Method::GET,
            "/v1/nothing",
            Some(keys::AGENT),
            "route_not_found",
            &["GET /v1/nothing"],
        ),
        (
            Method::POST,
            "/v2/actions",
            Some(keys::AGENT),
            "route_not_found",
            &["POST /v2/actions"],
        ),
        // Routing comes before the key: a wrong address says so, with or without one.
        (
            Method::GET,
            "/nothing/here",
            None,
            "route_not_found",
            &["/nothing/here"],
        ),
        (
            Method::GET,
            "/ui/app.js.map",
            None,
            "not_found",
            &["app.js.map"],
        ),
        (
            Method::POST,
            "/v1/notifications/ntf_nope/redeliver",
            Some(keys::ADMIN),
            "not_found",
            &["notification", "ntf_nope"],
        ),
        (
            Method::POST,
            "/v1/notifications/ntf_01J00000000000000000000000_7/redeliver",
            Some(keys::ADMIN),
            "not_found",
            &["notification"],
        ),
        (
            Method::DELETE,
            "/v1/stops/agent-1",
            Some(keys::ADMIN),
            "not_found",
            &["stop", "agent-1"],
        ),
        (
            Method::DELETE,
            "/v1/stops/*",
            Some(keys::ADMIN),
            "not_found",
            &["stop", "tenant"],
        ),
        (
            Method::GET,
            "/v1/actions/act_01J00000000000000000000000",
            Some(keys::AGENT),
            "not_found",
            &["no such action"],
        ),
    ];
    for (method, path, key, code, names) in cases {
        let (status, v, _) = api.send(method.clone(), path, *key, None, &[]).await;
        let (got, message) = code_and_message(&v);
        assert_eq!((status, got), (404, *code), "{method} {path}: {v}");
        for name in *names {
            assert!(
                message.contains(name),
                "{method} {path}: {message:?} names {name:?}"
            );
        }
        if !names.contains(&"no such action") {
            assert!(
                !message.contains("no such action"),
                "{method} {path}: {message:?}"
            );
        }
    }
}

/// Caught on main: a second `DELETE /v1/stops/<agent>` answered "no such action".
#[tokio::test]
async fn issue16_a_second_lift_of_a_stop_says_there_is_no_stop() {
    let (api, _server, _tools) = server().await;
    let (s, v) = api
        .post("/v1/stops", keys::ADMIN, json!({"agent_id": "agent-1"}))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(api.delete("/v1/stops/agent-1", keys::ADMIN).await, 204);
    let (status, v, _) = api
        .send(
            Method::DELETE,
            "/v1/stops/agent-1",
            Some(keys::ADMIN),
            None,
            &[],
        )
        .await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(
        code_and_message(&v),
        ("not_found", "no stop for agent agent-1")
    );
}

/// Caught on main: `/favicon.ico` answered the API's "no such action" JSON. Browsers ask for it
/// on every page load; it is a quiet 404 with no body, cacheable, so they stop asking.
#[tokio::test]
async fn issue16_the_favicon_is_a_quiet_404() {
    let (api, _server, _tools) = server().await;
    let (status, v, headers) = api.send(Method::GET, "/favicon.ico", None, None, &[]).await;
    assert_eq!((status, &v), (404, &Value::Null));
    let cache = headers
        .get("cache-control")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    assert!(cache.contains("max-age"), "{cache:?}");
}

/// Caught on main: "a agent key cannot approve actions", "a approver key cannot submit actions".
#[tokio::test]
async fn issue16_forbidden_messages_say_an_agent_key() {
    let (api, _server, _tools) = server().await;
    let missing = "/v1/actions/act_01J00000000000000000000000";
    let cases = [
        (
            "/v1/actions".to_owned(),
            keys::APPROVER,
            json!({"tool": "mail.send", "args": {}}),
            "an approver key cannot submit actions",
        ),
        (
            format!("{missing}/approve"),
            keys::AGENT,
            json!({"context_digest": "sha256:00"}),
            "an agent key cannot approve actions",
        ),
        (
            "/v1/stops".to_owned(),
            keys::APPROVER,
            json!({}),
            "an approver key cannot set stops",
        ),
        (
            format!("{missing}/deny"),
            keys::ADMIN,
            json!({"reason": "no"}),
            "an admin key cannot deny actions",
        ),
    ];
    for (path, key, body, message) in cases {
        let (s, v) = api.post(&path, key, body).await;
        assert_eq!(s, 403, "{path}: {v}");
        assert_eq!(code_and_message(&v), ("forbidden", message), "{path}");
    }
}

/// The methods `path` (a row of `api::ROUTES`) is served with, as an `Allow` header lists them
/// (GET brings HEAD).
fn allowed(path: &str) -> std::collections::BTreeSet<String> {
    let mut methods = std::collections::BTreeSet::new();
    for (method, p, _) in countersign::api::ROUTES {
        if *p == path {
            methods.insert(method.to_string());
            if *method == "GET" {
                methods.insert("HEAD".into());
            }
        }
    }
    methods
}

/// Caught on main (issue 28, item 11): a wrong method on any route answered `400
/// validation_failed param=method`, and `GET /mcp` — which a Streamable HTTP client sends to open
/// its SSE stream, expecting 405 when there is none — answered 400 (Claude Code logged "Failed to
/// open SSE stream: Bad Request" on every connection). Now `405 method_not_allowed` with `Allow`
/// naming the route's methods, before the key is looked at, as a wrong address is.
#[tokio::test]
async fn issue28_a_wrong_method_is_405_with_allow() {
    let (api, _server, _tools) = server().await;
    // GET /mcp as an MCP client opens its stream: no key needed to learn there is none.
    let (status, v, headers) = api
        .send(
            Method::GET,
            "/mcp",
            None,
            None,
            &[("accept", "text/event-stream")],
        )
        .await;
    assert_eq!(status, 405, "{v}");
    assert_eq!(headers["allow"], "POST");
    assert_eq!(v["error"]["code"], "method_not_allowed", "{v}");
    // Every route, with a method none of them serves, and with a key or without.
    for (_, path, _) in countersign::api::ROUTES {
        let concrete = path
            .replace("{id}", "act_01J00000000000000000000000")
            .replace("{scope}", "agent-1")
            .replace("{asset}", "index.html");
        for key in [Some(keys::ADMIN), None] {
            let (status, v, headers) = api.send(Method::PUT, &concrete, key, None, &[]).await;
            assert_eq!(status, 405, "PUT {path}: {v}");
            let (code, message) = code_and_message(&v);
            assert_eq!(code, "method_not_allowed", "PUT {path}: {v}");
            assert!(
                message.contains("PUT") && message.contains(&concrete),
                "PUT {path}: {message:?} names the method and the path"
            );
            let allow: std::collections::BTreeSet<String> = headers["allow"]
                .to_str()
                .unwrap()
                .split(',')
                .map(|m| m.trim().to_owned())
                .collect();
            assert_eq!(allow, allowed(path), "PUT {path}");
        }
    }
}
