//! The one configuration document (SPEC §5): tenants, hashed keys with roles, policy, declared
//! action kinds and the tool catalog. Validated once at load; every error names its entry.

use crate::domain::{canonical, deed::DeedKey, policy::Rule, window::WindowRules, Decision};
use crate::target;
use jiff::{tz::TimeZone, SignedDuration};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

mod notify;
pub use notify::{Endpoint, Format};

/// Bounds of a webhook's per-attempt timeout. The deployed functions' timeouts are sized so that
/// one claim of a `retry` tool at the maximum fits (`ToolEntry::claim_budget`; infra test).
pub const MIN_TOOL_TIMEOUT: SignedDuration = SignedDuration::from_millis(100);
pub const MAX_TOOL_TIMEOUT: SignedDuration = SignedDuration::from_secs(30);

#[derive(Debug, thiserror::Error)]
#[error("config: {0}")]
pub struct ConfigError(pub String);

fn bad(at: impl std::fmt::Display, what: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{at}: {what}"))
}

// ---------- the document as written ----------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    server: notify::RawServer,
    #[serde(default)]
    notify: notify::RawRetry,
    tenants: BTreeMap<String, RawTenant>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    min_window: Option<String>,
    sweep_interval: Option<String>,
    run_deadline: Option<String>,
    rate_per_key: Option<f64>,
    burst_per_key: Option<u32>,
    rate_per_tenant: Option<f64>,
    burst_per_tenant: Option<u32>,
    request_budget: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    time_zone: String,
    approval_ttl: Option<String>,
    #[serde(default)]
    action_kinds: Vec<String>,
    #[serde(default)]
    keys: Vec<RawKey>,
    #[serde(default)]
    policy: Vec<RawRule>,
    #[serde(default)]
    tools: BTreeMap<String, RawTool>,
    /// Webhook hosts allowed plain `http` (SC-SEC-08).
    #[serde(default)]
    allow_http_hosts: Vec<String>,
    /// Webhook hosts allowed to be or resolve to private, loopback or link-local addresses.
    #[serde(default)]
    allow_private_hosts: Vec<String>,
    #[serde(default)]
    notify: Vec<notify::RawEndpoint>,
    deed_key: Option<RawDeedKey>,
}

/// The tenant's deed signing key (SC-SEC-07): its id, and the environment variable that holds
/// the PKCS#8 PEM private key, so the key itself is never in the document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeedKey {
    kid: String,
    secret_env: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    id: String,
    role: Role,
    sha256: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: String,
    decision: Decision,
    result: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    executor: String,
    url: Option<String>,
    secret_env: Option<String>,
    secret_ssm: Option<String>,
    timeout: Option<String>,
    /// `executor = "mcp"`: the downstream server's tool name (default: the catalog name).
    tool: Option<String>,
    #[serde(default)]
    recovery: Recovery,
    /// What the tool does, for MCP clients and the models behind them (docs/mcp.md).
    description: Option<String>,
    /// The JSON Schema of the tool's arguments (an object schema), for MCP clients.
    input_schema: Option<toml::Value>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, …), passed through as written.
    annotations: Option<toml::Value>,
}

// ---------- the validated configuration ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Agent,
    Approver,
    Admin,
}

/// Who a key belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: String,
    pub role: Role,
    /// The agent id for agent keys; the person or service id otherwise.
    pub id: String,
}

/// What the sweep does with an expired lease (SC-REC-02).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Idempotent tools: re-claim with a new epoch, same Idempotency-Key, inside the window.
    Retry,
    /// Seal `failed` with reason `outcome_unknown`, for reconciliation.
    #[default]
    Fail,
}

/// Where a webhook's HMAC secret is read, by the process that runs tools, when it boots
/// (`tools::secrets`): an environment variable, or an SSM Parameter Store SecureString that only
/// the AWS functions running tools fetch (so the others never hold it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum Secret {
    #[serde(rename = "secret_env")]
    Env(String),
    #[serde(rename = "secret_ssm")]
    Ssm(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "executor")]
pub enum Executor {
    #[serde(rename = "webhook")]
    Webhook {
        url: String,
        /// Where the HMAC secret is; never the secret itself.
        #[serde(flatten)]
        secret: Secret,
        timeout_ms: u64,
        /// The tenant lists this host in `allow_private_hosts` (SC-SEC-08). Left out of the
        /// entry when false, so fingerprints of ordinary tools do not change.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        allow_private: bool,
    },
    /// A tool of a downstream MCP server over Streamable HTTP (docs/mcp.md, "Outbound").
    #[serde(rename = "mcp")]
    Mcp {
        url: String,
        /// The downstream tool's name.
        tool: String,
        /// Where its bearer token is; never the token itself.
        #[serde(flatten)]
        secret: Secret,
        timeout_ms: u64,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        allow_private: bool,
    },
    #[serde(rename = "builtin.echo")]
    Echo,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolEntry {
    pub name: String,
    #[serde(flatten)]
    pub executor: Executor,
    pub recovery: Recovery,
    /// What MCP clients are shown; part of the fingerprint when given, so a changed schema
    /// after approval seals `catalog_changed`.
    #[serde(flatten)]
    pub info: ToolInfo,
}

/// A tool's catalog fields for MCP clients (`tools/list`). Each is left out of the canonical
/// entry when absent, so the fingerprints of tools without them do not change.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<serde_json::Value>,
}

impl ToolEntry {
    /// sha256 of the canonical entry: a resume refuses a call whose tool changed since approval.
    pub fn fingerprint(&self) -> String {
        canonical::digest(self)
    }

    /// Attempts one claim makes: a `retry` tool's 5xx/timeout is tried again inside the window.
    pub fn attempts_per_claim(&self) -> u32 {
        match self.recovery {
            Recovery::Retry => 3,
            Recovery::Fail => 1,
        }
    }

    /// The pause before attempt `n + 1` (n = 1, 2, …).
    pub fn backoff(attempt: u32) -> SignedDuration {
        SignedDuration::from_secs(attempt as i64)
    }

    /// The longest one claim can take: every attempt timing out, plus the pauses between them.
    /// A lease (and a function timeout) must outlast it.
    pub fn claim_budget(&self) -> SignedDuration {
        let n = self.attempts_per_claim();
        let pauses = (1..n)
            .map(Self::backoff)
            .fold(SignedDuration::ZERO, |a, b| a + b);
        self.timeout() * n as i32 + pauses
    }

    /// The longest one attempt may take.
    pub fn timeout(&self) -> SignedDuration {
        match &self.executor {
            Executor::Webhook { timeout_ms, .. } | Executor::Mcp { timeout_ms, .. } => {
                SignedDuration::from_millis(*timeout_ms as i64)
            }
            Executor::Echo => SignedDuration::from_secs(1),
        }
    }
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
    pub deed_key: Option<DeedKey>,
    /// Notification endpoints (SC-NOT-01).
    pub notify: Vec<Endpoint>,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub window: WindowRules,
    /// An allowed request whose window opens within this runs at once (SC-INT-05).
    pub allow_now_within: SignedDuration,
    /// How often the sweep runs (local server; on AWS the sweep schedule says).
    pub sweep_interval: SignedDuration,
    /// Latest start of an approved call that has no window.
    pub run_deadline: SignedDuration,
    /// Requests one API key may make (SC-SEC-04).
    pub per_key: Rate,
    /// Requests all keys of one tenant may make together, so no tenant takes another's share.
    pub per_tenant: Rate,
    /// How long an HTTP request may wait on a tool run (SC-EDGE-07): a due ticket runs inside
    /// the request only if its tool's whole claim budget fits; otherwise its wake runs it.
    /// The default leaves room under API Gateway's 29 s integration timeout.
    pub request_budget: SignedDuration,
}

/// A token bucket: `per_second` refill, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

fn rate(
    at: &str,
    per_second: Option<f64>,
    burst: Option<u32>,
    default: Rate,
) -> Result<Rate, ConfigError> {
    let per_second = per_second.unwrap_or(default.per_second);
    // Below one per day or above a million per second is a typo, not a limit.
    if !(1.0 / 86_400.0..=1e6).contains(&per_second) {
        return Err(bad(
            format!("limits.rate_{at}"),
            "must be between 1/86400 and 1000000 requests per second",
        ));
    }
    let burst = burst.unwrap_or(default.burst);
    if burst == 0 {
        return Err(bad(format!("limits.burst_{at}"), "must be at least 1"));
    }
    Ok(Rate { per_second, burst })
}

#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    /// `[server] public_url`: the approver page's address, for links in notifications.
    pub public_url: Option<String>,
    /// `[notify]`: how long failing notifications are retried before they are parked.
    pub notify_retry: crate::domain::notice::RetryRule,
    pub tenants: BTreeMap<String, Tenant>,
    keys: HashMap<String, Principal>,
}

impl Config {
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text)
    }

    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        let min_window = duration("limits.min_window", raw.limits.min_window.as_deref(), "5m")?;
        if min_window > WindowRules::default().max_ahead {
            return Err(bad("limits.min_window", "must be at most 72h"));
        }
        let limits = Limits {
            window: WindowRules {
                min_width: min_window,
                ..WindowRules::default()
            },
            allow_now_within: SignedDuration::from_secs(60),
            sweep_interval: duration(
                "limits.sweep_interval",
                raw.limits.sweep_interval.as_deref(),
                "60s",
            )?,
            run_deadline: duration(
                "limits.run_deadline",
                raw.limits.run_deadline.as_deref(),
                "15m",
            )?,
            // Generous for people and well-behaved agents; a runaway loop meets the bucket.
            per_key: rate(
                "per_key",
                raw.limits.rate_per_key,
                raw.limits.burst_per_key,
                Rate {
                    per_second: 50.0,
                    burst: 100,
                },
            )?,
            per_tenant: rate(
                "per_tenant",
                raw.limits.rate_per_tenant,
                raw.limits.burst_per_tenant,
                Rate {
                    per_second: 200.0,
                    burst: 400,
                },
            )?,
            request_budget: duration(
                "limits.request_budget",
                raw.limits.request_budget.as_deref(),
                "25s",
            )?,
        };
        if raw.tenants.is_empty() {
            return Err(ConfigError("no [tenants.<name>] declared".into()));
        }
        let mut keys = HashMap::new();
        let mut tenants = BTreeMap::new();
        for (name, raw_tenant) in raw.tenants {
            let tenant = tenant(&name, raw_tenant, &mut keys)?;
            tenants.insert(name, tenant);
        }
        Ok(Config {
            limits,
            public_url: notify::public_url(raw.server)?,
            notify_retry: notify::retry_rule(raw.notify)?,
            tenants,
            keys,
        })
    }

    /// The principal a bearer key belongs to, by the key's SHA-256.
    pub fn principal(&self, bearer_key: &str) -> Option<&Principal> {
        self.keys.get(&canonical::sha256_hex(bearer_key.as_bytes()))
    }

    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.get(name)
    }

    /// Every webhook secret the catalog names, with the entry that names it (for boot errors).
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

impl Tenant {
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.get(name)
    }
}

fn duration(at: &str, raw: Option<&str>, default: &str) -> Result<SignedDuration, ConfigError> {
    let text = raw.unwrap_or(default);
    let d: SignedDuration = text.parse().map_err(|e| {
        bad(
            at,
            format!("{text:?} is not a duration like \"90s\", \"5m\", \"24h\" ({e})"),
        )
    })?;
    if d <= SignedDuration::ZERO {
        return Err(bad(at, "must be positive"));
    }
    Ok(d)
}

fn tenant(
    name: &str,
    raw: RawTenant,
    keys: &mut HashMap<String, Principal>,
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

    for (i, key) in raw.keys.into_iter().enumerate() {
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
        let principal = Principal {
            tenant: name.to_owned(),
            role: key.role,
            id: key.id,
        };
        if keys.insert(hash, principal).is_some() {
            return Err(bad(&key_at, "this key hash is declared twice"));
        }
    }

    let mut policy = Vec::new();
    for (i, rule) in raw.policy.into_iter().enumerate() {
        let rule_at = format!("{at}.policy[{i}]");
        if rule.tool.is_empty() {
            return Err(bad(&rule_at, "tool glob must not be empty"));
        }
        let result = match (rule.decision, rule.result) {
            (Decision::SetResult, Some(v)) => {
                Some(serde_json::to_value(v).map_err(|e| bad(&rule_at, format!("result: {e}")))?)
            }
            (Decision::SetResult, None) => {
                return Err(bad(&rule_at, "decision set_result needs a result"));
            }
            (_, Some(_)) => return Err(bad(&rule_at, "only a set_result rule carries a result")),
            (_, None) => None,
        };
        policy.push(Rule::new(&rule.tool, rule.decision, result));
    }

    let targets = Targets {
        http: raw.allow_http_hosts,
        private: raw.allow_private_hosts,
    };
    let mut tools = BTreeMap::new();
    for (tool_name, raw_tool) in raw.tools {
        let tool_at = format!("{at}.tools.{tool_name:?}");
        tools.insert(
            tool_name.clone(),
            tool_entry(&tool_at, tool_name, raw_tool, &targets)?,
        );
    }

    let notify = notify::endpoints(&at, raw.notify, &targets)?;
    Ok(Tenant {
        notify,
        name: name.to_owned(),
        time_zone,
        time_zone_name: raw.time_zone,
        approval_ttl,
        action_kinds: raw.action_kinds.into_iter().collect(),
        policy,
        tools,
        deed_key: raw.deed_key.map(|k| deed_key(&at, k)).transpose()?,
    })
}

/// The hosts a tenant lets its webhooks reach beyond https and public addresses (SC-SEC-08).
struct Targets {
    http: Vec<String>,
    private: Vec<String>,
}

impl Targets {
    /// Check a webhook URL; true if its host may be private.
    fn check(&self, at: &str, url: &str) -> Result<bool, ConfigError> {
        let at = format!("{at}.url");
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(&at, e))?;
        let host = target::host(&parsed).ok_or_else(|| bad(&at, "must name a host"))?;
        let listed = |hosts: &[String]| hosts.iter().any(|h| h.eq_ignore_ascii_case(host));
        match parsed.scheme() {
            "https" => {}
            "http" if listed(&self.http) => {}
            "http" => {
                return Err(bad(
                    &at,
                    format!("must be https, or its host {host} listed in allow_http_hosts"),
                ))
            }
            _ => return Err(bad(&at, "must be https")),
        }
        let private = listed(&self.private);
        if target::literal_is_private(host) && !private {
            return Err(bad(
                &at,
                format!(
                    "{host} is not a public address; list it in allow_private_hosts to allow it"
                ),
            ));
        }
        Ok(private)
    }
}

fn deed_key(at: &str, raw: RawDeedKey) -> Result<DeedKey, ConfigError> {
    let at = format!("{at}.deed_key");
    if raw.kid.trim().is_empty() {
        return Err(bad(format!("{at}.kid"), "kid must not be empty"));
    }
    let pem = std::env::var(&raw.secret_env).map_err(|_| {
        bad(
            format!("{at}.secret_env"),
            format!("environment variable {} is not set", raw.secret_env),
        )
    })?;
    DeedKey::from_pem(&raw.kid, &pem).map_err(|e| bad(format!("{at}.secret_env"), e))
}

fn tool_entry(
    at: &str,
    name: String,
    mut raw: RawTool,
    targets: &Targets,
) -> Result<ToolEntry, ConfigError> {
    let executor = match raw.executor.as_str() {
        "webhook" | "mcp" => {
            let executor = raw.executor.clone();
            remote(at, &name, &executor, &mut raw, targets)?
        }
        "builtin.echo" => {
            if raw.url.is_some()
                || raw.secret_env.is_some()
                || raw.secret_ssm.is_some()
                || raw.timeout.is_some()
                || raw.tool.is_some()
            {
                return Err(bad(
                    at,
                    "builtin.echo takes no url, secret_env, secret_ssm or timeout",
                ));
            }
            Executor::Echo
        }
        other => {
            return Err(bad(
                format!("{at}.executor"),
                format!("{other:?} is not one of \"webhook\", \"mcp\", \"builtin.echo\""),
            ))
        }
    };
    let info = tool_info(at, raw.description, raw.input_schema, raw.annotations)?;
    Ok(ToolEntry {
        name,
        executor,
        recovery: raw.recovery,
        info,
    })
}

/// A tool reached over the network: a webhook, or a downstream MCP server's tool. Both name a
/// checked target (SC-SEC-08), a secret by where it is, and a bounded timeout.
fn remote(
    at: &str,
    name: &str,
    executor: &str,
    raw: &mut RawTool,
    targets: &Targets,
) -> Result<Executor, ConfigError> {
    let url = raw
        .url
        .take()
        .ok_or_else(|| bad(at, format!("a {executor} tool needs url")))?;
    let allow_private = targets.check(at, &url)?;
    // Only named here: the value is read where the process boots (tools::secrets).
    let secret = match (raw.secret_env.take(), raw.secret_ssm.take()) {
        (Some(name), None) if !name.is_empty() => Secret::Env(name),
        (None, Some(name)) if name.starts_with('/') => Secret::Ssm(name),
        (None, Some(_)) => {
            return Err(bad(
                format!("{at}.secret_ssm"),
                "must be a parameter name like \"/countersign/acme/mail\"",
            ))
        }
        _ => {
            return Err(bad(
                at,
                format!("a {executor} tool needs exactly one of secret_env, secret_ssm"),
            ))
        }
    };
    let timeout = duration(&format!("{at}.timeout"), raw.timeout.as_deref(), "10s")?;
    if !(MIN_TOOL_TIMEOUT..=MAX_TOOL_TIMEOUT).contains(&timeout) {
        return Err(bad(
            format!("{at}.timeout"),
            format!(
                "must be between {MIN_TOOL_TIMEOUT:#} and {MAX_TOOL_TIMEOUT:#} (the functions' timeouts are sized for it)"
            ),
        ));
    }
    let timeout_ms = timeout.as_millis() as u64;
    Ok(match executor {
        "mcp" => Executor::Mcp {
            url,
            tool: raw.tool.take().unwrap_or_else(|| name.to_owned()),
            secret,
            timeout_ms,
            allow_private,
        },
        _ => {
            if raw.tool.is_some() {
                return Err(bad(
                    format!("{at}.tool"),
                    "only an mcp tool names a downstream tool",
                ));
            }
            Executor::Webhook {
                url,
                secret,
                timeout_ms,
                allow_private,
            }
        }
    })
}

/// The catalog fields: an `input_schema` must be an object schema (MCP's `inputSchema`).
fn tool_info(
    at: &str,
    description: Option<String>,
    input_schema: Option<toml::Value>,
    annotations: Option<toml::Value>,
) -> Result<ToolInfo, ConfigError> {
    let json = |field: &str, v: toml::Value| {
        serde_json::to_value(v).map_err(|e| bad(format!("{at}.{field}"), e))
    };
    let input_schema = input_schema.map(|v| json("input_schema", v)).transpose()?;
    if let Some(schema) = &input_schema {
        if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(bad(
                format!("{at}.input_schema"),
                "must be a JSON Schema table with type = \"object\"",
            ));
        }
    }
    let annotations = annotations.map(|v| json("annotations", v)).transpose()?;
    if annotations.as_ref().is_some_and(|a| !a.is_object()) {
        return Err(bad(format!("{at}.annotations"), "must be a table"));
    }
    Ok(ToolInfo {
        description,
        input_schema,
        annotations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "744db379a83da2deefdc13b510e392e5023808002b15e0bca779b63e498d306a";

    fn load(tenant_body: &str) -> Result<Config, ConfigError> {
        Config::from_toml(&format!(
            "[tenants.acme]\ntime_zone = \"Europe/Berlin\"\n{tenant_body}\n"
        ))
    }

    fn err(tenant_body: &str) -> String {
        load(tenant_body).unwrap_err().to_string()
    }

    #[test]
    fn the_sample_config_loads() {
        let text = include_str!("../../config/local.toml");
        let config = Config::from_toml(text).unwrap();
        let who = config.principal("cs_agent-dev").unwrap();
        assert_eq!(
            (who.tenant.as_str(), who.role, who.id.as_str()),
            ("acme", Role::Agent, "agent-dev")
        );
        assert!(config.principal("cs_nobody").is_none());
    }

    #[test]
    fn errors_name_the_bad_entry() {
        assert!(Config::from_toml("[tenants]")
            .unwrap_err()
            .to_string()
            .contains("no [tenants"));
        assert!(
            Config::from_toml("[tenants.acme]\ntime_zone = \"Mars/Olympus\"")
                .unwrap_err()
                .to_string()
                .contains("tenants.acme.time_zone")
        );
        assert!(err("approval_ttl = \"soon\"").contains("tenants.acme.approval_ttl"));
        assert!(
            err("keys = [{ id = \"a\", role = \"agent\", sha256 = \"abc\" }]")
                .contains("tenants.acme.keys[0]")
        );
        let dup = format!(
            "keys = [{{ id = \"a\", role = \"agent\", sha256 = \"{KEY}\" }}, {{ id = \"b\", role = \"admin\", sha256 = \"{KEY}\" }}]"
        );
        assert!(err(&dup).contains("tenants.acme.keys[1]"));
        assert!(err("keys = [{ id = \"a\", role = \"king\", sha256 = \"x\" }]").contains("king"));
        assert!(
            err("policy = [{ tool = \"x\", decision = \"set_result\" }]")
                .contains("tenants.acme.policy[0]")
        );
        assert!(
            err("policy = [{ tool = \"x\", decision = \"allow\", result = 1 }]")
                .contains("policy[0]")
        );
        assert!(err("[tenants.acme.tools.t]\nexecutor = \"lambda\"")
            .contains("tenants.acme.tools.\"t\".executor"));
        assert!(err(
            "[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"ftp://x\"\nsecret_env = \"X\""
        )
        .contains(".url"));
        assert!(err("[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x\"\nsecret_env = \"A\"\nsecret_ssm = \"/b\"")
            .contains("exactly one of secret_env, secret_ssm"));
        assert!(err("[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x\"\nsecret_ssm = \"b\"")
            .contains("tenants.acme.tools.\"t\".secret_ssm"));
        assert!(err("colour = 1").contains("colour"));
        std::env::set_var("COUNTERSIGN_CONFIG_TEST_SECRET", "s");
        let tool = |timeout: &str| {
            format!("[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x\"\nsecret_env = \"COUNTERSIGN_CONFIG_TEST_SECRET\"\ntimeout = \"{timeout}\"")
        };
        assert!(err(&tool("31s")).contains("tenants.acme.tools.\"t\".timeout"));
        assert!(err(&tool("1ns")).contains(".timeout"));
        assert!(load(&tool("30s")).is_ok());
        for limit in [
            "rate_per_key = 0.0",
            "rate_per_tenant = 1e9",
            "burst_per_key = 0",
        ] {
            let e = Config::from_toml(&format!(
                "[limits]\n{limit}\n[tenants.acme]\ntime_zone = \"UTC\""
            ))
            .unwrap_err()
            .to_string();
            assert!(
                e.contains(&format!("limits.{}", limit.split(' ').next().unwrap())),
                "{e}"
            );
        }
        assert!(Config::from_toml(
            "[limits]\nmin_window = \"73h\"\n[tenants.acme]\ntime_zone = \"UTC\""
        )
        .unwrap_err()
        .to_string()
        .contains("limits.min_window"));
    }

    #[test]
    fn sc_sec_08_webhook_targets_https_and_public_unless_the_tenant_allows_the_host() {
        std::env::set_var("COUNTERSIGN_CONFIG_TEST_SECRET", "s");
        let tool = |allow: &str, url: &str| {
            format!("{allow}\n[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"{url}\"\nsecret_env = \"COUNTERSIGN_CONFIG_TEST_SECRET\"")
        };
        let refused = [
            ("", "http://tools.example.com/x", "allow_http_hosts"),
            ("", "https://127.0.0.1/x", "allow_private_hosts"),
            ("", "https://10.0.0.7/x", "allow_private_hosts"),
            (
                "",
                "https://169.254.169.254/latest/meta-data",
                "allow_private_hosts",
            ),
            ("", "https://[::1]:8443/x", "allow_private_hosts"),
            ("", "https://[fd00::1]/x", "allow_private_hosts"),
            ("", "https://[::ffff:192.168.0.1]/x", "allow_private_hosts"),
            (
                "allow_http_hosts = [\"127.0.0.1\"]",
                "http://127.0.0.1:9/x",
                "allow_private_hosts",
            ),
            (
                "allow_private_hosts = [\"127.0.0.1\"]",
                "http://127.0.0.1:9/x",
                "allow_http_hosts",
            ),
            (
                "allow_http_hosts = [\"a.example\"]",
                "http://b.example/x",
                "allow_http_hosts",
            ),
        ];
        for (allow, url, hint) in refused {
            let e = err(&tool(allow, url));
            assert!(
                e.contains("tenants.acme.tools.\"t\".url") && e.contains(hint),
                "{url}: {e}"
            );
        }
        let private = |allow: &str, url: &str| match &load(&tool(allow, url)).unwrap().tenants
            ["acme"]
            .tools["t"]
            .executor
        {
            Executor::Webhook { allow_private, .. } => *allow_private,
            _ => unreachable!(),
        };
        assert!(!private("", "https://tools.example.com/x"));
        assert!(private(
            "allow_http_hosts = [\"127.0.0.1\"]\nallow_private_hosts = [\"127.0.0.1\"]",
            "http://127.0.0.1:9/x"
        ));
        assert!(private(
            "allow_private_hosts = [\"tools.internal\"]",
            "https://tools.internal/x"
        ));
    }

    #[test]
    fn fingerprints_change_with_the_entry() {
        let a = ToolEntry {
            name: "t".into(),
            executor: Executor::Echo,
            recovery: Recovery::Fail,
            info: ToolInfo::default(),
        };
        let b = ToolEntry {
            recovery: Recovery::Retry,
            ..a.clone()
        };
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
    }
}
