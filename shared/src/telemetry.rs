//! countersign's own metrics, recorded through the `metrics` facade so the engine names what
//! happened and the process chooses where it goes: Prometheus text on the local server
//! ([`prometheus`], `--metrics-listen`), CloudWatch embedded metric format on Lambda
//! ([`emf`], flushed per invocation). With no recorder installed every call is a no-op.
//!
//! Names, units and labels are documented in `docs/operations.md`; the alarms' series carry no
//! labels (an alarm matches a metric's exact dimension set), so the families that alarm are
//! recorded once without labels and, where a breakdown helps, once more with them.

use crate::domain::{Action, Decision, Standing};
use metrics::{counter, describe_counter, describe_histogram, histogram, Unit};

pub const SUBMITTED: &str = "actions_submitted";
pub const TRANSITIONS: &str = "transitions";
pub const SEALED: &str = "actions_sealed";
pub const WAKE_LATENESS: &str = "wake_lateness_seconds";
pub const TOOL_ATTEMPT: &str = "tool_attempt_seconds";
pub const TOOL_OUTCOMES: &str = "tool_outcomes";
pub const STORE_WRITE_ERRORS: &str = "store_write_errors";
pub const STORE_AMBIGUOUS: &str = "store_ambiguous_writes";
pub const SWEEP_LOST_WAKES: &str = "sweep_lost_wakes";
pub const SWEEP_FINDS: &str = "sweep_finds";
pub const QUARANTINED: &str = "records_quarantined";
pub const NOTIFICATIONS_DELIVERED: &str = "notifications_delivered";
pub const NOTIFICATIONS_RETRYING: &str = "notifications_retrying";
pub const NOTIFICATIONS_DEAD: &str = "notifications_dead";
pub const EMAILS: &str = "emails";
pub const CONFIG_RELOADS: &str = "config_reloads";
pub const CONFIG_REJECTED: &str = "config_rejected";
pub const GRANTS_USED: &str = "grants_used";
pub const BATCH_DECISIONS: &str = "batch_decisions";
pub const SHADOW_DECISIONS: &str = "shadow_decisions";
pub const DECISION_SECONDS: &str = "decision_seconds";

/// Every metric with its unit and meaning, for the exporters that show them.
pub fn describe() {
    describe_counter!(
        SUBMITTED,
        Unit::Count,
        "actions submitted, by the gate's decision"
    );
    describe_counter!(
        TRANSITIONS,
        Unit::Count,
        "committed transitions, by the state entered"
    );
    describe_counter!(SEALED, Unit::Count, "actions sealed, by state and reason");
    describe_histogram!(
        WAKE_LATENESS,
        Unit::Seconds,
        "claim instant minus the ticket's due time"
    );
    describe_histogram!(
        TOOL_ATTEMPT,
        Unit::Seconds,
        "one tool attempt, send to answer"
    );
    describe_counter!(
        TOOL_OUTCOMES,
        Unit::Count,
        "tool attempts, by the kind of answer"
    );
    describe_counter!(
        STORE_WRITE_ERRORS,
        Unit::Count,
        "store writes answered with an error, by kind"
    );
    describe_counter!(
        STORE_AMBIGUOUS,
        Unit::Count,
        "errored writes resolved by reading back, by whose write was found"
    );
    describe_counter!(
        SWEEP_LOST_WAKES,
        Unit::Count,
        "due tickets the sweep performed because their wake never came"
    );
    describe_counter!(SWEEP_FINDS, Unit::Count, "what the sweep found, by kind");
    describe_counter!(
        QUARANTINED,
        Unit::Count,
        "stored records quarantined because they do not load"
    );
    describe_counter!(NOTIFICATIONS_DELIVERED, Unit::Count, "notices delivered");
    describe_counter!(
        EMAILS,
        Unit::Count,
        "approval mails the SMTP server took (sent) or did not (failed)"
    );
    describe_counter!(
        NOTIFICATIONS_RETRYING,
        Unit::Count,
        "notice tries that failed and will be retried"
    );
    describe_counter!(
        NOTIFICATIONS_DEAD,
        Unit::Count,
        "notices parked as dead letters after their last try"
    );
    describe_counter!(
        CONFIG_RELOADS,
        Unit::Count,
        "new configuration documents, by outcome: applied, rejected, unreadable"
    );
    describe_histogram!(
        DECISION_SECONDS,
        Unit::Seconds,
        "from a call that asked a person to the person's decision, by decision"
    );
    describe_counter!(
        SHADOW_DECISIONS,
        Unit::Count,
        "what rules in shadow would have decided, by rule, decision and the enforced decision"
    );
    describe_counter!(
        BATCH_DECISIONS,
        Unit::Count,
        "decisions of a batch (POST /v1/decisions), by decision and outcome"
    );
    describe_counter!(
        CONFIG_REJECTED,
        Unit::Count,
        "new configuration documents that did not load (the previous one stays)"
    );
    describe_counter!(
        GRANTS_USED,
        Unit::Count,
        "calls a scoped grant allowed without a person (SC-GR-02)"
    );
}

/// A call a grant allowed: its use committed (SC-GR-02).
pub fn grant_used() {
    counter!(GRANTS_USED).increment(1);
}

/// An action the gate decided (its decision, snake_case as in the API).
pub fn submitted(decision: Decision) {
    counter!(SUBMITTED, "decision" => decision_label(decision)).increment(1);
}

fn decision_label(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allow",
        Decision::Deny => "deny",
        Decision::SetResult => "set_result",
        Decision::RequireApproval => "require_approval",
        Decision::Schedule => "schedule",
    }
}

/// What the rules in shadow would have decided of one call the gate decided `enforced`
/// (SC-GR-21). The rule label is the config's (`name`, else the glob): a bounded set.
pub fn shadowed(verdicts: &[crate::domain::policy::ShadowVerdict], enforced: Decision) {
    for v in verdicts {
        counter!(
            SHADOW_DECISIONS,
            "rule" => v.label.clone(),
            "decision" => decision_label(v.decision),
            "enforced" => decision_label(enforced)
        )
        .increment(1);
    }
}

/// A committed transition (ours: answered or found by reading back). A claim — by a wake, the
/// sweep, a request inline or an approve-and-claim — records how late it came after the ticket
/// was due.
pub fn landed(action: &Action) {
    counter!(TRANSITIONS, "to" => action.state().as_str()).increment(1);
    match &action.standing() {
        Standing::Executing { ticket, .. } => {
            let late = action.updated_at().duration_since(ticket.due_at());
            histogram!(WAKE_LATENESS).record(late.as_secs_f64().max(0.0));
        }
        Standing::Sealed { end, outcome, .. } => {
            let reason = reason_label(outcome.reason.as_deref());
            counter!(SEALED, "state" => end.as_str(), "reason" => reason).increment(1);
        }
        _ => {}
    }
}

/// A seal's reason as a label: the system's codes as they are; an approver's own words (a
/// deny reason) as `approver_reason`, so a label never holds free text.
fn reason_label(reason: Option<&str>) -> &'static str {
    const CODES: [&str; 10] = [
        "cancelled",
        "stopped",
        "catalog_changed",
        "schedule_missed",
        "approval_expired",
        "outcome_unknown",
        "policy_denied",
        "schedule_needs_approval",
        "capability_bound",
        "set_result",
    ];
    match reason {
        None => "none",
        Some(r) => CODES
            .into_iter()
            .find(|c| *c == r)
            .unwrap_or("approver_reason"),
    }
}

/// One tool attempt and what it answered (`ok`, `tool_error`, `retryable`, …).
pub fn tool_attempt(seconds: f64, outcome: &'static str) {
    histogram!(TOOL_ATTEMPT).record(seconds);
    counter!(TOOL_OUTCOMES, "outcome" => outcome).increment(1);
}

/// A store write that errored: `conflict` or `unavailable`.
pub fn write_error(kind: &'static str) {
    counter!(STORE_WRITE_ERRORS, "kind" => kind).increment(1);
}

/// An errored write resolved by reading back: `ours` (it applied) or `theirs` (a race lost).
pub fn ambiguous_resolved(found: &'static str) {
    counter!(STORE_AMBIGUOUS, "found" => found).increment(1);
}

/// One sweep pass's finds.
pub fn swept(lost_wakes: usize, recovered: usize, expired: usize) {
    counter!(SWEEP_LOST_WAKES).increment(lost_wakes as u64);
    for (kind, n) in [
        ("lost_wake", lost_wakes),
        ("lapsed_lease", recovered),
        ("expiry", expired),
    ] {
        counter!(SWEEP_FINDS, "kind" => kind).increment(n as u64);
    }
}

/// A record quarantined (SC-EDGE-08).
pub fn quarantined() {
    counter!(QUARANTINED).increment(1);
}

/// One notification pass's results.
pub fn notified(delivered: usize, retrying: usize, dead: usize) {
    counter!(NOTIFICATIONS_DELIVERED).increment(delivered as u64);
    counter!(NOTIFICATIONS_RETRYING).increment(retrying as u64);
    counter!(NOTIFICATIONS_DEAD).increment(dead as u64);
}

/// Approval mails of one try: taken by the SMTP server, or not (retried with the notice).
pub fn mailed(sent: usize, failed: usize) {
    counter!(EMAILS, "outcome" => "sent").increment(sent as u64);
    counter!(EMAILS, "outcome" => "failed").increment(failed as u64);
}

/// A new configuration document: `applied`, `rejected` (it does not load; the alarm series
/// counts these too) or `unreadable` (SC-OPS-03).
pub fn config_reload(outcome: &'static str) {
    counter!(CONFIG_RELOADS, "outcome" => outcome).increment(1);
    if outcome == "rejected" {
        counter!(CONFIG_REJECTED).increment(1);
    }
}

/// A person's decision committed on `action` (SC-GR-22): how long the call waited for it.
pub fn decided_by_person(action: &Action) {
    use crate::domain::insights::{fate, Fate};
    let (decision, secs) = match fate(action) {
        Some(Fate::Approved(secs)) => ("approve", secs),
        Some(Fate::Denied(secs)) => ("deny", secs),
        _ => return,
    };
    histogram!(DECISION_SECONDS, "decision" => decision).record(secs);
}

/// One decision of a batch (SC-GR-20): an approve or a deny, taken or refused.
pub fn decided_in_batch(approve: bool, taken: bool) {
    let decision = if approve { "approve" } else { "deny" };
    let outcome = if taken { "taken" } else { "refused" };
    counter!(BATCH_DECISIONS, "decision" => decision, "outcome" => outcome).increment(1);
}

/// The local server's exporter: Prometheus text, served on a listen address of its own.
#[cfg(feature = "embedded")]
pub mod prometheus {
    use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
    use std::sync::OnceLock;

    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

    /// Install the process's recorder (once; later calls share it).
    pub fn install() -> PrometheusHandle {
        HANDLE
            .get_or_init(|| {
                let handle = PrometheusBuilder::new()
                    // Buckets for the two latency histograms (seconds): 1 ms to 5 min.
                    .set_buckets(&[
                        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                        30.0, 60.0, 300.0,
                    ])
                    .and_then(|b| b.install_recorder())
                    .unwrap_or_else(|e| {
                        // Another recorder is installed (a test harness): record nowhere.
                        tracing::warn!(error = %e, "metrics recorder not installed");
                        PrometheusBuilder::new().build_recorder().handle()
                    });
                super::describe();
                handle
            })
            .clone()
    }

    /// Serve `GET /metrics` on `listener` until the process ends.
    pub async fn serve(listener: tokio::net::TcpListener, handle: PrometheusHandle) {
        use axum::{http::header, routing::get, Router};
        let app = Router::new().route(
            "/metrics",
            get(move || {
                let handle = handle.clone();
                async move {
                    handle.run_upkeep();
                    (
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        handle.render(),
                    )
                }
            }),
        );
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    }
}

/// The Lambda functions' exporter: CloudWatch embedded metric format lines on stdout, in the
/// namespace `Countersign`, flushed once per invocation.
#[cfg(feature = "aws")]
pub mod emf {
    use std::sync::OnceLock;

    static COLLECTOR: OnceLock<Option<&'static metrics_cloudwatch_embedded::Collector>> =
        OnceLock::new();

    /// Install the process's recorder (at cold start).
    pub fn install() {
        COLLECTOR.get_or_init(|| {
            match metrics_cloudwatch_embedded::Builder::new()
                .cloudwatch_namespace("Countersign")
                .init()
            {
                Ok(collector) => {
                    super::describe();
                    Some(collector)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed");
                    None
                }
            }
        });
    }

    /// Write what this invocation recorded to `out` as one EMF document per line.
    pub fn flush_to(out: impl std::io::Write) {
        if let Some(Some(collector)) = COLLECTOR.get() {
            if let Err(e) = collector.flush(out) {
                tracing::warn!(error = %e, "metrics flush failed");
            }
        }
    }

    /// Write what this invocation recorded to stdout (the function's log).
    pub fn flush() {
        flush_to(std::io::stdout());
    }
}

#[cfg(all(test, feature = "aws"))]
mod tests {
    use super::*;

    /// SC-OPS-01 on Lambda: what an invocation recorded is flushed as EMF documents in the
    /// namespace the template's alarms read, the alarm series without dimensions.
    #[test]
    fn sc_ops_01_an_invocation_flushes_emf_documents_the_alarms_can_read() {
        emf::install();
        counter!(SWEEP_LOST_WAKES).increment(2);
        quarantined();
        histogram!(WAKE_LATENESS).record(0.25);
        submitted(Decision::Allow);
        let mut out = Vec::new();
        emf::flush_to(&mut out);
        let text = String::from_utf8(out).unwrap();
        let docs: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON document a line"))
            .collect();
        let find = |name: &str| {
            docs.iter()
                .find(|d| d.get(name).is_some())
                .unwrap_or_else(|| panic!("{name} not flushed: {text}"))
        };
        for (name, unit) in [
            (SWEEP_LOST_WAKES, "Count"),
            (QUARANTINED, "Count"),
            (WAKE_LATENESS, "Seconds"),
        ] {
            let doc = find(name);
            let meta = &doc["_aws"]["CloudWatchMetrics"][0];
            assert_eq!(meta["Namespace"], "Countersign", "{doc}");
            let dims = meta["Dimensions"].as_array().unwrap();
            assert!(
                dims.iter().all(|d| d.as_array().unwrap().is_empty()),
                "{name} has dimensions: {doc}"
            );
            let m = meta["Metrics"].as_array().unwrap();
            let entry = m.iter().find(|e| e["Name"] == name).unwrap();
            assert_eq!(entry["Unit"], unit, "{doc}");
            assert!(doc["_aws"]["Timestamp"].as_u64().unwrap() > 0);
        }
        assert_eq!(find(SWEEP_LOST_WAKES)[SWEEP_LOST_WAKES], 2);
        // A labelled family becomes a dimension.
        assert_eq!(find(SUBMITTED)["decision"], "allow");
        // Flushed means gone: the next invocation starts from zero.
        let mut again = Vec::new();
        emf::flush_to(&mut again);
        assert!(!String::from_utf8(again).unwrap().contains(SWEEP_LOST_WAKES));
    }
}
