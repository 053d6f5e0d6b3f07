//! `countersign-server tools import`: a downstream MCP server's tools as catalog TOML
//! (docs/mcp.md, "Outbound"), written to stdout or a file.

use clap::Subcommand;
use countersign::tools::{import, mcp};
use std::{path::PathBuf, process::ExitCode};

#[derive(Subcommand, Debug)]
pub enum ToolsCommand {
    /// Read a downstream MCP server's `tools/list` (Streamable HTTP, 2026-07-28) and print one
    /// `executor = "mcp"` catalog entry per tool, with its description, input schema and
    /// annotations. Paste it into the config (or write it with --output): those fields are part
    /// of the tool's fingerprint, so re-importing after a downstream change seals approved calls
    /// `catalog_changed` instead of running them against the changed tool.
    Import {
        /// The downstream server's MCP endpoint, e.g. https://tools.example.com/mcp.
        #[arg(long)]
        from: String,
        /// The environment variable holding the downstream bearer token: sent with this request
        /// when set, and written as the entries' `secret_env`.
        #[arg(long)]
        secret_env: String,
        /// The tenant whose catalog the entries join.
        #[arg(long, default_value = "acme")]
        tenant: String,
        /// Put before each downstream tool's name to make its catalog name (e.g. `parcel.`), so
        /// policy patterns like `parcel.*` match them.
        #[arg(long, default_value = "")]
        prefix: String,
        /// Write the TOML to this file instead of stdout.
        #[arg(long)]
        output: Option<PathBuf>,
    },
}

pub async fn run(command: ToolsCommand) -> ExitCode {
    let ToolsCommand::Import {
        from,
        secret_env,
        tenant,
        prefix,
        output,
    } = command;
    let token = std::env::var(&secret_env).ok();
    let tools = match mcp::list_tools(&from, token.as_deref()).await {
        Ok(tools) => tools,
        Err(e) => {
            eprintln!("countersign-server tools import: {e}");
            return ExitCode::FAILURE;
        }
    };
    let spec = import::Import {
        url: &from,
        tenant: &tenant,
        prefix: &prefix,
        secret_env: &secret_env,
    };
    let (text, warnings) = import::catalog_toml(&spec, &tools);
    for warning in warnings {
        eprintln!("countersign-server tools import: {warning}");
    }
    match output {
        None => print!("{text}"),
        Some(path) => {
            if let Err(e) = std::fs::write(&path, text) {
                eprintln!("countersign-server tools import: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            eprintln!("wrote {} tools to {}", tools.len(), path.display());
        }
    }
    ExitCode::SUCCESS
}
