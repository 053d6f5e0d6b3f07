//! The configurations the reload tests swap between (SC-OPS-03), shared by the local server's
//! test and the AWS functions' test: the test document, a changed one, a broken one, and a
//! tenant-sized catalog of MCP tools.
#![allow(dead_code)]

use countersign_tests::{ToolServer, SECRET_ENV};
use sha2::Digest;

/// An agent key only the changed document holds: it answers `401` until the change is served.
pub const NEW_AGENT: &str = "key-agent-after-reload";

/// The test document changed as an operator changes a live one: a new agent key, `mail.send`
/// pointed elsewhere (its fingerprint changes: a ticket approved before is sealed
/// `catalog_changed`, SC-RES-04), `search.web` taken out of the catalog; `report.build` as it was.
pub fn changed(base: &str) -> String {
    let hash = hex::encode(sha2::Sha256::digest(NEW_AGENT.as_bytes()));
    let search = base
        .find("[tenants.acme.tools.\"search.web\"]")
        .expect("the test document has search.web");
    let end = base[search..]
        .find("\n\n")
        .map_or(base.len(), |at| search + at + 2);
    let without_search = format!("{}{}", &base[..search], &base[end..]);
    let text = without_search
        .replacen(
            "keys = [\n",
            &format!(
                "keys = [\n  {{ id = \"agent-new\", role = \"agent\", sha256 = \"{hash}\" }},\n"
            ),
            1,
        )
        .replace("/mail\"", "/mail-v2\"");
    assert!(text.contains("/mail-v2\"") && text.contains("agent-new"));
    text
}

/// A document with a mistake an operator makes: a tool with an executor that does not exist.
/// Its error names the entry.
pub fn broken(base: &str) -> String {
    format!("{base}\n[tenants.acme.tools.\"mail.archive\"]\nexecutor = \"teleport\"\n")
}

/// `n` tools of a downstream MCP server, each with the description, input schema and
/// annotations docs/mcp.md recommends (about 0.65 KB each), allowed by the test policy
/// (`search.*`), so that `tools/list` shows them all.
pub fn mcp_catalog(tools: &ToolServer, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                r#"
[tenants.acme.tools."search.crm_{i:02}"]
executor = "mcp"
url = "{url}"
tool = "crm_{i:02}"
secret_env = "{SECRET_ENV}"
timeout = "5s"
description = "Search the CRM's accounts of region {i:02} by name, owner or stage. Answers at most `limit` accounts, newest first, each with its id, name, owner, stage and last activity. Read-only."
input_schema = {{ type = "object", properties = {{ query = {{ type = "string", description = "Words of the account's name or owner" }}, stage = {{ type = "string", enum = ["lead", "trial", "customer", "churned"] }}, limit = {{ type = "integer", minimum = 1, maximum = 50, default = 10 }} }}, required = ["query"], additionalProperties = false }}
annotations = {{ title = "CRM search {i:02}", readOnlyHint = true, openWorldHint = false }}
"#,
                url = tools.url("mcp")
            )
        })
        .collect()
}

/// Write `text` to `path` as an operator's tooling should: a temporary file renamed over it,
/// so that no reader ever sees half a document.
pub fn write_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
