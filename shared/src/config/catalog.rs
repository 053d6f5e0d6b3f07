//! The tool catalog: each tool's executor (a webhook, a downstream MCP server's tool, the
//! built-in echo), its recovery policy and the fields MCP clients are shown. A tool names where
//! its secret is; the value is read where the process boots (`tools::secrets`).

use super::{
    parse::{bad, duration, ConfigError},
    targets::Targets,
};
use crate::domain::canonical;
use jiff::SignedDuration;
use serde::{Deserialize, Serialize};
use std::{borrow::Cow, collections::BTreeMap};

/// Bounds of a webhook's per-attempt timeout. The deployed functions' timeouts are sized so that
/// one claim of a `retry` tool at the maximum fits (`ToolEntry::claim_budget`; infra test).
pub const MIN_TOOL_TIMEOUT: SignedDuration = SignedDuration::from_millis(100);
pub const MAX_TOOL_TIMEOUT: SignedDuration = SignedDuration::from_secs(30);

/// The built-in MCP tool that follows an action; no catalog tool may be listed under its name.
pub const MCP_STATUS_TOOL: &str = "countersign_status";
/// The longest tool name OpenAI's and Anthropic's APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
const MAX_MCP_NAME: usize = 64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    executor: String,
    url: Option<String>,
    secret_env: Option<String>,
    secret_ssm: Option<String>,
    timeout: Option<String>,
    /// `executor = "webhook"`: how each request is signed (default `countersign`).
    #[serde(default)]
    signing: Signing,
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
    /// The name MCP clients see (default: the catalog name, made a model-API name).
    mcp_name: Option<String>,
}

/// How a webhook request or a notice is signed (docs/webhooks.md): countersign's own
/// Stripe-compatible `Countersign-Signature`, or the Standard Webhooks headers (`webhook-id`,
/// `webhook-timestamp`, `webhook-signature`) with a `whsec_<base64>` secret.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signing {
    #[default]
    Countersign,
    StandardWebhooks,
}

impl Signing {
    fn is_default(&self) -> bool {
        *self == Signing::Countersign
    }
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
        /// Left out of the entry when the default, so fingerprints of existing tools stay.
        #[serde(skip_serializing_if = "Signing::is_default")]
        signing: Signing,
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
    /// The name MCP clients see, when not the default (`ToolEntry::mcp_name`). Not part of the
    /// fingerprint: it is how a model reaches the tool, not what the tool is or runs.
    #[serde(skip)]
    pub mcp_name: Option<String>,
}

impl ToolEntry {
    /// The name MCP clients list and call (SC-MCP-09): `mcp_name`, else the catalog name with
    /// each character outside `[A-Za-z0-9_-]` as `_`, since model APIs accept no other.
    pub fn mcp_name(&self) -> Cow<'_, str> {
        match &self.info.mcp_name {
            Some(name) => Cow::Borrowed(name),
            None if model_api_name(&self.name) => Cow::Borrowed(&self.name),
            None => Cow::Owned(
                self.name
                    .chars()
                    .map(|c| if model_api_char(c) { c } else { '_' })
                    .collect(),
            ),
        }
    }

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
    let info = ToolInfo {
        mcp_name: raw.mcp_name,
        ..tool_info(at, raw.description, raw.input_schema, raw.annotations)?
    };
    Ok(ToolEntry {
        name,
        executor,
        recovery: raw.recovery,
        info,
    })
}

/// The tenant's `[tools.<name>]` tables.
pub(super) fn tools(
    at: &str,
    raw: BTreeMap<String, RawTool>,
    targets: &Targets,
) -> Result<BTreeMap<String, ToolEntry>, ConfigError> {
    let tools = raw
        .into_iter()
        .map(|(name, raw_tool)| {
            let tool_at = format!("{at}.tools.{name:?}");
            let entry = tool_entry(&tool_at, name.clone(), raw_tool, targets)?;
            Ok((name, entry))
        })
        .collect::<Result<BTreeMap<_, _>, ConfigError>>()?;
    mcp_names(at, &tools)?;
    Ok(tools)
}

fn model_api_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn model_api_name(name: &str) -> bool {
    (1..=MAX_MCP_NAME).contains(&name.len()) && name.chars().all(model_api_char)
}

/// Every tool's MCP name is a model-API name, and each name `tools/call` accepts (an MCP name,
/// or a catalog name, kept for older clients) reaches exactly one tool (SC-MCP-09).
fn mcp_names(at: &str, tools: &BTreeMap<String, ToolEntry>) -> Result<(), ConfigError> {
    let mut taken: BTreeMap<String, &str> = BTreeMap::new();
    for (name, tool) in tools {
        let tool_at = format!("{at}.tools.{name:?}");
        let mcp = tool.mcp_name();
        if !model_api_name(&mcp) {
            let field = if tool.info.mcp_name.is_some() {
                format!("{tool_at}.mcp_name")
            } else {
                tool_at.clone()
            };
            return Err(bad(
                field,
                format!(
                    "the MCP name {mcp:?} must be 1–{MAX_MCP_NAME} letters, digits, '_' or '-' \
                     (what model APIs accept); set mcp_name"
                ),
            ));
        }
        if mcp == MCP_STATUS_TOOL {
            return Err(bad(
                tool_at,
                format!("the MCP name {MCP_STATUS_TOOL:?} is the built-in tool's; set mcp_name"),
            ));
        }
        for key in [mcp.as_ref(), name.as_str()] {
            match taken.insert(key.to_owned(), name) {
                Some(other) if other != name => {
                    return Err(bad(
                        tool_at,
                        format!(
                            "MCP clients would reach both this tool and {other:?} as {key:?}; \
                             set mcp_name on one of them"
                        ),
                    ))
                }
                _ => {}
            }
        }
    }
    Ok(())
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
        "mcp" if raw.signing != Signing::Countersign => {
            return Err(bad(
                format!("{at}.signing"),
                "only a webhook tool is signed; an mcp tool sends a bearer token",
            ))
        }
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
                signing: raw.signing,
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
        mcp_name: None,
    })
}

/// Exactly one of `<name>_env`, `<name>_ssm` (a channel's secret: the Slack app's, the mail's).
pub(super) fn named_secret(
    at: &str,
    name: &str,
    env: Option<String>,
    ssm: Option<String>,
) -> Result<Secret, ConfigError> {
    match (env, ssm) {
        (Some(env), None) if !env.trim().is_empty() => Ok(Secret::Env(env)),
        (None, Some(ssm)) if ssm.starts_with('/') => Ok(Secret::Ssm(ssm)),
        (None, Some(_)) => Err(bad(
            format!("{at}.{name}_ssm"),
            "must be a parameter name like \"/countersign-channels/acme/slack-bot\"",
        )),
        _ => Err(bad(
            at,
            format!("needs exactly one of {name}_env, {name}_ssm"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn catalog(tools: &str) -> Result<Config, String> {
        Config::from_toml(&format!("[tenants.acme]\ntime_zone = \"UTC\"\n{tools}\n"))
            .map_err(|e| e.to_string())
    }

    fn echo(name: &str, more: &str) -> String {
        format!("[tenants.acme.tools.{name:?}]\nexecutor = \"builtin.echo\"\n{more}\n")
    }

    /// SC-MCP-09: the MCP name is the catalog name made a model-API name, or `mcp_name`.
    #[test]
    fn sc_mcp_09_mcp_names_default_to_the_catalog_name_made_a_model_api_name() {
        let text = echo("mail.send", "")
            + &echo("crm/contacts.löschen", "")
            + &echo("ok-name_1", "")
            + &echo("search.named", "mcp_name = \"findThings\"");
        let config = catalog(&text).unwrap();
        let names: Vec<(String, String)> = config.tenants["acme"]
            .tools
            .values()
            .map(|t| (t.name.clone(), t.mcp_name().into_owned()))
            .collect();
        let want = [
            ("crm/contacts.löschen", "crm_contacts_l_schen"),
            ("mail.send", "mail_send"),
            ("ok-name_1", "ok-name_1"),
            ("search.named", "findThings"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(names, want);
    }

    /// SC-MCP-09: a name that would reach two tools, a name no model API takes, and the built-in
    /// tool's name are config errors that name the tool and say to set `mcp_name`.
    #[test]
    fn sc_mcp_09_ambiguous_long_or_reserved_mcp_names_are_config_errors() {
        let e = catalog(&(echo("mail.send", "") + &echo("mail_send", ""))).unwrap_err();
        assert!(
            e.contains("\"mail_send\"") && e.contains("set mcp_name"),
            "{e}"
        );
        let e =
            catalog(&(echo("a", "mcp_name = \"b\"") + &echo("b", "mcp_name = \"c\""))).unwrap_err();
        assert!(e.contains("both this tool and"), "{e}");
        let long = "t".repeat(65);
        let e = catalog(&echo(&long, "")).unwrap_err();
        assert!(e.contains("1–64") && e.contains(&long), "{e}");
        let e = catalog(&echo("x", "mcp_name = \"has space\"")).unwrap_err();
        assert!(e.contains("tools.\"x\".mcp_name"), "{e}");
        let e = catalog(&echo("countersign.status", "")).unwrap_err();
        assert!(e.contains("built-in"), "{e}");
        // Renamed, the same tools load; the long one under a name of its own. (Renaming
        // `mail_send` would not do: its catalog name still reaches it.)
        let fixed = echo("mail.send", "mcp_name = \"send_mail\"")
            + &echo("mail_send", "")
            + &echo(&long, "mcp_name = \"long\"");
        assert!(catalog(&fixed).is_ok());
    }

    /// The MCP name is not part of the fingerprint: renaming it seals no approved call.
    #[test]
    fn sc_mcp_09_the_mcp_name_is_not_fingerprinted() {
        let a = catalog(&echo("t", "")).unwrap();
        let b = catalog(&echo("t", "mcp_name = \"other\"")).unwrap();
        assert_eq!(
            a.tenants["acme"].tools["t"].fingerprint(),
            b.tenants["acme"].tools["t"].fingerprint()
        );
    }
}
