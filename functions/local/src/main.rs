//! countersign self-hosted: the HTTP API, an SQLite or Postgres store and the in-process waker.

mod tools_import;
mod verify;

use clap::{Parser, Subcommand};
use countersign::{
    boot::embedded::{self, Database, Parts, Server},
    config::Config,
    domain::deed,
    store::postgres,
};
use std::{net::SocketAddr, path::PathBuf, sync::Arc};

#[derive(Parser, Debug)]
#[command(
    name = "countersign-server",
    version,
    about = "Run countersign on one machine",
    // Every argument has its help (a debug build panics otherwise; tests run debug builds).
    help_expected = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Address to serve the API on.
    #[arg(long, env = "COUNTERSIGN_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The configuration document (tenants, keys, policy, tools). Reloaded on SIGHUP and when
    /// the file changes; one that does not load keeps the running one.
    #[arg(
        long,
        env = "COUNTERSIGN_CONFIG_FILE",
        default_value = "config/local.toml"
    )]
    config: PathBuf,
    /// The SQLite database file (created if missing).
    #[arg(long, env = "COUNTERSIGN_DB", default_value = "countersign.db")]
    db: PathBuf,
    /// Serve Prometheus metrics (`GET /metrics`, no key) on this address of its own, so the
    /// API's address can be public while scrapers reach this one on an internal network.
    /// Off unless given.
    #[arg(long, env = "COUNTERSIGN_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// A Postgres database instead of the SQLite file, which several servers may share:
    /// `postgres://user:password@host:5432/db`, with `?sslmode=require` for TLS (the server's
    /// certificate verified for its host name). Its schema is migrated at start.
    #[arg(long, env = "COUNTERSIGN_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Connections this server keeps to Postgres at most.
    #[arg(long, env = "COUNTERSIGN_DATABASE_POOL_SIZE", default_value_t = 16)]
    database_pool_size: usize,
    /// PEM certificates to trust for Postgres's TLS besides the public roots (a cloud's CA).
    #[arg(long, env = "COUNTERSIGN_DATABASE_CA_FILE")]
    database_ca_file: Option<PathBuf>,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "COUNTERSIGN_LOG_JSON")]
    log_json: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a whole store's invariants (every action of every configured tenant loads in one
    /// valid state, its audit chain verifies and ends in its state, nothing `executing` on a
    /// lapsed lease); prints counts and every violation, exits 1 when there is any. Reads the
    /// SQLite file `--db`, the Postgres database `--database-url`, or with `--table` a DynamoDB
    /// table (build with `--features aws`; region and credentials from the environment). Serves,
    /// creates and migrates nothing (no store there: exit 2); run it on a stopped server. The
    /// store flags go before or after `verify`.
    Verify {
        #[command(flatten)]
        store: verify::StoreFlags,
        /// A DynamoDB table instead of the SQLite file.
        #[arg(long)]
        table: Option<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Judge leases as of this instant (RFC 3339) instead of now, e.g. when the server
        /// stopped: a lease that lapses after its server stopped is the next start's to recover.
        #[arg(long)]
        at: Option<jiff::Timestamp>,
    },
    /// Verify a deed file offline with the tenant's public key (SC-SEC-07); serves nothing.
    VerifyDeed {
        /// The tenant's Ed25519 public key, PEM (`openssl pkey -in private.pem -pubout`).
        #[arg(long = "public-key", value_name = "PEM")]
        public_key: PathBuf,
        /// The deed file exactly as `GET /v1/actions/{id}/deed` answered it.
        deed: PathBuf,
    },
    /// Print the OpenAPI document (as served at /openapi.json; committed as docs/openapi.json).
    Openapi,
    /// The policy of `--config`, offline (SC-POL-06).
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// A downstream MCP server's tools as catalog entries (docs/mcp.md).
    #[command(subcommand)]
    Tools(tools_import::ToolsCommand),
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// Run a table of calls against the policy: one line per case, exit 1 on any mismatch
    /// (2 when the config or the cases do not load). Stores nothing, runs no tool.
    Test {
        /// The cases file (TOML: `[[case]]` with tool, args, agent_id, expect, rule).
        cases: PathBuf,
    },
}

#[tokio::main]
pub(crate) async fn main() -> std::process::ExitCode {
    let mut args = Args::parse();
    match args.command.take() {
        Some(Command::VerifyDeed { public_key, deed }) => return verify_deed(&public_key, &deed),
        Some(Command::Openapi) => {
            print!("{}", countersign::api::openapi::document());
            return std::process::ExitCode::SUCCESS;
        }
        Some(Command::Policy(PolicyCommand::Test { cases })) => {
            return policy_test(&args.config, &cases)
        }
        Some(Command::Tools(command)) => return tools_import::run(command).await,
        Some(Command::Verify {
            store,
            table,
            json,
            at,
        }) => return verify::run(&store.over(args), table, json, at).await,
        None => {}
    }
    init_logs(args.log_json);
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("countersign-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let text = embedded::read_config(&args.config)?;
    let config = Arc::new(embedded::load_config(&text)?);
    let database = args.database();
    match &database {
        // The URL may carry a password: it is never logged.
        Database::Postgres { .. } => {
            tracing::info!(config = %args.config.display(), db = "postgres", "starting")
        }
        Database::Sqlite(path) => {
            tracing::info!(config = %args.config.display(), db = %path.display(), "starting")
        }
    }
    if let Some(addr) = args.metrics_listen {
        let handle = countersign::telemetry::prometheus::install();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("cannot listen for metrics on {addr}: {e}"))?;
        tracing::info!(addr = %listener.local_addr()?, "serving metrics at /metrics");
        tokio::spawn(countersign::telemetry::prometheus::serve(listener, handle));
    }
    let mut server = Server::start_on(config, &database, args.listen, Parts::default()).await?;
    // SIGHUP or a changed file reloads it; one that does not load keeps the running one.
    server.reload_from(args.config.clone(), &text, embedded::CONFIG_POLL);
    server.run_until(shutdown_signal()).await?;
    tracing::info!("stopped; committed tickets stay in the store and are rediscovered on start");
    Ok(())
}

impl Args {
    /// The store to open: Postgres when a URL is given, else the SQLite file.
    fn database(&self) -> Database {
        match &self.database_url {
            Some(url) => Database::Postgres {
                url: url.clone(),
                options: postgres::Options {
                    pool_size: self.database_pool_size,
                    ca_file: self.database_ca_file.clone(),
                },
            },
            None => Database::Sqlite(self.db.clone()),
        }
    }
}

fn policy_test(config: &std::path::Path, cases: &std::path::Path) -> std::process::ExitCode {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    // Parsing only: no secret is read, nothing is served.
    let verdicts = read(config)
        .and_then(|text| Config::from_toml(&text).map_err(|e| e.to_string()))
        .and_then(|config| {
            let now = jiff::Timestamp::now();
            countersign::operate::policy_table::run(&config, &read(cases)?, now)
        });
    let verdicts = match verdicts {
        Ok(v) => v,
        Err(e) => {
            eprintln!("countersign-server policy test: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let failed = verdicts.iter().filter(|v| v.mismatch.is_some()).count();
    for v in &verdicts {
        match &v.mismatch {
            None => println!("ok    {}", v.name),
            Some(why) => println!("FAIL  {}: {why}", v.name),
        }
        // What the rules in shadow would have decided, beside the enforced (SC-GR-21).
        for line in &v.shadow {
            println!("      {line}");
        }
    }
    println!("{} cases, {failed} failed", verdicts.len());
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

fn verify_deed(key: &std::path::Path, file: &std::path::Path) -> std::process::ExitCode {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    // A file that is no public key is a wrong argument (exit 2), not a deed that fails (1).
    let key = match read(key).and_then(|pem| {
        deed::public_key_from_pem(&String::from_utf8_lossy(&pem))
            .map_err(|e| format!("--public-key {}: {e}", key.display()))
    }) {
        Ok(key) => key,
        Err(e) => {
            eprintln!("countersign-server verify-deed: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let verified =
        read(file).and_then(|file| deed::Deed::verify(&file, &key).map_err(|e| e.to_string()));
    match verified {
        Ok(d) => {
            let by = d
                .approved_by()
                .map(|who| format!(", approved by {who}"))
                .unwrap_or_default();
            println!(
                "ok: deed of {} (tenant {}, key {}): {}{by}, {} events, chain head {}",
                d.action_id,
                d.tenant,
                d.kid,
                d.state,
                d.events.len(),
                d.chain_head
            );
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("countersign-server: the deed does not verify: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: a log file or a collector gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
