//! The AWS wiring in one place: environment → adapters → [`Engine`], and the resume function's
//! event and handler. Each Lambda binary is a few lines over this module.
//!
//! Environment (configuration comes from nowhere else):
//! - `COUNTERSIGN_TABLE` — the DynamoDB table (`infra/table.json`)
//! - `COUNTERSIGN_SCHEDULE_GROUP` — the EventBridge Scheduler group for wakes
//! - `COUNTERSIGN_RESUME_ARN` — the resume function, target of every wake
//! - `COUNTERSIGN_SCHEDULER_ROLE_ARN` — the role Scheduler assumes to invoke it
//! - `COUNTERSIGN_DLQ_ARN` — optional dead-letter queue for undeliverable wakes
//! - `COUNTERSIGN_CONFIG_SSM` — the SSM path whose String parameters hold the configuration
//!   document, re-read when they change ([`source`]); or `COUNTERSIGN_CONFIG` — the document
//!   itself (TOML text, at most about 3.5 KB), fixed until the next deploy. One of the two.
//! - `COUNTERSIGN_CONFIG_RECHECK` — optional: look for a changed document at most this often
//!   (default `60s`)
//! - `COUNTERSIGN_RETENTION` — optional: keep sealed actions this long (e.g. `2160h`), then TTL
//!
//! And for the SDK (nothing else: no profile file, no instance metadata; [`sdk`]): `AWS_REGION`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` (optional) and
//! `AWS_ENDPOINT_URL` (optional).

use crate::{
    config::{Config, Secret},
    domain::resume::Wake,
    engine::{ResumeOutcome, SweepReport},
    store::dynamodb::DynamoStore,
    tools::secrets::Secrets,
    tools::ToolRunner,
    wake::scheduler::{SchedulerTarget, SchedulerWaker},
    Clock, Engine, Error,
};
use aws_config::{BehaviorVersion, SdkConfig};
use jiff::SignedDuration;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

mod function;
pub mod http;
pub mod sdk;
pub mod source;
pub use function::{Approve, Boot, Cancel, Duties, Function, Intake, Resume};
pub use sdk::sdk_config_from_env;

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error("environment variable {0} is not set")]
    Missing(&'static str),
    #[error("environment variable {0}: {1}")]
    Invalid(&'static str, String),
    /// A webhook secret the config names is missing (the message names the entry).
    #[error("{0}")]
    Secret(String),
    /// The configuration's SSM parameters could not be read (the message names the path).
    #[error("{0}")]
    Unreadable(String),
}

/// Every environment variable [`Boot::from_env`] reads, required or optional. The infra
/// test (`tests/infra_template.rs`) holds the SAM template to this list: every function sets
/// all of them. It also checks that this module names no other `COUNTERSIGN_*` variable.
pub const ENV_VARS: &[&str] = &[
    "COUNTERSIGN_TABLE",
    "COUNTERSIGN_SCHEDULE_GROUP",
    "COUNTERSIGN_RESUME_ARN",
    "COUNTERSIGN_SCHEDULER_ROLE_ARN",
    "COUNTERSIGN_DLQ_ARN",
    "COUNTERSIGN_CONFIG",
    "COUNTERSIGN_CONFIG_SSM",
    "COUNTERSIGN_CONFIG_RECHECK",
    "COUNTERSIGN_RETENTION",
];

/// What one engine of a function is built from: its environment's settings and a configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub table: String,
    pub target: SchedulerTarget,
    pub config: Arc<Config>,
    pub retention: Option<SignedDuration>,
}

/// The SDK configuration from the default chain (profiles, SSO, instance metadata…), over
/// reqwest ([`http`]): for the local server's commands run from an operator's shell. The functions use
/// [`sdk_config_from_env`], so that the chain is not linked into them.
pub async fn sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http::https_client())
        .load()
        .await
}

/// The adapters over one SDK configuration: build once per cold start, reuse while warm.
pub fn adapters(settings: &Settings, sdk: &SdkConfig) -> (DynamoStore, SchedulerWaker) {
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(sdk), &settings.table)
        .with_retention(settings.retention);
    let waker = SchedulerWaker::new(aws_sdk_scheduler::Client::new(sdk), settings.target.clone());
    (store, waker)
}

/// The engine over DynamoDB and Scheduler, with the given tools and clock (tests inject theirs).
pub fn engine_with(
    settings: &Settings,
    sdk: &SdkConfig,
    tools: Arc<dyn ToolRunner>,
    clock: Arc<dyn Clock>,
) -> Arc<Engine> {
    let (store, waker) = adapters(settings, sdk);
    Arc::new(Engine::new(
        settings.config.clone(),
        Arc::new(store),
        Arc::new(waker),
        tools,
        clock,
    ))
}

/// Fetch every `secret_ssm` of the catalog and, with `channels`, every `*_ssm` of the approval
/// channels (the Slack apps' and the mail's: only the functions that deliver notices or answer
/// their buttons and links need them) — GetParameter, decrypted — and check every webhook
/// secret. The parameter's value is never logged; an error names the entry and the parameter.
pub async fn load_secrets(
    config: &Config,
    sdk: &SdkConfig,
    channels: bool,
) -> Result<Secrets, BootError> {
    let ssm = aws_sdk_ssm::Client::new(sdk);
    let mut secrets = Secrets::default();
    let webhooks = config
        .webhook_secrets()
        .into_iter()
        .map(|(at, secret)| (format!("{at}.secret_ssm"), secret));
    let channel_secrets = match channels {
        true => config.channel_secrets(),
        false => Vec::new(),
    };
    let channel_secrets = channel_secrets
        .into_iter()
        .map(|(at, secret)| (format!("{at}_ssm"), secret));
    for (at, secret) in webhooks.chain(channel_secrets) {
        let Secret::Ssm(name) = secret else { continue };
        let out = ssm
            .get_parameter()
            .name(name)
            .with_decryption(true)
            .send()
            .await
            .map_err(|e| {
                BootError::Secret(format!(
                    "{at}: cannot read parameter {name}: {}",
                    aws_sdk_ssm::error::DisplayErrorContext(&e)
                ))
            })?;
        let value = out
            .parameter()
            .and_then(|p| p.value())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| BootError::Secret(format!("{at}: parameter {name} is empty")))?;
        secrets.insert_fetched(name, value.to_owned());
    }
    crate::tools::secrets::check(config, &secrets, true).map_err(|e| BootError::Secret(e.0))?;
    Ok(secrets)
}

/// JSON logs to stdout (CloudWatch), filtered by `RUST_LOG` (default `info`): `target=level`
/// directives, e.g. `info,countersign=debug` (a [`Targets`] filter; an unreadable value is `info`).
/// And the metrics recorder, whose EMF lines each invocation flushes to the same log.
///
/// [`Targets`]: tracing_subscriber::filter::Targets
pub fn init_logs() {
    use tracing_subscriber::{filter::Targets, prelude::*};
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_ansi(false)
        .without_time() // CloudWatch stamps each line
        .finish()
        .with(filter)
        .init();
    crate::telemetry::emf::install();
}

/// The HTTP functions' handler: the API router. `lambda_http` turns API Gateway REST (v1) and
/// HTTP API (v2) events into these requests and the answers back; a REST API's stage prefix
/// (e.g. `/prod`) is not part of our routes, so every function runs with
/// `AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH` set ([`HTTP_ENV`]) and the library leaves it out.
pub fn http_handler(engine: Arc<Engine>) -> axum::Router {
    flushing(crate::api::router(engine))
}

fn flushing(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::map_response(flushed))
}

/// Each answer flushes what its invocation recorded (one Lambda invocation is one request).
async fn flushed(response: axum::response::Response) -> axum::response::Response {
    crate::telemetry::emf::flush();
    response
}

/// What the template sets for every function besides [`ENV_VARS`]: `lambda_http` then keeps a
/// REST API's stage out of the request path (`tests/infra_template.rs` holds the template to it).
pub const HTTP_ENV: (&str, &str) = ("AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH", "true");

/// What an HTTP function does after its cold start: serve only its routes (`api::intake_routes`,
/// …), as API Gateway routes them to it, so that its binary links only their handlers, until
/// the runtime stops.
pub async fn serve_http<D: Duties>(
    function: Arc<Function<D>>,
    routes: fn(crate::api::Routes) -> crate::api::Routes,
) -> Result<(), lambda_http::Error> {
    lambda_http::run(function.http(routes)).await
}

/// The sweep event's body: `{"sweep":{}}` (from a recurring schedule, every minute).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {}

/// What the resume function accepts: a wake, or the sweep. Anything else is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResumeEvent {
    Wake(Wake),
    Sweep(SweepEvent),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepEvent {
    pub sweep: Sweep,
}

/// The resume function's answer.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ResumeAnswer {
    Wake(ResumeOutcome),
    Sweep(SweepReport),
    /// A permanent error: the invocation succeeds, so it is not delivered again (see [`resume`]).
    Dropped(Dropped),
}

/// What a permanent error answers: `{"outcome": "dropped", "error_type", "error_message"}`.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    outcome: &'static str,
    pub error_type: String,
    pub error_message: String,
}

/// An error a retry can fix (a dependency — the store, Scheduler — unavailable or throttled):
/// it fails the invocation, so Lambda's asynchronous retries deliver the event again and, when
/// they are spent, its on-failure destination keeps it (`infra/README.md`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Retryable(pub Error);

/// The runtime reports a failed invocation as `{errorType, errorMessage}`: `Retryable.<kind>`
/// says which dependency to look at (a dependency's failure, `Unavailable`, is the one kind).
impl From<Retryable> for lambda_http::lambda_runtime::Diagnostic {
    fn from(e: Retryable) -> Self {
        lambda_http::lambda_runtime::Diagnostic {
            error_type: "Retryable.Unavailable".to_owned(),
            error_message: e.0.to_string(),
        }
    }
}

/// Only a dependency's failure is worth a retry; everything else (a tenant no longer
/// configured, a record that vanished, a chain that does not verify) fails the same way each
/// time, so failing the invocation would only have it delivered again and again.
fn classify(e: Error) -> Result<ResumeAnswer, Retryable> {
    if matches!(e, Error::Unavailable(_)) {
        return Err(Retryable(e));
    }
    let error_type = format!("Permanent.{}", permanent_kind(&e));
    tracing::error!(error_type, error = %e, "resume event dropped: a retry cannot fix this");
    Ok(ResumeAnswer::Dropped(Dropped {
        outcome: "dropped",
        error_type,
        error_message: e.to_string(),
    }))
}

fn permanent_kind(e: &Error) -> &'static str {
    match e {
        Error::NotFound(_) => "NotFound",
        Error::Validation { .. } => "Validation",
        Error::Forbidden(_) => "Forbidden",
        _ => "Internal",
    }
}

/// Handle one resume event. A retryable error fails the invocation (see [`Retryable`]); a
/// permanent one is logged and answered as [`Dropped`]; a rejected or sealed wake is an
/// answer. `deadline` is the invocation's (the Lambda context's): the sweep starts no tool run
/// that could not finish before it.
pub async fn resume(
    engine: &Engine,
    event: ResumeEvent,
    deadline: Option<jiff::Timestamp>,
) -> Result<ResumeAnswer, Retryable> {
    let answered = match event {
        ResumeEvent::Wake(wake) => engine.resume(&wake).await.map(ResumeAnswer::Wake),
        ResumeEvent::Sweep(_) => match engine.sweep_until(deadline).await {
            Ok(report) => {
                deliver_notifications(engine, deadline).await;
                Ok(ResumeAnswer::Sweep(report))
            }
            Err(e) => Err(e),
        },
    };
    crate::telemetry::emf::flush();
    answered.or_else(classify)
}

/// Time a notification pass needs before the invocation's deadline: one round of POSTs.
const NOTIFY_ROOM: jiff::SignedDuration = jiff::SignedDuration::from_secs(15);

/// The minute sweep also delivers the notification outbox (SC-NOT-01/02; docs/notifications.md
/// argues this against a DynamoDB Stream). A failure is logged, not returned: the sweep did its
/// work, and the outbox keeps every notice for the next minute.
async fn deliver_notifications(engine: &Engine, deadline: Option<jiff::Timestamp>) {
    let room = deadline.is_none_or(|d| {
        jiff::Timestamp::now()
            .checked_add(NOTIFY_ROOM)
            .is_ok_and(|t| t < d)
    });
    if !room {
        tracing::warn!("no time left for notifications in this sweep; the next one delivers them");
        return;
    }
    match engine.notifier().deliver_due().await {
        Ok(report) => tracing::info!(
            delivered = report.delivered,
            retrying = report.retrying,
            parked = report.parked,
            "notification pass"
        ),
        Err(e) => tracing::warn!(error = %e, "notification pass failed; the next sweep retries"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_events_are_closed() {
        let wake: ResumeEvent = serde_json::from_str(
            r#"{"tenant":"acme","action_id":"act_1","correlation_id":"cor_1"}"#,
        )
        .unwrap();
        assert!(matches!(wake, ResumeEvent::Wake(_)));
        let sweep: ResumeEvent = serde_json::from_str(r#"{"sweep":{}}"#).unwrap();
        assert!(matches!(sweep, ResumeEvent::Sweep(_)));
        for bad in [
            r#"{"tenant":"acme","action_id":"act_1","correlation_id":"cor_1","tool":"x"}"#,
            r#"{"sweep":{"all":true}}"#,
            r#"{"sweep":{},"tenant":"acme"}"#,
            r#"{}"#,
        ] {
            assert!(serde_json::from_str::<ResumeEvent>(bad).is_err(), "{bad}");
        }
    }
}
