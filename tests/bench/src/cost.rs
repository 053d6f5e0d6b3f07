//! Cost per million on AWS list prices, per path, from what the paths really spend: the
//! DynamoDB capacity every store request reports (the adapter asks for
//! `ReturnConsumedCapacity`, index writes included) against LocalStack, and each handler's
//! wall time as Lambda duration at the function's configured memory (`infra/template.yaml`).
//! The same runs give each function's warm handler latency.

#[path = "../../aws_support/mod.rs"]
mod aws_support;

use crate::{prices, stats::Summary};
use aws_support::AwsWorld;
use countersign_tests::keys;
use jiff::SignedDuration;
use serde_json::json;
use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, OnceLock},
    time::Instant,
};
use tracing::field::{Field, Visit};
use tracing_subscriber::{layer::Context, prelude::*, Layer};

/// The capacity of the store requests since the last drain: (read units, write units).
#[derive(Debug, Default, Clone, Copy)]
pub struct Units {
    pub read: f64,
    pub write: f64,
}

impl std::ops::AddAssign for Units {
    fn add_assign(&mut self, o: Units) {
        self.read += o.read;
        self.write += o.write;
    }
}

type Spent = Arc<Mutex<Units>>;

/// Install the collector once (it is the process's tracing subscriber).
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

fn drain() -> Units {
    std::mem::take(&mut *spent().lock().unwrap())
}

/// Collects the adapter's `"dynamodb consumed capacity"` events: `read_units`/`write_units` when
/// the adapter reports them split, else `capacity_units` classified by the operation's name.
struct Capacity(Spent);

#[derive(Default)]
struct Fields {
    message: String,
    op: String,
    total: Option<f64>,
    read: Option<f64>,
    write: Option<f64>,
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        match field.name() {
            "capacity_units" => self.total = Some(value),
            "read_units" => self.read = Some(value),
            "write_units" => self.write = Some(value),
            _ => {}
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "op" {
            self.op = value.to_owned();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "op" => self.op = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capacity {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        if f.message != "dynamodb consumed capacity" {
            return;
        }
        let units = match (f.read, f.write, f.total) {
            (None, None, None) => return,
            (None, None, Some(total)) if is_read(&f.op) => Units {
                read: total,
                write: 0.0,
            },
            (None, None, Some(total)) => Units {
                read: 0.0,
                write: total,
            },
            (read, write, _) => Units {
                read: read.unwrap_or(0.0),
                write: write.unwrap_or(0.0),
            },
        };
        *self.0.lock().unwrap() += units;
    }
}

fn is_read(op: &str) -> bool {
    let op = op.trim_matches('"');
    [
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "TransactGetItems",
    ]
    .iter()
    .any(|r| op.starts_with(r))
}

/// A function of the deployment and its configured memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Function {
    Intake,
    Approve,
    Cancel,
    Resume,
}

impl Function {
    pub const ALL: [Function; 4] = [
        Function::Intake,
        Function::Approve,
        Function::Cancel,
        Function::Resume,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Function::Intake => "intake",
            Function::Approve => "approve",
            Function::Cancel => "cancel",
            Function::Resume => "resume",
        }
    }

    fn resource(self) -> &'static str {
        match self {
            Function::Intake => "IntakeFunction",
            Function::Approve => "ApproveFunction",
            Function::Cancel => "CancelFunction",
            Function::Resume => "ResumeFunction",
        }
    }
}

/// `MemorySize` of each function in `infra/template.yaml` (what duration is billed at).
pub fn memory_mb() -> BTreeMap<Function, u32> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../infra/template.yaml");
    let text = std::fs::read_to_string(path).expect("infra/template.yaml");
    let template: serde_norway::Value = serde_norway::from_str(&text).expect("template YAML");
    let global = template["Globals"]["Function"]["MemorySize"].as_u64();
    Function::ALL
        .iter()
        .map(|&f| {
            let own = template["Resources"][f.resource()]["Properties"]["MemorySize"].as_u64();
            let mb = own.or(global).expect("every function has a MemorySize");
            (f, mb as u32)
        })
        .collect()
}

/// One path's measured spend per run.
#[derive(Debug, Clone)]
pub struct PathCost {
    pub name: &'static str,
    pub what: &'static str,
    pub units: Units,
    /// Mean handler time per invocation, per function invoked on this path.
    pub invocations: Vec<(Function, f64)>,
    pub api_requests: u32,
    pub scheduler_invocations: u32,
    /// The same flow as a Step Functions Standard state machine (see `step_functions`).
    pub sfn_transitions: u32,
}

impl PathCost {
    /// Dollars per million runs of this path, by part.
    pub fn dollars(&self, memory: &BTreeMap<Function, u32>) -> Dollars {
        let dynamodb =
            self.units.write * prices::DYNAMODB_WRU + self.units.read * prices::DYNAMODB_RRU;
        let lambda: f64 = self
            .invocations
            .iter()
            .map(|&(f, ms)| prices::LAMBDA_REQUEST + prices::lambda_duration(ms, memory[&f]))
            .sum();
        let api = self.api_requests as f64 * prices::HTTP_API_REQUEST;
        let scheduler = self.scheduler_invocations as f64 * prices::SCHEDULER_INVOCATION;
        let m = 1e6;
        Dollars {
            dynamodb: dynamodb * m,
            lambda: lambda * m,
            api: api * m,
            scheduler: scheduler * m,
            total: (dynamodb + lambda + api + scheduler) * m,
            step_functions: self.sfn_transitions as f64 * prices::STEP_FUNCTIONS_TRANSITION * m,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Dollars {
    pub dynamodb: f64,
    pub lambda: f64,
    pub api: f64,
    pub scheduler: f64,
    pub total: f64,
    /// Step Functions Standard's transitions alone for the same flow (it would still need the
    /// API, a Lambda per task and a store for the approval; those are not added).
    pub step_functions: f64,
}

/// What the cost runs measured.
pub struct CostReport {
    pub paths: Vec<PathCost>,
    pub warm: BTreeMap<&'static str, Summary>,
    pub memory: BTreeMap<Function, u32>,
}

/// Accumulates one path's runs.
struct Tally {
    units: Units,
    ms: BTreeMap<Function, Vec<f64>>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            units: Units::default(),
            ms: BTreeMap::new(),
        }
    }

    fn record(&mut self, f: Function, started: Instant) {
        self.ms
            .entry(f)
            .or_default()
            .push(started.elapsed().as_secs_f64() * 1000.0);
        self.units += drain();
    }

    fn finish(
        self,
        runs: usize,
        name: &'static str,
        what: &'static str,
        api_requests: u32,
        scheduler_invocations: u32,
        sfn_transitions: u32,
    ) -> PathCost {
        let n = runs as f64;
        PathCost {
            name,
            what,
            units: Units {
                read: self.units.read / n,
                write: self.units.write / n,
            },
            invocations: self
                .ms
                .iter()
                .map(|(&f, ms)| (f, ms.iter().sum::<f64>() / ms.len() as f64))
                .collect(),
            api_requests,
            scheduler_invocations,
            sfn_transitions,
        }
    }
}

/// Step Functions Standard, the same flows as state machines (every state entered is one
/// billed transition):
/// lifecycle = RequestApproval (task, `.waitForTaskToken`) → Approved? (choice) → WaitForWindow
/// (wait, `TimestampPath`) → RunTool (task) → Done (succeed): 5;
/// cancel = RequestApproval → Approved? → Cancelled (fail): 3;
/// allow = RunTool → Done: 2.
pub const SFN_LIFECYCLE: u32 = 5;
pub const SFN_CANCEL: u32 = 3;
pub const SFN_ALLOW: u32 = 2;

/// Run each path `runs` times (after one warm-up run) through the real handlers against
/// LocalStack.
pub async fn measure(runs: usize) -> CostReport {
    drain();
    let w = AwsWorld::new("bench").await;
    let mut lifecycle = Tally::new();
    let mut cancel = Tally::new();
    let mut allow = Tally::new();
    let mut warm: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for run in 0..=runs {
        // Run 0 warms the clients (connections, credentials) and is not counted.
        let (mut l, mut c, mut a) = (Tally::new(), Tally::new(), Tally::new());
        lifecycle_once(&w, &mut l).await;
        cancel_once(&w, &mut c).await;
        allow_once(&w, &mut a).await;
        if run == 0 {
            continue;
        }
        for (tally, into) in [(l, &mut lifecycle), (c, &mut cancel), (a, &mut allow)] {
            into.units += tally.units;
            for (f, ms) in tally.ms {
                into.ms.entry(f).or_default().extend(ms);
            }
        }
    }
    for (label, f, tally) in [
        ("intake (submit, pending)", Function::Intake, &lifecycle),
        (
            "approve (ticket, wake armed)",
            Function::Approve,
            &lifecycle,
        ),
        (
            "resume (wake → claim → tool → result)",
            Function::Resume,
            &lifecycle,
        ),
        ("cancel (pending)", Function::Cancel, &cancel),
        ("intake (allow → runs inline)", Function::Intake, &allow),
    ] {
        warm.insert(label, tally.ms[&f].clone());
    }
    let paths = vec![
        lifecycle.finish(
            runs,
            "lifecycle",
            "submit → approve → wake → run → result",
            2,
            1,
            SFN_LIFECYCLE,
        ),
        cancel.finish(
            runs,
            "cancel",
            "submit → cancel (pending)",
            2,
            0,
            SFN_CANCEL,
        ),
        allow.finish(
            runs,
            "allow",
            "submit → runs inline → result",
            1,
            0,
            SFN_ALLOW,
        ),
    ];
    CostReport {
        paths,
        warm: warm.into_iter().map(|(k, v)| (k, Summary::of(v))).collect(),
        memory: memory_mb(),
    }
}

/// Args of a typical size (≈ 100 bytes).
fn args() -> serde_json::Value {
    json!({"to": "ops@example.com", "subject": "quarterly report", "body": "Numbers attached."})
}

async fn lifecycle_once(w: &AwsWorld, t: &mut Tally) {
    drain();
    let body = json!({
        "tool": "mail.send",
        "args": args(),
        "schedule": {"not_before": w.at(120), "not_after": w.at(900)}
    });
    let started = Instant::now();
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    t.record(Function::Intake, started);
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();

    let digest = submitted.body["approval"]["context_digest"].clone();
    let started = Instant::now();
    let approved = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/approve"),
            keys::APPROVER,
            Some(json!({ "context_digest": digest })),
        )
        .await;
    t.record(Function::Approve, started);
    assert_eq!(approved.status, 200, "{:?}", approved.body);

    // The wake's input, as the Scheduler stored it (read outside the tally).
    let wake = serde_json::to_string(&w.wake_of(&id).await).unwrap();
    drain();
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
    let started = Instant::now();
    let outcome = w.deliver(&wake).await.unwrap();
    t.record(Function::Resume, started);
    assert_eq!(outcome["outcome"], "ran", "{outcome}");
}

async fn cancel_once(w: &AwsWorld, t: &mut Tally) {
    drain();
    let body = json!({
        "tool": "mail.send",
        "args": args(),
        "schedule": {"not_before": w.at(120), "not_after": w.at(900)}
    });
    let started = Instant::now();
    let submitted = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    t.record(Function::Intake, started);
    assert_eq!(submitted.status, 202, "{:?}", submitted.body);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let cancelled = w
        .v2(
            "POST",
            &format!("/v1/actions/{id}/cancel"),
            keys::AGENT,
            Some(json!({})),
        )
        .await;
    t.record(Function::Cancel, started);
    assert_eq!(cancelled.status, 200, "{:?}", cancelled.body);
    assert_eq!(cancelled.body["state"], "cancelled");
}

async fn allow_once(w: &AwsWorld, t: &mut Tally) {
    drain();
    let body = json!({"tool": "search.web", "args": {"q": "countersign"}});
    let started = Instant::now();
    let ran = w.v2("POST", "/v1/actions", keys::AGENT, Some(body)).await;
    t.record(Function::Intake, started);
    assert_eq!(ran.status, 200, "{:?}", ran.body);
    assert_eq!(ran.body["state"], "succeeded");
}
