//! Every path the API serves, each spelled once: the routers, the route table (`ROUTES`) and the OpenAPI
//! annotations beside the handlers name these.

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
