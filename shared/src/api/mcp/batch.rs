//! JSON-RPC batches (SC-MCP-12). Revision 2025-03-26 lets one POST carry an array of requests
//! and notifications, answered by the array of the requests' responses; 2025-06-18 removed
//! batches and no later revision has them. A batch is 2025-03-26 throughout: its POST names no
//! other revision, none of its messages speaks 2026-07-28, and `initialize` stays out of it (as
//! that revision's lifecycle says). Each message after the first spends from the key's and
//! tenant's rate-limit buckets, as its own POST would.

use super::{
    guard,
    message::{one, Caller},
    revision::{self, Version},
    rpc::RpcError,
};
use crate::api::{error::ApiError, rate::RateLimits};
use axum::{
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::{Map, Value};

/// The one revision with batches.
const WITH_BATCHES: Version = Version::V2025_03_26;

/// A batch: each message in order; `202` when none of them is a request.
pub(super) async fn answer(
    caller: &Caller<'_>,
    limits: Option<&RateLimits>,
    messages: Vec<Value>,
) -> Response {
    if let Err(e) = named_revision(caller) {
        return e.without_id();
    }
    if messages.is_empty() {
        return RpcError::invalid_request("an empty batch: send at least one message").without_id();
    }
    // Every message is a JSON-RPC request or notification: a batch holding anything else is
    // refused whole with a 400, as the transport refuses a POST it cannot accept (not 200 with
    // an error per element: a client that sends `[null]` is broken, and nothing of its batch
    // should run). The POST's schema says so too (docs/openapi.json).
    for (i, message) in messages.iter().enumerate() {
        if let Err(e) = guard::request_object(message.clone()) {
            return RpcError::invalid_request(format!(
                "batch element {i}: {}; nothing of the batch ran",
                e.message()
            ))
            .without_id();
        }
    }
    let mut replies = Vec::new();
    for (i, message) in messages.into_iter().enumerate() {
        let spent = match limits {
            Some(limits) if i > 0 => limits.admit(caller.who),
            _ => Ok(()),
        };
        let reply = match spent {
            Err(ApiError::RateLimited { retry_after_secs }) => {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                Some(guard::too_many(retry_after_secs).reply(id))
            }
            _ => one(caller, message, version).await,
        };
        replies.extend(reply.map(|r| r.body));
    }
    if replies.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    Json(Value::Array(replies)).into_response()
}

/// A batch's POST names 2025-03-26 or no revision (that revision's clients send no
/// `MCP-Protocol-Version`); any other revision has no batches.
fn named_revision(caller: &Caller<'_>) -> Result<(), RpcError> {
    let named = caller.headers.get("mcp-protocol-version");
    match named.map(|v| v.to_str().unwrap_or_default()) {
        None => Ok(()),
        Some(v) if v == WITH_BATCHES.as_str() => Ok(()),
        Some(v) => Err(no_batches(v)),
    }
}

fn no_batches(revision: &str) -> RpcError {
    RpcError::invalid_request(format!(
        "JSON-RPC batches are not part of MCP {revision} (only 2025-03-26 has them): send one \
         request per POST"
    ))
}

/// The revision of a message in a batch: 2025-03-26, whatever the message would otherwise
/// show (core tasks are not 2025-03-26's: `tasks/*` are unknown methods there).
fn version(
    method: &str,
    params: &Map<String, Value>,
    _headers: &HeaderMap,
) -> Result<Version, RpcError> {
    let meta_version = params
        .get("_meta")
        .and_then(|m| m.get(revision::META_VERSION))
        .and_then(Value::as_str);
    if let Some(v) = meta_version {
        return Err(no_batches(v));
    }
    if method == "initialize" {
        return Err(RpcError::invalid_request(
            "initialize must not be part of a batch: send it alone first",
        ));
    }
    Ok(WITH_BATCHES)
}
