//! The routers: every route of [`super::routes::ROUTES`] to its handler, all of them (the local server)
//! or one function's.

use super::error::ApiError;
use super::{approve, cancel, intake, openapi, paths, routes::Routes};
use crate::{error::shown, Engine};
use axum::{
    http::{header, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use serde_json::json;
use std::sync::Arc;

/// Every route: the local server's router (and the in-process tests' Lambda handler).
pub fn router(engine: Arc<Engine>) -> Router {
    served(engine, all_routes)
}

/// Every function's routes together (the local server serves them all).
pub fn all_routes(r: Routes) -> Routes {
    cancel_routes(approve_routes(intake_routes(r)))
}

/// The intake function's routes: submit, the reads, the approver page, the documents, MCP.
pub fn intake_routes(r: Routes) -> Routes {
    intake::routes(r).route(paths::OPENAPI, get(openapi::openapi_json))
}

/// The approve function's routes: the countersignature, also through Slack and a mailed link.
pub fn approve_routes(r: Routes) -> Routes {
    approve::routes(r)
}

/// The cancel function's routes: cancel, the stops, the dead notifications.
pub fn cancel_routes(r: Routes) -> Routes {
    cancel::routes(r)
}

/// A router serving only `routes` (one function's): each Lambda binary names its own, so that
/// it links only the handlers it routes (intake's gate, conditions and MCP are not in approve
/// or cancel). Every router answers `/healthz` and the same fallbacks.
pub fn served(engine: Arc<Engine>, routes: impl FnOnce(Routes) -> Routes) -> Router {
    // Built once per router: per process locally, per container on Lambda (SC-SEC-04).
    let rate_limits = Arc::new(super::rate::RateLimits::new(&engine.config().limits));
    // The identity providers' keys, cached for the process (SC-ID-02).
    let verifier = Arc::new(crate::identity::Verifier::new(engine.config()));
    routes(Router::new())
        .route("/healthz", get(|| async { Json(json!({"ok": true})) }))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::Extension(rate_limits))
        .layer(axum::Extension(verifier))
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
    ApiError::RouteNotFound {
        method: method.to_string(),
        path: shown(uri.path()),
    }
    .into_response()
}

/// A path that is served, with another method: `method_not_allowed` (405), which axum gives the
/// `Allow` header of the path's methods. `GET /mcp` is one: a Streamable HTTP client opening its
/// SSE stream learns there is none from the 405 the transport asks for (docs/mcp.md).
async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: shown(uri.path()),
    }
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    fn engine() -> Arc<Engine> {
        let config = crate::config::Config::from_toml(include_str!("../../../config/local.toml"))
            .expect("the example config loads");
        let clock: Arc<dyn crate::Clock> = Arc::new(crate::SystemClock);
        let (waker, _wakes) = crate::wake::in_process::InProcessWaker::new(clock.clone());
        Arc::new(Engine::new(
            Arc::new(config),
            Arc::new(crate::store::sqlite::SqliteStore::in_memory().expect("in-memory SQLite")),
            Arc::new(waker),
            Arc::new(crate::tools::Executors::new()),
            clock,
        ))
    }

    /// The error code a router answers `method path` with (no key), if any.
    async fn code(router: &Router, method: &str, path: &str) -> Option<String> {
        let path = path
            .replace("{id}", "act_01")
            .replace("{scope}", "agent:a")
            .replace("{asset}", "index.html");
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("a request");
        let answer = router.clone().oneshot(request).await.expect("an answer");
        let body = answer
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
        v["error"]["code"].as_str().map(str::to_owned)
    }

    /// Each HTTP function's router serves exactly its rows of `ROUTES` (what API Gateway routes
    /// to it, `tests/infra_template.rs`): any other route is `route_not_found` there, and the
    /// router of every route serves them all.
    #[tokio::test]
    async fn sc_api_each_function_router_serves_exactly_its_routes() {
        let engine = engine();
        type Of = fn(Routes) -> Routes;
        let per_function: [(&str, Of); 3] = [
            ("intake", intake_routes),
            ("approve", approve_routes),
            ("cancel", cancel_routes),
        ];
        let all = router(engine.clone());
        for (function, routes) in per_function {
            let own = served(engine.clone(), routes);
            for (method, path, owner) in super::super::routes::ROUTES {
                let not_found =
                    code(&own, method, path).await.as_deref() == Some("route_not_found");
                assert_eq!(not_found, *owner != function, "{function}: {method} {path}");
                assert_ne!(
                    code(&all, method, path).await.as_deref(),
                    Some("route_not_found"),
                    "every route: {method} {path}"
                );
            }
        }
    }
}
