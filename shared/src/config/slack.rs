//! A tenant's Slack app (`[tenants.<name>.slack]`, docs/slack.md): the bot token that posts and
//! updates approval messages, the signing secret that verifies the buttons' interactions, the
//! channel, and the Web API's address; and the approvers' Slack user ids (`slack_user` on
//! approver keys). Secrets are only named here, never read while parsing.

use super::{
    catalog::{named_secret as secret, Secret},
    parse::{bad, ConfigError},
    targets::Targets,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Slack's Web API.
pub const SLACK_API: &str = "https://slack.com/api";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSlack {
    bot_token_env: Option<String>,
    bot_token_ssm: Option<String>,
    signing_secret_env: Option<String>,
    signing_secret_ssm: Option<String>,
    channel: String,
    api_url: Option<String>,
    /// Find a clicking user without a `slack_user` by the email of their Slack profile
    /// (`users.info`, SC-CH-17).
    #[serde(default)]
    users_by_email: bool,
}

/// A tenant's Slack app.
#[derive(Debug, Clone, PartialEq)]
pub struct SlackConfig {
    /// The bot token (`xoxb-…`): `chat.postMessage`, `chat.update`, `views.open`.
    pub bot_token: Secret,
    /// Verifies the `v0` signature of every interaction.
    pub signing_secret: Secret,
    /// The channel id approval requests are posted to.
    pub channel: String,
    /// The Web API's base, without a trailing `/`.
    pub api_url: String,
    /// The tenant lists the API's host in `allow_private_hosts` (a local stand-in).
    pub allow_private: bool,
    /// Approver key ids by the Slack user id on the key (`slack_user`).
    pub approvers: BTreeMap<String, String>,
    /// With `users_by_email`: approver key ids by their `email` address, lower-cased (SC-CH-17).
    pub by_email: BTreeMap<String, String>,
}

impl SlackConfig {
    /// The approver key id of a Slack user, if a key names them.
    pub fn approver(&self, slack_user: &str) -> Option<&str> {
        self.approvers.get(slack_user).map(String::as_str)
    }

    /// With `users_by_email`, the approver key id whose `email` is this Slack profile's email.
    pub fn approver_by_email(&self, email: &str) -> Option<&str> {
        self.by_email
            .get(&email.to_ascii_lowercase())
            .map(String::as_str)
    }
}

pub(super) fn slack(
    at: &str,
    raw: RawSlack,
    targets: &Targets,
    approvers: BTreeMap<String, String>,
    addresses: &BTreeMap<String, lettre::message::Mailbox>,
) -> Result<SlackConfig, ConfigError> {
    let at = format!("{at}.slack");
    let by_email: BTreeMap<String, String> = match raw.users_by_email {
        true => addresses
            .iter()
            .map(|(id, to)| (to.email.to_string().to_ascii_lowercase(), id.clone()))
            .collect(),
        false => BTreeMap::new(),
    };
    if by_email.len() < addresses.len() && raw.users_by_email {
        return Err(bad(
            format!("{at}.users_by_email"),
            "two approvers have the same email: a Slack user would be either",
        ));
    }
    if raw.users_by_email && by_email.is_empty() {
        return Err(bad(
            format!("{at}.users_by_email"),
            "no approver key has an email to find a Slack user by",
        ));
    }
    let bot_token = secret(&at, "bot_token", raw.bot_token_env, raw.bot_token_ssm)?;
    let signing_secret = secret(
        &at,
        "signing_secret",
        raw.signing_secret_env,
        raw.signing_secret_ssm,
    )?;
    channel_id(&format!("{at}.channel"), &raw.channel)?;
    let api_url = raw
        .api_url
        .unwrap_or_else(|| SLACK_API.to_owned())
        .trim_end_matches('/')
        .to_owned();
    let allow_private = targets.check_field(&format!("{at}.api_url"), &api_url)?;
    Ok(SlackConfig {
        bot_token,
        signing_secret,
        channel: raw.channel,
        api_url,
        allow_private,
        approvers,
        by_email,
    })
}

/// A Slack id: one of `first`, then upper-case letters and digits.
fn is_id(s: &str, first: &[char]) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| first.contains(&c))
        && s.len() >= 3
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Check a channel id (the tenant's `channel`, a rule's `slack_channel`): `C…` or `G…`.
pub(super) fn channel_id(at: &str, channel: &str) -> Result<(), ConfigError> {
    if is_id(channel, &['C', 'G']) {
        Ok(())
    } else {
        Err(bad(
            at,
            format!(
                "{channel:?} is not a channel id like \"C0123456789\" (a channel's name can change; its id does not)"
            ),
        ))
    }
}

/// Check a key's `slack_user` (a user id, `U…`, or `W…` on Enterprise Grid).
pub(super) fn user_id(at: &str, user: &str) -> Result<(), ConfigError> {
    if is_id(user, &['U', 'W']) {
        Ok(())
    } else {
        Err(bad(
            format!("{at}.slack_user"),
            format!("{user:?} is not a Slack user id like \"U0123ABCD\""),
        ))
    }
}
