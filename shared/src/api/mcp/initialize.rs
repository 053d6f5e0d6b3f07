//! The lifecycle methods: `initialize` (the handshake revisions), `server/discover`
//! (2026-07-28) and `ping`.

use super::{
    revision::{Revision, Version, TASKS_EXTENSION},
    rpc::{server_info, Rpc, RpcError},
};
use serde_json::{json, Value};

const INSTRUCTIONS: &str = "countersign runs each tool call through its tenant's policy: some run \
now, some wait for a person's countersignature or for a window. A call that waits answers with \
its action_id; call countersign_status with it to follow the call.";

/// The handshake: answered, but no session is kept (every request stands alone and names its
/// revision in `MCP-Protocol-Version`). As the lifecycle specifies, a requested revision that
/// is served is answered as asked, any other with the newest handshake revision (2026-07-28
/// included: it has no handshake). Core tasks are offered where the revision has them.
pub(super) fn initialize(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let requested = rpc.text("protocolVersion")?;
    let version = Version::parse(requested)
        .filter(|v| v.revision() == Revision::Legacy)
        .unwrap_or(Version::LATEST_HANDSHAKE);
    let mut capabilities = json!({"tools": {"listChanged": false}});
    if version.has_core_tasks() {
        capabilities["tasks"] =
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    Ok(json!({
        "protocolVersion": version.as_str(),
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }))
}

pub(super) fn discover() -> Value {
    json!({
        "supportedVersions": Version::supported(),
        "capabilities": {"tools": {"listChanged": false}, "extensions": {TASKS_EXTENSION: {}}},
        "instructions": INSTRUCTIONS,
        "ttlMs": 3_600_000,
        "cacheScope": "private",
    })
}
