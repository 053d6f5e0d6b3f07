//! countersign: approve an agent's tool call now, run exactly that call later, inside its window.
//!
//! Layout (ports and adapters):
//! - [`domain`] — pure types and rules: actions, the closed [`domain::Ticket`], windows, policy,
//!   approval context, the audit chain and the ordered resume checks. No I/O, time is injected.
//! - [`store`] — the storage port and its adapters; every transition is one conditional write.
//! - [`wake`] — the wake port (a signal only; the committed ticket decides) and its adapters.
//! - [`tools`] — the executors that run a committed call (`webhook`, `builtin.echo`).
//! - [`engine`] — the use cases (intake, approval, cancel, stop, resume, sweep) over the ports.
//! - [`notify`] — the notification worker: delivers the outbox that transitions write.
//! - [`api`] — the HTTP API (axum), shared by the local server and the Lambda functions.
//! - [`operate`] — operator features: the store-wide invariant check behind
//!   `countersign-server verify`, and a table of calls run against a policy
//!   (`countersign-server policy test`).
//! - [`identity`] — OAuth access tokens from a tenant's identity provider, verified locally.
//! - [`config`] — the one TOML document: tenants, keys, policy, action kinds, tool catalog.
//! - [`boot`] — the composition roots: the self-hosted server and the Lambda wiring, each
//!   choosing the adapters and starting an engine over them; the configuration a running
//!   process serves, reloaded whole (SC-OPS-03).

pub mod api;
pub mod boot;
pub mod clock;
pub mod config;
pub mod domain;
pub mod engine;
pub mod error;
pub mod identity;
pub mod notify;
pub mod operate;
pub mod store;
pub mod target;
pub mod telemetry;
pub mod tools;
pub mod wake;

pub use clock::{Clock, SystemClock};
pub use engine::Engine;
pub use error::Error;
