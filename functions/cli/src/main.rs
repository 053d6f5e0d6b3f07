//! `countersign`: the command line over the HTTP API. Human tables by default, `--json` for
//! scripts, and exit codes scripts can rely on (`exit.rs`).

mod args;
mod client;
mod commands;
mod exit;
mod login;
mod session;
mod show;

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("countersign: {failure}");
            failure.exit.into()
        }
    }
}
