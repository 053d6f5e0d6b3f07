//! The command line's shape (clap). Key and URL come from flags or the environment.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "countersign",
    version,
    about = "Submit, approve, deny, cancel and stop tool calls over the countersign HTTP API",
    after_help = crate::exit::HELP
)]
pub struct Cli {
    /// The API's base URL.
    #[arg(
        long,
        env = "COUNTERSIGN_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// Your API key (agent, approver or admin). Prefer the environment variable: flags end up
    /// in shell history and process lists.
    #[arg(long, env = "COUNTERSIGN_KEY", hide_env_values = true, global = true)]
    pub key: Option<String>,
    /// Print the API's JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Submit one tool call (agent key).
    Submit {
        /// The tool's name, e.g. mail.send.
        #[arg(long)]
        tool: String,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Earliest start, RFC 3339 (with --not-after).
        #[arg(long, requires = "not_after")]
        not_before: Option<String>,
        /// Latest start, RFC 3339 (with --not-before).
        #[arg(long, requires = "not_before")]
        not_after: Option<String>,
        /// A declared action kind.
        #[arg(long)]
        kind: Option<String>,
        /// Resubmitting with the same key answers the original action.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// List actions, newest first.
    List {
        /// Only actions waiting for a countersignature: all of them (every page, unless --cursor).
        #[arg(long, conflicts_with = "state")]
        pending: bool,
        /// Only actions in this state.
        #[arg(long)]
        state: Option<String>,
        /// Only this agent's actions.
        #[arg(long)]
        agent: Option<String>,
        /// At most this many (1–100).
        #[arg(long)]
        limit: Option<u32>,
        /// Continue after an earlier page (its next_cursor).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Show one action with its approval context.
    Show { id: String },
    /// Countersign an action: shows its context, asks to confirm, then approves exactly what
    /// it showed (approver key).
    Approve {
        id: String,
        /// Approve only if the context still has this digest (e.g. from a notification).
        #[arg(long)]
        digest: Option<String>,
        /// Do not ask; approve what is shown.
        #[arg(long, short)]
        yes: bool,
    },
    /// Refuse an action, with a reason for the audit trail (approver key).
    Deny {
        id: String,
        #[arg(long)]
        reason: String,
    },
    /// Cancel an action before it runs.
    Cancel { id: String },
    /// Stop an agent, or the whole tenant, from running anything (admin key).
    Stop {
        /// The agent to stop.
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        agent: Option<String>,
        /// Stop every agent of the tenant.
        #[arg(long)]
        all: bool,
    },
    /// Lift a stop (admin key). Actions sealed while it stood stay sealed.
    ResumeAgent {
        /// The agent whose stop to lift.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        agent: Option<String>,
        /// Lift the tenant-wide stop.
        #[arg(long)]
        all: bool,
    },
    /// An action's audit trail (a hash chain).
    Events { id: String },
    /// Download a sealed action's signed deed, byte for byte (to stdout or --out).
    Deed {
        id: String,
        /// Write the deed to this file.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Verify a deed offline with the tenant's Ed25519 public key (PEM). No URL or API key.
    Verify {
        /// The tenant's public key, PEM.
        #[arg(long = "public-key")]
        public_key: std::path::PathBuf,
        /// The deed file exactly as `countersign deed` saved it.
        deed: std::path::PathBuf,
    },
    /// The SHA-256 to put in the config for a key (reads the key from stdin when not given).
    KeyHash {
        #[arg(value_name = "KEY")]
        secret: Option<String>,
    },
}
