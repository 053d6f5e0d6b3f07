//! The one configuration document (SPEC §5): tenants, hashed keys with roles, policy, declared
//! action kinds and the tool catalog. Validated once at load; every error names its entry.
//!
//! Parsing is pure: [`Config::from_toml`] reads no environment. The secrets the document names
//! are read where the process boots — deed keys by [`Config::read_keys`] (which
//! [`Config::from_file`] calls), webhook secrets by `tools::secrets`, notification secrets by
//! `notify::check_secrets`.

use crate::domain::canonical;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};

mod catalog;
mod email;
mod identity;
mod keys;
mod limits;
mod notify;
mod parse;
mod policy;
mod principal;
mod server;
mod slack;
mod targets;
mod tenant;
#[cfg(test)]
mod tests;

pub use catalog::{
    Executor, Recovery, Secret, Signing, ToolEntry, ToolInfo, MAX_TOOL_TIMEOUT, MCP_STATUS_TOOL,
    MIN_TOOL_TIMEOUT,
};
pub use email::{EmailConfig, MIN_LINK_SECRET};
pub use identity::{IdentityConfig, MAX_LEEWAY};
pub use keys::DeedSigner;
pub use limits::{Limits, Rate};
pub use notify::{Endpoint, Format};
pub use parse::ConfigError;
pub use policy::Conditions;
pub use principal::{Person, Principal, Role};
pub use server::TlsFiles;
pub use slack::{SlackConfig, SLACK_API};
pub use tenant::Tenant;

/// The document as written; each table's own raw shape lives beside its validation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    limits: limits::RawLimits,
    #[serde(default)]
    server: notify::RawServer,
    #[serde(default)]
    notify: notify::RawRetry,
    tenants: BTreeMap<String, tenant::RawTenant>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    /// `[server] public_url`: the approver page's address, for links in notifications.
    pub public_url: Option<String>,
    /// `[server] tls_cert`, `tls_key`: the local server serves HTTPS with these files.
    pub tls: Option<TlsFiles>,
    /// `[notify]`: how long failing notifications are retried before they are parked.
    pub notify_retry: crate::domain::notice::RetryRule,
    pub tenants: BTreeMap<String, Tenant>,
    keys: HashMap<String, Principal>,
}

impl Config {
    /// The configuration a process boots with: the file parsed, then the deed keys it names
    /// read from the process environment.
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text)?.read_keys()
    }

    /// Parse and validate the document. Pure: it reads no environment and no secret.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, Conditions::Compile)
    }

    /// The same, the policy's conditions compiled when `conditions` says.
    pub fn from_toml_with(text: &str, conditions: Conditions) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        let limits = limits::limits(raw.limits)?;
        if raw.tenants.is_empty() {
            return Err(ConfigError("no [tenants.<name>] declared".into()));
        }
        let mut keys = HashMap::new();
        let mut tenants = BTreeMap::new();
        for (name, raw_tenant) in raw.tenants {
            let tenant = tenant::tenant(&name, raw_tenant, &mut keys, conditions)?;
            tenants.insert(name, tenant);
        }
        identity::distinct(tenants.iter().map(|(name, t)| (name, t.identity.as_ref())))?;
        Ok(Config {
            limits,
            public_url: notify::public_url(&raw.server)?,
            tls: server::tls(&raw.server)?,
            notify_retry: notify::retry_rule(raw.notify)?,
            tenants,
            keys,
        })
    }

    /// Read every deed key the document names from the process environment (at boot).
    pub fn read_keys(self) -> Result<Config, ConfigError> {
        self.read_keys_with(&|name| std::env::var(name).ok())
    }

    /// As [`Config::read_keys`], from `env`.
    pub fn read_keys_with(
        mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        for (name, tenant) in &mut self.tenants {
            if let Some(signer) = tenant.deed_key.take() {
                tenant.deed_key = Some(keys::read(&format!("tenants.{name}"), signer, env)?);
            }
        }
        Ok(self)
    }

    /// The principal a bearer key belongs to, by the key's SHA-256.
    pub fn principal(&self, bearer_key: &str) -> Option<&Principal> {
        self.keys.get(&canonical::sha256_hex(bearer_key.as_bytes()))
    }

    /// The keys of `tenant` that identify as `id` (one person may hold several).
    pub fn principals_named<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> impl Iterator<Item = &'a Principal> {
        self.keys
            .values()
            .filter(move |p| p.tenant == tenant && p.id == id)
    }

    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.get(name)
    }

    /// Every webhook secret the catalog names, with the entry that names it (for boot errors).
    /// The Slack apps' secrets, each with the entry that names it (`tenants.acme.slack.bot_token`).
    pub fn slack_secrets(&self) -> Vec<(String, &Secret)> {
        let mut out = Vec::new();
        for (tenant, t) in &self.tenants {
            if let Some(slack) = &t.slack {
                out.push((
                    format!("tenants.{tenant}.slack.bot_token"),
                    &slack.bot_token,
                ));
                out.push((
                    format!("tenants.{tenant}.slack.signing_secret"),
                    &slack.signing_secret,
                ));
            }
        }
        out
    }

    pub fn webhook_secrets(&self) -> Vec<(String, &Secret)> {
        let mut out = Vec::new();
        for (tenant, t) in &self.tenants {
            for (tool, entry) in &t.tools {
                if let Executor::Webhook { secret, .. } | Executor::Mcp { secret, .. } =
                    &entry.executor
                {
                    out.push((format!("tenants.{tenant}.tools.{tool:?}"), secret));
                }
            }
        }
        out
    }
}
