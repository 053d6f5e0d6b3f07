//! The notification part of the configuration: per-tenant endpoints (`notify = [...]`), the
//! page link base (`[server] public_url`) and the retry rule (`[notify]`).

use super::{
    catalog::Signing,
    parse::{bad, duration, ConfigError},
    targets::Targets,
};
use crate::domain::notice::{endpoint_key, NoticeKind, RetryRule};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEndpoint {
    url: String,
    secret_env: String,
    events: Vec<String>,
    #[serde(default)]
    format: Format,
    #[serde(default)]
    signing: Signing,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    public_url: Option<String>,
    pub(super) tls_cert: Option<std::path::PathBuf>,
    pub(super) tls_key: Option<std::path::PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    first_retry: Option<String>,
    max_pause: Option<String>,
    attempts: Option<u32>,
}

/// How a notice is rendered for an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// The generic signed JSON document.
    #[default]
    Json,
    /// `{"text", "blocks"}` for Slack incoming webhooks (still signed).
    Slack,
}

/// One notification endpoint of a tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    pub url: String,
    /// The environment variable holding the HMAC secret.
    pub secret_env: String,
    pub events: Vec<NoticeKind>,
    pub format: Format,
    pub signing: Signing,
    /// The tenant lists this host in `allow_private_hosts` (SC-SEC-08, as for webhooks).
    pub allow_private: bool,
}

impl Endpoint {
    /// Names the endpoint in the outbox without its URL.
    pub fn key(&self) -> String {
        endpoint_key(&self.url)
    }

    pub fn wants(&self, kind: NoticeKind) -> bool {
        self.events.contains(&kind)
    }
}

/// A tenant's endpoints, held to the same target rules as its webhooks: https, public
/// addresses, unless the tenant lists the host (SC-SEC-08).
pub(super) fn endpoints(
    at: &str,
    raw: Vec<RawEndpoint>,
    targets: &Targets,
) -> Result<Vec<Endpoint>, ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    raw.into_iter()
        .enumerate()
        .map(|(i, e)| {
            let at = format!("{at}.notify[{i}]");
            let endpoint = endpoint(&at, e, targets)?;
            if !seen.insert(endpoint.url.clone()) {
                return Err(bad(format!("{at}.url"), "this url is declared twice"));
            }
            Ok(endpoint)
        })
        .collect()
}

fn endpoint(at: &str, raw: RawEndpoint, targets: &Targets) -> Result<Endpoint, ConfigError> {
    let allow_private = targets.check(at, &raw.url)?;
    // The secret itself is read where the notifications are sent (crate::notify::check_secrets
    // at boot, then at each delivery), never while parsing.
    if raw.secret_env.trim().is_empty() {
        return Err(bad(
            format!("{at}.secret_env"),
            "must name an environment variable",
        ));
    }
    if raw.events.is_empty() {
        return Err(bad(format!("{at}.events"), "name at least one event"));
    }
    let events = raw
        .events
        .iter()
        .map(|e| {
            NoticeKind::parse(e).ok_or_else(|| {
                bad(
                    format!("{at}.events"),
                    format!(
                        "{e:?} is not one of {}",
                        NoticeKind::ALL
                            .map(|k| format!("{:?}", k.as_str()))
                            .join(", ")
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Endpoint {
        url: raw.url,
        secret_env: raw.secret_env,
        events,
        format: raw.format,
        signing: raw.signing,
        allow_private,
    })
}

fn http_url(at: &str, url: &str) -> Result<(), ConfigError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(at, e))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(at, "must be http or https"));
    }
    Ok(())
}

/// `[server] public_url`: where the approver page is reachable (links in notices).
pub(super) fn public_url(raw: &RawServer) -> Result<Option<String>, ConfigError> {
    let Some(url) = &raw.public_url else {
        return Ok(None);
    };
    http_url("server.public_url", url)?;
    Ok(Some(url.clone()))
}

/// `[notify]`: `first_retry` (default 10s), `max_pause` (15m), `attempts` (20).
pub(super) fn retry_rule(raw: RawRetry) -> Result<RetryRule, ConfigError> {
    let default = RetryRule::default();
    let first = duration("notify.first_retry", raw.first_retry.as_deref(), "10s")?;
    let cap = duration("notify.max_pause", raw.max_pause.as_deref(), "15m")?;
    if cap < first {
        return Err(bad("notify.max_pause", "must be at least first_retry"));
    }
    let attempts = raw.attempts.unwrap_or(default.attempts);
    if !(1..=1000).contains(&attempts) {
        return Err(bad("notify.attempts", "must be between 1 and 1000"));
    }
    Ok(RetryRule {
        first,
        cap,
        attempts,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Format};
    use crate::domain::notice::NoticeKind;

    fn load(extra: &str) -> Result<Config, String> {
        Config::from_toml(&format!("{extra}\n[tenants.acme]\ntime_zone = \"UTC\"\n"))
            .map_err(|e| e.to_string())
    }

    fn endpoint(fields: &str) -> String {
        format!("[[tenants.acme.notify]]\n{fields}")
    }

    const OK: &str = "url = \"https://hooks.example.com/a\"\nsecret_env = \"COUNTERSIGN_NOTIFY_CONFIG_TEST\"\nevents = [\"approval_requested\"]\n";

    #[test]
    fn endpoints_load_with_defaults() {
        let text = format!(
            "[tenants.acme]\ntime_zone = \"UTC\"\n{}{}format = \"slack\"\n",
            endpoint(OK),
            endpoint(&OK.replace("/a", "/b").replace(
                "\"approval_requested\"",
                "\"action_sealed\", \"approval_requested\""
            )),
        );
        let config = Config::from_toml(&text).unwrap();
        let notify = &config.tenant("acme").unwrap().notify;
        assert_eq!(notify.len(), 2);
        assert_eq!(notify[0].format, Format::Json);
        assert_eq!(notify[1].format, Format::Slack);
        assert!(
            notify[1].wants(NoticeKind::ActionSealed) && !notify[0].wants(NoticeKind::ActionSealed)
        );
        assert_eq!(config.public_url, None);
        assert_eq!(
            config.notify_retry,
            crate::domain::notice::RetryRule::default()
        );
    }

    #[test]
    fn errors_name_the_bad_entry() {
        let cases = [
            (endpoint(&OK.replace("https://hooks.example.com/a", "ftp://x")), "tenants.acme.notify[0].url"),
            (endpoint(&OK.replace("COUNTERSIGN_NOTIFY_CONFIG_TEST", "")), "tenants.acme.notify[0].secret_env: must name an environment variable"),
            (endpoint(&OK.replace("\"approval_requested\"", "\"approved\"")), "tenants.acme.notify[0].events: \"approved\" is not one of"),
            (endpoint(&OK.replace("[\"approval_requested\"]", "[]")), "tenants.acme.notify[0].events"),
            (endpoint(&format!("{OK}format = \"teams\"")), "teams"),
            (endpoint(&format!("{OK}colour = 1")), "colour"),
            (endpoint(&OK.replace("https://hooks.example.com/a", "http://hooks.example.com/a")), "tenants.acme.notify[0].url: must be https, or its host hooks.example.com listed in allow_http_hosts"),
            (endpoint(&OK.replace("hooks.example.com", "10.0.0.7")), "tenants.acme.notify[0].url: 10.0.0.7 is not a public address; list it in allow_private_hosts"),
            (format!("{}{}", endpoint(OK), endpoint(OK)), "tenants.acme.notify[1].url: this url is declared twice"),
        ];
        for (tenant_part, expected) in cases {
            let text = format!("[tenants.acme]\ntime_zone = \"UTC\"\n{tenant_part}\n");
            let err = Config::from_toml(&text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err} lacks {expected}");
        }
        for (top, expected) in [
            ("[server]\npublic_url = \"nope\"", "server.public_url"),
            ("[notify]\nfirst_retry = \"soon\"", "notify.first_retry"),
            (
                "[notify]\nfirst_retry = \"1m\"\nmax_pause = \"10s\"",
                "notify.max_pause",
            ),
            ("[notify]\nattempts = 0", "notify.attempts"),
        ] {
            let err = load(top).unwrap_err();
            assert!(err.contains(expected), "{err} lacks {expected}");
        }
        let config = load("[server]\npublic_url = \"https://cs.example.com/ui/\"").unwrap();
        assert_eq!(
            config.public_url.as_deref(),
            Some("https://cs.example.com/ui/")
        );
    }
}
