//! The HTTP API (SPEC §3). One router, served by the local server and by the Lambda functions.

mod auth;
pub mod error;
mod routes;

pub use auth::Caller;
pub use routes::router;

/// Largest accepted request body.
pub const MAX_BODY: usize = 256 * 1024;
