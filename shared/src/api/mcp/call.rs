//! `tools/call`: a call through the very gate of `POST /v1/actions` (`Engine::submit`),
//! answered by its decision (SC-MCP-03, SC-MCP-04), and the built-in `countersign_status`.

use super::{
    list::{deferrable, WINDOW_ARG},
    revision::{Revision, META_CAPABILITIES, TASKS_EXTENSION},
    rpc::{tenant, Rpc, RpcError},
    tasks, text,
};
use crate::{
    api::{
        body::{idempotency_key, RequestedWindow, SubmitRequest},
        error::ApiError,
    },
    config::{Tenant, ToolEntry},
    Error,
};
use serde_json::{json, Map, Value};

/// The same window for programmatic clients, in `params._meta`.
const WINDOW_META: &str = "io.countersign/window";
/// An idempotency key for programmatic clients, in `params._meta` (as `Idempotency-Key`).
const IDEMPOTENCY_META: &str = "io.countersign/idempotencyKey";

/// The catalog tool a `tools/call` name reaches (SC-MCP-09): its MCP name, or its catalog name,
/// still accepted for clients written before names were made model-API names. The config keeps
/// every such name to one tool.
fn resolve<'t>(tenant: &'t Tenant, name: &str) -> Option<&'t ToolEntry> {
    tenant
        .tools
        .values()
        .find(|t| t.mcp_name() == name)
        .or_else(|| tenant.tool(name))
}

/// `tools/call`: submit through the engine's gate and answer by the decision.
pub(super) async fn call(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let name = rpc.text("name")?;
    let mut args = match rpc.params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(_) => return Err(RpcError::invalid_params("arguments must be an object")),
    };
    if name == text::STATUS_TOOL {
        return status(rpc, &args).await;
    }
    let tenant = tenant(rpc)?;
    let Some(tool) = resolve(tenant, name) else {
        return Err(RpcError::invalid_params(format!("Unknown tool: {name}")));
    };
    let name = tool.name.as_str();
    let task = wants_task(rpc);
    if task && rpc.rev == Revision::Legacy && !deferrable(tenant, name) {
        // 2025-11-25: a task for a tool without taskSupport is refused this way.
        return Err(RpcError::new(
            axum::http::StatusCode::OK,
            -32601,
            format!("{name} runs at once; call it without a task"),
        ));
    }
    let schedule = match take_window(&mut args, rpc) {
        Ok(schedule) => schedule,
        Err(message) => return Ok(tool_error("validation_failed", None, message)),
    };
    let windowed = schedule.is_some();
    let key = rpc
        .meta()
        .and_then(|m| m.get(IDEMPOTENCY_META))
        .and_then(Value::as_str);
    let request = SubmitRequest {
        tool: name.to_owned(),
        args,
        action_kind: None,
        run: None,
        schedule,
    };
    let checked = request
        .into_submission()
        .and_then(|call| Ok((call, key.map(idempotency_key).transpose()?)));
    let (call, key) = match checked {
        Ok(checked) => checked,
        Err(e) => return refused(e, windowed),
    };
    let action = match rpc.engine.submit(rpc.who, call, key).await {
        Ok(submitted) => submitted.action,
        // A refusal is recorded as a sealed action: answer it like any other.
        Err(Error::Refused { action_id, .. }) => rpc
            .engine
            .get(rpc.who, &action_id)
            .await
            .map_err(RpcError::from_engine)?,
        Err(e) => return refused(e.into(), windowed),
    };
    tracing::info!(tenant = %action.tenant(), action_id = %action.id(), state = %action.state(), version = rpc.version.as_str(), task, "mcp tools/call");
    Ok(tasks::answer(rpc, tenant, &action, task))
}

/// Whether this request may be answered with a task: on 2025-11-25 the request asks for one
/// (`params.task`); on 2026-07-28 the client declares the tasks extension in `_meta`.
fn wants_task(rpc: &Rpc<'_>) -> bool {
    match rpc.rev {
        Revision::Legacy => {
            rpc.version.has_core_tasks() && rpc.params.get("task").is_some_and(Value::is_object)
        }
        Revision::Modern => rpc
            .meta()
            .and_then(|m| m.get(META_CAPABILITIES))
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some(),
    }
}

/// The window from `arguments.countersign_window` or `_meta`, validated later by the intake.
/// `null` is no window: models send it for an optional property they leave out.
fn take_window(
    args: &mut Map<String, Value>,
    rpc: &Rpc<'_>,
) -> Result<Option<RequestedWindow>, String> {
    let from_args = args.remove(WINDOW_ARG).filter(|w| !w.is_null());
    let from_meta = rpc
        .meta()
        .and_then(|m| m.get(WINDOW_META))
        .filter(|w| !w.is_null())
        .cloned();
    let window = match (from_args, from_meta) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "give the window once: {WINDOW_ARG} or _meta {WINDOW_META}"
            ))
        }
        (Some(w), None) | (None, Some(w)) => w,
        (None, None) => return Ok(None),
    };
    serde_json::from_value(window).map(Some).map_err(|e| {
        format!("{WINDOW_ARG} must be {{\"not_before\": RFC 3339, \"not_after\": RFC 3339}}: {e}")
    })
}

/// Errors of a call that recorded no action: the model's mistakes are tool errors it can read
/// and fix, naming the MCP argument; the server's failures are JSON-RPC errors.
fn refused(e: ApiError, windowed: bool) -> Result<Value, RpcError> {
    let (_, code) = e.status_and_code();
    let e = match e {
        ApiError::Engine(e) => e,
        e @ ApiError::PayloadTooLarge(_) => return Ok(tool_error(code, None, e.to_string())),
        other => return Err(RpcError::from_engine(other)),
    };
    match e {
        // A scheduled call without a window: the API's words name its `schedule` field.
        Error::Validation { param, .. } if param == "schedule" && !windowed => Ok(tool_error(
            code,
            Some(WINDOW_ARG.to_owned()),
            format!(
                "this call runs unattended, only inside a window: pass {WINDOW_ARG} \
                 {{\"not_before\": …, \"not_after\": …}} (RFC 3339 times with an offset)"
            ),
        )),
        Error::Validation { param, message } => {
            let param = match param.as_str() {
                "schedule" => WINDOW_ARG.to_owned(),
                p => p.to_owned(),
            };
            Ok(tool_error(code, Some(param), message))
        }
        Error::IdempotencyConflict | Error::Forbidden(_) => {
            let message = e.to_string();
            Ok(tool_error(code, None, message))
        }
        other => Err(RpcError::from_engine(other)),
    }
}

fn tool_error(code: &str, param: Option<String>, message: String) -> Value {
    let mut content = json!({"code": code});
    let text = match &param {
        Some(p) => format!("Not accepted ({code}, {p}): {message}"),
        None => format!("Not accepted ({code}): {message}"),
    };
    if let Some(param) = param {
        content["param"] = json!(param);
    }
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": content,
        "isError": true,
    })
}

/// `countersign_status {action_id}`: the caller's own action as a result; any other id is
/// simply not found.
async fn status(rpc: &Rpc<'_>, args: &Map<String, Value>) -> Result<Value, RpcError> {
    let Some(id) = args.get("action_id").and_then(Value::as_str) else {
        return Ok(tool_error(
            "validation_failed",
            Some("action_id".into()),
            "action_id (act_…) is required".into(),
        ));
    };
    let tenant = tenant(rpc)?;
    match tasks::own(rpc, id).await? {
        Some(action) => {
            let mut result = text::call_result(tenant, &action);
            let status = text::status_message(tenant, &action);
            // The status call itself succeeded; the action's own outcome is in the content.
            result["isError"] = json!(false);
            result["content"] = json!([{"type": "text", "text": format!(
                "Action {} ({}): {status}.\n{}",
                action.id(), action.call().tool(),
                result["content"][0]["text"].as_str().unwrap_or_default()
            )}]);
            result["structuredContent"] = json!({
                "action_id": action.id(),
                "tool": action.call().tool(),
                "state": action.state(),
                "status": status,
                "result": action.outcome().and_then(|o| o.result.clone()),
                "error": action.outcome().and_then(|o| o.error.clone()),
            });
            Ok(result)
        }
        None => Ok(tool_error(
            "not_found",
            Some("action_id".into()),
            format!("no action {id} of yours"),
        )),
    }
}
