//! What one action costs in DynamoDB capacity (issue 4, infra/README.md "Cost"): the typical
//! flow submit → approve → wake → claim → succeed through the real handlers against LocalStack,
//! with the capacity every store request reports (the adapter logs `ReturnConsumedCapacity`)
//! collected per phase, and the sizes of the items it leaves. Prints its table; run with
//! `-- --nocapture` to read it. The figures in infra/README.md come from this test.

#[path = "aws_support/mod.rs"]
mod aws_support;

use aws_support::AwsWorld;
use countersign_tests::keys;
use jiff::SignedDuration;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing_subscriber::{layer::Context, prelude::*, Layer};

/// (op, capacity units) of every store request since the last drain.
type Spent = Arc<Mutex<Vec<(String, f64)>>>;

fn spent() -> &'static Spent {
    static SPENT: OnceLock<Spent> = OnceLock::new();
    SPENT.get_or_init(|| {
        let spent = Spent::default();
        tracing_subscriber::registry()
            .with(Capacity(spent.clone()))
            .init();
        spent
    })
}

/// Collects the adapter's "dynamodb consumed capacity" events.
struct Capacity(Spent);

#[derive(Default)]
struct Fields {
    message: String,
    op: String,
    units: Option<f64>,
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "capacity_units" {
            self.units = Some(value);
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "op" {
            self.op = value.to_owned();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capacity {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message == "dynamodb consumed capacity" {
            if let Some(units) = fields.units {
                self.0.lock().unwrap().push((fields.op, units));
            }
        }
    }
}

fn drain() -> Vec<(String, f64)> {
    std::mem::take(&mut *spent().lock().unwrap())
}

/// Reads are GetItem/BatchGetItem/Query; everything else writes.
fn is_read(op: &str) -> bool {
    op.starts_with("GetItem") || op.starts_with("BatchGetItem") || op.starts_with("Query")
}

fn report(phase: &str, ops: &[(String, f64)], totals: &mut (f64, f64)) {
    let (reads, writes): (Vec<_>, Vec<_>) = ops.iter().partition(|(op, _)| is_read(op));
    // `+ 0.0`: an empty sum is -0.0.
    let r: f64 = reads.iter().map(|(_, u)| u).sum::<f64>() + 0.0;
    let w: f64 = writes.iter().map(|(_, u)| u).sum::<f64>() + 0.0;
    totals.0 += r;
    totals.1 += w;
    println!("{phase:<34} reads {r:>5.1} RCU   writes {w:>5.1} WCU   {ops:?}");
}

/// DynamoDB's item size: attribute names plus values (strings as UTF-8, numbers ≈ 1 byte per
/// two digits + 1).
fn item_size(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> usize {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    item.iter()
        .map(|(name, value)| {
            name.len()
                + match value {
                    A::S(s) => s.len(),
                    A::N(n) => n.len().div_ceil(2) + 1,
                    A::Bool(_) | A::Null(_) => 1,
                    other => format!("{other:?}").len(),
                }
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue4_cost_capacity_of_the_typical_flow_submit_approve_wake_succeed() {
    drain();
    let w = AwsWorld::new("cost").await;
    drain(); // table creation and warm-up are not the product's cost
    let mut totals = (0.0, 0.0);

    // 1. submit: a mail.send with a window, policy require_approval → 202 pending_approval.
    let body = json!({
        "tool": "mail.send",
        "args": {"to": "ops@example.com", "subject": "quarterly report", "body": "Numbers attached."},
        "schedule": {"not_before": w.at(120), "not_after": w.at(900)}
    });
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    report("submit (intake)", &drain(), &mut totals);

    // 2. approve: the ticket commits, the wake is armed (a Scheduler call, no capacity).
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
    report("approve (approve)", &drain(), &mut totals);

    // 3. the wake at not_before: checks, claim, the tool, the result.
    let wake = w.wake_of(&id).await;
    drain();
    let input = serde_json::to_string(&wake).unwrap();
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
    let outcome = w.deliver(&input).await.unwrap();
    assert_eq!(outcome["outcome"], "ran", "{outcome}");
    report("wake → claim → succeed (resume)", &drain(), &mut totals);
    println!(
        "{:<34} reads {:>5.1} RCU   writes {:>5.1} WCU",
        "TOTAL per action", totals.0, totals.1
    );

    // Reads a client may add, and the sweep's fixed cost per minute.
    let got = w
        .v2("GET", &format!("/v1/actions/{id}"), keys::AGENT, None)
        .await;
    assert_eq!(got.body["state"], "succeeded");
    report("GET /v1/actions/{id}", &drain(), &mut (0.0, 0.0));
    w.v2(
        "GET",
        &format!("/v1/actions/{id}/events"),
        keys::AGENT,
        None,
    )
    .await;
    report("GET /v1/actions/{id}/events", &drain(), &mut (0.0, 0.0));
    w.engine.sweep().await.unwrap();
    report("sweep, nothing due (per minute)", &drain(), &mut (0.0, 0.0));

    // The items the action left: their sizes are what the capacity is made of.
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
        .map(|i| {
            let sk = match i.get("sk") {
                Some(aws_sdk_dynamodb::types::AttributeValue::S(s)) => s.clone(),
                _ => "?".into(),
            };
            (sk, item_size(i))
        })
        .collect();
    sizes.sort();
    println!("item sizes (bytes): {sizes:?}");
    let action_size = sizes
        .iter()
        .find(|(sk, _)| sk == "ACTION")
        .map(|(_, s)| *s)
        .unwrap();
    let value: Value =
        json!({"reads": totals.0, "writes": totals.1, "action_item_bytes": action_size});
    println!("summary: {value}");
    assert!(totals.1 > 0.0, "writes report their capacity");
}
