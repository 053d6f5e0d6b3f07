//! The approver page (issue 10): plain HTML, CSS and JS embedded in the binary, so the local
//! server and the Lambda behind API Gateway serve the same bytes with no build step. The page
//! talks to the ordinary API with the approver's key; it holds no secret of its own.

use super::extract::Segment;
use crate::{error::Missing, Error};
use axum::{
    http::header,
    response::{IntoResponse, Redirect, Response},
};

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// Only our own files, no inline script or style, no framing, and fetches to this origin only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// `/ui` → `/ui/`, so the page's relative links resolve under it (also behind a stage prefix).
pub(super) async fn to_index() -> Redirect {
    Redirect::permanent("ui/")
}

/// The approver page (no key needed to load it; it asks for one).
#[utoipa::path(
    get,
    path = "/ui/",
    tag = "page",
    security(()),
    responses((status = 200, description = "The page", content_type = "text/html"))
)]
pub(super) async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

/// The page's script and style.
#[utoipa::path(
    get,
    path = "/ui/{asset}",
    tag = "page",
    security(()),
    params(("asset" = String, Path, description = "`app.js` or `app.css`")),
    responses(
        (status = 200, description = "The file", content((String = "text/javascript"), (String = "text/css"))),
        (status = 404, description = "not_found", body = super::error::ErrorBody),
    )
)]
pub(super) async fn asset(Segment(name): Segment) -> Result<Response, Error> {
    match name.as_str() {
        "app.js" => Ok(file("text/javascript; charset=utf-8", SCRIPT)),
        "app.css" => Ok(file("text/css; charset=utf-8", STYLE)),
        _ => Err(Error::NotFound(Missing::PageFile(name))),
    }
}

fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            // The page and its script change together with the binary; never mix versions.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
