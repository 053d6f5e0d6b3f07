//! One `[tenants.<name>]` table: its zone, approval TTL, keys with their roles, policy, action
//! kinds, tool catalog, webhook targets, notification endpoints and deed key.

use super::{
    catalog::{self, ToolEntry},
    email::{self, EmailConfig},
    identity::{self, IdentityConfig},
    keys::{self, DeedSigner},
    notify::{self, Endpoint},
    parse::{bad, duration, ConfigError},
    policy,
    principal::{Principal, Role},
    slack::{self, SlackConfig},
    targets::Targets,
};
use crate::domain::policy::Rule;
use jiff::{tz::TimeZone, SignedDuration};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenant {
    time_zone: String,
    approval_ttl: Option<String>,
    #[serde(default)]
    action_kinds: Vec<String>,
    #[serde(default)]
    keys: Vec<RawKey>,
    #[serde(default)]
    policy: Vec<policy::RawRule>,
    #[serde(default)]
    tools: BTreeMap<String, catalog::RawTool>,
    /// Webhook hosts allowed plain `http` (SC-SEC-08).
    #[serde(default)]
    allow_http_hosts: Vec<String>,
    /// Webhook hosts allowed to be or resolve to private, loopback or link-local addresses.
    #[serde(default)]
    allow_private_hosts: Vec<String>,
    #[serde(default)]
    notify: Vec<notify::RawEndpoint>,
    deed_key: Option<keys::RawDeedKey>,
    /// The tenant's identity provider (SC-ID-03): OAuth access tokens beside keys.
    identity: Option<identity::RawIdentity>,
    /// The tenant's Slack app (docs/slack.md): approval requests as messages with buttons.
    slack: Option<slack::RawSlack>,
    /// Approval requests mailed to the approvers (docs/email.md).
    email: Option<email::RawEmail>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    id: String,
    role: Role,
    sha256: String,
    /// Approver groups (SC-POL-03): a rule's `approvers` names them.
    #[serde(default)]
    groups: Vec<String>,
    /// The approver's Slack user id: their clicks on a Slack message approve as this key.
    slack_user: Option<String>,
    /// Where an approver's approval requests are mailed (`[tenants.<name>.email]`).
    email: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Tenant {
    pub name: String,
    pub time_zone: TimeZone,
    pub time_zone_name: String,
    pub approval_ttl: SignedDuration,
    pub action_kinds: BTreeSet<String>,
    pub policy: Vec<Rule>,
    pub tools: BTreeMap<String, ToolEntry>,
    /// Signs this tenant's deeds; without one, deeds are not issued.
    pub deed_key: Option<DeedSigner>,
    /// Notification endpoints (SC-NOT-01).
    pub notify: Vec<Endpoint>,
    /// Whose OAuth access tokens the tenant accepts (SC-ID-03); `None`: keys only.
    pub identity: Option<IdentityConfig>,
    /// The tenant's Slack app (SC-CH-01); `None`: no Slack messages.
    pub slack: Option<SlackConfig>,
    /// Approval requests by mail (SC-CH-10); `None`: no mail.
    pub email: Option<EmailConfig>,
}

impl Tenant {
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.get(name)
    }
}

pub(super) fn tenant(
    name: &str,
    raw: RawTenant,
    keys: &mut HashMap<String, Principal>,
    conditions: policy::Conditions,
) -> Result<Tenant, ConfigError> {
    let at = format!("tenants.{name}");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(bad(&at, "tenant names use letters, digits, '-' and '_'"));
    }
    let time_zone = TimeZone::get(&raw.time_zone).map_err(|e| {
        bad(
            format!("{at}.time_zone"),
            format!("unknown IANA time zone {:?} ({e})", raw.time_zone),
        )
    })?;
    let approval_ttl = duration(
        &format!("{at}.approval_ttl"),
        raw.approval_ttl.as_deref(),
        "24h",
    )?;

    let (slack_users, addresses) = principals(&at, name, raw.keys, keys)?;
    let targets = Targets {
        http: raw.allow_http_hosts,
        private: raw.allow_private_hosts,
    };
    let slack = match (raw.slack, slack_users.first_key_value()) {
        (Some(raw), _) => Some(slack::slack(&at, raw, &targets, slack_users, &addresses)?),
        (None, Some((_, key))) => {
            return Err(bad(
                format!("{at}.slack"),
                format!("approver {key} has a slack_user, but the tenant has no [{at}.slack]"),
            ))
        }
        (None, None) => None,
    };
    let identity = raw
        .identity
        .map(|i| identity::identity(&at, i))
        .transpose()?;
    // Checked against the tenant's approver keys: a group nobody is in could never decide.
    // With an identity provider the people and their groups are the provider's.
    let policy = policy::rules(
        &at,
        raw.policy,
        keys.values().filter(|p| p.tenant == name),
        conditions,
        identity.is_some(),
    )?;
    let named_channel = policy.iter().position(|r| r.slack_channel.is_some());
    if let (Some(i), None) = (named_channel, &slack) {
        return Err(bad(
            format!("{at}.policy[{i}].slack_channel"),
            format!("the tenant has no [{at}.slack] to post to"),
        ));
    }
    let email = raw
        .email
        .map(|e| email::email(&at, e, addresses))
        .transpose()?;
    if let Some(email) = &email {
        email::sign_in_rules(&at, email, &policy, identity.is_some())?;
    }
    Ok(Tenant {
        policy,
        identity,
        slack,
        tools: catalog::tools(&at, raw.tools, &targets)?,
        notify: notify::endpoints(&at, raw.notify, &targets)?,
        email,
        deed_key: raw.deed_key.map(|k| keys::named(&at, k)).transpose()?,
        name: name.to_owned(),
        time_zone,
        time_zone_name: raw.time_zone,
        approval_ttl,
        action_kinds: raw.action_kinds.into_iter().collect(),
    })
}

/// Approver key ids by Slack user id.
type SlackUsers = BTreeMap<String, String>;
/// Approvers' addresses by approver key id.
type Addresses = BTreeMap<String, lettre::message::Mailbox>;

/// The tenant's keys, by hash, into the one map of every tenant's keys (a hash is unique).
/// Answers the approver key ids by their Slack user ids, and the approvers' addresses.
fn principals(
    at: &str,
    tenant: &str,
    raw: Vec<RawKey>,
    keys: &mut HashMap<String, Principal>,
) -> Result<(SlackUsers, Addresses), ConfigError> {
    let (mut slack_users, mut addresses) = (BTreeMap::new(), BTreeMap::new());
    for (i, key) in raw.into_iter().enumerate() {
        let key_at = format!("{at}.keys[{i}]");
        let hash = key.sha256.to_ascii_lowercase();
        if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad(
                &key_at,
                "sha256 must be the 64 hex digits of the key's SHA-256",
            ));
        }
        if key.id.trim().is_empty() {
            return Err(bad(&key_at, "id must not be empty"));
        }
        if key.role != Role::Approver && !key.groups.is_empty() {
            return Err(bad(&key_at, "only approver keys belong to groups"));
        }
        if let Some(user) = key.slack_user {
            if key.role != Role::Approver {
                return Err(bad(&key_at, "only approver keys have a slack_user"));
            }
            slack::user_id(&key_at, &user)?;
            if let Some(other) = slack_users.insert(user.clone(), key.id.clone()) {
                if other != key.id {
                    return Err(bad(
                        format!("{key_at}.slack_user"),
                        format!("{user} is already the Slack user of approver {other}"),
                    ));
                }
            }
        }
        match (&key.email, key.role) {
            (Some(to), Role::Approver) => email::address(&key_at, &key.id, to, &mut addresses)?,
            (Some(_), _) => return Err(bad(&key_at, "only approver keys have an email")),
            (None, _) => {}
        }
        let principal = Principal {
            tenant: tenant.to_owned(),
            role: key.role,
            id: key.id,
            groups: key.groups,
            person: None,
        };
        if keys.insert(hash, principal).is_some() {
            return Err(bad(&key_at, "this key hash is declared twice"));
        }
    }
    Ok((slack_users, addresses))
}
