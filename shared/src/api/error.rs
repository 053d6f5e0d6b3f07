//! The one mapping from engine errors to HTTP: status + stable code (SPEC §3).

use crate::{domain::State, Error};
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

impl Error {
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Error::Validation { .. } => (StatusCode::BAD_REQUEST, "validation_failed"),
            Error::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::RouteNotFound { .. } => (StatusCode::NOT_FOUND, "route_not_found"),
            Error::MethodNotAllowed { .. } => {
                (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
            }
            Error::Refused { code, .. } => (StatusCode::FORBIDDEN, code.code()),
            Error::ContextChanged { .. } => (StatusCode::CONFLICT, "context_changed"),
            Error::ActionExecuting => (StatusCode::CONFLICT, "action_executing"),
            Error::ActionSealed { .. } => (StatusCode::CONFLICT, "action_sealed"),
            Error::ActionNotSealed { .. } => (StatusCode::CONFLICT, "action_not_sealed"),
            Error::IdempotencyConflict => (StatusCode::CONFLICT, "idempotency_conflict"),
            Error::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Error::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
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
        match self {
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

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if status.is_server_error() {
            tracing::error!(code, error = %self, "request failed");
        }
        let mut response = (status, Json(self.body())).into_response();
        if let Error::RateLimited { retry_after_secs } = self {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after_secs.into());
        }
        response
    }
}
