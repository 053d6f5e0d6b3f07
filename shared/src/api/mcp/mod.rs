//! MCP at `POST /mcp` (docs/mcp.md): Streamable HTTP with JSON responses, serving revision
//! 2026-07-28 (stateless: `_meta` on every request, `server/discover`, `resultType`) and the
//! handshake revisions 2025-11-25, 2025-06-18 and 2025-03-26 (`initialize`, answered without a
//! session; each request's revision from its `MCP-Protocol-Version`). A small JSON-RPC layer
//! of our own over the API's own guards — bearer keys, strict JSON, body cap, rate limits — so
//! an MCP call meets exactly what `POST /v1/actions` meets; the reasons are in docs/mcp.md.
//!
//! One file per method or concern: `initialize` (and `server/discover`, `ping`), `list`
//! (`tools/list`), `call` (`tools/call`), `tasks` (`tasks/*`); `revision` says which revision a
//! request speaks, `guard` holds the API's guards, `batch` the 2025-03-26 batches, `message` one message
//! (its checks, its revision, the method it calls), `rpc` the JSON-RPC request and error.

mod batch;
mod call;
mod describe;
mod guard;
mod initialize;
mod list;
mod message;
mod revision;
mod rpc;
mod tasks;
mod text;

use super::rate::RateLimits;
use crate::{identity::Verifier, Engine};
use axum::{
    body::Body,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Extension,
};
use message::Caller;
use rpc::RpcError;
use serde_json::{Map, Value};
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
        message => match message::one(&caller, message, message::alone).await {
            Some(reply) => reply.into_response(),
            None => StatusCode::ACCEPTED.into_response(),
        },
    }
}
