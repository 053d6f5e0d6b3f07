//! The downstream MCP server of tests/mcp.rs: tests/mcp/py_tool_server.py, written with the
//! official Python SDK, started by the test and recording every request it receives.

use super::python;
use serde_json::Value;
use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// A downstream MCP server written with the official Python SDK (tests/mcp/py_tool_server.py),
/// recording every request it receives.
pub struct Downstream {
    child: Child,
    port: u16,
    calls_file: PathBuf,
}

impl Drop for Downstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Downstream {
    pub async fn start() -> Downstream {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let calls_file =
            std::env::temp_dir().join(format!("mcp-calls-{}.jsonl", ulid::Ulid::new()));
        Downstream::start_on(port, calls_file, "v1").await
    }

    /// The server changed: stopped, and started again with its `v2` tools on the same port
    /// (the same URL) and the same record of calls.
    pub async fn change(self) -> Downstream {
        let (port, calls_file) = (self.port, self.calls_file.clone());
        drop(self);
        Downstream::start_on(port, calls_file, "v2").await
    }

    async fn start_on(port: u16, calls_file: PathBuf, variant: &str) -> Downstream {
        let child = Command::new(python())
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/mcp/py_tool_server.py"
            ))
            .args([port.to_string(), countersign_tests::SECRET.to_owned()])
            .arg(&calls_file)
            .arg(variant)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the MCP Python SDK is installed (source scripts/mcp-sdks.sh)");
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < until,
                "the downstream server starts"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Downstream {
            child,
            port,
            calls_file,
        }
    }

    /// The catalog entry of a tool served by this server.
    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn tool(&self, name: &str, downstream: &str) -> String {
        format!(
            "\n[tenants.acme.tools.\"{name}\"]\nexecutor = \"mcp\"\nurl = \"{}\"\ntool = \"{downstream}\"\nsecret_env = \"{}\"\ntimeout = \"5s\"\n",
            self.url(),
            countersign_tests::SECRET_ENV
        )
    }

    /// The `tools/call` requests it received for this action.
    pub fn calls_for(&self, action_id: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.calls_file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|c| {
                c["body"]["params"]["_meta"]["io.countersign/action"]["action_id"] == action_id
            })
            .collect()
    }
}
