//! The tool port: run one committed call, classify the answer.

pub mod echo;
#[cfg(feature = "embedded")]
pub mod import;
pub mod mcp;
pub mod secrets;
pub mod webhook;

use crate::config::{Executor, ToolEntry};
use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::Value;
use std::time::Duration;

/// One attempt at the committed call.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub action_id: &'a str,
    pub tool: &'a ToolEntry,
    pub args: &'a Value,
    /// Counts every attempt at this action from 1, across in-window retries and recovery re-claims.
    pub attempt: u32,
    /// The engine's clock as the attempt starts: a webhook signs with it (`t`), and the
    /// attempt's time left is counted from it.
    pub at: Timestamp,
    /// The window's end (SC-EDGE-01): the attempt — connect, send, answer — is over by then.
    pub not_after: Timestamp,
}

impl Call<'_> {
    /// How long this attempt may take: the tool's timeout, cut at the deadline, so a slow
    /// connect or a loaded receiver cannot carry the request past `not_after` (SC-EDGE-01).
    /// Zero when no time is left: the attempt is not sent.
    pub fn budget(&self) -> Duration {
        let left = self.not_after.duration_since(self.at);
        Duration::try_from(self.tool.timeout().min(left)).unwrap_or(Duration::ZERO)
    }
}

/// How an attempt ended (SPEC §5 webhook classification).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolAnswer {
    /// 2xx: the JSON result (capped).
    Succeeded(Value),
    /// 4xx or a permanent misconfiguration: do not retry.
    Failed(Value),
    /// 5xx, timeout, connection failure: retry if the tool's policy allows, inside the window.
    Retryable(Value),
}

impl ToolAnswer {
    /// The kind of answer, as a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolAnswer::Succeeded(_) => "succeeded",
            ToolAnswer::Failed(_) => "failed",
            ToolAnswer::Retryable(_) => "retryable",
        }
    }
}

#[async_trait]
pub trait ToolRunner: Send + Sync + 'static {
    async fn run(&self, call: &Call<'_>) -> ToolAnswer;
}

/// The executors named in the catalog.
pub struct Executors {
    webhook: webhook::Webhook,
    mcp: mcp::Mcp,
    secrets: secrets::Secrets,
}

impl Executors {
    /// Webhook secrets from the environment only (the local server, tests).
    pub fn new() -> Self {
        Self::with_secrets(secrets::Secrets::default())
    }

    /// With the secrets fetched at boot (`aws::load_secrets`).
    pub fn with_secrets(secrets: secrets::Secrets) -> Self {
        Executors {
            webhook: webhook::Webhook::new(),
            mcp: mcp::Mcp::new(),
            secrets,
        }
    }
}

impl Default for Executors {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl ToolRunner for Executors {
    async fn run(&self, call: &Call<'_>) -> ToolAnswer {
        match &call.tool.executor {
            Executor::Echo => echo::run(call),
            Executor::Webhook {
                url,
                secret,
                allow_private,
                signing,
                ..
            } => {
                let secret = self.secrets.value(secret);
                self.webhook
                    .run(call, url, secret, *allow_private, *signing)
                    .await
            }
            Executor::Mcp {
                url,
                tool,
                secret,
                allow_private,
                ..
            } => {
                let secret = self.secrets.value(secret);
                self.mcp.run(call, url, tool, secret, *allow_private).await
            }
        }
    }
}
