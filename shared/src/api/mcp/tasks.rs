//! Tasks: an action that waits (for a countersignature, for its window) is the task of the
//! call that created it. The task id is the action id (`act_` + ULID: 80 random bits), and it
//! exists as soon as the answer does, since the intake commits the action first. Another
//! agent's or tenant's task answers exactly as a missing one (SC-SEC-01).

use super::{
    revision::Revision,
    rpc::{tenant, Rpc, RpcError},
    text,
};
use crate::{
    config::Tenant,
    domain::{Action, State},
    engine::ListFilter,
    Error,
};
use jiff::SignedDuration;
use serde_json::{json, Value};

/// How often a client is asked to poll.
const POLL_MS: u64 = 2_000;
/// How long a sealed task stays worth reading after its last possible run, in its `ttl`.
const KEPT_AFTER: SignedDuration = SignedDuration::from_hours(24);
/// `tasks/result` re-reads a waiting action this often.
const RESULT_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The caller's own action, or `None` for a missing one — which is what another agent's is to
/// an agent key (the engine's read rule, SC-SEC-01).
pub(super) async fn own(rpc: &Rpc<'_>, id: &str) -> Result<Option<Action>, RpcError> {
    match rpc.engine.get(rpc.who, id).await {
        Ok(action) => Ok(Some(action)),
        Err(Error::NotFound(_)) => Ok(None),
        Err(e) => Err(RpcError::from_engine(e)),
    }
}

fn not_found() -> RpcError {
    RpcError::invalid_params("Task not found")
}

async fn own_task(rpc: &Rpc<'_>) -> Result<Action, RpcError> {
    let id = rpc.text("taskId")?;
    own(rpc, id).await?.ok_or_else(not_found)
}

/// MCP task status. A tool failure or a refusal is a `completed` task whose result has
/// `isError` on 2026-07-28 (its `failed` is for JSON-RPC errors only); 2025-11-25 says `failed`.
fn status(a: &Action, rev: Revision) -> &'static str {
    match (a.state(), rev) {
        (State::PendingApproval | State::Approved | State::Executing, _) => "working",
        (State::Succeeded, _) => "completed",
        (State::Cancelled, _) => "cancelled",
        (State::Failed | State::Denied, Revision::Legacy) => "failed",
        (State::Failed | State::Denied, Revision::Modern) => "completed",
    }
}

/// Milliseconds from creation until the task is no longer worth reading: past the last moment
/// it could run (its window, its approval's lapse, or the run deadline), plus a day.
fn ttl_ms(rpc: &Rpc<'_>, a: &Action) -> i64 {
    let run_deadline = a
        .created_at()
        .saturating_add(rpc.engine.config().limits.run_deadline)
        .unwrap_or(a.created_at());
    let last = [
        a.call().schedule().map(|w| w.not_after),
        a.approval().map(|ap| ap.expires_at),
        Some(run_deadline),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(run_deadline);
    let until = last.saturating_add(KEPT_AFTER).unwrap_or(last);
    until.duration_since(a.created_at()).as_millis() as i64
}

fn task(rpc: &Rpc<'_>, tenant: &Tenant, a: &Action) -> Value {
    let (ttl, poll) = match rpc.rev {
        Revision::Legacy => ("ttl", "pollInterval"),
        Revision::Modern => ("ttlMs", "pollIntervalMs"),
    };
    let mut task = json!({
        "taskId": a.id(),
        "status": status(a, rpc.rev),
        "statusMessage": text::status_message(tenant, a),
        "createdAt": a.created_at().to_string(),
        "lastUpdatedAt": a.updated_at().to_string(),
    });
    task[ttl] = json!(ttl_ms(rpc, a));
    task[poll] = json!(POLL_MS);
    task
}

/// The answer to a `tools/call` that committed `a`: a task where the client asked for one
/// (2025-11-25) or accepts them and the call waits (2026-07-28); otherwise the plain result.
pub(super) fn answer(rpc: &Rpc<'_>, tenant: &Tenant, a: &Action, wants_task: bool) -> Value {
    match (rpc.rev, wants_task) {
        (Revision::Legacy, true) => json!({
            "task": task(rpc, tenant, a),
            "_meta": {"io.modelcontextprotocol/model-immediate-response": text::waiting(tenant, a)},
        }),
        (Revision::Modern, true) if !a.state().is_sealed() => {
            let mut created = task(rpc, tenant, a);
            created["resultType"] = json!("task");
            created
        }
        _ => text::call_result(tenant, a),
    }
}

/// `tasks/get`; on 2026-07-28 a finished task carries its `CallToolResult`.
pub(super) async fn get(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let a = own_task(rpc).await?;
    let tenant = tenant(rpc)?;
    let mut t = task(rpc, tenant, &a);
    if rpc.rev == Revision::Modern && a.state().is_sealed() && t["status"] == "completed" {
        t["result"] = text::call_result(tenant, &a);
    }
    Ok(t)
}

/// 2025-11-25 `tasks/result`: the call's result once the action is sealed. It waits, but never
/// past the request budget (SC-EDGE-07), its store reads included: each read gets only what is
/// left of the budget. Then it answers an error and the client polls again.
pub(super) async fn result(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let budget = rpc.engine.config().limits.request_budget.unsigned_abs();
    let give_up = tokio::time::Instant::now() + budget;
    let tenant = tenant(rpc)?;
    let id = rpc.text("taskId")?;
    let mut last = None;
    loop {
        let Ok(read) = tokio::time::timeout_at(give_up, own(rpc, id)).await else {
            return Err(still_working(tenant, id, last.as_ref()));
        };
        let a = read?.ok_or_else(not_found)?;
        if a.state().is_sealed() {
            let mut result = text::call_result(tenant, &a);
            result["_meta"] = json!({"io.modelcontextprotocol/related-task": {"taskId": a.id()}});
            return Ok(result);
        }
        if tokio::time::Instant::now() + RESULT_POLL >= give_up {
            return Err(still_working(tenant, id, Some(&a)));
        }
        tokio::time::sleep(RESULT_POLL).await;
        last = Some(a);
    }
}

/// The budget ran out before the task finished: poll again. Without a read that came back in
/// time, what the task waits for is not known.
fn still_working(tenant: &Tenant, id: &str, last: Option<&Action>) -> RpcError {
    let (message, data) = match last {
        Some(a) => (
            format!(
                "Task {id} is still working ({}); poll tasks/get and ask for the result again",
                text::status_message(tenant, a)
            ),
            json!({"taskId": id, "status": "working"}),
        ),
        None => (
            format!(
                "Task {id} could not be read within the request budget; poll tasks/get and \
                 ask for the result again"
            ),
            json!({"taskId": id}),
        ),
    };
    RpcError::new(axum::http::StatusCode::OK, -32000, message).with_data(data)
}

/// 2025-11-25 `tasks/list`: the caller's own actions, newest first, a page at a time.
pub(super) async fn list(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let cursor = match rpc.params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(RpcError::invalid_params("cursor must be a string")),
    };
    let filter = ListFilter {
        agent_id: Some(rpc.who.id.clone()),
        limit: Some(50),
        cursor,
        ..ListFilter::default()
    };
    let (actions, next) = match rpc.engine.list(rpc.who, filter).await {
        Ok(page) => page,
        Err(Error::Validation { message, .. }) => return Err(RpcError::invalid_params(message)),
        Err(e) => return Err(RpcError::from_engine(e)),
    };
    let tenant = tenant(rpc)?;
    let tasks: Vec<Value> = actions.iter().map(|a| task(rpc, tenant, a)).collect();
    let mut result = json!({ "tasks": tasks });
    if let Some(next) = next {
        result["nextCursor"] = json!(next);
    }
    Ok(result)
}

/// `tasks/cancel` is the engine's cancel (SC-CAN-01/02/03): a waiting action is sealed
/// `cancelled`; a running or finished one is not. 2025-11-25 refuses those with -32602 and
/// answers the cancelled task; 2026-07-28 acknowledges every known task with an empty result.
pub(super) async fn cancel(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let a = own_task(rpc).await?;
    let refused = |why: &str| match rpc.rev {
        Revision::Legacy => Err(RpcError::invalid_params(format!(
            "Cannot cancel task {}: {why}",
            a.id()
        ))),
        Revision::Modern => Ok(json!({})),
    };
    match rpc.engine.cancel(rpc.who, a.id()).await {
        Ok(cancelled) => match rpc.rev {
            Revision::Legacy => Ok(task(rpc, tenant(rpc)?, &cancelled)),
            Revision::Modern => Ok(json!({})),
        },
        Err(Error::ActionExecuting) => refused("it is running now"),
        Err(Error::ActionSealed { state }) => {
            refused(&format!("it is already in a terminal status ({state})"))
        }
        Err(Error::NotFound(_)) => Err(not_found()),
        Err(e) => Err(RpcError::from_engine(e)),
    }
}

/// 2026-07-28 `tasks/update`: countersign never asks a client for input, so there is nothing
/// outstanding to answer; a known task is acknowledged.
pub(super) async fn update(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    own_task(rpc).await?;
    Ok(json!({}))
}
