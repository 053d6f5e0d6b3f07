//! Who is calling: a bearer key, whose SHA-256 names a principal in the config, or an OAuth
//! access token from the tenant's identity provider (SC-ID-02), verified by [`Verifier`]. Every
//! refusal says how to authenticate, as an OAuth protected resource does (RFC 6750 §3, RFC 9728
//! §5.1, SC-ID-01): `WWW-Authenticate: Bearer resource_metadata="…"`, with `invalid_token` where
//! a credential was sent, and `insufficient_scope` with the scope a route needs.

use super::{
    error::{ApiError, ErrorBody},
    rate::RateLimits,
    resource,
};
use crate::{
    config::{Principal, Role},
    identity::{Need, TokenError, Verifier},
    Engine,
};
use axum::{
    extract::FromRequestParts,
    http::{header, request::Parts, HeaderMap, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use std::sync::Arc;

/// The authenticated caller.
pub struct Caller(pub Principal);

impl FromRequestParts<Arc<Engine>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, engine: &Arc<Engine>) -> Result<Self, Response> {
        let need = need(&parts.method, parts.uri.path());
        let verifier = parts.extensions.get::<Arc<Verifier>>().cloned();
        let who = authenticate(engine, verifier.as_deref(), &parts.headers, need)
            .await
            .map_err(|refusal| refusal.respond(engine, &parts.headers, false))?;
        // Every authenticated request spends from its key's and its tenant's bucket.
        if let Some(limits) = parts.extensions.get::<Arc<RateLimits>>() {
            limits.admit(&who).map_err(IntoResponse::into_response)?;
        }
        Ok(Caller(who))
    }
}

/// Why a request is not authenticated as it must be.
#[derive(Debug)]
pub enum Refusal {
    /// No credential.
    Missing,
    /// A credential that names nobody or does not verify (401 `invalid_token`).
    Invalid(String),
    /// A token without the scope the route needs (403 `insufficient_scope`).
    Scope(String),
    /// The provider's keys cannot be had (503); keys still work.
    Unavailable,
}

impl From<TokenError> for Refusal {
    fn from(e: TokenError) -> Refusal {
        match e {
            TokenError::Invalid(why) => Refusal::Invalid(why),
            TokenError::Scope(scope) => Refusal::Scope(scope),
            TokenError::Unavailable => Refusal::Unavailable,
        }
    }
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Missing | Refusal::Invalid(_) => StatusCode::UNAUTHORIZED,
            Refusal::Scope(_) => StatusCode::FORBIDDEN,
            Refusal::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// What a person reads.
    pub fn message(&self) -> String {
        match self {
            Refusal::Missing => {
                "send an API key or an access token as Authorization: Bearer <credential>".into()
            }
            Refusal::Invalid(why) => format!("the credential is not accepted: {why}"),
            Refusal::Scope(scope) => format!("this token lacks the scope {scope}"),
            Refusal::Unavailable => TokenError::Unavailable.to_string(),
        }
    }

    /// The `WWW-Authenticate` challenge (none on a 503), pointing at the metadata of the
    /// resource asked for: the MCP endpoint's or the API's.
    pub fn challenge(
        &self,
        engine: &Engine,
        headers: &HeaderMap,
        mcp: bool,
    ) -> Option<HeaderValue> {
        let metadata = resource::metadata_url(engine.config(), headers, mcp);
        // A quoted-string of visible ASCII (RFC 9110 §5.6.4), or the header could not be sent.
        let quoted = |s: &str| -> String {
            s.chars()
                .map(|c| match c {
                    '"' | '\\' => '\'',
                    c if c == ' ' || c.is_ascii_graphic() => c,
                    _ => '?',
                })
                .collect()
        };
        let text = match self {
            Refusal::Missing => format!("Bearer resource_metadata=\"{metadata}\""),
            Refusal::Invalid(why) => format!(
                "Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\", error_description=\"{}\"",
                quoted(why)
            ),
            Refusal::Scope(scope) => format!(
                "Bearer resource_metadata=\"{metadata}\", error=\"insufficient_scope\", scope=\"{}\"",
                quoted(scope)
            ),
            Refusal::Unavailable => return None,
        };
        HeaderValue::from_str(&text).ok()
    }

    /// The API's answer: the error body of its status, with the challenge.
    fn respond(self, engine: &Engine, headers: &HeaderMap, mcp: bool) -> Response {
        let status = self.status();
        let code = match status {
            StatusCode::UNAUTHORIZED => "unauthenticated",
            StatusCode::FORBIDDEN => "forbidden",
            _ => "unavailable",
        };
        let mut body: ErrorBody = ApiError::Unauthenticated.body();
        body.error.code = code;
        body.error.message = self.message();
        let challenge = self.challenge(engine, headers, mcp);
        let mut response = (status, Json(body)).into_response();
        if let Some(challenge) = challenge {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(5));
        }
        response
    }
}

/// The bearer credential of a request, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let header = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// The caller of a request that needs `need`: a key first (by its hash), else a token of a
/// tenant's provider. A tenant that signs its people in with its provider refuses their keys.
pub async fn authenticate(
    engine: &Engine,
    verifier: Option<&Verifier>,
    headers: &HeaderMap,
    need: Need,
) -> Result<Principal, Refusal> {
    let credential = bearer(headers).ok_or(Refusal::Missing)?;
    let config = engine.config();
    if let Some(who) = config.principal(credential) {
        let identity = config.tenant(&who.tenant).and_then(|t| t.identity.as_ref());
        if who.role != Role::Agent && identity.is_some_and(|i| !i.keys_for_people) {
            return Err(Refusal::Invalid(format!(
                "tenant {} signs its people in with its identity provider: use an access token",
                who.tenant
            )));
        }
        return Ok(who.clone());
    }
    match verifier {
        Some(verifier) if crate::identity::token::looks_like_jwt(credential) => Ok(verifier
            .principal(config, credential, need, engine.now())
            .await?),
        _ => Err(Refusal::Invalid("unknown API key".into())),
    }
}

/// What a route needs of a token's scopes: the role whose use case it is (the engine checks
/// the role again, for keys and tokens alike). Where any role may call, any scope will do.
pub fn need(method: &Method, path: &str) -> Need {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let role = match (method.as_str(), segments.as_slice()) {
        ("POST", ["v1", "actions"] | ["mcp"]) => Role::Agent,
        ("POST", ["v1", "actions", _, "approve" | "deny"] | ["v1", "decisions"]) => Role::Approver,
        (
            "POST",
            ["v1", "stops"] | ["v1", "policy", "explain"] | ["v1", "notifications", _, "redeliver"],
        )
        | ("DELETE", ["v1", "stops", _])
        | ("GET", ["v1", "notifications", "dead"] | ["v1", "quarantine"] | ["v1", "insights"]) => {
            Role::Admin
        }
        _ => return Need::Any,
    };
    Need::Role(role)
}
