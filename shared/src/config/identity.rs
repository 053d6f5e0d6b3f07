//! A tenant's identity provider (`[tenants.<name>.identity]`, SC-ID-03): whose OAuth access
//! tokens the tenant accepts beside its keys, and how a token's claims name a role, an agent,
//! a person and their groups. Only `issuer` and `audience` are required; the rest default to
//! what most providers issue (docs/identity.md maps the claims of the common ones).

use super::parse::{bad, duration, ConfigError};
use jiff::SignedDuration;
use serde::Deserialize;

/// The largest clock leeway a tenant may allow on `exp` and `nbf`: a bigger one would make an
/// expired token good for minutes.
pub const MAX_LEEWAY: SignedDuration = SignedDuration::from_secs(300);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdentity {
    issuer: String,
    audience: String,
    leeway: Option<String>,
    jwks_refresh: Option<String>,
    jwks_max_age: Option<String>,
    scope_claim: Option<String>,
    groups_claim: Option<String>,
    client_claim: Option<String>,
    agent_scope: Option<String>,
    approve_scope: Option<String>,
    admin_scope: Option<String>,
    keys_for_people: Option<bool>,
    require_at_jwt: Option<bool>,
    page_client_id: Option<String>,
    name: Option<String>,
}

/// How a tenant's tokens are checked and read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityConfig {
    /// The `iss` a token must carry, exactly; discovery at `{issuer}/.well-known/openid-configuration`.
    pub issuer: String,
    /// This server's resource identifier (RFC 8707): a token's `aud` must name it (or its
    /// `/mcp` endpoint, the resource MCP clients ask for).
    pub audience: String,
    /// Clock leeway on `exp` and `nbf` (at most [`MAX_LEEWAY`]).
    pub leeway: SignedDuration,
    /// The least time between two fetches of the provider's keys (an unknown `kid` asks again
    /// at most this often).
    pub jwks_refresh: SignedDuration,
    /// How long fetched keys serve when the provider cannot be reached again.
    pub jwks_max_age: SignedDuration,
    /// The claim that holds the scopes (`scope`, space-separated or a list).
    pub scope_claim: String,
    /// The claim that holds a person's groups (SC-POL-03).
    pub groups_claim: String,
    /// The claim that names the client (`None`: `client_id`, else `azp`; Okta writes `cid`).
    pub client_claim: Option<String>,
    pub agent_scope: String,
    pub approve_scope: String,
    pub admin_scope: String,
    /// Whether the tenant's approver and admin keys still work beside tokens.
    pub keys_for_people: bool,
    /// Refuse a token whose header `typ` is not `at+jwt` (RFC 9068).
    pub require_at_jwt: bool,
    /// The approver page's client at the provider (a public client, authorization code +
    /// PKCE, redirect URI the page's address): with one, the page offers "Sign in with" it.
    pub page_client_id: Option<String>,
    /// The provider's name on the page's sign-in button (default: the issuer's host).
    pub name: String,
}

pub(super) fn identity(at: &str, raw: RawIdentity) -> Result<IdentityConfig, ConfigError> {
    let at = format!("{at}.identity");
    let issuer = url(&format!("{at}.issuer"), raw.issuer)?;
    let audience = raw.audience.trim().to_owned();
    if audience.is_empty() {
        return Err(bad(
            format!("{at}.audience"),
            "must name this server's resource",
        ));
    }
    let leeway = duration(&format!("{at}.leeway"), raw.leeway.as_deref(), "30s")?;
    if leeway > MAX_LEEWAY {
        return Err(bad(format!("{at}.leeway"), "at most 5m"));
    }
    let text = |v: Option<String>, default: &str, field: &str| -> Result<String, ConfigError> {
        let v = v.unwrap_or_else(|| default.to_owned());
        if v.trim().is_empty() || v.contains(char::is_whitespace) {
            return Err(bad(format!("{at}.{field}"), "must be one word"));
        }
        Ok(v)
    };
    let config = IdentityConfig {
        leeway,
        jwks_refresh: duration(
            &format!("{at}.jwks_refresh"),
            raw.jwks_refresh.as_deref(),
            "60s",
        )?,
        jwks_max_age: duration(
            &format!("{at}.jwks_max_age"),
            raw.jwks_max_age.as_deref(),
            "24h",
        )?,
        scope_claim: text(raw.scope_claim, "scope", "scope_claim")?,
        groups_claim: text(raw.groups_claim, "groups", "groups_claim")?,
        client_claim: raw
            .client_claim
            .map(|c| text(Some(c), "", "client_claim"))
            .transpose()?,
        agent_scope: text(raw.agent_scope, "countersign:agent", "agent_scope")?,
        approve_scope: text(raw.approve_scope, "countersign:approve", "approve_scope")?,
        admin_scope: text(raw.admin_scope, "countersign:admin", "admin_scope")?,
        keys_for_people: raw.keys_for_people.unwrap_or(true),
        require_at_jwt: raw.require_at_jwt.unwrap_or(false),
        page_client_id: raw
            .page_client_id
            .map(|c| text(Some(c), "", "page_client_id"))
            .transpose()?,
        name: match raw.name.map(|n| n.trim().to_owned()) {
            Some(n) if n.is_empty() => return Err(bad(format!("{at}.name"), "must not be empty")),
            Some(n) => n,
            None => reqwest::Url::parse(&issuer)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_else(|| issuer.clone()),
        },
        issuer,
        audience,
    };
    let scopes = [
        &config.agent_scope,
        &config.approve_scope,
        &config.admin_scope,
    ];
    if scopes[0] == scopes[1] || scopes[1] == scopes[2] || scopes[0] == scopes[2] {
        return Err(bad(&at, "the agent, approve and admin scopes must differ"));
    }
    Ok(config)
}

/// An issuer: `https`, or `http` on a loopback host (a provider on the same machine, as in
/// development and the tests). No query or fragment (OpenID Discovery §4.3 appends a path).
fn url(at: &str, raw: String) -> Result<String, ConfigError> {
    let parsed = reqwest::Url::parse(&raw).map_err(|e| bad(at, format!("not a URL: {e}")))?;
    let loopback = matches!(parsed.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err(bad(at, "must be https (http only on a loopback host)")),
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad(at, "an issuer has no query or fragment"));
    }
    Ok(raw)
}

impl IdentityConfig {
    /// The issuer's origin (scheme, host, port): where the approver page fetches the
    /// provider's discovery and token endpoint (its CSP allows it).
    pub fn origin(&self) -> String {
        reqwest::Url::parse(&self.issuer)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default()
    }

    /// The resource identifiers a token's `aud` may name: the audience, and its `/mcp`.
    pub fn audiences(&self) -> [String; 2] {
        let base = self.audience.trim_end_matches('/');
        [self.audience.clone(), format!("{base}/mcp")]
    }
}

/// A token names its tenant by its issuer and audience: two tenants may share a provider, not
/// both. `tenants`: each tenant's name with its provider, if it has one.
pub(super) fn distinct<'a>(
    tenants: impl Iterator<Item = (&'a String, Option<&'a IdentityConfig>)>,
) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeMap::new();
    for (name, id) in tenants {
        let Some(id) = id else { continue };
        if let Some(other) = seen.insert((&id.issuer, &id.audience), name) {
            return Err(bad(
                format!("tenants.{name}.identity"),
                format!("tenant {other} has the same issuer and audience: a token could not tell them apart"),
            ));
        }
    }
    Ok(())
}
