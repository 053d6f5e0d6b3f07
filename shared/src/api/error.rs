//! The HTTP layer's error and the one mapping from errors to HTTP: status + stable code + body
//! (SPEC §3). [`ApiError`] is the engine's [`Error`] or a refusal only HTTP makes (no route, a
//! wrong method, no key, a body too large, too many requests); the engine knows none of these.

use crate::{domain::State, error::shown, Error};
use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;
use utoipa::ToSchema;

/// `{"error": {…}}`: every refusal (SPEC §3).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code: validation_failed, unauthenticated, forbidden, not_found,
    /// route_not_found, method_not_allowed, denied, schedule_needs_approval, capability_bound,
    /// agent_stopped, context_changed, action_executing, action_sealed, action_not_sealed,
    /// idempotency_conflict, payload_too_large, rate_limited, unavailable, internal.
    pub code: &'static str,
    pub message: String,
    /// validation_failed: the field, header or query parameter at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// action_sealed, action_not_sealed: the action's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    /// Intake refusals: the action, recorded sealed `denied`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    /// context_changed: the digest that is current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_digest: Option<String>,
}

/// What a handler answers when it does not succeed: the engine's error, or one of the HTTP
/// layer's own. Handlers return it; `?` on an engine call wraps the engine's.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Engine(#[from] Error),
    #[error("missing or unknown API key")]
    Unauthenticated,
    /// No route has this method and path: a wrong address, not a missing resource.
    #[error("no route {method} {path}")]
    RouteNotFound { method: String, path: String },
    /// The path is served, but not with this method (the answer's `Allow` lists those it is).
    #[error("{path} does not accept {method}")]
    MethodNotAllowed { method: String, path: String },
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("too many requests: retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// A file the approver page does not have.
    #[error("no such file of the approver page: {}", shown(.0))]
    NoPageFile(String),
    /// A path segment that does not decode names nothing.
    #[error("no such resource: the path is not valid UTF-8")]
    Undecodable,
}

impl ApiError {
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        let engine = match self {
            ApiError::Engine(e) => e,
            ApiError::Unauthenticated => return (StatusCode::UNAUTHORIZED, "unauthenticated"),
            ApiError::RouteNotFound { .. } => return (StatusCode::NOT_FOUND, "route_not_found"),
            ApiError::MethodNotAllowed { .. } => {
                return (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
            }
            ApiError::PayloadTooLarge(_) => {
                return (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
            }
            ApiError::RateLimited { .. } => return (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::NoPageFile(_) | ApiError::Undecodable => {
                return (StatusCode::NOT_FOUND, "not_found")
            }
        };
        Self::of_engine(engine)
    }

    /// The status and code of an engine's error (also where a refusal is told another way,
    /// as Slack's ephemeral message).
    pub fn of_engine(engine: &Error) -> (StatusCode, &'static str) {
        match engine {
            Error::Validation { .. } => (StatusCode::BAD_REQUEST, "validation_failed"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Refused { code, .. } => (StatusCode::FORBIDDEN, code.code()),
            Error::ContextChanged { .. } => (StatusCode::CONFLICT, "context_changed"),
            Error::ActionExecuting => (StatusCode::CONFLICT, "action_executing"),
            Error::ActionSealed { .. } => (StatusCode::CONFLICT, "action_sealed"),
            Error::ActionNotSealed { .. } => (StatusCode::CONFLICT, "action_not_sealed"),
            Error::IdempotencyConflict => (StatusCode::CONFLICT, "idempotency_conflict"),
            Error::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Error::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The body every refusal answers with.
    pub fn body(&self) -> ErrorBody {
        let (_, code) = self.status_and_code();
        let mut error = ErrorDetail {
            code,
            message: self.to_string(),
            param: None,
            state: None,
            action_id: None,
            context_digest: None,
        };
        let ApiError::Engine(engine) = self else {
            return ErrorBody { error };
        };
        match engine {
            Error::Validation { param, .. } => error.param = Some(param.clone()),
            Error::Refused { action_id, .. } => error.action_id = Some(action_id.clone()),
            Error::ActionSealed { state } | Error::ActionNotSealed { state } => {
                error.state = Some(*state)
            }
            Error::ContextChanged { current_digest } => {
                error.context_digest = Some(current_digest.clone())
            }
            // Never leak internals to callers (SDK and rusqlite texts name accounts, roles and
            // tables); the log has them (SC-SEC-02).
            Error::Internal(_) => error.message = "internal error".into(),
            Error::Unavailable(_) => error.message = "store unavailable; retry shortly".into(),
            _ => {}
        }
        ErrorBody { error }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if status.is_server_error() {
            tracing::error!(code, error = %self, "request failed");
        }
        let mut response = (status, Json(self.body())).into_response();
        if let ApiError::RateLimited { retry_after_secs } = self {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after_secs.into());
        }
        response
    }
}
