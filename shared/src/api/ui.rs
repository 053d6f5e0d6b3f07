//! The approver page (issue 10): plain HTML, CSS and JS embedded in the binary, so the local
//! server and the Lambda behind API Gateway serve the same bytes with no build step. The page
//! talks to the ordinary API with the approver's key, or with an access token it obtained from
//! the tenant's provider (`sign-in.js`, docs/identity.md "The approver page signs in"); it
//! holds no secret of its own.

use super::error::ApiError;
use super::extract::Segment;
use crate::{config::Config, Engine, Error};
use axum::{
    extract::State,
    http::header,
    response::{IntoResponse, Redirect, Response},
};
use serde::Serialize;
use std::sync::Arc;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const SIGN_IN: &str = include_str!("ui/sign-in.js");
const STYLE: &str = include_str!("ui/app.css");

/// Only our own files, no inline script or style, no framing, and fetches to this origin only
/// — and to the providers the page signs in with (see [`csp`]).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The page's policy: [`CSP`], its fetches also allowed to the origin of each provider the page
/// signs in with (discovery and the token endpoint). Navigating to the provider's login page is
/// not a fetch, and needs nothing here.
pub fn csp(config: &Config) -> String {
    let mut origins: Vec<String> = signing_in(config).map(|i| i.origin()).collect();
    origins.sort();
    origins.dedup();
    if origins.is_empty() {
        return CSP.to_owned();
    }
    CSP.replace(
        "connect-src 'self';",
        &format!("connect-src 'self' {};", origins.join(" ")),
    )
}

/// The providers the page offers: the tenants' with a `page_client_id`.
fn signing_in(config: &Config) -> impl Iterator<Item = &crate::config::IdentityConfig> {
    config
        .tenants
        .values()
        .filter_map(|t| t.identity.as_ref())
        .filter(|i| i.page_client_id.is_some())
}

/// One "Sign in with" button: where to send the person, as whom, for what (`sign-in.json`).
#[derive(Debug, Serialize)]
struct Provider<'a> {
    name: &'a str,
    issuer: &'a str,
    client_id: &'a str,
    /// The resource the token is asked for (RFC 8707): the tenant's audience.
    resource: &'a str,
    scope: String,
}

/// `/ui` → `/ui/`, so the page's relative links resolve under it (also behind a stage prefix).
pub(super) async fn to_index() -> Redirect {
    Redirect::permanent("ui/")
}

/// The approver page (no key needed to load it; it asks for one).
#[utoipa::path(
    get,
    path = crate::api::paths::UI,
    tag = "page",
    security(()),
    responses((status = 200, description = "The page", content_type = "text/html"))
)]
pub(super) async fn index(State(engine): State<Arc<Engine>>) -> Response {
    file(engine.config(), "text/html; charset=utf-8", INDEX.into())
}

/// The page's scripts and style, and the providers it signs in with.
#[utoipa::path(
    get,
    path = crate::api::paths::UI_ASSET,
    tag = "page",
    security(()),
    params(("asset" = String, Path, description = "`app.js`, `sign-in.js`, `app.css`, or `sign-in.json` (the providers the page offers: `name`, `issuer`, `client_id`, `resource`, `scope`)")),
    responses(
        (status = 200, description = "The file", content((String = "text/javascript"), (String = "text/css"), (String = "application/json"))),
        (status = 404, description = "not_found", body = super::error::ErrorBody),
    )
)]
pub(super) async fn asset(
    State(engine): State<Arc<Engine>>,
    Segment(name): Segment,
) -> Result<Response, ApiError> {
    let config = engine.config();
    let script = "text/javascript; charset=utf-8";
    match name.as_str() {
        "app.js" => Ok(file(config, script, SCRIPT.into())),
        "sign-in.js" => Ok(file(config, script, SIGN_IN.into())),
        "app.css" => Ok(file(config, "text/css; charset=utf-8", STYLE.into())),
        "sign-in.json" => {
            let providers: Vec<Provider> = signing_in(config)
                .map(|i| Provider {
                    name: &i.name,
                    issuer: &i.issuer,
                    client_id: i.page_client_id.as_deref().unwrap_or_default(),
                    resource: &i.audience,
                    scope: format!("openid profile email {}", i.approve_scope),
                })
                .collect();
            let body = serde_json::to_string(&serde_json::json!({ "providers": providers }))
                .map_err(|e| Error::Internal(e.to_string()))?;
            Ok(file(config, "application/json", body.into()))
        }
        _ => Err(ApiError::NoPageFile(name)),
    }
}

fn file(config: &Config, content_type: &'static str, body: axum::body::Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, csp(config).as_str()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            // The page and its script change together with the binary; never mix versions.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
