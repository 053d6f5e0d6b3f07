//! What an action costs in DynamoDB capacity (issue 9, `docs/dynamodb.md` "Capacity"): three
//! paths through the real handlers against LocalStack — the full lifecycle (submit → approve →
//! wake → run → result), the cancel path (submit → cancel) and the `allow` path (submit, run
//! inline) — with arguments of 300 bytes, and the capacity every store request reports
//! (`ReturnConsumedCapacity=INDEXES`: index writes included) collected per step. Prints its
//! tables (`-- --nocapture`), and holds each path to the figures `docs/dynamodb.md` states, so
//! the document cannot drift from the code. Capacity is deterministic; this is not a timing test.

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_support::{
    capacity::{drain, Spent},
    AwsWorld,
};
use countersign_tests::keys;
use jiff::SignedDuration;
use serde_json::{json, Value};

/// The capacity log is process-wide: the tests of this file take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A path's figures: (RRU, WRU, of which index writes), step by step.
#[derive(Default)]
struct Path {
    name: &'static str,
    read: f64,
    write: f64,
    index: f64,
}

impl Path {
    fn new(name: &'static str) -> Self {
        println!("\n{name}");
        Path {
            name,
            ..Path::default()
        }
    }

    fn step(&mut self, step: &str) {
        let spent = drain();
        let sum = |f: fn(&Spent) -> f64| spent.iter().map(f).sum::<f64>() + 0.0;
        let (r, w, i) = (sum(|s| s.read), sum(|s| s.write), sum(|s| s.index));
        self.read += r;
        self.write += w;
        self.index += i;
        let ops: Vec<String> = spent
            .iter()
            .map(|s| format!("{} {}", s.op, s.read + s.write))
            .collect();
        println!("  {step:<26} {r:>4.1} RRU {w:>4.1} WRU ({i:.1} index)   {ops:?}");
    }

    fn total(&self) {
        println!(
            "  {:<26} {:>4.1} RRU {:>4.1} WRU ({:.1} index)",
            "TOTAL", self.read, self.write, self.index
        );
    }

    /// Held to the figures of docs/dynamodb.md ("Capacity per path").
    fn within(&self, rru: f64, wru: f64) {
        assert!(
            self.read <= rru && self.write <= wru,
            "{}: {} RRU / {} WRU, docs/dynamodb.md states {rru} / {wru}",
            self.name,
            self.read,
            self.write
        );
    }
}

/// Arguments of exactly 300 bytes (as JSON), the size the goal is stated for.
fn args_300() -> Value {
    let mut args = json!({"to": "ops@example.com", "subject": "quarterly report", "body": ""});
    let pad = 300 - serde_json::to_string(&args).unwrap().len();
    args["body"] = json!("n".repeat(pad));
    assert_eq!(serde_json::to_string(&args).unwrap().len(), 300);
    args
}

/// DynamoDB's item size: attribute names plus values (strings and bytes as their length,
/// numbers ≈ 1 byte per two digits + 1, one byte of overhead per list or map element).
fn item_size(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> usize {
    item.iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

fn value_size(value: &aws_sdk_dynamodb::types::AttributeValue) -> usize {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    match value {
        A::S(s) => s.len(),
        A::N(n) => n.len().div_ceil(2) + 1,
        A::B(b) => b.as_ref().len(),
        A::Bool(_) | A::Null(_) => 1,
        A::L(l) => 3 + l.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        A::M(m) => {
            3 + m
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        other => format!("{other:?}").len(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_cost_capacity_per_path_lifecycle_cancel_allow() {
    let _one_at_a_time = SERIAL.lock().await;
    drain();
    let w = AwsWorld::new("cost").await;
    drain(); // table creation and warm-up are not the product's cost

    // The lifecycle: a mail.send with a window (policy require_approval) → approve → the wake
    // at not_before → claim → the tool → the result.
    let mut lifecycle = Path::new("lifecycle: submit → approve → wake → run → result");
    let body = json!({
        "tool": "mail.send",
        "args": args_300(),
        "schedule": {"not_before": w.at(120), "not_after": w.at(900)}
    });
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    lifecycle.step("submit (intake)");
    let digest = submitted.body["approval"]["context_digest"].clone();
    let approved = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            Some(json!({ "context_digest": digest })),
        )
        .await;
    assert_eq!(approved.status, 200, "{:?}", approved.body);
    lifecycle.step("approve (approve)");
    let wake = w.wake_of(&id).await;
    drain(); // reading the stored schedule is the test's, not the product's
    let not_before: jiff::Timestamp = approved.body["schedule"]["not_before"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    w.clock.set(
        not_before
            .checked_add(SignedDuration::from_secs(5))
            .unwrap(),
    );
    let outcome = w
        .deliver(&serde_json::to_string(&wake).unwrap())
        .await
        .unwrap();
    assert_eq!(outcome["outcome"], "ran", "{outcome}");
    lifecycle.step("wake → claim → result");
    lifecycle.total();

    // The cancel path: submitted, then cancelled by its agent.
    let mut cancel = Path::new("cancel: submit → cancel");
    let body = json!({"tool": "mail.send", "args": args_300()});
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let cancelled_id = submitted.body["id"].as_str().unwrap().to_owned();
    cancel.step("submit (intake)");
    let cancelled = w
        .v2(
            "POST",
            &format!("/v1/actions/{cancelled_id}/cancel"),
            keys::AGENT,
            Some(json!({})),
        )
        .await;
    assert_eq!(cancelled.body["state"], "cancelled", "{:?}", cancelled.body);
    cancel.step("cancel (cancel)");
    cancel.total();

    // The allow path: policy allow, no window: runs inline in intake, created already claimed.
    let mut allow = Path::new("allow: submit → run → result (inline)");
    let body = json!({"tool": "search.web", "args": args_300()});
    let ran = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(ran.body["state"], "succeeded", "{:?}", ran.body);
    allow.step("submit → claim → result");
    allow.total();

    // Reads a client may add, and the sweep's fixed cost per minute.
    let mut reads = Path::new("reads");
    let got = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(got.body["state"], "succeeded");
    reads.step("GET /v1/actions/{id}");
    let events = w
        .v2(
            "GET",
            &format!("/v1/actions/{id}/events"),
            keys::AGENT,
            None,
        )
        .await;
    assert_eq!(
        events.body["data"].as_array().map(Vec::len),
        Some(4),
        "{:?}",
        events.body
    );
    reads.step("GET …/events");
    let listed = w.v2("GET", "/v1/actions?limit=3", keys::AGENT, None).await;
    assert_eq!(
        listed.body["data"].as_array().map(Vec::len),
        Some(3),
        "{:?}",
        listed.body
    );
    reads.step("GET /v1/actions?limit=3");
    w.engine.sweep().await.unwrap();
    reads.step("sweep, nothing due");

    // The lifecycle action's two items: their sizes are what its capacity is made of.
    let ddb = aws_sdk_dynamodb::Client::new(&w.sdk);
    let items = ddb
        .scan()
        .table_name(&w.table)
        .send()
        .await
        .expect("Scan")
        .items
        .unwrap_or_default();
    let mut sizes: Vec<(String, usize)> = items
        .iter()
        .filter_map(|i| match i.get("sk") {
            Some(aws_sdk_dynamodb::types::AttributeValue::S(sk)) if sk.contains(&id) => {
                Some((sk.replace(&id, "<id>"), item_size(i)))
            }
            _ => None,
        })
        .collect();
    sizes.sort();
    println!("\nitem sizes of the sealed lifecycle action (bytes): {sizes:?}");

    println!(
        "\nsummary: {}",
        json!({
            "lifecycle": {"rru": lifecycle.read, "wru": lifecycle.write, "index_wru": lifecycle.index},
            "cancel": {"rru": cancel.read, "wru": cancel.write, "index_wru": cancel.index},
            "allow": {"rru": allow.read, "wru": allow.write, "index_wru": allow.index},
        })
    );
    // Issue 16: +2 index WRU for a pending action, its `waiting` entry put and removed. Issue 19:
    // the call item had passed 1 KB (1,033 bytes: its context repeated the call's tool, agent,
    // kind and window ends) and cost 10 WRU here; those copies are elided now (9 WRU).
    lifecycle.within(2.0, 9.0);
    cancel.within(1.0, 7.0);
    allow.within(0.0, 5.0);
}

/// What a scoped grant costs (issue 33, docs/grants.md): the approval that grants one puts it
/// (one conditional PutItem); a call it allows reads the agent's grants for the tool (one
/// Query) and uses it (one PutItem conditional on its version) before the allow path's own
/// writes. And what a call the policy holds for a person pays when no grant allows it: the
/// same Query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue33_cost_of_a_grant_use() {
    let _one_at_a_time = SERIAL.lock().await;
    drain();
    let w = AwsWorld::new("cost-grant").await;
    drain();
    let mut granting = Path::new("grant: submit → approve with a grant → run");
    let call = json!({"tool": "mail.send", "args": args_300()});
    let submitted = w
        .v2("POST", "/v1/actions", keys::AGENT, Some(call.clone()))
        .await;
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    granting.step("submit (intake, no grant)");
    let body = json!({"context_digest": submitted.body["approval"]["context_digest"],
        "grant": {"uses": 10, "pin": ["to"]}});
    let approved = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            Some(body),
        )
        .await;
    assert_eq!(approved.status, 200, "{:?}", approved.body);
    granting.step("approve + put the grant");
    granting.total();
    let mut used = Path::new("granted: submit → use the grant → run → result (inline)");
    let ran = w.v2("POST", "/v1/actions", keys::AGENT, Some(call)).await;
    assert_eq!(ran.body["decision"], "allow", "{:?}", ran.body);
    used.step("submit → use → claim → result");
    used.total();
    println!(
        "\nsummary: {}",
        json!({"granted_call": {"rru": used.read, "wru": used.write, "index_wru": used.index}})
    );
    used.within(1.0, 6.0);
}

/// What one decision-insights request costs (issue 33, SC-GR-22, docs/dynamodb.md "Decision
/// insights"): it reads the tenant's partition newest first, 100 actions a Query, until the
/// first action older than `from`. Measured over 100 and then 250 calls held for a person
/// (300-byte arguments), the range covering them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue33_cost_of_an_insights_read() {
    let _one_at_a_time = SERIAL.lock().await;
    drain();
    let w = AwsWorld::new("cost-insights").await;
    let from = jiff::Timestamp::now() - SignedDuration::from_secs(1);
    let call = json!({"tool": "mail.send", "args": args_300()});
    let mut submitted = 0;
    for n in [100, 250] {
        while submitted < n {
            let r = w
                .v2("POST", "/v1/actions", keys::AGENT, Some(call.clone()))
                .await;
            assert_eq!(r.status, 202, "{:?}", r.body);
            submitted += 1;
        }
        drain();
        let mut read = Path::new("insights over the range");
        let to = jiff::Timestamp::now() + SignedDuration::from_secs(1);
        let path = format!("/v1/insights?from={from}&to={to}");
        let r = w.v2("GET", &path, keys::ADMIN, None).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(
            (r.body["read"].as_u64(), &r.body["complete"]),
            (Some(n), &json!(true))
        );
        read.step(&format!("GET /v1/insights, {n} actions"));
        println!(
            "\nsummary: {}",
            json!({"insights": {"actions": n, "rru": read.read, "per_action": read.read / n as f64}})
        );
        // Eventually consistent reads of pairs under 4 KB: at most 0.5 RRU an action.
        read.within(0.5 * n as f64, 0.0);
    }
}

/// What notifications add (issue 10, docs/notifications.md "Capacity"): a tenant with one
/// endpoint; the pending action's notice rides in the submit's write, the sweep delivers it, the
/// denial's notice rides in the deny's write, the next sweep delivers that. And a sweep with
/// nothing to deliver. (Tenants without endpoints pay nothing: the test above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_cost_capacity_of_notifications() {
    let _one_at_a_time = SERIAL.lock().await;
    drain();
    let receiver =
        countersign_tests::receiver::Receiver::start(countersign_tests::receiver::Mode::Up).await;
    let w = AwsWorld::with_config(
        "cost-notify",
        &countersign_tests::receiver::notify_toml(&receiver.url(), "30s", 20),
    )
    .await;
    w.deliver(r#"{"sweep":{}}"#).await.unwrap();
    drain(); // table creation and warm-up

    let mut notified = Path::new("notified: submit → deliver → deny → deliver");
    let body = json!({"tool": "mail.send", "args": args_300()});
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    notified.step("submit (+ its notice)");
    w.deliver(r#"{"sweep":{}}"#).await.unwrap();
    notified.step("sweep: deliver approval_requested");
    let denied = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/deny"),
            keys::APPROVER,
            Some(json!({"reason": "no"})),
        )
        .await;
    assert_eq!(denied.status, 200, "{:?}", denied.body);
    notified.step("deny (+ its notice)");
    w.deliver(r#"{"sweep":{}}"#).await.unwrap();
    notified.step("sweep: deliver action_sealed");
    notified.total();
    assert_eq!(receiver.seen().len(), 2, "both notices delivered once");
    let mut idle = Path::new("idle");
    w.deliver(r#"{"sweep":{}}"#).await.unwrap();
    idle.step("sweep, nothing due or to deliver");
    notified.within(8.0, 14.0);
}
