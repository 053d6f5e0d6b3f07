//! `builtin.echo`: answers with what it was given. For demos and tests.

use super::{Call, ToolAnswer};
use serde_json::json;

pub fn run(call: &Call<'_>) -> ToolAnswer {
    ToolAnswer::Succeeded(json!({
        "echo": call.args,
        "tool": call.tool.name,
        "action_id": call.action_id,
        "attempt": call.attempt,
    }))
}
