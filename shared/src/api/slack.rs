//! `POST /v1/slack/interactions` (SC-CH-04…, docs/slack.md): the Approve and Deny buttons of a
//! Slack approval message, and the deny modal's submission.
//!
//! Nothing is parsed before the request's Slack signature verifies: `v0=` HMAC-SHA256 of
//! `v0:{timestamp}:{raw body}` under a tenant's signing secret, compared in constant time, the
//! timestamp within five minutes of the engine's clock. The clicking Slack user is an approver
//! only through the `slack_user` on one of the tenant's approver keys, and the approval is the
//! engine's, unchanged: eligibility, groups, quorum, no self-approval, expiry and the context
//! digest the button carries. A replayed click is harmless (an approver approves once). Slack
//! wants an answer within 3 s: the approval is awaited up to [`INLINE`], then left to finish in
//! its own task; the message itself is updated through the outbox.

use super::{error::ApiError, extract::bytes};
use crate::{
    config::Principal,
    config::Role,
    domain::{
        actor::Channel,
        slack::{self, ButtonValue},
    },
    notify::slack::WebApi,
    target, Engine, Error,
};
use axum::{
    body::Body,
    extract::State as Shared,
    http::HeaderMap,
    response::{IntoResponse, Response},
    Json,
};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::{sync::Arc, time::Duration};

/// How far a request's timestamp may be from the engine's clock (Slack's own advice).
const FRESH_FOR: i64 = 5 * 60;
/// How long an answer waits for the approval (Slack gives up at 3 s).
const INLINE: Duration = Duration::from_millis(2000);
/// Each Web API call made while Slack waits (`views.open`, `chat.postEphemeral`).
const WEB_API_TIMEOUT: Duration = Duration::from_millis(800);

/// `v0=<hex>` over `v0:{timestamp}:{body}`, in constant time; the timestamp within
/// [`FRESH_FOR`] of `now` (unix seconds). Pure, so a table test holds it.
pub fn verify(secret: &[u8], timestamp: &str, body: &[u8], signature: &str, now: i64) -> bool {
    let Ok(at) = timestamp.parse::<i64>() else {
        return false;
    };
    if (now - at).abs() > FRESH_FOR {
        return false;
    }
    let Some(claimed) = signature
        .strip_prefix("v0=")
        .and_then(|hex| hex::decode(hex).ok())
    else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    mac.verify_slice(&claimed).is_ok()
}

/// The tenants whose signing secret verifies this request (usually one: its Slack app's).
fn verified_tenants(engine: &Engine, headers: &HeaderMap, body: &[u8]) -> Vec<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(timestamp), Some(signature)) = (
        header("x-slack-request-timestamp"),
        header("x-slack-signature"),
    ) else {
        return Vec::new();
    };
    let now = engine.now().as_second();
    engine
        .config()
        .tenants
        .iter()
        .filter_map(|(name, t)| Some((name, t.slack.as_ref()?)))
        .filter(|(_, slack)| {
            engine
                .channel_secrets()
                .value(&slack.signing_secret)
                .is_some_and(|secret| verify(secret.as_bytes(), timestamp, body, signature, now))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Slack's interactions: the Approve and Deny buttons and the deny modal (docs/slack.md).
/// Authenticated by Slack's signature, not by a key: verified before anything is parsed.
#[utoipa::path(
    post,
    path = crate::api::paths::SLACK_INTERACTIONS,
    tag = "approval",
    request_body(
        content = String,
        content_type = "application/x-www-form-urlencoded",
        description = "Slack's `payload=<JSON>` form, signed by Slack (`X-Slack-Signature: v0=…`, `X-Slack-Request-Timestamp`)"
    ),
    responses(
        (status = 200, description = "Taken. A click answers `{\"ok\": …}` (Slack ignores it; a refusal is told to the person in an ephemeral message); the deny modal's submission answers nothing (it closes) or `{\"response_action\": \"errors\"}`", body = Object),
        (status = 401, description = "unauthenticated: the Slack signature does not verify under any tenant's signing secret, or its timestamp is more than 5 minutes from the server's clock", body = super::error::ErrorBody),
    )
)]
pub(super) async fn interactions(
    Shared(engine): Shared<Arc<Engine>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = bytes(body).await?;
    let tenants = verified_tenants(&engine, &headers, &body);
    if tenants.is_empty() {
        tracing::warn!("a Slack interaction failed its signature or is stale; refused");
        return Err(ApiError::Unauthenticated);
    }
    let payload = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "payload")
        .and_then(|(_, v)| serde_json::from_str::<Value>(&v).ok())
        .ok_or_else(|| Error::validation("payload", "a Slack interaction payload is required"))?;
    let answer = match payload["type"].as_str() {
        Some("block_actions") => clicked(&engine, &tenants, &payload).await,
        Some("view_submission") if payload["view"]["callback_id"] == slack::DENY_VIEW => {
            return Ok(submitted(&engine, &tenants, &payload).await);
        }
        // Other interactions (a shortcut, a closed modal) change nothing.
        _ => Answer::Ignored,
    };
    Ok(answer.into_response())
}

/// What a click came to: Slack ignores the body of a `block_actions` answer, so it is for logs
/// and tests; the person is told by an ephemeral message.
enum Answer {
    Approved(crate::domain::State),
    /// The approval goes on in its own task (a tool running inline).
    Pending,
    ModalOpened,
    Refused(&'static str, String),
    Ignored,
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let body = match self {
            Answer::Approved(state) => json!({"ok": true, "state": state}),
            Answer::Pending => json!({"ok": true, "state": "approving"}),
            Answer::ModalOpened => json!({"ok": true, "modal": "deny"}),
            Answer::Refused(code, message) => {
                json!({"ok": false, "error": {"code": code, "message": message}})
            }
            Answer::Ignored => json!({"ok": true}),
        };
        Json(body).into_response()
    }
}

/// The button's value, if it names a tenant whose secret verified the request.
fn button(tenants: &[String], value: Option<&str>) -> Option<ButtonValue> {
    value
        .and_then(ButtonValue::parse)
        .filter(|v| tenants.contains(&v.tenant))
}

/// The approver key a Slack user clicks as: the one whose `slack_user` they are; else, with
/// `users_by_email` (SC-CH-17), the one whose `email` is their Slack profile's — as `users.info`
/// answers it, Slack having verified it — unless the member is deleted or a bot.
async fn approver(engine: &Engine, tenant: &str, slack_user: &str) -> Option<Principal> {
    let config = engine.config();
    let slack = config.tenant(tenant)?.slack.as_ref()?;
    let key_id = match slack.approver(slack_user) {
        Some(id) => id.to_owned(),
        None if !slack.by_email.is_empty() => {
            let member = web_api(engine, tenant, |api| async move {
                api.read("users.info", &[("user", slack_user)]).await
            })
            .await
            .map_err(|why| tracing::warn!(%tenant, %slack_user, error = %why, "users.info failed"))
            .ok()?;
            let user = &member["user"];
            if user["deleted"] == true || user["is_bot"] == true {
                return None;
            }
            slack
                .approver_by_email(user["profile"]["email"].as_str()?)?
                .to_owned()
        }
        None => return None,
    };
    let who = config
        .principals_named(tenant, &key_id)
        .find(|p| p.role == Role::Approver)
        .cloned();
    who
}

async fn clicked(engine: &Arc<Engine>, tenants: &[String], payload: &Value) -> Answer {
    let click = &payload["actions"][0];
    let Some(value) = button(tenants, click["value"].as_str()) else {
        return Answer::Ignored;
    };
    let user = payload["user"]["id"].as_str().unwrap_or_default();
    let Some(who) = approver(engine, &value.tenant, user).await else {
        let answer = Answer::Refused(
            "forbidden",
            "your Slack user is not an approver of this countersign tenant".into(),
        );
        return tell(engine, &value.tenant, payload, answer).await;
    };
    match click["action_id"].as_str() {
        Some(slack::APPROVE) => {
            let approving = {
                let engine = engine.clone();
                let value = value.clone();
                let who = who.clone();
                tokio::spawn(async move {
                    engine
                        .approve_through(
                            &who,
                            &value.action_id,
                            &value.context_digest,
                            Some(Channel::Slack),
                            None,
                        )
                        .await
                })
            };
            let answer = match tokio::time::timeout(INLINE, approving).await {
                Ok(Ok(Ok(action))) => {
                    tracing::info!(tenant = %value.tenant, action_id = %value.action_id, approver = %who.id, slack_user = %user, "approved from Slack");
                    Answer::Approved(action.state())
                }
                Ok(Ok(Err(e))) => refused(&e),
                Ok(Err(e)) => Answer::Refused("internal", format!("the approval failed: {e}")),
                Err(_) => Answer::Pending,
            };
            tell(engine, &value.tenant, payload, answer).await
        }
        Some(slack::DENY) => {
            let action = match engine.get(&who, &value.action_id).await {
                Ok(action) => action,
                Err(e) => return tell(engine, &value.tenant, payload, refused(&e)).await,
            };
            let view = slack::deny_view(&value, action.call().tool());
            let opened = web_api(engine, &value.tenant, |api| async move {
                api.call(
                    "views.open",
                    &json!({"trigger_id": payload["trigger_id"], "view": view}),
                )
                .await
            })
            .await;
            match opened {
                Ok(_) => Answer::ModalOpened,
                Err(why) => {
                    tracing::warn!(tenant = %value.tenant, error = %why, "the deny modal did not open");
                    Answer::Refused("unavailable", why)
                }
            }
        }
        _ => Answer::Ignored,
    }
}

/// The deny modal's submission: deny with the reason. An empty body closes the modal; a
/// refusal is shown on the reason field.
async fn submitted(engine: &Arc<Engine>, tenants: &[String], payload: &Value) -> Response {
    let view = &payload["view"];
    let errors = |message: String| {
        Json(json!({"response_action": "errors", "errors": {slack::REASON_BLOCK: message}}))
            .into_response()
    };
    let Some(value) = button(tenants, view["private_metadata"].as_str()) else {
        return errors("this form does not name an action of this workspace".into());
    };
    let user = payload["user"]["id"].as_str().unwrap_or_default();
    let Some(who) = approver(engine, &value.tenant, user).await else {
        return errors("your Slack user is not an approver of this countersign tenant".into());
    };
    let reason = view["state"]["values"][slack::REASON_BLOCK][slack::REASON_INPUT]["value"]
        .as_str()
        .unwrap_or_default()
        .trim();
    if reason.is_empty() {
        return errors("say why it is denied".into());
    }
    match engine
        .deny_through(&who, &value.action_id, reason, Some(Channel::Slack))
        .await
    {
        Ok(_) => {
            tracing::info!(tenant = %value.tenant, action_id = %value.action_id, approver = %who.id, slack_user = %user, "denied from Slack");
            axum::http::StatusCode::OK.into_response()
        }
        Err(e) => errors(e.to_string()),
    }
}

fn refused(e: &Error) -> Answer {
    Answer::Refused(ApiError::of_engine(e).1, e.to_string())
}

/// Tell the person who clicked what their click came to, when it did not simply work (an
/// ephemeral message only they see); the answer is returned either way.
async fn tell(engine: &Engine, tenant: &str, payload: &Value, answer: Answer) -> Answer {
    let text = match &answer {
        Answer::Refused(_, message) => format!("countersign did not take your click: {message}"),
        Answer::Pending => {
            "countersign is recording your approval; the message will show it.".into()
        }
        _ => return answer,
    };
    let (channel, user) = (&payload["channel"]["id"], &payload["user"]["id"]);
    let told = web_api(engine, tenant, |api| async move {
        api.call(
            "chat.postEphemeral",
            &json!({"channel": channel, "user": user, "text": text}),
        )
        .await
    })
    .await;
    if let Err(why) = told {
        tracing::warn!(%tenant, error = %why, "could not tell the Slack user");
    }
    answer
}

/// One Web API call for `tenant`, bounded by [`WEB_API_TIMEOUT`].
async fn web_api<'a, F, Fut>(engine: &'a Engine, tenant: &str, call: F) -> Result<Value, String>
where
    F: FnOnce(WebApi<'a>) -> Fut,
    Fut: std::future::Future<Output = Result<Value, String>>,
{
    static CLIENTS: std::sync::OnceLock<target::Clients> = std::sync::OnceLock::new();
    let clients = CLIENTS.get_or_init(|| target::Clients::new(Some(WEB_API_TIMEOUT)));
    let slack = engine
        .config()
        .tenants
        .get(tenant)
        .and_then(|t| t.slack.as_ref())
        .ok_or("slack: the tenant has no Slack app")?;
    call(WebApi::new(clients, slack, engine.channel_secrets())?).await
}

#[cfg(test)]
mod tests {
    use super::verify;

    /// SC-CH-04: the signature covers the timestamp and every byte of the body, and a request
    /// more than five minutes from the clock is refused however well signed. (Slack's own
    /// example from its documentation, then changes to it.)
    #[test]
    fn sc_ch_04_the_slack_signature_is_checked_before_anything_else() {
        let secret = b"8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let ts = "1531420618";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        let now = 1531420618;
        assert!(verify(secret, ts, body, sig, now));
        assert!(verify(secret, ts, body, sig, now + 300));
        assert!(!verify(secret, ts, body, sig, now + 301), "stale");
        assert!(!verify(secret, ts, body, sig, now - 301), "from the future");
        assert!(!verify(b"another secret", ts, body, sig, now), "forged");
        let mut altered = body.to_vec();
        altered[10] ^= 1;
        assert!(!verify(secret, ts, &altered, sig, now), "altered body");
        assert!(
            !verify(secret, "1531420619", body, sig, now),
            "altered timestamp"
        );
        assert!(!verify(secret, ts, body, &sig.replace("v0=", "v1="), now));
        assert!(!verify(secret, ts, body, "v0=zz", now));
        assert!(
            !verify(secret, ts, body, &sig[..sig.len() - 2], now),
            "cut short"
        );
        assert!(!verify(secret, "soon", body, sig, now));
    }
}
