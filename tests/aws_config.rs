//! SC-OPS-03 on AWS: the functions' configuration in SSM Parameter Store (LocalStack, through
//! the real SDK), driven through the functions' real handlers — API Gateway events through
//! `lambda_http`'s adapter into `aws::Function::http`, the Scheduler's stored input into the
//! resume handler — as `functions/*` wire them (`aws::Boot::from_lookup` over the variables
//! `infra/template.yaml` sets).
//!
//! Caught on main: the whole document had to fit `COUNTERSIGN_CONFIG`, and Lambda allows 4 KB of
//! environment in all (≈ 3.5 KB for the document) — the 20 KB tenant here could not be deployed
//! at all — and a change of key, policy or tool meant a redeploy.

#[path = "aws_support/mod.rs"]
mod aws_support;
#[path = "reload_support/mod.rs"]
mod reload_support;

use aws_sdk_ssm::types::ParameterType;
use aws_support::{apigw_v2, function_event, AwsWorld, Reply, RESUME_ARN, ROLE_ARN};
use countersign::{
    api::{self, Routes},
    boot::aws::{
        self, Approve, Boot, BootError, Cancel, Duties, Function, Intake, Resume, ResumeEvent,
    },
    telemetry, SystemClock,
};
use countersign_tests::{in_secs, keys};
use reload_support::{broken, changed, mcp_catalog, NEW_AGENT};
use serde_json::{json, Value};
use std::{sync::Arc, time::Duration};

/// The environment `infra/template.yaml` gives every function, the document under `path`.
fn boot(w: &AwsWorld, path: &str, recheck: &str) -> Boot {
    let vars = [
        ("COUNTERSIGN_TABLE", w.table.clone()),
        ("COUNTERSIGN_SCHEDULE_GROUP", w.group.clone()),
        ("COUNTERSIGN_RESUME_ARN", RESUME_ARN.to_owned()),
        ("COUNTERSIGN_SCHEDULER_ROLE_ARN", ROLE_ARN.to_owned()),
        // As the template sets it: empty, the document is in SSM.
        ("COUNTERSIGN_CONFIG", String::new()),
        ("COUNTERSIGN_CONFIG_SSM", path.to_owned()),
        ("COUNTERSIGN_CONFIG_RECHECK", recheck.to_owned()),
    ];
    Boot::from_lookup(&|name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    })
    .expect("the template's environment")
}

/// A function with `D`'s duties, started as its `main` starts it.
async fn start<D: Duties>(boot: Boot, w: &AwsWorld) -> Result<Arc<Function<D>>, BootError> {
    Function::<D>::start_with(boot, w.sdk.clone(), Arc::new(SystemClock)).await
}

/// Store `text` under `path` as infra/README.md says: split at line ends into standard (4 KB)
/// String parameters `00`, `01`, … (`split -C 4000 -d`), one PutParameter each; parts left over
/// from a longer document deleted. Returns how many parts it took.
async fn put_document(ssm: &aws_sdk_ssm::Client, path: &str, text: &str) -> usize {
    let mut parts = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if parts.last().unwrap().len() + line.len() > 4000 {
            parts.push(String::new());
        }
        parts.last_mut().unwrap().push_str(line);
    }
    for (i, part) in parts.iter().enumerate() {
        ssm.put_parameter()
            .name(format!("{path}/{i:02}"))
            .value(part)
            .r#type(ParameterType::String)
            .overwrite(true)
            .send()
            .await
            .expect("PutParameter (LocalStack serves SSM: localstack/start.sh SERVICES)");
    }
    let existing = ssm
        .get_parameters_by_path()
        .path(path)
        .send()
        .await
        .unwrap();
    for p in existing.parameters() {
        let name = p.name().unwrap();
        let index: usize = name.rsplit('/').next().unwrap().parse().unwrap();
        if index >= parts.len() {
            ssm.delete_parameter().name(name).send().await.unwrap();
        }
    }
    parts.len()
}

async fn http<D: Duties>(
    f: &Arc<Function<D>>,
    routes: fn(Routes) -> Routes,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> Reply {
    function_event(f, routes, apigw_v2(method, path, key, body, &[])).await
}

/// The names `tools/list` answers (MCP 2025-11-25) through the intake function.
async fn listed(intake: &Arc<Function<Intake>>) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let r = http(
        intake,
        api::intake_routes,
        "POST",
        "/mcp",
        keys::AGENT,
        Some(list),
    )
    .await;
    r.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{:?}", r.body))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Poll `ok` every 200 ms for up to `secs`; whether it came true.
async fn eventually<F: std::future::Future<Output = bool>>(secs: u64, ok: impl Fn() -> F) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < until {
        if ok().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// `config_reloads{outcome=…}` as this process counted it.
fn counted(outcome: &str) -> f64 {
    let series = format!("config_reloads{{outcome=\"{outcome}\"}}");
    telemetry::prometheus::install()
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str())?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A 20 KB document with 30 MCP tools, in six standard parameters, loads at the functions' cold
/// starts. Two tickets are committed under it. The parameters change: the functions serve the
/// change without a redeploy (one that looks only every hour still serves the first: never a
/// look per request); at their wakes the ticket whose tool is unchanged runs and the one whose
/// tool changed is sealed `catalog_changed` (SC-RES-04). A broken document then: refused and
/// counted, the last good one keeps serving, and a cold start on it fails naming the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_ops_03_a_20_kb_config_in_ssm_loads_and_reloads_without_a_redeploy() {
    telemetry::prometheus::install();
    let w = AwsWorld::new("ssm-config").await;
    let ssm = aws_sdk_ssm::Client::new(&w.sdk);
    let path = format!("/countersign/{}/config", aws_support::unique("reload"));
    let first = countersign_tests::config_toml(&w.tools, "1m", "5s") + &mcp_catalog(&w.tools, 30);
    assert!(first.len() >= 20_000, "{} bytes", first.len());
    let parts = put_document(&ssm, &path, &first).await;
    assert!(parts >= 5, "{parts} parts");

    let intake = start::<Intake>(boot(&w, &path, "1s"), &w)
        .await
        .expect("the 20 KB document loads");
    let approve = start::<Approve>(boot(&w, &path, "1s"), &w).await.unwrap();
    let resume = start::<Resume>(boot(&w, &path, "1s"), &w).await.unwrap();
    let hourly = start::<Intake>(boot(&w, &path, "1h"), &w).await.unwrap();
    let names = listed(&intake).await;
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("search_crm_"))
            .count(),
        30,
        "{names:?}"
    );
    assert!(names.contains(&"search_web".to_owned()));

    // Two tickets committed under the first document, due in a few seconds.
    let window = json!({"not_before": in_secs(10), "not_after": in_secs(300)});
    let submit =
        |tool: &str| json!({"tool": tool, "args": {"to": "ops@example.com"}, "schedule": window});
    let report = http(
        &intake,
        api::intake_routes,
        "POST",
        "/v1/actions",
        keys::AGENT,
        Some(submit("report.build")),
    )
    .await;
    assert_eq!(
        (report.status, &report.body["state"]),
        (201, &json!("approved")),
        "{:?}",
        report.body
    );
    let mail = http(
        &intake,
        api::intake_routes,
        "POST",
        "/v1/actions",
        keys::AGENT,
        Some(submit("mail.send")),
    )
    .await;
    assert_eq!(mail.status, 202, "{:?}", mail.body);
    let mail_id = mail.body["id"].as_str().unwrap().to_owned();
    let digest = mail.body["approval"]["context_digest"].clone();
    let approved = http(
        &approve,
        api::approve_routes,
        "POST",
        &format!("/v1/actions/{mail_id}/approve"),
        keys::APPROVER,
        Some(json!({"context_digest": digest})),
    )
    .await;
    assert_eq!(approved.body["state"], "approved", "{:?}", approved.body);

    // The change, in SSM only.
    assert_eq!(
        http(
            &intake,
            api::intake_routes,
            "GET",
            "/v1/me",
            NEW_AGENT,
            None
        )
        .await
        .status,
        401
    );
    let second = changed(&first);
    put_document(&ssm, &path, &second).await;
    assert!(
        eventually(30, || async {
            http(
                &intake,
                api::intake_routes,
                "GET",
                "/v1/me",
                NEW_AGENT,
                None,
            )
            .await
            .status
                == 200
        })
        .await,
        "the change is served without a redeploy"
    );
    let names = listed(&intake).await;
    assert!(!names.contains(&"search_web".to_owned()), "{names:?}");
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("search_crm_"))
            .count(),
        30
    );
    assert_eq!(
        http(
            &hourly,
            api::intake_routes,
            "GET",
            "/v1/me",
            NEW_AGENT,
            None
        )
        .await
        .status,
        401,
        "a function looks at most every COUNTERSIGN_CONFIG_RECHECK, never per request"
    );

    // The wakes, once due, through the resume handler (which looks before its invocation).
    let due: jiff::Timestamp = window["not_before"].as_str().unwrap().parse().unwrap();
    let wait = jiff::Timestamp::now()
        .duration_until(due)
        .as_millis()
        .max(0) as u64
        + 1000;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let deliver = |id: String| {
        let (w, resume) = (&w, resume.clone());
        async move {
            let event: ResumeEvent = serde_json::from_value(w.wake_input(&id).await).unwrap();
            let engine = resume.engine().await;
            let answer = aws::resume(&engine, event, None).await.expect("answered");
            serde_json::to_value(answer).unwrap()
        }
    };
    let report_id = report.body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        deliver(report_id.clone()).await,
        json!({"outcome": "ran", "state": "succeeded"})
    );
    assert_eq!(w.tools.count_for(&report_id), 1);
    assert_eq!(
        deliver(mail_id.clone()).await,
        json!({"outcome": "sealed", "state": "cancelled", "reason": "catalog_changed"})
    );
    assert_eq!(w.tools.count_for(&mail_id), 0, "never sent");

    // A broken document: refused, counted, the last good one serves.
    let rejected = counted("rejected");
    put_document(&ssm, &path, &broken(&second)).await;
    assert!(
        eventually(30, || async {
            http(
                &intake,
                api::intake_routes,
                "GET",
                "/v1/me",
                NEW_AGENT,
                None,
            )
            .await;
            counted("rejected") > rejected
        })
        .await,
        "the broken document was looked at and refused"
    );
    assert_eq!(
        http(
            &intake,
            api::intake_routes,
            "GET",
            "/v1/me",
            NEW_AGENT,
            None
        )
        .await
        .status,
        200,
        "the last good document serves"
    );
    let still = http(
        &intake,
        api::intake_routes,
        "POST",
        "/v1/actions",
        keys::AGENT,
        Some(submit("report.build")),
    )
    .await;
    assert_eq!(still.status, 201, "{:?}", still.body);
    match start::<Intake>(boot(&w, &path, "1s"), &w).await {
        Err(BootError::Invalid("COUNTERSIGN_CONFIG_SSM", m)) => {
            assert!(m.contains("mail.archive"), "{m}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a cold start on a broken document must fail"),
    }
}

/// A cold start reads only String parameters and fails closed: nothing under the path, or a
/// part that is a SecureString (nothing is decrypted into the document), fails it naming the
/// path or the parameter. `COUNTERSIGN_CONFIG` still works for a small document.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_ops_03_a_cold_start_reads_string_parameters_only_and_fails_closed() {
    let w = AwsWorld::new("ssm-cold").await;
    let ssm = aws_sdk_ssm::Client::new(&w.sdk);
    let path = format!("/countersign/{}/config", aws_support::unique("cold"));
    match start::<Cancel>(boot(&w, &path, "1s"), &w).await {
        Err(BootError::Unreadable(m)) => assert!(m.contains("no parameters under"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("nothing to load"),
    }
    let text = countersign_tests::config_toml(&w.tools, "1m", "5s");
    put_document(&ssm, &path, &text).await;
    ssm.put_parameter()
        .name(format!("{path}/99"))
        .value("# a secret")
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .unwrap();
    match start::<Cancel>(boot(&w, &path, "1s"), &w).await {
        Err(BootError::Unreadable(m)) => {
            assert!(
                m.contains(&format!("{path}/99")) && m.contains("SecureString"),
                "{m}"
            )
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a SecureString part is refused"),
    }

    // The document itself in the environment, as before.
    let inline = Boot::from_lookup(&|name| match name {
        "COUNTERSIGN_TABLE" => Some(w.table.clone()),
        "COUNTERSIGN_SCHEDULE_GROUP" => Some(w.group.clone()),
        "COUNTERSIGN_RESUME_ARN" => Some(RESUME_ARN.into()),
        "COUNTERSIGN_SCHEDULER_ROLE_ARN" => Some(ROLE_ARN.into()),
        "COUNTERSIGN_CONFIG" => Some(text.clone()),
        _ => None,
    })
    .unwrap();
    let cancel = start::<Cancel>(inline, &w).await.unwrap();
    let dead = http(
        &cancel,
        api::cancel_routes,
        "GET",
        "/v1/notifications/dead",
        keys::ADMIN,
        None,
    )
    .await;
    assert_eq!(dead.status, 200, "{:?}", dead.body);
}

/// `w`'s environment with the document itself in `COUNTERSIGN_CONFIG`.
fn inline(w: &AwsWorld, text: &str) -> Boot {
    Boot::from_lookup(&|name| match name {
        "COUNTERSIGN_TABLE" => Some(w.table.clone()),
        "COUNTERSIGN_SCHEDULE_GROUP" => Some(w.group.clone()),
        "COUNTERSIGN_RESUME_ARN" => Some(RESUME_ARN.into()),
        "COUNTERSIGN_SCHEDULER_ROLE_ARN" => Some(ROLE_ARN.into()),
        "COUNTERSIGN_CONFIG" => Some(text.to_owned()),
        _ => None,
    })
    .unwrap()
}

/// A Slack interaction signed `v0` with `secret` now, as API Gateway hands it to approve.
fn slack_click(secret: &str) -> Value {
    let body = "payload=%7B%22type%22%3A%22shortcut%22%7D";
    let ts = jiff::Timestamp::now().as_second().to_string();
    let base = format!("v0:{ts}:{body}");
    let mac = countersign_tests::receiver::hmac_sha256(secret.as_bytes(), base.as_bytes());
    let signature = format!("v0={}", hex::encode(mac));
    let headers = [
        ("x-slack-request-timestamp", ts.as_str()),
        ("x-slack-signature", signature.as_str()),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    let mut event = apigw_v2("POST", "/v1/slack/interactions", "", None, &headers);
    event["body"] = json!(body);
    event
}

/// SC-CH-14: the approval channels' secrets from SSM Parameter Store (LocalStack, the real SDK):
/// a tenant's Slack bot token and signing secret, SMTP URL and link key named `*_ssm`, fetched
/// at cold start by approve and resume — approve verifies Slack's signature with the fetched
/// secret and checks links with the fetched key; resume checks the SMTP URL it will send with
/// — and never by intake, which starts though the parameters do not exist. A parameter that is
/// missing, or an SMTP URL that does not parse, fails the cold start naming the entry and
/// never repeating the value. On main `smtp_url_ssm` was an unknown field and every function
/// fetched the Slack secrets.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_ch_14_channel_secrets_come_from_ssm_where_they_are_used() {
    let w = AwsWorld::new("ssm-channels").await;
    let ssm = aws_sdk_ssm::Client::new(&w.sdk);
    let root = format!("/countersign-channels/{}", aws_support::unique("ch"));
    let link_key = "k".repeat(40);
    let values = [
        ("slack-bot", "xoxb-from-ssm"),
        ("slack-signing", "signing-secret-from-ssm"),
        ("smtp", "smtps://user:pa%2Fss@smtp.example.com"),
        ("smtp-bad", "http://smtp.example.com"),
        ("link", link_key.as_str()),
    ];
    for (name, value) in values {
        ssm.put_parameter()
            .name(format!("{root}/{name}"))
            .value(value)
            .r#type(ParameterType::SecureString)
            .send()
            .await
            .expect("PutParameter");
    }
    let base = countersign_tests::config_toml(&w.tools, "1m", "5s").replacen(
        "id = \"approver-1\", role = \"approver\",",
        "id = \"approver-1\", role = \"approver\", email = \"a1@example.com\",",
        1,
    );
    let document = |smtp: &str, bot: &str| {
        format!(
            "{base}\n[tenants.acme.slack]\nbot_token_ssm = \"{root}/{bot}\"\nsigning_secret_ssm = \"{root}/slack-signing\"\nchannel = \"C0123456789\"\n\n[tenants.acme.email]\nsmtp_url_ssm = \"{root}/{smtp}\"\nfrom = \"countersign <approvals@example.com>\"\nlink_secret_ssm = \"{root}/link\"\n"
        )
    };
    let good = document("smtp", "slack-bot");

    // Approve: the fetched signing secret verifies a click; another secret is refused.
    let approve = start::<Approve>(inline(&w, &good), &w).await.unwrap();
    let ok = function_event(
        &approve,
        api::approve_routes,
        slack_click("signing-secret-from-ssm"),
    )
    .await;
    assert_eq!((ok.status, &ok.body), (200, &json!({"ok": true})));
    let forged = function_event(&approve, api::approve_routes, slack_click("another secret")).await;
    assert_eq!(forged.status, 401, "{:?}", forged.body);
    // The mailed links are checked with the fetched key.
    let engine = approve.engine().await;
    let config = engine.config();
    let email = config.tenants["acme"].email.as_ref().unwrap();
    let key = countersign::notify::email::link_key(email, engine.channel_secrets()).unwrap();
    assert_eq!(key, link_key.as_bytes());

    // Resume: starts with the URL it sends with checked; a URL that does not parse fails it.
    start::<Resume>(inline(&w, &good), &w).await.unwrap();
    let bad = start::<Resume>(inline(&w, &document("smtp-bad", "slack-bot")), &w).await;
    let e = bad
        .err()
        .expect("an unusable SMTP URL fails the cold start")
        .to_string();
    assert!(
        e.contains("tenants.acme.email.smtp_url_ssm:") && e.contains("scheme is http"),
        "{e}"
    );
    assert!(
        !e.contains("http://smtp.example.com"),
        "{e} repeats the URL"
    );

    // A parameter that does not exist fails approve's and resume's cold start, not intake's.
    let missing = document("smtp", "no-such-bot");
    for e in [
        start::<Approve>(inline(&w, &missing), &w)
            .await
            .err()
            .map(|e| e.to_string()),
        start::<Resume>(inline(&w, &missing), &w)
            .await
            .err()
            .map(|e| e.to_string()),
    ] {
        let e = e.expect("a missing parameter fails the cold start");
        assert!(
            e.contains("tenants.acme.slack.bot_token_ssm: cannot read parameter"),
            "{e}"
        );
    }
    start::<Intake>(inline(&w, &missing), &w)
        .await
        .expect("intake never reads a channel's secret");
    start::<Cancel>(inline(&w, &missing), &w)
        .await
        .expect("nor does cancel");
}
