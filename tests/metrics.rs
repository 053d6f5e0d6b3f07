//! SC-OPS-01: the local server's metrics over real HTTP (`--metrics-listen`), counted from real
//! lifecycles — an allowed call that runs, an approval denied, one cancelled — and parsed as the
//! Prometheus text format. One test in its own binary: the recorder is process-wide.

use countersign::{config::Config, embedded::Server, telemetry};
use countersign_tests::{config_toml, keys, temp_db, Api, ToolServer};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

/// `name{labels}` → value, and `name` → its `# TYPE`; every line must parse.
fn parse(text: &str) -> (HashMap<String, f64>, HashMap<String, String>) {
    let (mut samples, mut types) = (HashMap::new(), HashMap::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            types.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample is `series value`");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value of {line:?}"));
        samples.insert(series.to_owned(), value);
    }
    (samples, types)
}

#[tokio::test]
async fn sc_ops_01_lifecycles_are_counted_and_served_as_prometheus_text() {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let handle = telemetry::prometheus::install();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_url = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(telemetry::prometheus::serve(listener, handle));
    let server = Server::start(config, &temp_db("metrics"), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = Api::new(server.addr);

    let (s, ran) = api
        .submit(
            keys::AGENT,
            json!({"tool": "search.web", "args": {"q": "x"}}),
        )
        .await;
    assert_eq!(s, 200, "{ran}");
    let ran = api.wait_sealed(ran["id"].as_str().unwrap(), 10).await;
    assert_eq!(ran["state"], "succeeded", "{ran}");
    let (_, denied) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let id = denied["id"].as_str().unwrap();
    let deny = format!("/v1/actions/{id}/deny");
    let (s, r) = api
        .post(&deny, keys::APPROVER, json!({"reason": "not today"}))
        .await;
    assert_eq!(s, 200, "{r}");
    let (_, cancelled) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let (s, r) = api
        .cancel(cancelled["id"].as_str().unwrap(), keys::AGENT)
        .await;
    assert_eq!(s, 200, "{r}");

    let answer = reqwest::get(&metrics_url).await.unwrap();
    assert_eq!(answer.status(), 200);
    let content_type = answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = answer.text().await.unwrap();
    let (samples, types) = parse(&text);
    let value = |series: &str| {
        samples
            .get(series)
            .copied()
            .unwrap_or_else(|| panic!("{series} missing in:\n{text}"))
    };

    assert_eq!(value(r#"actions_submitted{decision="allow"}"#), 1.0);
    assert_eq!(
        value(r#"actions_submitted{decision="require_approval"}"#),
        2.0
    );
    assert_eq!(
        value(r#"actions_sealed{state="succeeded",reason="none"}"#),
        1.0
    );
    // An approver's own words never become a label.
    assert_eq!(
        value(r#"actions_sealed{state="denied",reason="approver_reason"}"#),
        1.0
    );
    assert_eq!(
        value(r#"actions_sealed{state="cancelled",reason="cancelled"}"#),
        1.0
    );
    assert!(!text.contains("not today"));
    assert_eq!(value(r#"tool_outcomes{outcome="succeeded"}"#), 1.0);
    assert_eq!(value("tool_attempt_seconds_count"), 1.0);
    assert!(value("tool_attempt_seconds_sum") > 0.0);
    // The allowed call was claimed once, right when it was due.
    assert_eq!(value("wake_lateness_seconds_count"), 1.0);
    assert!(value("wake_lateness_seconds_sum") < 5.0);
    assert_eq!(value(r#"transitions{to="executing"}"#), 1.0);
    assert_eq!(value(r#"transitions{to="pending_approval"}"#), 2.0);
    for histogram in ["tool_attempt_seconds", "wake_lateness_seconds"] {
        assert_eq!(types[histogram], "histogram", "{histogram}");
    }
    for counter in [
        "actions_submitted",
        "actions_sealed",
        "transitions",
        "tool_outcomes",
    ] {
        assert_eq!(types[counter], "counter", "{counter}");
    }
    // Every name served is one docs/operations.md documents.
    let documented = include_str!("../docs/operations.md");
    for name in types.keys() {
        assert!(
            documented.contains(&format!("`{name}`")),
            "{name} is not in docs/operations.md"
        );
    }
}
