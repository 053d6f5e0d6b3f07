//! The HTTP API (SPEC §3). One router of every route for the local server; each HTTP Lambda
//! function serves its own routes of it.
//!
//! Modules, none importing another in a circle: `router` → each function's routes beside their
//! handlers (`intake`, `approve`, `cancel`) and `openapi`; `openapi` → the handlers' annotations;
//! handlers → `body`, `extract`, `view`, `error`.

mod approve;
pub mod auth;
pub mod body;
mod cancel;
mod decide;
mod email;
pub mod error;
mod explain;
mod extract;
mod grants;
mod insights;
mod intake;
pub mod json;
mod mcp;
mod me;
pub mod openapi;
pub mod paths;
pub mod rate;
pub mod resource;
mod router;
mod routes;
pub mod slack;
pub mod ui;
pub mod view;

pub use auth::Caller;
pub use body::MAX_BODY;
pub use router::{all_routes, approve_routes, cancel_routes, intake_routes, router, served};
pub use routes::{Routes, ROUTES};
