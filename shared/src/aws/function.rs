//! A Lambda function's cold start and warm life (SC-OPS-03): the environment read, the
//! configuration document read from its source with the secrets it names, the engine built over
//! it — and, when the document lives in SSM, a look for a changed one at the start of an
//! invocation that finds a look due: at most every `COUNTERSIGN_CONFIG_RECHECK`, never per
//! request. A changed document that loads is served from then on (`crate::live`: operations
//! under way keep the engine they took); one that does not leaves the current one serving,
//! counted, and is tried again at the next look.

use super::{
    engine_with, load_secrets, sdk_config_from_env,
    source::{self, ConfigSource},
    BootError, Settings,
};
use crate::{
    api::Routes,
    config::{Conditions, Config, ConfigError},
    live::{Live, Refusal},
    tools::{Executors, ToolRunner},
    wake::scheduler::SchedulerTarget,
    Clock, Engine, SystemClock,
};
use aws_config::SdkConfig;
use jiff::SignedDuration;
use std::{
    sync::Arc,
    time::{Instant, SystemTime},
};
use tower::ServiceExt;

/// A function's document parser, chosen where it boots ([`Boot::from_env`]).
type Parse = fn(&str) -> Result<Config, ConfigError>;

/// Parsed with the policy's conditions compiled (the function that gates), then the deed keys
/// it names read from this function's environment.
fn parse_compiling(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_with(text, Conditions::Compile)?.read_keys()
}

/// As [`parse_compiling`], the conditions left for their first use (the functions that never
/// gate skip the compiler).
fn parse_deferring(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_with(text, Conditions::Defer)?.read_keys()
}

/// What a function reads from its environment at cold start besides the SDK's settings.
#[derive(Debug, Clone)]
pub struct Boot {
    pub table: String,
    pub target: SchedulerTarget,
    pub retention: Option<SignedDuration>,
    pub source: ConfigSource,
    parse: Parse,
}

impl Boot {
    /// `conditions`: `Compile` in the function that gates (intake), `Defer` in the others.
    /// Each function calls this itself, before any `async fn`, so that its choice is a
    /// constant where the call is made and only its parser is linked: the optimizer drops the
    /// compiler of conditions (the CEL parser: ≈ 0.35 MB zipped when it was the ANTLR one)
    /// from the functions that defer (measured: BENCHMARKS.md, zips of 2 Dec 2026). Passed
    /// into an `async fn` instead, the choice was a field of its future, and every function
    /// linked the parser.
    pub fn from_env(conditions: Conditions) -> Result<Boot, BootError> {
        Self::from_lookup(conditions, &|name| std::env::var(name).ok())
    }

    /// As [`Boot::from_env`], each variable from `get` (a test's table).
    pub fn from_lookup(
        conditions: Conditions,
        get: &dyn Fn(&'static str) -> Option<String>,
    ) -> Result<Boot, BootError> {
        let optional = |name| get(name).filter(|v: &String| !v.trim().is_empty());
        let required = |name| optional(name).ok_or(BootError::Missing(name));
        let retention = optional("COUNTERSIGN_RETENTION")
            .map(|text| {
                text.parse::<SignedDuration>()
                    .ok()
                    // Idempotency records live 24 h (SC-INT-07): their actions must outlive them.
                    .filter(|d| *d >= SignedDuration::from_hours(24))
                    .ok_or_else(|| {
                        BootError::Invalid(
                            "COUNTERSIGN_RETENTION",
                            format!("{text:?} is not a duration of at least 24h, like \"2160h\""),
                        )
                    })
            })
            .transpose()?;
        let parse: Parse = match conditions {
            Conditions::Compile => parse_compiling,
            Conditions::Defer => parse_deferring,
        };
        Ok(Boot {
            table: required("COUNTERSIGN_TABLE")?,
            target: SchedulerTarget {
                schedule_group: required("COUNTERSIGN_SCHEDULE_GROUP")?,
                resume_function_arn: required("COUNTERSIGN_RESUME_ARN")?,
                role_arn: required("COUNTERSIGN_SCHEDULER_ROLE_ARN")?,
                dead_letter_arn: optional("COUNTERSIGN_DLQ_ARN"),
            },
            retention,
            source: ConfigSource::from_lookup(get)?,
            parse,
        })
    }
}

/// What a function does besides answering: which secrets its configuration needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// `cancel`: no tool and no notification; it reads no secret.
    Nothing,
    /// `intake`, `approve`: tools, whose webhook secrets are fetched (`secret_ssm`) and checked.
    Tools,
    /// `resume`: tools, and the sweep's notifications, whose secrets are checked too.
    ToolsAndNotifications,
}

/// A warm function: the configuration it serves, and where to look for a new one.
pub struct Function {
    live: Arc<Live>,
    boot: Boot,
    runs: Runs,
    sdk: SdkConfig,
    ssm: aws_sdk_ssm::Client,
    looked: tokio::sync::Mutex<Looked>,
}

/// When the SSM source was last looked at, and the versions of the parameters served now.
struct Looked {
    at: Instant,
    serving: Vec<(String, i64)>,
}

impl Function {
    /// The cold start: the SDK's settings from the environment, the document from its source
    /// and the secrets it names, the engine over it. Any failure fails the cold start, naming
    /// the variable, the parameter or the entry.
    pub async fn start(boot: Boot, runs: Runs) -> Result<Arc<Function>, BootError> {
        Self::start_with(boot, runs, sdk_config_from_env()?, Arc::new(SystemClock)).await
    }

    /// As [`Function::start`], over `sdk` and `clock` (tests).
    pub async fn start_with(
        boot: Boot,
        runs: Runs,
        sdk: SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Function>, BootError> {
        let ssm = aws_sdk_ssm::Client::new(&sdk);
        let (text, serving) = first_read(&ssm, &boot.source).await?;
        let (config, tools) = prepare(&boot, runs, &sdk, &text).await?;
        let settings = Settings {
            table: boot.table.clone(),
            target: boot.target.clone(),
            config,
            retention: boot.retention,
        };
        let engine = engine_with(&settings, &sdk, tools, clock);
        tracing::info!(
            source = boot.source.variable(),
            tenants = settings.config.tenants.len(),
            "configuration loaded"
        );
        Ok(Arc::new(Function {
            live: Live::new(engine),
            boot,
            runs,
            sdk,
            ssm,
            looked: tokio::sync::Mutex::new(Looked {
                at: Instant::now(),
                serving,
            }),
        }))
    }

    /// The engine for one invocation: the one now, after a look for a changed document if one
    /// is due. Take it once and keep it for the invocation.
    pub async fn engine(&self) -> Arc<Engine> {
        self.recheck().await;
        self.live.engine()
    }

    /// The HTTP handler: each request served whole by the router of `routes` over its
    /// invocation's engine, then flushing the metrics it recorded.
    pub fn http(self: &Arc<Self>, routes: fn(Routes) -> Routes) -> axum::Router {
        let function = self.clone();
        let dispatch = tower::service_fn(move |request: axum::extract::Request| {
            let function = function.clone();
            async move {
                function.recheck().await;
                function.live.router(routes).oneshot(request).await
            }
        });
        super::flushing(axum::Router::new().fallback_service(dispatch))
    }

    /// With an SSM source, when a look is due: read the parameters (one `GetParametersByPath`)
    /// and, if their versions moved, load the document and serve it, or keep the current one.
    async fn recheck(&self) {
        let ConfigSource::Ssm { path, recheck } = &self.boot.source else {
            return;
        };
        // One look at a time: an invocation that finds one under way serves what is current.
        let Ok(mut looked) = self.looked.try_lock() else {
            return;
        };
        if looked.at.elapsed() < *recheck {
            return;
        }
        looked.at = Instant::now();
        let document = match source::read(&self.ssm, path).await {
            Ok(document) => document,
            Err(e) => return self.live.refused(path, Refusal::Unreadable, &e),
        };
        if document.versions == looked.serving {
            return;
        }
        if let Some(left) = document.settling(SystemTime::now()) {
            // Still being written: look again once it has settled.
            looked.at = Instant::now()
                .checked_sub(recheck.saturating_sub(left))
                .unwrap_or(looked.at);
            return;
        }
        match prepare(&self.boot, self.runs, &self.sdk, &document.text).await {
            Ok((config, tools)) => {
                self.live
                    .replace(path, |now| now.with_config(config).with_tools(tools));
                looked.serving = document.versions;
            }
            // Tried again at the next look (a secret it names may be created meanwhile): the
            // alarm on `config_rejected` stays on while the document does not load.
            Err(e) => self.live.refused(path, Refusal::Rejected, &e),
        }
    }
}

/// The document at cold start, and the versions of its parts (none for `COUNTERSIGN_CONFIG`).
/// Parts written in the last [`source::SETTLE`] are read again once they have settled.
async fn first_read(
    ssm: &aws_sdk_ssm::Client,
    from: &ConfigSource,
) -> Result<(String, Vec<(String, i64)>), BootError> {
    let path = match from {
        ConfigSource::Inline(text) => return Ok((text.clone(), Vec::new())),
        ConfigSource::Ssm { path, .. } => path,
    };
    let mut document = source::read(ssm, path).await;
    let settling = document
        .as_ref()
        .ok()
        .and_then(|d| d.settling(SystemTime::now()));
    if let Some(left) = settling {
        tokio::time::sleep(left).await;
        document = source::read(ssm, path).await;
    }
    let document = document.map_err(BootError::Unreadable)?;
    Ok((document.text, document.versions))
}

/// The document parsed and checked for this function: its deed keys read, the webhook secrets
/// of a function that runs tools fetched and checked, the notification secrets of the one that
/// notifies checked. The tools it runs with are built over those secrets.
async fn prepare(
    boot: &Boot,
    runs: Runs,
    sdk: &SdkConfig,
    text: &str,
) -> Result<(Arc<Config>, Arc<dyn ToolRunner>), BootError> {
    let invalid = |e: ConfigError| BootError::Invalid(boot.source.variable(), e.to_string());
    let config = (boot.parse)(text).map_err(invalid)?;
    let tools: Arc<dyn ToolRunner> = match runs {
        Runs::Nothing => Arc::new(Executors::new()),
        Runs::Tools | Runs::ToolsAndNotifications => {
            Arc::new(Executors::with_secrets(load_secrets(&config, sdk).await?))
        }
    };
    if runs == Runs::ToolsAndNotifications {
        crate::notify::check_secrets(&config).map_err(invalid)?;
    }
    Ok((Arc::new(config), tools))
}
