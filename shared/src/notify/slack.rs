//! Slack as an outbox channel beside the webhooks (SC-CH-02/03, docs/slack.md): an approval
//! request becomes a message (`chat.postMessage`) whose channel and `ts` the store keeps
//! ([`crate::store::Outbox::keep_channel_note`]); every later notice of the action updates that
//! message (`chat.update`) to where the action stands then. Both are rendered from the action as
//! it is when the notice is delivered, so a late or repeated delivery shows the latest state.
//!
//! Plain `reqwest` against the Web API's documented wire format (JSON bodies, a bearer token,
//! `{"ok": …, "error": …}` answers): the handful of methods used do not warrant an SDK.

use crate::{
    config::{Secret, SlackConfig, Tenant},
    domain::{notice::OutboxEntry, slack, Action},
    store::Outbox,
    target,
    tools::secrets::Secrets,
};
use serde_json::{json, Value};

/// The channel's name in an entry's `delivered` list and in the store's channel notes.
pub const CHANNEL: &str = "slack";

/// One tenant's Web API: its address, the client allowed to reach it, the bot token.
pub struct WebApi<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
    token: String,
}

impl<'a> WebApi<'a> {
    /// The tenant's Web API, or why it cannot be called (a kind, never the token).
    pub fn new(
        clients: &'a target::Clients,
        slack: &'a SlackConfig,
        secrets: &Secrets,
    ) -> Result<WebApi<'a>, String> {
        let http = clients
            .for_url(&slack.api_url, slack.allow_private)
            .ok_or("slack: target_refused")?;
        let token = secrets
            .value(&slack.bot_token)
            .ok_or_else(|| format!("slack: {} is not set", secret_name(&slack.bot_token)))?;
        Ok(WebApi {
            http,
            base: &slack.api_url,
            token,
        })
    }

    /// One Web API method: its answer when `ok`, else a short reason (`slack: channel_not_found`,
    /// `slack: http 503`, `slack: timeout`).
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, String> {
        let sent = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(&self.token)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string())
            .send()
            .await;
        Self::answered(sent).await
    }

    /// A read method (`users.info`): its arguments as a form, as Slack takes them.
    pub async fn read(&self, method: &str, form: &[(&str, &str)]) -> Result<Value, String> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let sent = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(&self.token)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await;
        Self::answered(sent).await
    }

    async fn answered(sent: reqwest::Result<reqwest::Response>) -> Result<Value, String> {
        let answer = match sent {
            Ok(r) if r.status().as_u16() == 429 => return Err("slack: ratelimited".into()),
            Ok(r) if !r.status().is_success() => {
                return Err(format!("slack: http {}", r.status().as_u16()))
            }
            Ok(r) => r.bytes().await.map_err(|_| "slack: unreadable answer")?,
            Err(e) if e.is_timeout() => return Err("slack: timeout".into()),
            Err(e) if target::refused(&e) => return Err("slack: target_refused".into()),
            Err(_) => return Err("slack: unreachable".into()),
        };
        let answer: Value =
            serde_json::from_slice(&answer).map_err(|_| "slack: unreadable answer")?;
        if answer["ok"] == true {
            Ok(answer)
        } else {
            Err(format!(
                "slack: {}",
                answer["error"].as_str().unwrap_or("not ok")
            ))
        }
    }
}

/// Which secret is missing, by its name (never its value).
pub fn secret_name(secret: &Secret) -> String {
    match secret {
        Secret::Env(name) => format!("environment variable {name}"),
        Secret::Ssm(name) => format!("parameter {name}"),
    }
}

/// The channel an action's request is posted to (SC-CH-15): the `slack_channel` of the rule
/// that asked, else the tenant's. The rule is the one the approval context names — its place
/// in the policy and its label both — as the configuration reads now; a policy reordered since
/// the call was submitted names another rule there, and the tenant's channel is used.
fn channel_of<'a>(slack: &'a SlackConfig, tenant: &'a Tenant, action: &Action) -> &'a str {
    let shown = action.approval().map(|a| &a.context["policy"]);
    let rule = shown.and_then(|p| {
        let rule = tenant
            .policy
            .get(usize::try_from(p["rule"].as_u64()?).ok()?)?;
        (p["label"].as_str() == Some(rule.label().as_str())).then_some(rule)
    });
    rule.and_then(|r| r.slack_channel.as_deref())
        .unwrap_or(&slack.channel)
}

/// Post or update the action's message for one notice. `Err` is why this try failed (the
/// entry is retried with backoff like a webhook's).
pub(super) async fn deliver(
    api: &WebApi<'_>,
    outbox: &dyn Outbox,
    slack_config: &SlackConfig,
    tenant: &Tenant,
    entry: &OutboxEntry,
    action: &Action,
    page_url: &str,
) -> Result<(), String> {
    let message = slack::message(action, page_url, &tenant.time_zone);
    let note = outbox
        .channel_note(&entry.tenant, &entry.action_id, CHANNEL)
        .await
        .map_err(|e| format!("slack: store: {e}"))?;
    match note.as_deref().and_then(|n| n.split_once(' ')) {
        Some((channel, ts)) => {
            let mut update = message;
            update["channel"] = json!(channel);
            update["ts"] = json!(ts);
            api.call("chat.update", &update).await.map(drop)
        }
        // No message yet: a notice after the request (approved, sealed) has nothing to update
        // — the request's own delivery, still to come, posts the action as it stands then.
        None if entry.kind != crate::domain::notice::NoticeKind::ApprovalRequested => Ok(()),
        None => {
            let mut post = message;
            post["channel"] = json!(channel_of(slack_config, tenant, action));
            // Links stay links; no preview of the page.
            post["unfurl_links"] = json!(false);
            let posted = api.call("chat.postMessage", &post).await?;
            let (Some(channel), Some(ts)) = (posted["channel"].as_str(), posted["ts"].as_str())
            else {
                return Err("slack: chat.postMessage answered no channel and ts".into());
            };
            outbox
                .keep_channel_note(
                    &entry.tenant,
                    &entry.action_id,
                    CHANNEL,
                    &format!("{channel} {ts}"),
                )
                .await
                .map_err(|e| format!("slack: posted, but the store failed: {e}"))
        }
    }
}
