//! SC-OPS-01: the local server's metrics over real HTTP (`--metrics-listen`), counted from real
//! lifecycles — an allowed call that runs, an approval denied, one cancelled — and parsed as the
//! Prometheus text format. One test in its own binary: the recorder is process-wide.

use countersign::{
    boot::embedded::Server,
    config::Config,
    domain::{
        policy::{Mode, Rule},
        Decision,
    },
    telemetry,
};
use countersign_tests::{config_toml, keys, temp_db, Api, ToolServer};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

struct Parsed {
    samples: HashMap<String, f64>,
    /// Histogram name → (observations, buckets).
    histograms: HashMap<String, (f64, usize)>,
    /// Every metric with a `# HELP` line.
    described: Vec<String>,
}

/// The scrape, parsed by a Prometheus text-format library: `name{k="v",…}` (labels sorted)
/// → value, and each histogram's name → its `_count`/`_sum` and buckets.
fn parse(text: &str) -> Parsed {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("the Prometheus text format");
    let described = scrape.docs.keys().cloned().collect();
    let (mut samples, mut histograms) = (HashMap::new(), HashMap::new());
    for s in scrape.samples {
        let mut labels: Vec<_> = s
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        labels.sort();
        let series = match labels.is_empty() {
            true => s.metric.clone(),
            false => format!("{}{{{}}}", s.metric, labels.join(",")),
        };
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => {
                samples.insert(series, v);
            }
            prometheus_parse::Value::Histogram(buckets) => {
                let observed = buckets.iter().map(|b| b.count).fold(0.0, f64::max);
                histograms.insert(s.metric, (observed, buckets.len()));
            }
            prometheus_parse::Value::Summary(_) => {
                panic!("{} is a summary, not a histogram", s.metric)
            }
        }
    }
    Parsed {
        samples,
        histograms,
        described,
    }
}

#[tokio::test]
async fn sc_ops_01_lifecycles_are_counted_and_served_as_prometheus_text() {
    let tools = ToolServer::start().await;
    let mut config = Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap();
    // A rule in shadow before the one that allows searches (SC-GR-21).
    let shadow = Rule::new("search.*", Decision::Deny, None).in_mode(Mode::Shadow);
    let acme = config.tenants.get_mut("acme").unwrap();
    acme.policy.insert(0, shadow);
    let config = Arc::new(config);
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
    // One more denied, in a batch (SC-GR-20).
    let (_, batched) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    let decisions =
        json!({"decisions": [{"id": batched["id"], "decision": "deny", "reason": "no"}]});
    let (s, r) = api.post("/v1/decisions", keys::APPROVER, decisions).await;
    assert_eq!((s, r["taken"].as_u64()), (200, Some(1)), "{r}");
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
    let parsed = parse(&text);
    let value = |series: &str| {
        parsed
            .samples
            .get(series)
            .copied()
            .unwrap_or_else(|| panic!("{series} missing in:\n{text}"))
    };
    let observed = |histogram: &str| {
        let (n, buckets) = parsed.histograms[histogram];
        assert!(buckets >= 10, "{histogram} has its buckets: {text}");
        n
    };

    assert_eq!(value(r#"actions_submitted{decision="allow"}"#), 1.0);
    assert_eq!(
        value(r#"actions_submitted{decision="require_approval"}"#),
        3.0
    );
    // SC-GR-21: the shadow rule would have denied the search the policy allowed.
    assert_eq!(
        value(r#"shadow_decisions{decision="deny",enforced="allow",rule="search.*"}"#),
        1.0
    );
    // SC-GR-20, SC-GR-22: the batch's decision, and each person's time to decide.
    assert_eq!(
        value(r#"batch_decisions{decision="deny",outcome="taken"}"#),
        1.0
    );
    assert_eq!(observed("decision_seconds"), 2.0);
    assert_eq!(
        value(r#"actions_sealed{reason="none",state="succeeded"}"#),
        1.0
    );
    // An approver's own words never become a label.
    assert_eq!(
        value(r#"actions_sealed{reason="approver_reason",state="denied"}"#),
        2.0
    );
    assert_eq!(
        value(r#"actions_sealed{reason="cancelled",state="cancelled"}"#),
        1.0
    );
    assert!(!text.contains("not today"));
    assert_eq!(value(r#"tool_outcomes{outcome="succeeded"}"#), 1.0);
    assert_eq!(observed("tool_attempt_seconds"), 1.0);
    // The allowed call was claimed once, right when it was due.
    assert_eq!(observed("wake_lateness_seconds"), 1.0);
    assert_eq!(value(r#"transitions{to="executing"}"#), 1.0);
    assert_eq!(value(r#"transitions{to="pending_approval"}"#), 3.0);
    // Every name served is one docs/operations.md documents.
    let documented = include_str!("../docs/operations.md");
    assert!(parsed.described.len() >= 8, "{text}");
    for name in &parsed.described {
        assert!(
            documented.contains(&format!("`{name}`")),
            "{name} is not in docs/operations.md"
        );
    }
}
