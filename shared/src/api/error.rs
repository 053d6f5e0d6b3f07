//! The one mapping from engine errors to HTTP: status + stable code (SPEC §3).

use crate::Error;
use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::{json, Value};

impl Error {
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Error::Validation { .. } => (StatusCode::BAD_REQUEST, "validation_failed"),
            Error::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::NotFound => (StatusCode::NOT_FOUND, "not_found"),
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

    /// `{"error": {"code", "message", "param"?, …}}`
    pub fn body(&self) -> Value {
        let (_, code) = self.status_and_code();
        let mut error = json!({"code": code, "message": self.to_string()});
        match self {
            Error::Validation { param, .. } => error["param"] = json!(param),
            Error::Refused { action_id, .. } => error["action_id"] = json!(action_id),
            Error::ActionSealed { state } | Error::ActionNotSealed { state } => {
                error["state"] = json!(state)
            }
            Error::ContextChanged { current_digest } => {
                error["context_digest"] = json!(current_digest)
            }
            // Never leak internals to callers (SDK and rusqlite texts name accounts, roles and
            // tables); the log has them (SC-SEC-02).
            Error::Internal(_) => error["message"] = json!("internal error"),
            Error::Unavailable(_) => error["message"] = json!("store unavailable; retry shortly"),
            _ => {}
        }
        json!({ "error": error })
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
