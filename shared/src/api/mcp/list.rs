//! `tools/list`: the tenant's catalog under MCP names, each tool described as the policy treats
//! its calls (SC-MCP-02, SC-MCP-09, SC-MCP-11).

use super::{
    describe::{describe, WindowUse},
    revision::{Revision, Version},
    rpc::{tenant, Rpc, RpcError},
    text,
};
use crate::{
    config::{Tenant, ToolEntry},
    domain::{policy, Decision},
};
use serde_json::{json, Value};

/// The optional argument of a deferrable tool that carries its window; taken out before commit.
pub(super) const WINDOW_ARG: &str = "countersign_window";

/// Whether every call of this tool is denied, whatever its arguments (SC-POL-01 conditions).
fn always_denied(tenant: &Tenant, tool: &str) -> bool {
    policy::possible(&tenant.policy, tool)
        .iter()
        .all(|d| *d == Decision::Deny)
}

/// A call of this tool may wait: for a countersignature, or for its window.
pub(super) fn deferrable(tenant: &Tenant, tool: &str) -> bool {
    policy::possible(&tenant.policy, tool)
        .iter()
        .any(|d| matches!(d, Decision::RequireApproval | Decision::Schedule))
}

/// The catalog in name order; tools the policy always denies are left out.
pub(super) fn list(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    if rpc.params.get("cursor").is_some_and(|c| !c.is_null()) {
        return Err(RpcError::invalid_params(
            "cursor: the tool list has a single page",
        ));
    }
    let tenant = tenant(rpc)?;
    let mut tools: Vec<Value> = tenant
        .tools
        .values()
        .filter(|t| !always_denied(tenant, &t.name))
        .map(|t| entry(tenant, t, rpc.version))
        .collect();
    tools.push(status_tool());
    let mut result = json!({ "tools": tools });
    if rpc.rev == Revision::Modern {
        // Cacheable result (2026-07-28): per key, for a minute.
        result["ttlMs"] = json!(60_000);
        result["cacheScope"] = json!("private");
    }
    Ok(result)
}

/// One listed tool: its MCP name, and a description and schema that say what the policy does
/// with its calls (SC-MCP-11).
fn entry(tenant: &Tenant, tool: &ToolEntry, version: Version) -> Value {
    let mut description = tool
        .info
        .description
        .clone()
        .unwrap_or_else(|| format!("The tool {}.", tool.name));
    let mut schema = tool
        .info
        .input_schema
        .clone()
        // Any object, said outright: a strict function schema (OpenAI's) cannot close it.
        .unwrap_or_else(|| json!({"type": "object", "additionalProperties": true}));
    let policy = describe(&tenant.policy, &tool.name, WINDOW_ARG);
    if !policy.text.is_empty() {
        description.push(' ');
        description.push_str(&policy.text);
    }
    if policy.window != WindowUse::None {
        if let Some(fields) = schema.as_object_mut() {
            let properties = fields.entry("properties").or_insert_with(|| json!({}));
            if let Some(properties) = properties.as_object_mut() {
                properties.insert(WINDOW_ARG.to_owned(), window_schema(policy.window));
            }
            if policy.window == WindowUse::Required {
                let required = fields.entry("required").or_insert_with(|| json!([]));
                if let Some(required) = required.as_array_mut() {
                    required.push(json!(WINDOW_ARG));
                }
            }
        }
    }
    let mut entry = json!({
        "name": tool.mcp_name(),
        "description": description,
        "inputSchema": schema,
    });
    if let Some(annotations) = &tool.info.annotations {
        entry["annotations"] = annotations.clone();
    }
    if version.has_core_tasks() && deferrable(tenant, &tool.name) {
        entry["execution"] = json!({"taskSupport": "optional"});
    }
    entry
}

/// `countersign_window` in a tool's schema. Optional, it may also be `null` (what models send
/// for a property they leave out, and what strict function schemas need to leave it out).
fn window_schema(window: WindowUse) -> Value {
    let time = |what: &str| json!({"type": "string", "format": "date-time", "description": what});
    let (kind, when) = match window {
        WindowUse::Required => (json!("object"), "Required"),
        WindowUse::Optional {
            needed_sometimes: true,
        } => (
            json!(["object", "null"]),
            "Required where the description says the call runs unattended; otherwise optional",
        ),
        _ => (json!(["object", "null"]), "Optional"),
    };
    json!({
        "type": kind,
        "description": format!("{when}: when the call may run. RFC 3339 times with an offset, e.g. \
            2026-12-01T17:30:00+01:00; the window is at least the tenant's minimum width and \
            ends within 72 hours. countersign takes it out of the arguments: the tool never \
            sees it."),
        "properties": {
            "not_before": time("The earliest start."),
            "not_after": time("The latest start."),
        },
        "required": ["not_before", "not_after"],
        "additionalProperties": false,
    })
}

fn status_tool() -> Value {
    json!({
        "name": text::STATUS_TOOL,
        "description": "Where a countersign action stands, by the action_id an earlier call \
            answered: waiting for a countersignature, approved for a window, running, or how it \
            ended (with the tool's result once it ran).",
        "inputSchema": {
            "type": "object",
            "properties": {"action_id": {"type": "string", "description": "act_… from an earlier answer"}},
            "required": ["action_id"],
            "additionalProperties": false,
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true},
    })
}
