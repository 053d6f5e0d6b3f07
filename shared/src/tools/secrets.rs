//! Webhook secrets, read where the process boots — never while the config is parsed. A tool's
//! `secret_env` is an environment variable of the process; its `secret_ssm` is an SSM Parameter
//! Store SecureString that only the AWS functions that run tools fetch, once per cold start
//! (`aws::load_secrets`), so `cancel`, which runs no tool, never holds one.

use crate::config::{Config, ConfigError, Secret};
use std::collections::HashMap;

/// The secrets fetched at boot (SSM parameters by name); environment secrets are read from the
/// process environment when a call is signed.
#[derive(Clone, Default)]
pub struct Secrets {
    fetched: HashMap<String, String>,
}

// Values never reach a log or a debug print.
impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("fetched", &self.fetched.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Secrets {
    /// Keep the value of the SSM parameter `name`.
    pub fn insert_fetched(&mut self, name: &str, value: String) {
        self.fetched.insert(name.to_owned(), value);
    }

    /// The secret's value, if the process has it.
    pub fn value(&self, secret: &Secret) -> Option<String> {
        match secret {
            Secret::Env(name) => std::env::var(name).ok().filter(|v| !v.is_empty()),
            Secret::Ssm(name) => self.fetched.get(name).cloned(),
        }
    }
}

/// A process that runs tools checks at boot that every environment secret is set; with
/// `ssm_fetched`, every parameter too. Errors name the entry.
pub fn check(config: &Config, secrets: &Secrets, ssm_fetched: bool) -> Result<(), ConfigError> {
    for (at, secret) in config.webhook_secrets() {
        let missing = match secret {
            Secret::Env(name) => secrets
                .value(secret)
                .is_none()
                .then(|| format!("{at}.secret_env: environment variable {name} is not set")),
            Secret::Ssm(name) if !ssm_fetched => Some(format!(
                "{at}.secret_ssm: parameter {name} is read only by the AWS functions; use secret_env here"
            )),
            Secret::Ssm(name) => secrets
                .value(secret)
                .is_none()
                .then(|| format!("{at}.secret_ssm: parameter {name} was not fetched")),
        };
        if let Some(message) = missing {
            return Err(ConfigError(message));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sc_sec_02_secrets_are_checked_where_the_process_boots() {
        let config = |secret: &str| {
            Config::from_toml(&format!(
                "[tenants.acme]\ntime_zone = \"UTC\"\n[tenants.acme.tools.t]\nexecutor = \"webhook\"\nurl = \"https://x.example\"\n{secret}"
            ))
            .expect("the config names secrets without reading them")
        };
        let unset = config("secret_env = \"COUNTERSIGN_SURELY_UNSET\"");
        let e = check(&unset, &Secrets::default(), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tenants.acme.tools.\"t\".secret_env: environment variable COUNTERSIGN_SURELY_UNSET is not set"), "{e}");
        let ssm = config("secret_ssm = \"/countersign/acme/t\"");
        let e = check(&ssm, &Secrets::default(), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("read only by the AWS functions"), "{e}");
        assert!(check(&ssm, &Secrets::default(), true).is_err());
        let mut fetched = Secrets::default();
        fetched.insert_fetched("/countersign/acme/t", "s3cret".into());
        assert!(check(&ssm, &fetched, true).is_ok());
        assert!(!format!("{fetched:?}").contains("s3cret"));
    }
}
