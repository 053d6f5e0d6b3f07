//! The confirmation page of an approval mail (SC-CH-11 … SC-CH-13). Opening the link — `GET`
//! or `HEAD`, as a person or a corporate link scanner does — only shows the call: nothing is
//! written. The decision is a `POST` of the page's form, which carries the link's token in its
//! body; the token is the credential (no cookie is involved, so a forged cross-site form has
//! nothing to ride on). The page answers in HTML, never the API's JSON.

use super::{
    auth::{authenticate, Refusal},
    body::ConfirmForm,
    error::ApiError,
    extract::bytes,
};
use crate::{
    config::{Principal, Role},
    domain::{
        actor::Channel,
        email_link::{Link, LinkError},
        mail::{escape, facts},
        Action, State,
    },
    identity::{Need, Verifier},
    notify::email::link_key,
    Engine, Error,
};
use axum::{
    extract::{RawQuery, Request, State as Shared},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
};
use base64::Engine as _;
use sha2::Digest;
use std::sync::{Arc, LazyLock};

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}\
th{text-align:left;padding-right:1rem;vertical-align:top}pre{background:#f4f4f4;padding:.75rem;overflow:auto;white-space:pre-wrap}\
textarea{width:100%}button{font-size:1rem;margin:.5rem .5rem .5rem 0;padding:.4rem 1rem}";

/// The page's own inline style by its hash, forms posted to this origin only, no script.
static CSP: LazyLock<String> = LazyLock::new(|| {
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; base-uri 'none'; \
         frame-ancestors 'none'"
    )
});

/// Show the call a mailed link may decide. Writes nothing.
#[utoipa::path(
    get,
    path = crate::api::paths::EMAIL_CONFIRM,
    tag = "approval",
    security(()),
    params(("token" = String, Query, description = "The mailed link's token")),
    responses(
        (status = 200, description = "The call, with Approve and Deny", content_type = "text/html"),
        (status = 403, description = "The link is malformed, altered or of no key that still approves", content_type = "text/html"),
        (status = 410, description = "The link has expired", content_type = "text/html"),
    )
)]
pub(super) async fn show(
    Shared(engine): Shared<Arc<Engine>>,
    RawQuery(query): RawQuery,
) -> Result<Response, Response> {
    let token = ConfirmForm::read(query.as_deref().unwrap_or_default().as_bytes()).token;
    let (link, _, action) = opened(&engine, &token).await?;
    let zone = zone(&engine, &link.tenant);
    let body = match used(&link, &action) {
        Some(said) => format!(
            "{}<p><strong>{}</strong></p>",
            call(&action, &zone),
            escape(&said)
        ),
        None if needs_sign_in(&engine, &link, &action) => {
            format!("{}{}", call(&action, &zone), sign_in_first(&link))
        }
        None => format!("{}{}", call(&action, &zone), form(&token)),
    };
    Ok(page(StatusCode::OK, "Approval requested", &body))
}

/// Decide: approve (for the context the mail showed) or deny with a reason.
#[utoipa::path(
    post,
    path = crate::api::paths::EMAIL_CONFIRM,
    tag = "approval",
    security(()),
    request_body(content_type = "application/x-www-form-urlencoded", content = ConfirmForm),
    responses(
        (status = 200, description = "Approved or denied", content_type = "text/html"),
        (status = 400, description = "No decision, or a deny without a reason", content_type = "text/html"),
        (status = 401, description = "The call's rule needs the approver signed in as well (`[email] sign_in_for`): no bearer token, or one that does not verify", content_type = "text/html"),
        (status = 403, description = "The link is malformed, altered or of no key that still approves; or, where sign-in is needed, the token is a key's or another person's", content_type = "text/html"),
        (status = 409, description = "Already used, or the call changed or ended", content_type = "text/html"),
        (status = 410, description = "The link has expired", content_type = "text/html"),
        (status = 413, description = "The form exceeds 256 KiB", content_type = "text/html"),
    )
)]
pub(super) async fn decide(
    Shared(engine): Shared<Arc<Engine>>,
    request: Request,
) -> Result<Response, Response> {
    let (parts, body) = request.into_parts();
    let form = ConfirmForm::read(
        &bytes(body)
            .await
            .map_err(|e| refused_with(e.status_and_code(), &e))?,
    );
    let (link, who, action) = opened(&engine, &form.token).await?;
    if let Some(said) = used(&link, &action) {
        return Err(page(
            StatusCode::CONFLICT,
            "Already used",
            &format!("<p>{}</p>", escape(&said)),
        ));
    }
    let who = signed_in(&engine, &parts, &link, &action, who).await?;
    let decided = match form.decision.as_str() {
        "approve" => {
            engine
                .approve_through(
                    &who,
                    &link.action_id,
                    &link.context_digest,
                    Some(Channel::Email),
                    None,
                )
                .await
        }
        "deny" => {
            let reason = form.reason.unwrap_or_default();
            if reason.trim().is_empty() || reason.trim().len() > super::body::MAX_REASON {
                return Err(page(
                    StatusCode::BAD_REQUEST,
                    "A reason is needed",
                    "<p>Say why you deny it (at most 1000 characters), then deny again.</p>",
                ));
            }
            deny(&engine, &who, &link, reason.trim()).await
        }
        _ => {
            return Err(page(
                StatusCode::BAD_REQUEST,
                "No decision",
                "<p>Approve or deny from the page.</p>",
            ))
        }
    };
    let action = decided.map_err(|e| refused(&e))?;
    tracing::info!(tenant = %link.tenant, action_id = %link.action_id, approver = %link.approver, state = %action.state(), "decided through a mailed link");
    let zone = zone(&engine, &link.tenant);
    let body = format!(
        "<p><strong>{}</strong></p>{}",
        escape(&outcome(&action, &link.approver)),
        call(&action, &zone)
    );
    Ok(page(StatusCode::OK, "Thank you", &body))
}

/// Whether the rule that asked for `action` decides through its mailed links only with the
/// approver signed in (`[email] sign_in_for`, SC-CH-16).
fn needs_sign_in(engine: &Engine, link: &Link, action: &Action) -> bool {
    let config = engine.config();
    let email = config.tenant(&link.tenant).and_then(|t| t.email.as_ref());
    let rule = action.approval().map(|a| &a.context["policy"]["label"]);
    email.is_some_and(|e| e.needs_sign_in(rule.and_then(|r| r.as_str())))
}

/// SC-CH-16: where the rule needs it, the link's approver signed in as well — the request's
/// bearer token a person's from the tenant's provider, whose email is the address the link was
/// mailed to. The approval is then the key's with the person on it. Anything else is refused
/// and changes nothing: no token `401`, a key's token or another person's `403`.
#[allow(clippy::result_large_err)]
async fn signed_in(
    engine: &Engine,
    parts: &axum::http::request::Parts,
    link: &Link,
    action: &Action,
    who: Principal,
) -> Result<Principal, Response> {
    if !needs_sign_in(engine, link, action) {
        return Ok(who);
    }
    let verifier = parts.extensions.get::<Arc<Verifier>>().map(Arc::as_ref);
    let refused = |status, title: &str, why: &str| {
        page(
            status,
            title,
            &format!("<p>{why} Nothing was changed.</p>{}", sign_in_first(link)),
        )
    };
    let person =
        match authenticate(engine, verifier, &parts.headers, Need::Role(Role::Approver)).await {
            Ok(p) if p.tenant == link.tenant => p.person,
            Ok(_) => None,
            Err(Refusal::Missing) => {
                return Err(refused(
                    StatusCode::UNAUTHORIZED,
                    "Sign in to decide",
                    "This call's rule asks you to sign in as well.",
                ))
            }
            Err(_) => {
                return Err(refused(
                    StatusCode::UNAUTHORIZED,
                    "Sign in to decide",
                    "Your sign-in did not verify.",
                ))
            }
        };
    let config = engine.config();
    let mailed_to = config
        .tenant(&link.tenant)
        .and_then(|t| t.email.as_ref())
        .and_then(|e| e.to.get(&link.approver))
        .map(|m| m.email.to_string().to_ascii_lowercase());
    match person {
        Some(person)
            if person.email.as_deref().map(str::to_ascii_lowercase) == mailed_to
                && mailed_to.is_some() =>
        {
            Ok(Principal {
                person: Some(person),
                ..who
            })
        }
        _ => Err(refused(
            StatusCode::FORBIDDEN,
            "Not yours to decide",
            "This link was mailed to another person: sign in as them.",
        )),
    }
}

/// Where a rule needs the approver signed in: the call is decided on the approver page, after
/// signing in there (this page has no script and holds no token).
fn sign_in_first(link: &Link) -> String {
    format!(
        "<p>This call's rule asks you to sign in to decide it. \
         <a href=\"../#action={}\">Sign in and decide on the approver page</a>.</p>",
        escape(&link.action_id)
    )
}

/// The link's token checked, and the action it names as its approver may read it.
async fn opened(engine: &Arc<Engine>, token: &str) -> Result<(Link, Principal, Action), Response> {
    let (link, who) = holder(engine, token)?;
    let action = engine
        .get(&who, &link.action_id)
        .await
        .map_err(|e| refused(&e))?;
    Ok((link, who, action))
}

/// A deny of exactly the call the mail showed: refused when its context changed since.
async fn deny(
    engine: &Arc<Engine>,
    who: &Principal,
    link: &Link,
    reason: &str,
) -> Result<Action, Error> {
    let action = engine.get(who, &link.action_id).await?;
    if let Some(approval) = action
        .approval()
        .filter(|a| a.context_digest != link.context_digest)
    {
        return Err(Error::ContextChanged {
            current_digest: approval.context_digest.clone(),
        });
    }
    engine
        .deny_through(who, &link.action_id, reason, Some(Channel::Email))
        .await
}

/// The link's token checked (the tenant's key, the expiry), and the approver it names as a
/// principal: one of the tenant's approver keys (a key removed since the mail ends the link).
#[allow(clippy::result_large_err)]
fn holder(engine: &Engine, token: &str) -> Result<(Link, Principal), Response> {
    let config = engine.config();
    let tenant = Link::claimed_tenant(token).map_err(bad_link)?;
    let email = config
        .tenant(&tenant)
        .and_then(|t| t.email.as_ref())
        .ok_or_else(|| bad_link(LinkError::Forged))?;
    let key = link_key(email, engine.channel_secrets()).map_err(|why| {
        tracing::error!(%tenant, %why, "the link key is not usable");
        page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            "<p>This server cannot check links now. Try again later.</p>",
        )
    })?;
    let link = Link::verify(token, &key, engine.now()).map_err(bad_link)?;
    let key_of = config
        .principals_named(&link.tenant, &link.approver)
        .find(|p| p.role == Role::Approver)
        .cloned();
    match key_of {
        Some(who) => Ok((link, who)),
        None => Err(page(
            StatusCode::FORBIDDEN,
            "Not an approver",
            "<p>The approver this link was sent to no longer holds an approver key.</p>",
        )),
    }
}

/// Whether this approver's link was used already, or the action no longer waits; what to say.
fn used(link: &Link, action: &Action) -> Option<String> {
    let mine = action
        .approvals()
        .iter()
        .any(|s| s.approver == link.approver)
        || action.approval().and_then(|a| a.approver.as_deref()) == Some(link.approver.as_str());
    match action.state() {
        _ if mine => Some(format!(
            "This link was already used: you approved this call. It is now {}.",
            action.state()
        )),
        State::PendingApproval => None,
        state => Some(format!(
            "This call no longer waits for an approval: it is {state}."
        )),
    }
}

fn outcome(action: &Action, approver: &str) -> String {
    match action.state() {
        State::PendingApproval => {
            format!("Your approval ({approver}) is recorded; more are needed.")
        }
        State::Denied => "You denied this call.".into(),
        state => format!("Approved by {approver}. The call is now {state}."),
    }
}

fn zone(engine: &Engine, tenant: &str) -> jiff::tz::TimeZone {
    engine
        .config()
        .tenant(tenant)
        .map(|t| t.time_zone.clone())
        .unwrap_or(jiff::tz::TimeZone::UTC)
}

/// The call as the mail showed it: the facts and the arguments, whole.
fn call(action: &Action, zone: &jiff::tz::TimeZone) -> String {
    let rows: String = facts(action, zone)
        .iter()
        .map(|(label, value)| {
            format!(
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(label),
                escape(value)
            )
        })
        .collect();
    let args = serde_json::to_string_pretty(action.call().args()).expect("JSON serializes");
    format!(
        "<table>{rows}</table><h2>Arguments</h2><pre>{}</pre>",
        escape(&args)
    )
}

/// Approve, or deny with a reason: posted to this same address, the token in the body.
fn form(token: &str) -> String {
    let token = escape(token);
    format!(
        "<form method=\"post\"><input type=\"hidden\" name=\"token\" value=\"{token}\">\
         <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button></form>\
         <form method=\"post\"><input type=\"hidden\" name=\"token\" value=\"{token}\">\
         <label for=\"reason\">Reason to deny</label><textarea id=\"reason\" name=\"reason\" rows=\"2\" required></textarea>\
         <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>"
    )
}

fn bad_link(e: LinkError) -> Response {
    let status = match e {
        LinkError::Expired => StatusCode::GONE,
        LinkError::Malformed | LinkError::Forged => StatusCode::FORBIDDEN,
    };
    page(
        status,
        "Link refused",
        &format!(
            "<p>{}. Nothing was changed.</p>",
            escape(&capitalized(&e.to_string()))
        ),
    )
}

fn refused(e: &Error) -> Response {
    refused_with(ApiError::of_engine(e), e)
}

/// The page of a refusal, the HTTP layer's or the engine's.
fn refused_with((status, code): (StatusCode, &str), e: &dyn std::fmt::Display) -> Response {
    page(
        status,
        "Not done",
        &format!(
            "<p>Nothing was changed: {} ({code}).</p>",
            escape(&e.to_string())
        ),
    )
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>countersign: {t}</title><style>{STYLE}</style></head>\
         <body><h1>{t}</h1>{body}</body></html>",
        t = escape(title)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CSP.as_str()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // The address holds the token: never sent on to another site, never cached.
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        html,
    )
        .into_response()
}
