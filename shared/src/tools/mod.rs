//! The tool port: run one committed call, classify the answer.

pub mod echo;
pub mod mcp;
pub mod secrets;
pub mod webhook;

use crate::config::{Executor, ToolEntry};
use async_trait::async_trait;
use serde_json::Value;

/// One attempt at the committed call.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub action_id: &'a str,
    pub tool: &'a ToolEntry,
    pub args: &'a Value,
    /// Counts every attempt at this action from 1, across in-window retries and recovery re-claims.
    pub attempt: u32,
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
                timeout_ms,
                allow_private,
            } => {
                let secret = self.secrets.value(secret);
                self.webhook
                    .run(call, url, secret, *timeout_ms, *allow_private)
                    .await
            }
            Executor::Mcp {
                url,
                tool,
                secret,
                timeout_ms,
                allow_private,
            } => {
                let secret = self.secrets.value(secret);
                self.mcp
                    .run(call, url, tool, secret, *timeout_ms, *allow_private)
                    .await
            }
        }
    }
}
