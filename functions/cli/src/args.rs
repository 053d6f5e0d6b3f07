//! The command line's shape (clap). Key and URL come from flags or the environment.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "countersign",
    version,
    about = "Submit, approve, deny, cancel and stop tool calls over the countersign HTTP API",
    after_help = crate::exit::HELP,
    // clap folds every option into `[OPTIONS]`; the two a reader looks for are named, optional.
    override_usage = "countersign [--url <URL>] [--key <KEY>] [--json] <COMMAND> [ARGS]",
    // Every argument has its help (a debug build panics otherwise; tests run debug builds).
    help_expected = true
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
    /// in shell history and process lists. Without one, the token `countersign login` stored.
    #[arg(long, env = "COUNTERSIGN_KEY", hide_env_values = true, global = true)]
    pub key: Option<String>,
    /// Where `countersign login` keeps its token (mode 0600); by default
    /// `$XDG_CONFIG_HOME/countersign/token.json`, else `~/.config/countersign/token.json`.
    #[arg(long, env = "COUNTERSIGN_TOKEN_FILE", global = true)]
    pub token_file: Option<std::path::PathBuf>,
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
    Show {
        /// The action's id (act_…).
        id: String,
    },
    /// Countersign an action: shows its context, asks to confirm, then approves exactly what
    /// it showed (approver key).
    Approve {
        /// The action's id (act_…).
        id: String,
        /// Approve only if the context still has this digest (e.g. from a notification).
        #[arg(long)]
        digest: Option<String>,
        /// Do not ask; approve what is shown.
        #[arg(long, short)]
        yes: bool,
        #[command(flatten)]
        grant: GrantArgs,
    },
    /// Refuse an action, with a reason for the audit trail (approver key).
    Deny {
        /// The action's id (act_…).
        id: String,
        /// Why, for the audit trail and the agent (recorded in the deny event).
        #[arg(long)]
        reason: String,
    },
    /// Cancel an action before it runs.
    Cancel {
        /// The action's id (act_…).
        id: String,
    },
    /// Stop an agent, or the whole tenant, from running anything (admin key).
    // One of the two, so the usage line reads `<--agent <AGENT>|--all>`.
    #[command(group(clap::ArgGroup::new("scope").required(true).args(["agent", "all"])))]
    Stop {
        /// The agent to stop.
        #[arg(long)]
        agent: Option<String>,
        /// Stop every agent of the tenant.
        #[arg(long)]
        all: bool,
    },
    /// Lift a stop (admin key). Actions sealed while it stood stay sealed.
    #[command(group(clap::ArgGroup::new("scope").required(true).args(["agent", "all"])))]
    ResumeAgent {
        /// The agent whose stop to lift.
        agent: Option<String>,
        /// Lift the tenant-wide stop.
        #[arg(long)]
        all: bool,
    },
    /// The tenant's scoped grants with their uses left, newest first (approver or admin key).
    Grants,
    /// Revoke a scoped grant at once; the uses before it stand (approver or admin key).
    Revoke {
        /// The grant's id (grt_…).
        id: String,
    },
    /// An action's audit trail (a hash chain).
    Events {
        /// The action's id (act_…).
        id: String,
    },
    /// Download a sealed action's signed deed, byte for byte (to stdout or --out).
    Deed {
        /// The sealed action's id (act_…).
        id: String,
        /// Write the deed to this file.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Verify a deed offline with the tenant's Ed25519 public key (PEM). No URL or API key.
    Verify {
        /// The tenant's Ed25519 public key, PEM (`openssl pkey -in private.pem -pubout`).
        #[arg(long = "public-key", value_name = "PEM")]
        public_key: std::path::PathBuf,
        /// The deed file exactly as `countersign deed` saved it.
        deed: std::path::PathBuf,
    },
    /// Sign in with your organization's provider (OAuth device authorization, RFC 8628) and keep
    /// the token for the other commands, in your config directory (mode 0600).
    Login {
        /// The provider's issuer; needed only when the server trusts more than one.
        #[arg(long)]
        issuer: Option<String>,
        /// The CLI's client id at the provider (a public client allowed the device grant).
        #[arg(long, env = "COUNTERSIGN_CLIENT_ID", default_value = "countersign-cli")]
        client_id: String,
        /// The resource to ask a token for (RFC 8707); by default the server's own, from its
        /// protected resource metadata.
        #[arg(long)]
        resource: Option<String>,
        /// The scopes to ask for.
        #[arg(long, default_value = "openid countersign:approve")]
        scope: String,
    },
    /// Forget the token `countersign login` stored.
    Logout,
    /// The SHA-256 to put in the config for a key (reads the key from stdin when not given).
    KeyHash {
        /// The key; prefer stdin, an argument ends up in shell history.
        #[arg(value_name = "KEY")]
        secret: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own checks, `help_expected` among them: an argument without help fails here.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}

/// A scoped grant given with the approval (docs/grants.md): any of these asks for one, the
/// server's defaults for the rest (1 h, 1 call).
#[derive(clap::Args, Debug, Default)]
pub struct GrantArgs {
    /// Also let the same agent make this many further calls of the tool without asking (1–1,000).
    #[arg(long = "grant-uses", value_name = "N")]
    pub uses: Option<u32>,
    /// How long the grant lasts, e.g. 90m, 8h, 720h (at most 30 days).
    #[arg(long = "grant-ttl", value_name = "DURATION")]
    pub ttl: Option<String>,
    /// An argument later calls must repeat with this call's value (repeatable).
    #[arg(long = "grant-pin", value_name = "FIELD")]
    pub pin: Vec<String>,
    /// A policy condition later calls must meet, e.g. 'args.amount <= 100'.
    #[arg(long = "grant-when", value_name = "CONDITION")]
    pub when: Option<String>,
}

impl GrantArgs {
    /// The approve body's `grant`, or `None` when no flag asks for one.
    pub fn body(&self) -> Option<serde_json::Value> {
        if self.uses.is_none() && self.ttl.is_none() && self.pin.is_empty() && self.when.is_none() {
            return None;
        }
        let mut grant = serde_json::json!({"pin": self.pin});
        if let Some(uses) = self.uses {
            grant["uses"] = uses.into();
        }
        if let Some(ttl) = &self.ttl {
            grant["ttl"] = ttl.as_str().into();
        }
        if let Some(when) = &self.when {
            grant["when"] = when.as_str().into();
        }
        Some(grant)
    }
}
