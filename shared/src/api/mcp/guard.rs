//! The API's own guards in front of every MCP request: the `Origin` check (DNS rebinding), the
//! bearer keys and rate-limit buckets of `POST /v1/actions`, and the body cap and strict JSON
//! of SC-SEC-03.

use super::rpc::RpcError;
use crate::{
    api::{auth, error::ApiError, json, rate::RateLimits, MAX_BODY},
    config::{Principal, Role},
    identity::{Need, Verifier},
    Engine,
};
use axum::{
    body::Body,
    http::{header, HeaderMap, StatusCode},
    response::Response,
};
use serde_json::{Map, Value};

/// An `Origin` header, when sent, must be a loopback origin or the configured public URL's.
pub(super) fn origin_allowed(engine: &Engine, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(origin) = origin
        .to_str()
        .ok()
        .and_then(|o| reqwest::Url::parse(o).ok())
    else {
        return false;
    };
    let loopback = matches!(origin.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let public = engine
        .config()
        .public_url
        .as_deref()
        .and_then(|u| reqwest::Url::parse(u).ok())
        .is_some_and(|u| u.origin() == origin.origin());
    loopback || public
}

/// The same bearer keys and tokens as the API (an agent's only), spending from the same
/// buckets; a refusal carries the MCP endpoint's challenge (SC-ID-01).
pub(super) async fn authenticate(
    engine: &Engine,
    verifier: Option<&Verifier>,
    headers: &HeaderMap,
    limits: Option<&RateLimits>,
) -> Result<Principal, Box<Response>> {
    let who = match auth::authenticate(engine, verifier, headers, Need::Role(Role::Agent)).await {
        Ok(who) => who,
        Err(refusal) => {
            let mut response =
                RpcError::new(refusal.status(), -32000, refusal.message()).without_id();
            if let Some(challenge) = refusal.challenge(engine, headers, true) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, challenge);
            }
            return Err(Box::new(response));
        }
    };
    if let Some(limits) = limits {
        if let Err(ApiError::RateLimited { retry_after_secs }) = limits.admit(&who) {
            let mut response = too_many(retry_after_secs).without_id();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_secs.into());
            return Err(Box::new(response));
        }
    }
    if who.role != Role::Agent {
        return Err(Box::new(
            RpcError::new(
                StatusCode::FORBIDDEN,
                -32000,
                "Forbidden: the MCP endpoint takes agent keys",
            )
            .without_id(),
        ));
    }
    Ok(who)
}

/// The body: size-capped and parsed as strictly as the API's (SC-SEC-03).
pub(super) async fn read_body(body: Body) -> Result<Value, RpcError> {
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        RpcError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            format!("the body exceeds {MAX_BODY} bytes"),
        )
    })?;
    json::parse(&bytes)
        .map_err(|e| RpcError::new(StatusCode::BAD_REQUEST, -32700, format!("Parse error: {e}")))
}

/// One message: a JSON-RPC 2.0 request or notification object.
pub(super) fn request_object(message: Value) -> Result<Map<String, Value>, RpcError> {
    let Value::Object(message) = message else {
        return Err(RpcError::invalid_request(
            "a message must be a JSON-RPC request object",
        ));
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0")
        || !message.get("method").is_some_and(Value::is_string)
    {
        return Err(RpcError::invalid_request(
            "a JSON-RPC 2.0 request needs jsonrpc \"2.0\" and a method",
        ));
    }
    Ok(message)
}

/// A key or tenant over its rate limit (SC-SEC-04).
pub(super) fn too_many(retry_after_secs: u64) -> RpcError {
    RpcError::new(
        StatusCode::TOO_MANY_REQUESTS,
        -32000,
        format!("Too many requests: retry after {retry_after_secs} s"),
    )
}
