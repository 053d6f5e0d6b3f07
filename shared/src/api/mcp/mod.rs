//! MCP at `POST /mcp` (docs/mcp.md): Streamable HTTP with JSON responses, serving revision
//! 2026-07-28 (stateless: `_meta` on every request, `server/discover`, `resultType`) and the
//! handshake revisions 2025-11-25, 2025-06-18 and 2025-03-26 (`initialize`, answered without a
//! session; each request's revision from its `MCP-Protocol-Version`). A small JSON-RPC layer
//! of our own over the API's own guards — bearer keys, strict JSON, body cap, rate limits — so
//! an MCP call meets exactly what `POST /v1/actions` meets; the reasons are in docs/mcp.md.
//!
//! One file per method or concern: `initialize` (and `server/discover`, `ping`), `list`
//! (`tools/list`), `call` (`tools/call`), `tasks` (`tasks/*`); `revision` says which revision a
//! request speaks, `guard` holds the API's guards, `batch` the 2025-03-26 batches, `rpc` the
//! JSON-RPC request and error.

mod batch;
mod call;
mod describe;
mod guard;
mod initialize;
mod list;
mod revision;
mod rpc;
mod tasks;
mod text;

use super::rate::RateLimits;
use crate::{config::Principal, identity::Verifier, Engine};
use axum::{
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Extension,
};
use revision::{Revision, Version};
use rpc::{tenant, Reply, Rpc, RpcError};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// One JSON-RPC 2.0 request; without `id` (a string or an integer) a notification.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Describes the body in the OpenAPI document; the handler reads it as JSON.
pub(super) struct JsonRpcRequest {
    #[schema(pattern = r"^2\.0$")]
    jsonrpc: String,
    /// `initialize`, `server/discover`, `tools/list`, `tools/call`, `tasks/get`, …
    method: String,
    #[schema(value_type = Option<Object>)]
    params: Option<Map<String, Value>>,
}

/// `POST /mcp`: one JSON-RPC request or notification per HTTP request, or on 2025-03-26 a batch
/// of them (docs/mcp.md). Protocol errors are JSON-RPC errors; tool outcomes are results.
#[utoipa::path(
    post,
    path = crate::api::paths::MCP,
    tag = "mcp",
    request_body(content = JsonRpcRequest, description = "MCP 2026-07-28 (with `params._meta` and the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` headers), or 2025-11-25, 2025-06-18, 2025-03-26 (after `initialize`, named by `MCP-Protocol-Version`); on 2025-03-26 also an array of them (a batch)"),
    responses(
        (status = 200, description = "The JSON-RPC response (a result, or an error such as -32601/-32602); for a batch, the array of its requests' responses", content_type = "application/json"),
        (status = 202, description = "A notification (or a batch of notifications), accepted"),
        (status = 400, description = "Parse error (-32700), invalid request (-32600/-32602; a batch outside 2025-03-26), header mismatch (-32020), unsupported version (-32022)", content_type = "application/json"),
        (status = 401, description = "No or unknown key", content_type = "application/json"),
        (status = 403, description = "Not an agent key, or an Origin that may not use the endpoint", content_type = "application/json"),
        (status = 404, description = "2026-07-28: no such method (-32601)", content_type = "application/json"),
        (status = 413, description = "The body exceeds the limit", content_type = "application/json"),
        (status = 429, description = "Rate limited; see Retry-After", content_type = "application/json"),
    )
)]
pub(super) async fn endpoint(
    State(engine): State<Arc<Engine>>,
    limits: Option<Extension<Arc<RateLimits>>>,
    verifier: Option<Extension<Arc<Verifier>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // DNS rebinding (transport spec): a browser page of another origin is refused.
    if !guard::origin_allowed(&engine, &headers) {
        return RpcError::new(
            StatusCode::FORBIDDEN,
            -32000,
            "Forbidden: this Origin may not use the MCP endpoint",
        )
        .without_id();
    }
    let limits = limits.as_ref().map(|l| &*l.0);
    let verifier = verifier.as_ref().map(|v| &*v.0);
    let who = match guard::authenticate(&engine, verifier, &headers, limits).await {
        Ok(who) => who,
        Err(response) => return *response,
    };
    let body = match guard::read_body(body).await {
        Ok(body) => body,
        Err(e) => return e.without_id(),
    };
    let caller = Caller {
        engine: &engine,
        who: &who,
        headers: &headers,
    };
    match body {
        Value::Array(messages) => batch::answer(&caller, limits, messages).await,
        message => match one(&caller, message, false).await {
            Some(reply) => reply.into_response(),
            None => StatusCode::ACCEPTED.into_response(),
        },
    }
}

/// Who sent a POST, and its headers: what every message of it shares.
struct Caller<'a> {
    engine: &'a Arc<Engine>,
    who: &'a Principal,
    headers: &'a HeaderMap,
}

/// One message, alone or in a batch: `None` for a notification (nothing to answer), else its
/// response. A malformed message is refused whether or not it has an id.
async fn one(caller: &Caller<'_>, message: Value, batched: bool) -> Option<Reply> {
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
    let version = match batched {
        true => batch::version(method, &params),
        false => revision::version(method, &params, caller.headers).map_err(RpcError::from),
    };
    let version = match version {
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
