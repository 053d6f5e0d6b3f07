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
pub mod rate;
pub mod resource;
mod router;
pub mod slack;
pub mod ui;
pub mod view;

pub use auth::Caller;
pub use router::{all_routes, approve_routes, cancel_routes, intake_routes, router, served};

/// The routes of one function, added to a router (the third column of [`ROUTES`]).
pub type Routes = axum::Router<std::sync::Arc<crate::Engine>>;

/// Largest accepted request body.
pub const MAX_BODY: usize = 256 * 1024;

/// Every path the API serves, each spelled once: the routers, [`ROUTES`] and the OpenAPI
/// annotations beside the handlers name these.
pub mod paths {
    /// Submit (POST), list (GET).
    pub const ACTIONS: &str = "/v1/actions";
    /// One action.
    pub const ACTION: &str = "/v1/actions/{id}";
    /// Its audit chain.
    pub const EVENTS: &str = "/v1/actions/{id}/events";
    /// Its deed.
    pub const DEED: &str = "/v1/actions/{id}/deed";
    /// Countersign.
    pub const APPROVE: &str = "/v1/actions/{id}/approve";
    /// Deny.
    pub const DENY: &str = "/v1/actions/{id}/deny";
    /// Approve or deny several at once (SC-GR-20).
    pub const DECISIONS: &str = "/v1/decisions";
    /// Cancel.
    pub const CANCEL: &str = "/v1/actions/{id}/cancel";
    /// Stop an agent or the tenant.
    pub const STOPS: &str = "/v1/stops";
    /// Lift a stop.
    pub const STOP: &str = "/v1/stops/{scope}";
    /// Dead letters.
    pub const DEAD_NOTIFICATIONS: &str = "/v1/notifications/dead";
    /// Try one again.
    pub const REDELIVER: &str = "/v1/notifications/{id}/redeliver";
    /// The tenant's scoped grants (docs/grants.md).
    pub const GRANTS: &str = "/v1/grants";
    /// One grant, to revoke.
    pub const GRANT: &str = "/v1/grants/{id}";
    /// Records that do not load.
    pub const QUARANTINE: &str = "/v1/quarantine";
    /// Who the caller is.
    pub const ME: &str = "/v1/me";
    /// Which rule a call would match.
    pub const EXPLAIN: &str = "/v1/policy/explain";
    /// Decision insights (SC-GR-22).
    pub const INSIGHTS: &str = "/v1/insights";
    /// The approver page.
    pub const UI: &str = "/ui/";
    /// Its files.
    pub const UI_ASSET: &str = "/ui/{asset}";
    /// This API's document.
    pub const OPENAPI: &str = "/openapi.json";
    /// MCP over Streamable HTTP.
    pub const MCP: &str = "/mcp";
    /// The API's protected resource metadata (RFC 9728 §3: the path form inserts the
    /// resource's path after it, as MCP's below).
    pub const RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";
    /// MCP's.
    pub const MCP_RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource/mcp";
    /// Slack's buttons and the deny modal (docs/slack.md).
    pub const SLACK_INTERACTIONS: &str = "/v1/slack/interactions";
    /// The confirmation page of an approval mail (docs/email.md).
    pub const EMAIL_CONFIRM: &str = "/ui/email/confirm";
}

/// Every route the router serves, with the Lambda function that owns it on AWS (SPEC §3).
/// The infra tests hold the SAM template to this list; a router test holds the router to it.
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("POST", paths::ACTIONS, "intake"),
    ("GET", paths::ACTIONS, "intake"),
    ("GET", paths::ACTION, "intake"),
    ("GET", paths::EVENTS, "intake"),
    ("GET", paths::DEED, "intake"),
    ("POST", paths::APPROVE, "approve"),
    ("POST", paths::DENY, "approve"),
    // Several decisions in one request (SC-GR-20), each its own approve or deny.
    ("POST", paths::DECISIONS, "approve"),
    // The confirmation page of an approval mail (docs/email.md): GET shows, POST decides.
    ("GET", paths::EMAIL_CONFIRM, "approve"),
    ("POST", paths::EMAIL_CONFIRM, "approve"),
    ("POST", paths::CANCEL, "cancel"),
    ("POST", paths::STOPS, "cancel"),
    ("DELETE", paths::STOP, "cancel"),
    // The approver page: public static files; the data comes through the routes above.
    ("GET", paths::UI, "intake"),
    ("GET", paths::UI_ASSET, "intake"),
    ("GET", paths::DEAD_NOTIFICATIONS, "cancel"),
    ("POST", paths::REDELIVER, "cancel"),
    // Scoped grants (docs/grants.md): listed, and revoked at once.
    ("GET", paths::GRANTS, "cancel"),
    ("DELETE", paths::GRANT, "cancel"),
    ("GET", paths::QUARANTINE, "intake"),
    ("GET", paths::ME, "intake"),
    // Which policy rule a call would match (SC-POL-05): reads the config only.
    ("POST", paths::EXPLAIN, "intake"),
    // Decision insights (SC-GR-22): a bounded read of the tenant's actions.
    ("GET", paths::INSIGHTS, "intake"),
    // The OpenAPI document of the routes above.
    ("GET", paths::OPENAPI, "intake"),
    // MCP over Streamable HTTP (docs/mcp.md).
    ("POST", paths::MCP, "intake"),
    // OAuth protected resource metadata (RFC 9728, docs/identity.md): the API's and MCP's.
    ("GET", paths::RESOURCE_METADATA, "intake"),
    ("GET", paths::MCP_RESOURCE_METADATA, "intake"),
    // Slack's buttons and the deny modal (docs/slack.md): signed by Slack, not by a key.
    ("POST", paths::SLACK_INTERACTIONS, "approve"),
];
