//! The HTTP API (SPEC §3). One router of every route for the local server; each HTTP Lambda
//! function serves its own routes of it.
//!
//! Modules, none importing another in a circle: `router` → handlers (`routes`, `ui`, `mcp`,
//! `openapi`); `openapi` → handlers' annotations; handlers → `body`, `extract`, `view`, `error`.

pub mod auth;
pub mod body;
pub mod error;
mod explain;
mod extract;
pub mod json;
mod mcp;
mod me;
pub mod openapi;
pub mod rate;
pub mod resource;
mod router;
mod routes;
pub mod slack;
pub mod ui;
pub mod view;

pub use auth::Caller;
pub use router::{
    all_routes, approve_routes, cancel_routes, intake_routes, router, served, Routes,
};

/// Largest accepted request body.
pub const MAX_BODY: usize = 256 * 1024;

/// Every route the router serves, with the Lambda function that owns it on AWS (SPEC §3).
/// The infra tests hold the SAM template to this list; a router test holds the router to it.
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", "/v1/actions", "intake"),
    ("GET", "/v1/actions", "intake"),
    ("GET", "/v1/actions/{id}", "intake"),
    ("GET", "/v1/actions/{id}/events", "intake"),
    ("GET", "/v1/actions/{id}/deed", "intake"),
    ("POST", "/v1/actions/{id}/approve", "approve"),
    ("POST", "/v1/actions/{id}/deny", "approve"),
    ("POST", "/v1/actions/{id}/cancel", "cancel"),
    ("POST", "/v1/stops", "cancel"),
    ("DELETE", "/v1/stops/{scope}", "cancel"),
    // The approver page: public static files; the data comes through the routes above.
    ("GET", "/ui/", "intake"),
    ("GET", "/ui/{asset}", "intake"),
    ("GET", "/v1/notifications/dead", "cancel"),
    ("POST", "/v1/notifications/{id}/redeliver", "cancel"),
    ("GET", "/v1/quarantine", "intake"),
    ("GET", "/v1/me", "intake"),
    // Which policy rule a call would match (SC-POL-05): reads the config only.
    ("POST", "/v1/policy/explain", "intake"),
    // The OpenAPI document of the routes above.
    ("GET", "/openapi.json", "intake"),
    // MCP over Streamable HTTP (docs/mcp.md).
    ("POST", "/mcp", "intake"),
    // OAuth protected resource metadata (RFC 9728, docs/identity.md): the API's and MCP's.
    ("GET", "/.well-known/oauth-protected-resource", "intake"),
    ("GET", "/.well-known/oauth-protected-resource/mcp", "intake"),
    // Slack's buttons and the deny modal (docs/slack.md): signed by Slack, not by a key.
    ("POST", "/v1/slack/interactions", "approve"),
];
