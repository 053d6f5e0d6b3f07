//! The bench's configuration: the tests' configuration (tenant `acme` with webhook tools served
//! by the tests' tool server, so the bench follows every change the tests make to it) plus a
//! tenant `bench` whose tools are builtin (instant, no network).

use countersign_tests::{config_toml, ToolServer};
use sha2::{Digest, Sha256};

pub const BENCH_AGENT: &str = "key-bench-agent";
pub const BENCH_APPROVER: &str = "key-bench-approver";

fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The configuration document and the tool server its webhook tools call.
pub async fn config() -> (String, ToolServer) {
    config_with_rules("").await
}

/// The same, with `rules` (TOML inline tables, each ending in a comma) ahead of tenant `bench`'s
/// two rules: `gate.rs` measures what rules in front of the allow cost.
pub async fn config_with_rules(rules: &str) -> (String, ToolServer) {
    let tools = ToolServer::start().await;
    let mut toml = config_toml(&tools, "1m", "10s");
    toml.push_str(&format!(
        r#"
[tenants.bench]
time_zone = "UTC"
keys = [
  {{ id = "bench-agent", role = "agent", sha256 = "{agent}" }},
  {{ id = "bench-approver", role = "approver", sha256 = "{approver}" }},
]
policy = [{rules}
  {{ tool = "search.*", decision = "allow" }},
  {{ tool = "mail.*", decision = "require_approval" }},
]

[tenants.bench.tools."search.instant"]
executor = "builtin.echo"

[tenants.bench.tools."mail.instant"]
executor = "builtin.echo"
"#,
        rules = rules,
        agent = hash(BENCH_AGENT),
        approver = hash(BENCH_APPROVER),
    ));
    (toml, tools)
}

/// A fresh database path under the system's temporary directory.
/// A database of one run in a directory of its own, removed when dropped: a bench run writes
/// hundreds of megabytes a database, and a whole run dozens of them.
pub struct TempDb {
    pub path: std::path::PathBuf,
}

impl TempDb {
    pub fn new(name: &str) -> TempDb {
        TempDb {
            path: countersign_tests::temp_db(&format!("bench-{name}")),
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
