//! The Lambda boundary. The compiled function binaries under a local Lambda Runtime API
//! (`cargo lambda watch`), configured only through their environment, invoked over HTTP like
//! Lambda invokes them: LocalStack cannot execute Lambda without Docker; this proves the
//! binaries' wiring (env → clients → engine → handler) that the in-process tests bypass. And
//! which resume errors fail an invocation (so that it is delivered again) and which are answered.
//!
//! Needs cargo-lambda: `bash localstack/install-cargo-lambda.sh` (found on `PATH`, in
//! `$COUNTERSIGN_CACHE/bin` or `~/.cache/countersign/bin`, or at `$CARGO_LAMBDA`).

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_support::{AwsWorld, RESUME_ARN, ROLE_ARN};
use countersign::{
    boot::aws::{self, ResumeEvent},
    store::dynamodb::DynamoStore,
    tools::Executors,
    Engine,
};
use countersign_tests::faults::{Fault, FaultyStore, Gate, Matching};
use countersign_tests::{keys, RecordingWaker, SECRET, SECRET_ENV};
use jiff::{SignedDuration, Timestamp};
use lambda_http::lambda_runtime::Diagnostic;
use serde_json::{json, Value};
use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

/// `cargo-lambda`'s executable, or a clear failure.
fn cargo_lambda() -> PathBuf {
    let cache = std::env::var("COUNTERSIGN_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/countersign")
        });
    let path = std::env::var("PATH").unwrap_or_default();
    let candidates = std::env::var("CARGO_LAMBDA")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            path.split(':')
                .map(|d| PathBuf::from(d).join("cargo-lambda")),
        )
        .chain([cache.join("bin/cargo-lambda")]);
    for c in candidates {
        if c.is_file() {
            return c;
        }
    }
    panic!("cargo-lambda not found: run `bash localstack/install-cargo-lambda.sh` (or set CARGO_LAMBDA)")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops `cargo lambda watch` (and the functions it started: its process group) on drop.
struct Watch(Child);

impl Drop for Watch {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        // The negative pid addresses the group `process_group(0)` gave it.
        let _ = Command::new("kill")
            .arg("--")
            .arg(format!("-{pid}"))
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every CloudWatch EMF document a function wrote to its log (one JSON object a line, holding
/// `_aws`), whatever the runtime printed around it.
fn emf_documents(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            line.find("{\"_aws\"")
                .or_else(|| line.find('{'))
                .map(|at| &line[at..])
        })
        .filter_map(|json| serde_json::from_str::<Value>(json).ok())
        .filter(|doc| doc.get("_aws").is_some())
        .collect()
}

/// Where the functions under `watch` read their configuration document.
enum Source {
    /// `COUNTERSIGN_CONFIG`: the document itself.
    Inline,
    /// `COUNTERSIGN_CONFIG_SSM`: its path in SSM Parameter Store, as the template sets it
    /// (SC-OPS-03), the document in one String parameter under it.
    Ssm,
}

/// The functions under `cargo lambda watch` on `port`, configured as the template configures
/// them, with the world's table, schedule group and tools; its log file.
async fn watch(
    cargo_lambda: &std::path::Path,
    w: &AwsWorld,
    port: u16,
    source: Source,
) -> (Watch, PathBuf) {
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let config = countersign_tests::config_toml(&w.tools, "1m", "5s");
    let (variable, value) = match source {
        Source::Inline => ("COUNTERSIGN_CONFIG", config),
        Source::Ssm => {
            let path = format!("/countersign/{}/config", aws_support::unique("binary"));
            aws_sdk_ssm::Client::new(&w.sdk)
                .put_parameter()
                .name(format!("{path}/00"))
                .value(config)
                .r#type(aws_sdk_ssm::types::ParameterType::String)
                .send()
                .await
                .expect("PutParameter");
            ("COUNTERSIGN_CONFIG_SSM", path)
        }
    };
    let log = std::env::temp_dir().join(format!("countersign-cargo-lambda-{port}.log"));
    let mut cmd = Command::new(cargo_lambda);
    cmd.current_dir(workspace)
        .args([
            "lambda",
            "watch",
            "--ignore-changes",
            "--invoke-address",
            "127.0.0.1",
        ])
        .args(["--invoke-port", &port.to_string(), "--timeout", "900"])
        .env("COUNTERSIGN_TABLE", &w.table)
        .env("COUNTERSIGN_SCHEDULE_GROUP", &w.group)
        .env("COUNTERSIGN_RESUME_ARN", RESUME_ARN)
        .env("COUNTERSIGN_SCHEDULER_ROLE_ARN", ROLE_ARN)
        .env(variable, &value)
        // As infra/template.yaml sets it for every function (tests/infra_template.rs).
        .env(aws::HTTP_ENV.0, aws::HTTP_ENV.1)
        .env(SECRET_ENV, SECRET)
        .env("AWS_ENDPOINT_URL", aws_support::endpoint())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(log.with_extension("err")).unwrap());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    (Watch(cmd.spawn().expect("cargo lambda watch starts")), log)
}

async fn invoke(port: u16, function: &str, event: &Value) -> (u16, Value) {
    let url = format!("http://127.0.0.1:{port}/2015-03-31/functions/{function}/invocations");
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        // The first invoke builds the function; connection errors mean the server is not up yet.
        match reqwest::Client::new()
            .post(&url)
            .json(event)
            .timeout(Duration::from_secs(900))
            .send()
            .await
        {
            Ok(r) => {
                let status = r.status().as_u16();
                let text = r.text().await.unwrap();
                return (
                    status,
                    serde_json::from_str(&text).unwrap_or(Value::String(text)),
                );
            }
            Err(e) if Instant::now() < deadline && e.is_connect() => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("invoking {function}: {e}"),
        }
    }
}

/// The `resume` and `intake` binaries under `cargo lambda watch`: a wake's input runs the
/// committed call (SC-RES-07), the sweep event answers its report, a foreign event is an
/// invocation error, and an API Gateway v2 event reads the action (config from env only).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compiled_functions_run_under_a_local_lambda_runtime() {
    let cargo_lambda = cargo_lambda();
    let w = AwsWorld::new("binary").await;
    // A ticket due in 2 s (real time: the binaries use the system clock), armed by the engine.
    let body = json!({
        "tool": "report.build",
        "args": {"quarter": "Q4"},
        "schedule": {"not_before": w.at(2), "not_after": w.at(600)}
    });
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(submitted.status, 201, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let input = w.wake_input(&id).await;

    let port = free_port();
    let (_watch, log) = watch(&cargo_lambda, &w, port, Source::Inline).await;

    let started = Instant::now();
    let wait = (Timestamp::now()
        .duration_until(wake_due(&submitted.body))
        .as_millis()
        .max(0) as u64)
        + 1500;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let (status, answer) = invoke(port, "countersign-resume", &input).await;
    eprintln!(
        "first resume invoke (builds the binary) took {:.1?}; logs: {}",
        started.elapsed(),
        log.display()
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"outcome": "ran", "state": "succeeded"}));
    assert_eq!(
        w.tools.count_for(&id),
        1,
        "the binary ran the committed call once"
    );
    // SC-OPS-01 on the Lambda path: the invocation flushed EMF documents into the function's
    // log, in the namespace the template's alarms read, the alarm series without dimensions.
    let emf = emf_documents(&log);
    let claim = emf
        .iter()
        .find(|d| d.get("wake_lateness_seconds").is_some())
        .unwrap_or_else(|| panic!("no lateness document in {}: {emf:?}", log.display()));
    let meta = &claim["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(meta["Namespace"], "Countersign", "{claim}");
    assert_eq!(meta["Dimensions"], json!([[]]), "{claim}");
    let unit = |doc: &Value, name: &str| {
        doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .and_then(|m| m.iter().find(|e| e["Name"] == name))
            .map(|e| e["Unit"].clone())
    };
    assert_eq!(unit(claim, "wake_lateness_seconds"), Some(json!("Seconds")));
    let sealed = emf
        .iter()
        .find(|d| d.get("actions_sealed").is_some())
        .expect("the seal is counted");
    assert_eq!(
        (&sealed["state"], &sealed["reason"]),
        (&json!("succeeded"), &json!("none"))
    );
    assert!(
        emf.iter()
            .any(|d| d["tool_outcomes"] == 1 && d["outcome"] == "succeeded"),
        "{emf:?}"
    );

    let t = Instant::now();
    let (status, again) = invoke(port, "countersign-resume", &input).await;
    eprintln!("warm resume invoke took {:.1?}", t.elapsed());
    assert_eq!(status, 200);
    assert_eq!(
        again,
        json!({"outcome": "rejected", "reason": "no_waiting_ticket"})
    );
    let (status, report) = invoke(port, "countersign-resume", &json!({"sweep": {}})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["due"], 0, "{report}");
    let (status, refused) = invoke(port, "countersign-resume", &json!({"hello": "world"})).await;
    assert_ne!(
        status, 200,
        "a foreign event fails the invocation: {refused}"
    );

    let (status, got) = invoke(
        port,
        "countersign-intake",
        &aws_support::apigw_v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None, &[]),
    )
    .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["statusCode"], 200, "{got}");
    let action: Value = serde_json::from_str(got["body"].as_str().unwrap()).unwrap();
    assert_eq!(action["state"], "succeeded");

    // A REST API (v1) event on stage `prod`: the library leaves the stage out of the path.
    let (status, got) = invoke(
        port,
        "countersign-intake",
        &aws_support::apigw_v1("GET", &format!("/v1/actions/{id}"), keys::AGENT, None, &[]),
    )
    .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        got["statusCode"], 200,
        "the stage is not in the route: {got}"
    );

    // The store gone: a wake fails the invocation, and the runtime says it is worth a retry.
    aws_sdk_dynamodb::Client::new(&w.sdk)
        .delete_table()
        .table_name(&w.table)
        .send()
        .await
        .unwrap();
    let (status, failed) = invoke(port, "countersign-resume", &input).await;
    assert_ne!(status, 200, "{failed}");
    assert_eq!(failed["errorType"], "Retryable.Unavailable", "{failed}");
}

/// SC-REC-01 at the resume function's boundary: only an error a retry can fix fails the
/// invocation (Lambda's asynchronous retries, then its on-failure destination, deliver it again);
/// a permanent one is answered `dropped`, so it is not delivered again and again. Caught on
/// main: every error failed the invocation — a wake whose record vanished during its claim
/// failed on each of its deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_rec_01_resume_fails_only_what_a_retry_can_fix() {
    let w = AwsWorld::new("boundary").await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&w.sdk);
    let store = Arc::new(FaultyStore::new(Arc::new(DynamoStore::new(
        dynamodb.clone(),
        &w.table,
    ))));
    let engine = Arc::new(Engine::new(
        w.settings.config.clone(),
        store.clone(),
        Arc::new(RecordingWaker::default()),
        Arc::new(Executors::new()),
        w.clock.clone(),
    ));
    let body = json!({
        "tool": "report.build",
        "args": {"quarter": "Q1"},
        "schedule": {"not_before": w.at(60), "not_after": w.at(900)}
    });
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(submitted.status, 201, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let wake = w.wake_of(&id).await;
    w.clock
        .set(wake_due(&submitted.body) + SignedDuration::from_secs(1));

    // Permanent: the record vanishes (an operator, a retention) while the claim is on its way.
    let gate = Gate::new();
    store.inject(
        Matching::claim().of(&id),
        Fault::HoldBefore(gate.clone()),
        1,
    );
    let resumed = {
        let (engine, event) = (engine.clone(), ResumeEvent::Wake(wake.clone()));
        tokio::spawn(async move { aws::resume(&engine, event, None).await })
    };
    gate.reached().await;
    for sk in [format!("A#{id}"), format!("A#{id}#S")] {
        dynamodb
            .delete_item()
            .table_name(&w.table)
            .key("pk", AttributeValue::S("T#acme".into()))
            .key("sk", AttributeValue::S(sk))
            .send()
            .await
            .unwrap();
    }
    gate.open();
    let answer = resumed
        .await
        .unwrap()
        .expect("a permanent error does not fail the invocation");
    let answer = serde_json::to_value(answer).unwrap();
    assert_eq!(answer["outcome"], "dropped", "{answer}");
    assert!(
        answer["error_type"]
            .as_str()
            .is_some_and(|t| t.starts_with("Permanent.")),
        "{answer}"
    );
    assert_eq!(w.tools.count_for(&id), 0);

    // Retryable: the store unavailable (throttled, a network fault).
    store.fail_reads(Some("injected: ProvisionedThroughputExceededException"));
    let failed = aws::resume(&engine, ResumeEvent::Wake(wake), None)
        .await
        .expect_err("an unavailable store fails the invocation");
    let diagnostic = Diagnostic::from(failed);
    assert_eq!(diagnostic.error_type, "Retryable.Unavailable");
    assert!(
        diagnostic.error_message.contains("temporarily unavailable"),
        "{diagnostic:?}"
    );
}

fn wake_due(action: &Value) -> Timestamp {
    action["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// MCP on AWS (SC-MCP-01/03/05): `POST /mcp` through the compiled intake binary as API Gateway
/// delivers it, the tools through the compiled resume binary. The tenant's tools listed; an
/// allowed call runs inside the intake invocation; a countersigned call becomes a task, is
/// approved over the API, armed on EventBridge Scheduler (LocalStack), run by the wake's
/// delivery to the resume binary, and then read back as completed through `tasks/get`,
/// `tasks/result` and `countersign_status`. The binaries read their configuration from SSM
/// Parameter Store (`COUNTERSIGN_CONFIG_SSM`), as the template deploys them (SC-OPS-03).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_mcp_05_mcp_flows_through_the_compiled_functions_scheduler_wake_included() {
    let cargo_lambda = cargo_lambda();
    let w = AwsWorld::new("mcp-binary").await;
    let port = free_port();
    // The document in SSM, as the template deploys it (SC-OPS-03).
    let (_watch, _log) = watch(&cargo_lambda, &w, port, Source::Ssm).await;
    let intake = |key: &'static str, method: &'static str, path: String, body: Option<Value>| {
        invoke_http(port, key, method, path, body)
    };
    let mcp = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});

    // 2025-11-25: initialize, then the catalog in name order with the built-in status tool.
    let init = mcp(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(init)).await;
    assert_eq!(v["result"]["protocolVersion"], "2025-11-25", "{v}");
    let (_, v) = intake(
        keys::AGENT,
        "POST",
        "/mcp".into(),
        Some(mcp(2, "tools/list", json!({}))),
    )
    .await;
    let names: Vec<&str> = v["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "mail_send",
            "report_build",
            "search_web",
            "countersign_status"
        ]
    );

    // Start the approve binary now: `cargo lambda watch` starts a binary on its first request,
    // and on a loaded machine (CI) that took longer than the window's 10 s lead below, so the
    // approval landed after `not_before` and the wake ran before the test saw `approved`.
    let unknown = format!("/v1/actions/act_{}/approve", "0".repeat(26));
    let digest = json!({ "context_digest": format!("sha256:{}", "0".repeat(64)) });
    let (status, v) = intake(keys::APPROVER, "POST", unknown, Some(digest)).await;
    assert!(
        (400..500).contains(&status) && v["error"]["code"] != "route_not_found",
        "the approve binary answers its route: {status} {v}"
    );

    // allow → run now, inside the intake invocation, once.
    let call = mcp(
        3,
        "tools/call",
        json!({"name": "search.web", "arguments": {"q": "parcels"}}),
    );
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(call)).await;
    assert_eq!(v["result"]["isError"], false, "{v}");
    let ran = w.tools.received();
    assert_eq!(ran.len(), 1, "the intake binary ran the allowed call once");
    assert_eq!(
        ran[0].body["args"],
        json!({"q": "parcels"}),
        "{:?}",
        ran[0].body
    );

    // require_approval → a task, durably created before the answer.
    // The binaries use the system clock (the world's test clock stands still): a window that
    // opens after the approval, so the approval arms a wake instead of running the call.
    let at = |secs: i64| {
        Timestamp::now()
            .checked_add(SignedDuration::from_secs(secs))
            .unwrap()
            .round(jiff::Unit::Second)
            .unwrap()
            .to_string()
    };
    let args = json!({"to": "ops@example.com", "countersign_window": {"not_before": at(10), "not_after": at(600)}});
    let call = mcp(
        4,
        "tools/call",
        json!({"name": "mail.send", "arguments": args, "task": {"ttl": 600000}}),
    );
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(call)).await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"], "working", "{v}");
    let id = task["taskId"].as_str().unwrap().to_owned();
    let (_, action) = intake(keys::AGENT, "GET", format!("/v1/actions/{id}"), None).await;
    assert_eq!(action["state"], "pending_approval", "{action}");
    assert!(
        action["args"].get("countersign_window").is_none(),
        "taken out"
    );
    let digest = action["approval"]["context_digest"].clone();
    let approve = json!({ "context_digest": digest });
    let (status, approved) = intake(
        keys::APPROVER,
        "POST",
        format!("/v1/actions/{id}/approve"),
        Some(approve),
    )
    .await;
    assert_eq!(
        (status, &approved["state"]),
        (200, &json!("approved")),
        "{approved}"
    );
    let get = mcp(5, "tasks/get", json!({"taskId": id}));
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(get.clone())).await;
    assert_eq!(v["result"]["status"], "working", "{v}");
    assert_eq!(w.tools.count_for(&id), 0, "not before its window");

    // The wake the approval armed on Scheduler, delivered when due to the resume binary.
    let input = w.wake_input(&id).await;
    let due = Timestamp::now().duration_until(wake_due(&approved));
    tokio::time::sleep(Duration::from_millis(due.as_millis().max(0) as u64 + 500)).await;
    let (status, answer) = invoke(port, "countersign-resume", &input).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"outcome": "ran", "state": "succeeded"}));
    assert_eq!(w.tools.count_for(&id), 1, "run once, by the wake");

    // The task is completed; its result is the tool's; the plain path says the same.
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(get)).await;
    assert_eq!(v["result"]["status"], "completed", "{v}");
    let result = mcp(6, "tasks/result", json!({"taskId": id}));
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(result)).await;
    assert_eq!(v["result"]["isError"], false, "{v}");
    let status_call = mcp(
        7,
        "tools/call",
        json!({"name": "countersign_status", "arguments": {"action_id": id}}),
    );
    let (_, v) = intake(keys::AGENT, "POST", "/mcp".into(), Some(status_call)).await;
    assert_eq!(
        v["result"]["structuredContent"]["state"], "succeeded",
        "{v}"
    );
    // Another agent's key sees no such task (SC-MCP-07).
    let get = mcp(8, "tasks/get", json!({"taskId": id}));
    let (_, v) = intake(keys::AGENT_2, "POST", "/mcp".into(), Some(get)).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

/// The function API Gateway routes `method path` to (`api::ROUTES`, the template's routes):
/// each HTTP binary serves only its own routes.
fn routed_function(method: &str, path: &str) -> String {
    let matches = |pattern: &str| {
        let (p, q): (Vec<_>, Vec<_>) = (pattern.split('/').collect(), path.split('/').collect());
        p.len() == q.len() && p.iter().zip(&q).all(|(a, b)| a.starts_with('{') || a == b)
    };
    let (_, _, function) = countersign::api::ROUTES
        .iter()
        .find(|(m, pattern, _)| *m == method && matches(pattern))
        .unwrap_or_else(|| panic!("no function routes {method} {path}"));
    format!("countersign-{function}")
}

/// An API Gateway (v2) request to the binary that serves its route: the HTTP status and the
/// JSON body.
async fn invoke_http(
    port: u16,
    key: &str,
    method: &str,
    path: String,
    body: Option<Value>,
) -> (u16, Value) {
    let event = aws_support::apigw_v2(method, &path, key, body, &[]);
    let (status, got) = invoke(port, &routed_function(method, &path), &event).await;
    assert_eq!(status, 200, "the invocation: {got}");
    let body = got["body"].as_str().unwrap_or_default();
    let code = got["statusCode"].as_u64().unwrap_or_default() as u16;
    (code, serde_json::from_str(body).unwrap_or(Value::Null))
}
