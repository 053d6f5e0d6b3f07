//! The adapter's "dynamodb consumed capacity" events (`meter::meter`), collected by a tracing
//! layer: what a test's requests cost in RRU and WRU, as DynamoDB (LocalStack) reported it.

use std::sync::{Arc, Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing_subscriber::{layer::Context, prelude::*, Layer};

/// One store request's report.
#[derive(Debug, Clone, Default)]
pub struct Spent {
    pub op: String,
    pub read: f64,
    pub write: f64,
    pub index: f64,
}

type Log = Arc<Mutex<Vec<Spent>>>;

/// The process-wide log (the collector is installed on first use): tests of one binary that
/// measure take turns.
fn log() -> &'static Log {
    static LOG: OnceLock<Log> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Log::default();
        tracing_subscriber::registry()
            .with(Capacity(log.clone()))
            .init();
        log
    })
}

/// Every report since the last drain, oldest first.
pub fn drain() -> Vec<Spent> {
    std::mem::take(&mut *log().lock().unwrap())
}

/// Collects the adapter's "dynamodb consumed capacity" events.
struct Capacity(Log);

#[derive(Default)]
struct Fields {
    message: String,
    spent: Spent,
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        match field.name() {
            "read_units" => self.spent.read = value,
            "write_units" => self.spent.write = value,
            "index_units" => self.spent.index = value,
            _ => {}
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "op" {
            self.spent.op = value.to_owned();
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
            self.0.lock().unwrap().push(fields.spent);
        }
    }
}
