//! One JSON-RPC message, alone or in a batch: its checks, the revision it speaks and the
//! method it calls.

use super::{
    call, guard, initialize, list,
    revision::{self, Revision, Version},
    rpc::{Reply, Rpc, RpcError},
    tasks,
};
use crate::{config::Principal, Engine};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Who sent a POST, and its headers: what every message of it shares.
pub(super) struct Caller<'a> {
    pub(super) engine: &'a Arc<Engine>,
    pub(super) who: &'a Principal,
    pub(super) headers: &'a HeaderMap,
}

/// How a message's revision is told: from the message and its POST's headers
/// ([`alone`]), or as a member of a batch (`batch::version`).
pub(super) type Versioning = fn(&str, &Map<String, Value>, &HeaderMap) -> Result<Version, RpcError>;

/// A message sent alone: its revision from its `_meta` or its POST's headers.
pub(super) fn alone(
    method: &str,
    params: &Map<String, Value>,
    headers: &HeaderMap,
) -> Result<Version, RpcError> {
    revision::version(method, params, headers).map_err(RpcError::from)
}

/// One message, alone or in a batch: `None` for a notification (nothing to answer), else its
/// response. A malformed message is refused whether or not it has an id.
pub(super) async fn one(
    caller: &Caller<'_>,
    message: Value,
    version_of: Versioning,
) -> Option<Reply> {
    let message = match guard::request_object(message) {
        Ok(message) => message,
        Err(e) => return Some(e.reply(Value::Null)),
    };
    let params = match message.get("params") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => {
            let e = RpcError::new(StatusCode::BAD_REQUEST, -32602, "params must be an object");
            return Some(e.reply(Value::Null));
        }
    };
    // A notification (`notifications/initialized`, `notifications/cancelled`): nothing to do.
    let id = message.get("id").cloned()?;
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        let e = RpcError::invalid_request("id must be a string or an integer");
        return Some(e.reply(Value::Null));
    }
    let method = message["method"].as_str().unwrap_or_default();
    let version = match version_of(method, &params, caller.headers) {
        Ok(version) => version,
        Err(e) => return Some(e.reply(id)),
    };
    let rpc = Rpc {
        engine: caller.engine,
        who: caller.who,
        rev: version.revision(),
        version,
        params: &params,
    };
    Some(match dispatch(&rpc, method).await {
        Ok(result) => Reply::result(id, rpc.rev, result),
        Err(e) => e.reply(id),
    })
}

async fn dispatch(rpc: &Rpc<'_>, method: &str) -> Result<Value, RpcError> {
    match (rpc.rev, method) {
        (Revision::Legacy, "initialize") => initialize::initialize(rpc),
        (Revision::Legacy, m) if m.starts_with("tasks/") && !rpc.version.has_core_tasks() => {
            Err(RpcError::method_not_found(rpc.rev, method))
        }
        (Revision::Legacy, "ping") => Ok(json!({})),
        (Revision::Modern, "server/discover") => Ok(initialize::discover()),
        (_, "tools/list") => list::list(rpc),
        (_, "tools/call") => call::call(rpc).await,
        (_, "tasks/get") => tasks::get(rpc).await,
        (_, "tasks/cancel") => tasks::cancel(rpc).await,
        (Revision::Legacy, "tasks/result") => tasks::result(rpc).await,
        (Revision::Legacy, "tasks/list") => tasks::list(rpc).await,
        (Revision::Modern, "tasks/update") => tasks::update(rpc).await,
        _ => Err(RpcError::method_not_found(rpc.rev, method)),
    }
}
