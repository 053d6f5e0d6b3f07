//! The SDK configuration the Lambda functions use, built from exactly what Lambda gives them.
//!
//! `aws_config::defaults(…).load()` would make the whole default chain reachable — profile
//! files, IMDS, the ECS endpoint, web identity through an STS client, SSO — and so linked into
//! every function, though on Lambda the credentials and the region always come from the
//! environment. This builds the same configuration from the environment alone:
//! - `AWS_REGION` — required (Lambda sets it)
//! - `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` — required, `AWS_SESSION_TOKEN` — optional
//!   (Lambda sets all three from the function's role)
//! - `AWS_ENDPOINT_URL` — optional: one endpoint for every service (LocalStack in the tests)
//!
//! A missing or blank one is a [`BootError`] at cold start, not a failure at the first request.

use super::BootError;
use aws_config::{
    environment::EnvironmentVariableCredentialsProvider, identity::IdentityCache,
    retry::RetryConfig, timeout::TimeoutConfig, BehaviorVersion, Region, SdkConfig,
};
use aws_sdk_dynamodb::config::SharedCredentialsProvider;
use aws_smithy_async::{rt::sleep::TokioSleep, time::SystemTimeSource};
use std::time::Duration;

/// Every environment variable [`SdkEnv::from_lookup`] reads (the docs list the same).
pub const SDK_ENV_VARS: &[&str] = &[
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
];

/// What the default chain gives as the connect timeout, kept so that a function behaves as
/// before (the SDK's own default; no other timeout is set, as before).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// The SDK settings read from the environment, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkEnv {
    pub region: String,
    pub endpoint_url: Option<String>,
}

impl SdkEnv {
    /// `get` reads one variable (the process environment, or a test's table).
    pub fn from_lookup(get: impl Fn(&'static str) -> Option<String>) -> Result<SdkEnv, BootError> {
        let set = |name: &'static str| get(name).filter(|v| !v.trim().is_empty());
        let required = |name| set(name).ok_or(BootError::Missing(name));
        // The credentials provider reads them again per request; checked here so that a
        // function without them fails its cold start, naming the variable.
        required("AWS_ACCESS_KEY_ID")?;
        required("AWS_SECRET_ACCESS_KEY")?;
        let region = required("AWS_REGION")?;
        let endpoint_url = set("AWS_ENDPOINT_URL").map(checked_url).transpose()?;
        Ok(SdkEnv {
            region,
            endpoint_url,
        })
    }

    /// The configuration every client of a function is made from.
    pub fn sdk_config(&self) -> SdkConfig {
        let mut config = SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()))
            .credentials_provider(SharedCredentialsProvider::new(
                EnvironmentVariableCredentialsProvider::new(),
            ))
            .identity_cache(IdentityCache::lazy().build())
            .http_client(super::http::https_client())
            .sleep_impl(TokioSleep::new())
            .time_source(SystemTimeSource::new())
            .retry_config(RetryConfig::standard())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .build(),
            );
        config.set_endpoint_url(self.endpoint_url.clone());
        config.build()
    }
}

/// An endpoint is an absolute `http` or `https` URL; anything else would fail every request.
fn checked_url(url: String) -> Result<String, BootError> {
    let ok = url
        .parse::<axum::http::Uri>()
        .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some());
    if ok {
        Ok(url)
    } else {
        Err(BootError::Invalid(
            "AWS_ENDPOINT_URL",
            format!("{url:?} is not an http(s) URL like \"http://127.0.0.1:4566\""),
        ))
    }
}

/// The functions' SDK configuration from this process's environment (see the module's list).
pub fn sdk_config_from_env() -> Result<SdkConfig, BootError> {
    SdkEnv::from_lookup(|name| std::env::var(name).ok()).map(|env| env.sdk_config())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &[(&'static str, &str)]) -> Result<SdkEnv, BootError> {
        let vars: Vec<(&str, String)> = vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        SdkEnv::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.clone())
        })
    }

    const COMPLETE: &[(&str, &str)] = &[
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
    ];

    /// A function without its region or credentials fails its cold start naming the variable
    /// (the default chain it replaces would have failed only at the first request).
    #[test]
    fn sc_ops_02_lambda_sdk_env_names_what_is_missing() {
        for missing in ["AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
            for blank in [None, Some("  ")] {
                let vars: Vec<(&'static str, &str)> = COMPLETE
                    .iter()
                    .filter_map(|(k, v)| match (*k == missing, blank) {
                        (false, _) => Some((*k, *v)),
                        (true, Some(b)) => Some((*k, b)),
                        (true, None) => None,
                    })
                    .collect();
                let err = lookup(&vars).unwrap_err();
                assert!(
                    matches!(err, BootError::Missing(name) if name == missing),
                    "{err}"
                );
                assert_eq!(
                    err.to_string(),
                    format!("environment variable {missing} is not set")
                );
            }
        }
        for bad in ["127.0.0.1:4566", "localstack", "ftp://host/", "http://"] {
            let mut vars = COMPLETE[..3].to_vec();
            vars.push(("AWS_ENDPOINT_URL", bad));
            let err = lookup(&vars).unwrap_err();
            assert!(
                matches!(err, BootError::Invalid("AWS_ENDPOINT_URL", _)),
                "{bad}: {err}"
            );
        }
    }

    /// What the functions' clients are made from: the region and endpoint read, the
    /// environment's credentials provider, the SDK's retry and connect-timeout defaults.
    #[test]
    fn sc_ops_02_lambda_sdk_config_is_built_from_the_environment() {
        let env = lookup(COMPLETE).unwrap();
        let config = env.sdk_config();
        assert_eq!(config.region().map(|r| r.as_ref()), Some("eu-west-1"));
        assert_eq!(config.endpoint_url(), Some("http://127.0.0.1:4566"));
        assert!(config.credentials_provider().is_some());
        assert!(config.http_client().is_some());
        assert!(config.sleep_impl().is_some());
        assert_eq!(config.retry_config(), Some(&RetryConfig::standard()));
        assert_eq!(
            config.timeout_config().and_then(|t| t.connect_timeout()),
            Some(CONNECT_TIMEOUT)
        );
        // It reads only the variables it lists (and the docs name).
        let asked = std::cell::RefCell::new(Vec::new());
        SdkEnv::from_lookup(|name| {
            asked.borrow_mut().push(name);
            COMPLETE
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        for name in asked.into_inner() {
            assert!(SDK_ENV_VARS.contains(&name), "{name} is in SDK_ENV_VARS");
        }
        let without_endpoint = lookup(&COMPLETE[..3]).unwrap();
        assert_eq!(without_endpoint.endpoint_url, None);
        assert_eq!(without_endpoint.sdk_config().endpoint_url(), None);
    }

    /// The README's AWS section lists what the functions read (docs match the code).
    #[test]
    fn sc_ops_02_readme_names_every_sdk_variable() {
        let readme = include_str!("../../../../README.md");
        for name in SDK_ENV_VARS {
            assert!(
                readme.contains(&format!("`{name}`")),
                "README.md names {name}"
            );
        }
    }
}
