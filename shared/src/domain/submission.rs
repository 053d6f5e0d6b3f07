//! A tool call as an agent submitted it, in shape already (the API checked the body): what
//! intake decides on.

use super::window::Window;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Longest caller-supplied identifier (`run.*`, `action_kind`, an agent id in a stop).
pub const MAX_ID: usize = 256;

#[derive(Debug, Clone)]
pub struct Submission {
    pub tool: String,
    pub args: Map<String, Value>,
    pub action_kind: Option<String>,
    pub run: Option<RunRef>,
    /// The window asked for, not yet held to the window rules (they depend on `now`).
    pub window: Option<Window>,
    /// The digest of the payload as sent: a replay under the same Idempotency-Key must match.
    pub payload_digest: String,
}

/// Caller-side identifiers an agent may attach, echoed back untouched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}
