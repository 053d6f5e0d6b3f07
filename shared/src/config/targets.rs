//! The hosts a tenant lets its webhooks and notification endpoints reach (SC-SEC-08).

use super::parse::{bad, ConfigError};
use crate::target;

/// The hosts a tenant lets its webhooks reach beyond https and public addresses (SC-SEC-08).
pub(super) struct Targets {
    pub(super) http: Vec<String>,
    pub(super) private: Vec<String>,
}

impl Targets {
    /// Check a webhook URL; true if its host may be private.
    pub(super) fn check(&self, at: &str, url: &str) -> Result<bool, ConfigError> {
        self.check_field(&format!("{at}.url"), url)
    }

    /// The same for the URL in field `at` (the whole path, e.g. `tenants.acme.slack.api_url`).
    pub(super) fn check_field(&self, at: &str, url: &str) -> Result<bool, ConfigError> {
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(at, e))?;
        let host = target::host(&parsed).ok_or_else(|| bad(at, "must name a host"))?;
        let listed = |hosts: &[String]| hosts.iter().any(|h| h.eq_ignore_ascii_case(host));
        match parsed.scheme() {
            "https" => {}
            "http" if listed(&self.http) => {}
            "http" => {
                return Err(bad(
                    at,
                    format!("must be https, or its host {host} listed in allow_http_hosts"),
                ))
            }
            _ => return Err(bad(at, "must be https")),
        }
        let private = listed(&self.private);
        if target::literal_is_private(host) && !private {
            return Err(bad(
                at,
                format!(
                    "{host} is not a public address; list it in allow_private_hosts to allow it"
                ),
            ));
        }
        Ok(private)
    }
}
