//! The downstream MCP servers of tests/mcp.rs, started by the test and recording every request
//! they receive: tests/mcp/py_tool_server.py (the official Python SDK),
//! tests/mcp/fastmcp_server.py (FastMCP) and tests/mcp/misbehaving_server.py (what the SDKs never
//! send).

use super::python;
use serde_json::Value;
use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// Which downstream server, answering how.
#[derive(Clone, Copy, Debug)]
pub enum Serve {
    /// The official Python SDK, answering JSON or SSE.
    Sdk { sse: bool },
    /// The same after its tools changed (`v2`), answering JSON.
    SdkChanged,
    /// FastMCP, answering JSON or SSE.
    FastMcp { sse: bool },
    /// The small server that answers as the SDKs never do.
    Misbehaving,
}

impl Serve {
    /// The script and its arguments after `PORT TOKEN CALLS_FILE`.
    fn script(self) -> (&'static str, Vec<&'static str>) {
        let mode = |sse| if sse { "sse" } else { "json" };
        match self {
            Serve::Sdk { sse } => ("py_tool_server.py", vec!["v1", mode(sse)]),
            Serve::SdkChanged => ("py_tool_server.py", vec!["v2", "json"]),
            Serve::FastMcp { sse } => ("fastmcp_server.py", vec![mode(sse)]),
            Serve::Misbehaving => ("misbehaving_server.py", vec![]),
        }
    }
}

/// A downstream MCP server recording every request it receives.
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
    /// The official Python SDK's server, answering JSON.
    pub async fn start() -> Downstream {
        Downstream::serve(Serve::Sdk { sse: false }).await
    }

    pub async fn serve(serve: Serve) -> Downstream {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let calls_file =
            std::env::temp_dir().join(format!("mcp-calls-{}.jsonl", ulid::Ulid::new()));
        Downstream::start_on(port, calls_file, serve).await
    }

    /// The server changed: stopped, and started again with its `v2` tools on the same port
    /// (the same URL) and the same record of calls.
    pub async fn change(self) -> Downstream {
        let (port, calls_file) = (self.port, self.calls_file.clone());
        drop(self);
        Downstream::start_on(port, calls_file, Serve::SdkChanged).await
    }

    async fn start_on(port: u16, calls_file: PathBuf, serve: Serve) -> Downstream {
        let (script, args) = serve.script();
        let child = Command::new(python())
            .arg(format!("{}/mcp/{script}", env!("CARGO_MANIFEST_DIR")))
            .args([port.to_string(), countersign_tests::SECRET.to_owned()])
            .arg(&calls_file)
            .args(args)
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

    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The catalog entry of a tool served by this server.
    pub fn tool(&self, name: &str, downstream: &str) -> String {
        self.tool_with(name, downstream, "")
    }

    /// The catalog entry of a tool served by this server, with more TOML lines.
    pub fn tool_with(&self, name: &str, downstream: &str, more: &str) -> String {
        format!(
            "\n[tenants.acme.tools.\"{name}\"]\nexecutor = \"mcp\"\nurl = \"{}\"\ntool = \"{downstream}\"\nsecret_env = \"{}\"\ntimeout = \"5s\"\n{more}",
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
