//! A Lambda function's cold start and warm life (SC-OPS-03): the environment read, the
//! configuration document read from its source with the secrets it names, the engine built over
//! it — and, when the document lives in SSM, a look for a changed one at the start of an
//! invocation that finds a look due: at most every `COUNTERSIGN_CONFIG_RECHECK`, never per
//! request. A changed document that loads is served from then on (`crate::boot::live`: operations
//! under way keep the engine they took); one that does not leaves the current one serving,
//! counted, and is tried again at the next look.

use super::{
    engine_with, load_secrets, sdk_config_from_env,
    source::{self, ConfigSource},
    BootError, Settings,
};
use crate::{
    api::Routes,
    boot::live::{Live, Refusal},
    config::{Conditions, Config, ConfigError},
    tools::{secrets::Secrets, Executors, ToolRunner},
    wake::scheduler::SchedulerTarget,
    Clock, Engine, SystemClock,
};
use aws_config::SdkConfig;
use jiff::SignedDuration;
use std::{
    future::Future,
    marker::PhantomData,
    sync::Arc,
    time::{Instant, SystemTime},
};
use tower::ServiceExt;

/// What a function's configuration must give it, by what the function does. Each `main` names
/// its own as a type ([`Function`]`::<Intake>`…), so that its binary links only its own: the
/// CEL compiler only where conditions are compiled (intake), the fetching of webhook secrets
/// only where tools run. A choice held as a value — in a struct, or in an `async fn`'s future —
/// keeps every branch linked (BENCHMARKS.md, zips of 2 Dec 2026). Measured again here: with
/// the duties a value, the CEL parser's strings were in the release binaries of approve and
/// cancel; as types, they are in neither (and cancel links no `GetParameter`).
pub trait Duties: Send + Sync + 'static {
    /// The document parsed, the deed keys it names read, and the secrets this function needs
    /// from its environment checked.
    fn parse(text: &str) -> Result<Config, ConfigError>;

    /// The tools it runs under `config`, with the `secret_ssm` secrets they need fetched; and
    /// the fetched secrets themselves (the Slack app's, for the notifier and the interactions).
    fn tools(
        config: &Config,
        sdk: &SdkConfig,
    ) -> impl Future<Output = Result<Armed, BootError>> + Send;
}

/// `intake`: gates (its policy's conditions compiled at load) and runs allowed calls' tools.
pub struct Intake;
/// `approve`: runs the tools of approvals already due; never gates.
pub struct Approve;
/// `cancel`: runs no tool and sends no notification, so it reads no secret.
pub struct Cancel;
/// `resume`: runs tools, and its sweep sends the notifications.
pub struct Resume;

impl Duties for Intake {
    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, Conditions::Compile)?.read_keys()
    }

    /// Its tools' secrets only: intake delivers no notice and answers no button or link, so it
    /// never reads a channel's secret (nor may it, infra/template.yaml).
    fn tools(
        config: &Config,
        sdk: &SdkConfig,
    ) -> impl Future<Output = Result<Armed, BootError>> + Send {
        with_secrets(config, sdk, false)
    }
}

impl Duties for Approve {
    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, Conditions::Defer)?.read_keys()
    }

    /// Its tools' secrets and the channels': Slack's buttons (the signing secret, the bot
    /// token) and the mailed links' page (the link key).
    fn tools(
        config: &Config,
        sdk: &SdkConfig,
    ) -> impl Future<Output = Result<Armed, BootError>> + Send {
        with_secrets(config, sdk, true)
    }
}

impl Duties for Cancel {
    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, Conditions::Defer)?.read_keys()
    }

    async fn tools(_: &Config, _: &SdkConfig) -> Result<Armed, BootError> {
        Ok((Arc::new(Executors::new()), Secrets::default()))
    }
}

impl Duties for Resume {
    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, Conditions::Defer)?.read_keys()
    }

    /// Its tools' secrets and the channels': the sweep sends the notifications, so their
    /// secrets — an environment's or a fetched parameter's — must be here and usable.
    async fn tools(config: &Config, sdk: &SdkConfig) -> Result<Armed, BootError> {
        let armed = with_secrets(config, sdk, true).await?;
        crate::notify::check_secrets(config, &armed.1, true).map_err(|e| BootError::Secret(e.0))?;
        Ok(armed)
    }
}

/// A function's tools and the secrets it fetched at cold start.
pub type Armed = (Arc<dyn ToolRunner>, Secrets);

/// The tools over every `secret_ssm` the catalog (and, with `channels`, the approval channels)
/// name, fetched and checked.
async fn with_secrets(
    config: &Config,
    sdk: &SdkConfig,
    channels: bool,
) -> Result<Armed, BootError> {
    let secrets = load_secrets(config, sdk, channels).await?;
    Ok((Arc::new(Executors::with_secrets(secrets.clone())), secrets))
}

/// What a function reads from its environment at cold start besides the SDK's settings.
#[derive(Debug, Clone)]
pub struct Boot {
    pub table: String,
    pub target: SchedulerTarget,
    pub retention: Option<SignedDuration>,
    pub source: ConfigSource,
}

impl Boot {
    pub fn from_env() -> Result<Boot, BootError> {
        Self::from_lookup(&|name| std::env::var(name).ok())
    }

    /// As [`Boot::from_env`], each variable from `get` (a test's table).
    pub fn from_lookup(get: &dyn Fn(&'static str) -> Option<String>) -> Result<Boot, BootError> {
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
        })
    }
}

/// A warm function: the configuration it serves, and where to look for a new one.
pub struct Function<D: Duties> {
    live: Arc<Live>,
    boot: Boot,
    duties: PhantomData<D>,
    sdk: SdkConfig,
    ssm: aws_sdk_ssm::Client,
    looked: tokio::sync::Mutex<Looked>,
}

/// When the SSM source was last looked at, and the versions of the parameters served now.
struct Looked {
    at: Instant,
    serving: Vec<(String, i64)>,
}

impl<D: Duties> Function<D> {
    /// The cold start: the SDK's settings from the environment, the document from its source
    /// and the secrets it names, the engine over it. Any failure fails the cold start, naming
    /// the variable, the parameter or the entry.
    pub async fn start(boot: Boot) -> Result<Arc<Self>, BootError> {
        Self::start_with(boot, sdk_config_from_env()?, Arc::new(SystemClock)).await
    }

    /// As [`Function::start`], over `sdk` and `clock` (tests).
    pub async fn start_with(
        boot: Boot,
        sdk: SdkConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, BootError> {
        let ssm = aws_sdk_ssm::Client::new(&sdk);
        let (text, serving) = first_read(&ssm, &boot.source).await?;
        let (config, (tools, secrets)) = load::<D>(&boot.source, &sdk, &text).await?;
        let settings = Settings {
            table: boot.table.clone(),
            target: boot.target.clone(),
            config,
            retention: boot.retention,
        };
        let engine = engine_with(&settings, &sdk, tools, clock);
        let engine = Arc::new(
            engine
                .with_config(settings.config.clone())
                .with_channel_secrets(secrets),
        );
        tracing::info!(
            source = boot.source.variable(),
            tenants = settings.config.tenants.len(),
            "configuration loaded"
        );
        Ok(Arc::new(Function {
            live: Live::new(engine),
            boot,
            duties: PhantomData,
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
        match load::<D>(&self.boot.source, &self.sdk, &document.text).await {
            Ok((config, (tools, secrets))) => {
                self.live.replace(path, |now| {
                    now.with_config(config)
                        .with_tools(tools)
                        .with_channel_secrets(secrets)
                });
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

/// The document loaded for a function with `D`'s duties: parsed and checked, its tools built.
async fn load<D: Duties>(
    from: &ConfigSource,
    sdk: &SdkConfig,
    text: &str,
) -> Result<(Arc<Config>, Armed), BootError> {
    let config = D::parse(text).map_err(|e| BootError::Invalid(from.variable(), e.to_string()))?;
    let tools = D::tools(&config, sdk).await?;
    Ok((Arc::new(config), tools))
}
