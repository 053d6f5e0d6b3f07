//! One JSON-RPC request in its revision, and the JSON-RPC error with the HTTP status the
//! transport answers it with.

use super::revision::{Refused, Revision, Version, META_SERVER_INFO};
use crate::{api::error::ApiError, config::Principal, Engine, Error};
use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// One JSON-RPC request, authenticated, in its revision.
pub(crate) struct Rpc<'a> {
    pub(super) engine: &'a Arc<Engine>,
    pub(super) who: &'a Principal,
    pub(super) rev: Revision,
    pub(super) version: Version,
    pub(super) params: &'a Map<String, Value>,
}

impl Rpc<'_> {
    pub(super) fn meta(&self) -> Option<&Map<String, Value>> {
        self.params.get("_meta").and_then(Value::as_object)
    }

    /// A string parameter that must be there.
    pub(super) fn text(&self, name: &str) -> Result<&str, RpcError> {
        self.params
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params(format!("params.{name} must be a string")))
    }
}

/// The caller's tenant (the catalog and the tasks both answer within it).
pub(super) fn tenant<'a>(rpc: &Rpc<'a>) -> Result<&'a crate::config::Tenant, RpcError> {
    rpc.engine.config().tenant(&rpc.who.tenant).ok_or_else(|| {
        RpcError::from_engine(Error::Internal(format!(
            "tenant {} is not configured",
            rpc.who.tenant
        )))
    })
}

/// A JSON-RPC error, with the HTTP status the transport answers it with.
#[derive(Debug)]
pub(crate) struct RpcError {
    status: StatusCode,
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    pub(super) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        RpcError {
            status,
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(super) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(StatusCode::OK, -32602, message)
    }

    pub(super) fn message(&self) -> &str {
        &self.message
    }

    pub(super) fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(StatusCode::BAD_REQUEST, -32600, message)
    }

    /// 2026-07-28 answers an unknown method with HTTP 404 (its body tells it from a missing
    /// endpoint); 2025-11-25 with 200.
    pub(super) fn method_not_found(rev: Revision, method: &str) -> Self {
        let status = match rev {
            Revision::Modern => StatusCode::NOT_FOUND,
            Revision::Legacy => StatusCode::OK,
        };
        RpcError::new(status, -32601, format!("Method not found: {method}"))
    }

    /// An error that is not a tool result: the store or the server itself failed.
    pub(crate) fn from_engine(e: impl Into<ApiError>) -> Self {
        let e = e.into();
        let (_, code) = e.status_and_code();
        let body = e.body();
        let failed = |e: &ApiError| {
            matches!(
                e,
                ApiError::Engine(Error::Internal(_) | Error::Unavailable(_))
            )
        };
        if failed(&e) {
            tracing::error!(code, error = %e, "mcp request failed");
        }
        let message = body.error.message;
        let rpc_code = match e {
            ApiError::Engine(Error::Unavailable(_)) => -32000,
            _ => -32603,
        };
        RpcError::new(StatusCode::OK, rpc_code, message).with_data(json!({"code": code}))
    }

    /// An error answered before the request's id is known.
    pub(super) fn without_id(self) -> Response {
        self.reply(Value::Null).into_response()
    }

    /// The error response to request `id`.
    pub(super) fn reply(self, id: Value) -> Reply {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = self.data {
            error["data"] = data;
        }
        Reply {
            status: self.status,
            body: json!({"jsonrpc": "2.0", "id": id, "error": error}),
        }
    }
}

impl From<Refused> for RpcError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Header(message) => RpcError::new(StatusCode::BAD_REQUEST, -32020, message),
            Refused::Unsupported(requested) => RpcError::new(
                StatusCode::BAD_REQUEST,
                -32022,
                "Unsupported protocol version",
            )
            .with_data(json!({"supported": Version::supported(), "requested": requested})),
        }
    }
}

/// Who answers: in `initialize`'s result, and in every 2026-07-28 result's `_meta`.
pub(super) fn server_info() -> Value {
    json!({"name": "countersign", "version": env!("CARGO_PKG_VERSION")})
}

/// A JSON-RPC response object, and the HTTP status it is answered with when it stands alone
/// (in a batch only the object counts).
pub(super) struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    /// The result of request `id`; on 2026-07-28 with its `resultType` and the server's info.
    pub(super) fn result(id: Value, rev: Revision, mut result: Value) -> Reply {
        if rev == Revision::Modern {
            if let Some(fields) = result.as_object_mut() {
                fields
                    .entry("resultType")
                    .or_insert_with(|| json!("complete"));
                let meta = fields.entry("_meta").or_insert_with(|| json!({}));
                meta[META_SERVER_INFO] = server_info();
            }
        }
        Reply {
            status: StatusCode::OK,
            body: json!({"jsonrpc": "2.0", "id": id, "result": result}),
        }
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}
