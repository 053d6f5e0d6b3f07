//! Reading a request: path segments and JSON bodies, refused in the API's error shape.

use super::{body::MAX_BODY, error::ApiError};
use crate::{domain::actor::Channel, Error};
use axum::{body::Body, extract::Path};
use serde::de::DeserializeOwned;

/// A path segment (`{id}`, `{scope}`). One that does not decode (e.g. `%FF`) names nothing:
/// 404 in the API's JSON shape, not the framework's plain-text rejection.
pub(super) struct Segment(pub(super) String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(segment)| Segment(segment))
            .map_err(|_| ApiError::Undecodable)
    }
}

/// The header a client of the API names itself with, for the record of its decision.
pub const CHANNEL_HEADER: &str = "Countersign-Channel";

/// The channel a decision through the API came through (SC-CH-08): `page` or `cli` as the
/// `Countersign-Channel` header says, `api` without it (a script, an SDK, curl).
///
/// Why a header the client sets, and not something the server infers: the page and the CLI
/// hold the same key and call the same routes as any script, so nothing the server sees tells
/// them apart — only the client knows what it is. The header claims nothing a key could not
/// already do: the key is the authority, the channel describes how its holder decided. So it is
/// limited to the channels that authenticate with a key (`api`, `page`, `cli`); `slack` and
/// `email` are recorded only by their own routes, after their own proof (Slack's signature, the
/// mail's signed link), and a key's request naming them — or anything else — is refused `400`
/// rather than recorded as a false channel or silently as `api`.
pub(super) struct Through(pub(super) Channel);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Through {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get(CHANNEL_HEADER) else {
            return Ok(Through(Channel::Api));
        };
        match value.to_str().ok().and_then(Channel::parse) {
            Some(channel @ (Channel::Api | Channel::Page | Channel::Cli)) => Ok(Through(channel)),
            _ => Err(Error::validation(
                CHANNEL_HEADER,
                "Countersign-Channel must be api, page or cli (slack and email decide through their own routes)",
            )
            .into()),
        }
    }
}

/// The body's bytes, capped at [`MAX_BODY`].
pub(super) async fn bytes(body: Body) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| ApiError::PayloadTooLarge(format!("the body exceeds {MAX_BODY} bytes")))
}

/// Read a JSON body: size-capped, parsed strictly, then shaped so that `param` names the
/// offending field.
pub(super) async fn read_json<T: DeserializeOwned>(body: Body) -> Result<T, ApiError> {
    let bytes = bytes(body).await?;
    if bytes.is_empty() {
        return Err(Error::validation("body", "a JSON object body is required").into());
    }
    // Strict: hostile depth, duplicate keys and inexact numbers are refused here (SC-SEC-03).
    let value = super::json::parse(&bytes)?;
    if !value.is_object() {
        return Err(Error::validation("body", "the body must be a JSON object").into());
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // The path already ends at an unknown field; a missing one is named only in the message.
        let param = match (path.as_str(), missing_field(&inner)) {
            (".", Some(field)) => field,
            (".", None) => "body".to_owned(),
            (p, Some(field)) => format!("{p}.{field}"),
            (p, None) => p.to_owned(),
        };
        Error::validation(&param, inner).into()
    })
}

/// serde says "missing field `x`": name that field.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next().map(str::to_owned)
}
