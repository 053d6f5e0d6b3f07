//! The one router: every route of [`super::ROUTES`] to its handler.

use super::{mcp, openapi, routes, ui};
use crate::{error::shown, Engine, Error};
use axum::{
    http::{header, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::{delete, get, post},
    Json, Router,
};
use serde_json::json;
use std::sync::Arc;

pub fn router(engine: Arc<Engine>) -> Router {
    // Built once per router: per process locally, per container on Lambda (SC-SEC-04).
    let rate_limits = Arc::new(super::rate::RateLimits::new(&engine.config().limits));
    Router::new()
        .route("/v1/actions", post(routes::submit).get(routes::list))
        .route("/v1/actions/{id}", get(routes::get_action))
        .route("/v1/actions/{id}/events", get(routes::events))
        .route("/v1/actions/{id}/deed", get(routes::deed))
        .route("/v1/actions/{id}/approve", post(routes::approve))
        .route("/v1/actions/{id}/deny", post(routes::deny))
        .route("/v1/actions/{id}/cancel", post(routes::cancel))
        .route("/v1/stops", post(routes::stop))
        .route("/v1/stops/{scope}", delete(routes::lift_stop))
        .route("/ui", get(ui::to_index))
        .route("/ui/", get(ui::index))
        .route("/ui/{asset}", get(ui::asset))
        .route("/v1/notifications/dead", get(routes::dead_notifications))
        .route("/v1/notifications/{id}/redeliver", post(routes::redeliver))
        .route("/v1/quarantine", get(routes::quarantined))
        .route("/v1/me", get(super::me::me))
        .route("/v1/policy/explain", post(super::explain::explain))
        .route("/openapi.json", get(openapi::openapi_json))
        .route("/mcp", post(mcp::endpoint))
        .route("/healthz", get(|| async { Json(json!({"ok": true})) }))
        .fallback(no_route)
        .method_not_allowed_fallback(|| async {
            Error::validation("method", "this route does not accept that method")
        })
        .layer(axum::Extension(rate_limits))
        .with_state(engine)
}

/// No route: `route_not_found`, naming the method and path. Browsers ask every origin for
/// `/favicon.ico`; it has none, said quietly (no body) and cacheably, so they stop asking.
async fn no_route(method: Method, uri: Uri) -> Response {
    if uri.path() == "/favicon.ico" {
        return (
            StatusCode::NOT_FOUND,
            [(header::CACHE_CONTROL, "public, max-age=86400")],
        )
            .into_response();
    }
    Error::RouteNotFound {
        method: method.to_string(),
        path: shown(uri.path()),
    }
    .into_response()
}
