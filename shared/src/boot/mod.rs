//! The composition roots: where each deployment chooses its adapters and wires them into an
//! [`Engine`](crate::Engine). Nothing else in the crate names this room; the binaries under
//! `functions/` are a few lines over it.
//!
//! - [`embedded`] — the self-hosted server (`countersign-server`): SQLite or Postgres, the
//!   in-process waker, the notifier, HTTPS and the configuration file's reload.
//! - [`aws`] — the Lambda functions: DynamoDB, EventBridge Scheduler, the configuration and
//!   secrets from Parameter Store, API Gateway events.
//! - [`live`] — the engine a running process serves, replaced whole when its configuration
//!   changes (both roots).

#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod live;
