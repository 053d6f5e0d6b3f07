//! The route table: every route the API serves with the Lambda function that owns it, and the
//! shape of one function's routes.

use super::paths;

/// The routes of one function, added to a router (the third column of [`ROUTES`]).
pub type Routes = axum::Router<std::sync::Arc<crate::Engine>>;

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
