//! What a model reads: an action as a `CallToolResult` and as a task's status message. Few MCP
//! clients support tasks, so the plain answers must say what happened and what comes next.

use crate::{
    config::Tenant,
    domain::{context::window_sentence, Action, NextAction, State, Window},
    error::Refusal,
};
use jiff::Timestamp;
use serde_json::{json, Value};

/// The built-in tool that follows an action by its id.
pub(super) const STATUS_TOOL: &str = crate::config::MCP_STATUS_TOOL;

/// A time in the tenant's zone, as a person reads it: "2026-12-01 17:30 CET".
fn local(tenant: &Tenant, t: Timestamp) -> String {
    t.to_zoned(tenant.time_zone.clone())
        .strftime("%Y-%m-%d %H:%M %Z")
        .to_string()
}

/// "between Wed 21 Oct 2026 17:30 and 19:30 CEST (Europe/Berlin)", as the approver is shown.
fn between(tenant: &Tenant, not_before: Timestamp, not_after: Timestamp) -> String {
    let window = Window {
        not_before,
        not_after,
    };
    window_sentence(&window, &tenant.time_zone, &tenant.time_zone_name)
}

/// One line for a person or a model: where the action stands.
pub(super) fn status_message(tenant: &Tenant, a: &Action) -> String {
    match (a.state(), a.next_action()) {
        (State::PendingApproval, _) => {
            let mut s = "waiting for a countersignature".to_owned();
            if let Some(w) = a.call().schedule() {
                s += &format!(
                    "; once approved it runs {}",
                    between(tenant, w.not_before, w.not_after)
                );
            }
            if let Some(approval) = &a.approval() {
                s += &format!(
                    " (the request lapses at {})",
                    local(tenant, approval.expires_at)
                );
            }
            s
        }
        (
            State::Approved,
            NextAction::Scheduled {
                not_before,
                not_after,
            },
        ) => {
            format!("approved — runs {}", between(tenant, not_before, not_after))
        }
        (State::Approved, _) => "approved — runs shortly".to_owned(),
        (State::Executing, _) => "running now".to_owned(),
        (State::Succeeded, _) if a.reason() == Some("set_result") => {
            "answered by policy; the tool did not run".to_owned()
        }
        (State::Succeeded, _) => "completed".to_owned(),
        (State::Failed, _) => format!("failed: {}", failure(a)),
        (State::Cancelled | State::Denied, _) => sealed_why(a),
    }
}

/// What a tool failure names: its kind (`http`, `timeout`, …) or the seal reason.
fn failure(a: &Action) -> String {
    let outcome = a.outcome();
    match outcome.and_then(|o| o.error.as_ref()) {
        Some(error) => {
            let kind = error["kind"].as_str().unwrap_or("tool_error");
            match error["status"].as_u64() {
                Some(status) => format!("the tool answered HTTP {status} ({kind})"),
                None => format!("the tool call failed ({kind})"),
            }
        }
        None if a.reason() == Some("outcome_unknown") => {
            "the outcome is unknown: the tool may have run; check before trying again".to_owned()
        }
        None => format!("the tool call failed ({})", a.reason().unwrap_or("unknown")),
    }
}

/// Why a cancelled or denied action did not run, in words.
fn sealed_why(a: &Action) -> String {
    let reason = a.reason().unwrap_or_default();
    if let Some(refusal) = Refusal::from_reason(reason) {
        return format!("refused: {}", refusal.message());
    }
    match reason {
        "cancelled" => "cancelled before it ran".to_owned(),
        "catalog_changed" => "not run: the tool changed after the approval".to_owned(),
        "schedule_missed" => "not run: its window closed before it could run".to_owned(),
        "approval_expired" => "not run: nobody countersigned it in time".to_owned(),
        words => format!("denied by a person: {words}"),
    }
}

/// The stable code a tool error names in `structuredContent.code`.
pub(super) fn code(a: &Action) -> String {
    let reason = a.reason().unwrap_or_default();
    if let Some(refusal) = Refusal::from_reason(reason) {
        return refusal.code().to_owned();
    }
    match (a.state(), reason) {
        (State::Failed, "outcome_unknown") => "outcome_unknown".to_owned(),
        (State::Failed, _) => "tool_failed".to_owned(),
        (State::Denied, _) => "denied_by_approver".to_owned(),
        (_, reason) => reason.to_owned(),
    }
}

/// `structuredContent` must be an object on 2025-11-25: other results are wrapped.
fn structured(result: &Value) -> Value {
    match result {
        Value::Object(_) => result.clone(),
        other => json!({"result": other}),
    }
}

fn text(t: String) -> Value {
    json!([{"type": "text", "text": t}])
}

/// The `CallToolResult` for an action as it stands now: its result once it succeeded, an
/// `isError` result that says why when it did not, and a plain result that says what happens
/// next while it waits.
pub(super) fn call_result(tenant: &Tenant, a: &Action) -> Value {
    match a.state() {
        State::Succeeded => {
            let result = a
                .outcome()
                .and_then(|o| o.result.clone())
                .unwrap_or(Value::Null);
            json!({
                "content": text(result.to_string()),
                "structuredContent": structured(&result),
                "isError": false,
            })
        }
        State::Failed | State::Cancelled | State::Denied => {
            let error = a.outcome().and_then(|o| o.error.clone());
            let mut content = json!({"code": code(a), "action_id": a.id()});
            if let Some(error) = error {
                content["error"] = error;
            }
            json!({
                "content": text(format!(
                    "{} (action {}). {}",
                    capitalized(&status_message(tenant, a)),
                    a.id(),
                    advice(a)
                )),
                "structuredContent": content,
                "isError": true,
            })
        }
        State::PendingApproval | State::Approved | State::Executing => json!({
            "content": text(waiting(tenant, a)),
            "structuredContent": {
                "action_id": a.id(),
                "state": a.state(),
                "status": status_message(tenant, a),
                "follow": {"tool": STATUS_TOOL, "arguments": {"action_id": a.id()}},
            },
            "isError": false,
        }),
    }
}

/// What a model should do after a refusal or a failure.
fn advice(a: &Action) -> &'static str {
    match a.state() {
        State::Failed => "Do not assume it took effect.",
        _ => "It did not run; do not retry it unchanged.",
    }
}

/// The plain answer for a call that has not run yet: what happens, and how to follow it.
pub(super) fn waiting(tenant: &Tenant, a: &Action) -> String {
    format!(
        "Not run yet: {}. countersign holds this exact call as action {id}; it runs only as \
         described and nothing needs to be sent again. To see how it ended, call the \
         {STATUS_TOOL} tool with {{\"action_id\": \"{id}\"}} later.",
        status_message(tenant, a),
        id = a.id()
    )
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
