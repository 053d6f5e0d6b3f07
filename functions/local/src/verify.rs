//! `countersign-server verify`: the store-wide invariant check, printed.

use countersign::{
    boot::embedded::Database,
    config::Config,
    operate::invariants,
    store::{postgres::PostgresStore, sqlite::SqliteStore, Store},
    Clock, SystemClock,
};
use std::{path::PathBuf, process::ExitCode, sync::Arc};

/// The store flags again after `verify` (`verify --db X`), so its help lists them; each one
/// given here wins over the same flag before the subcommand (or its variable and default).
#[derive(clap::Args, Debug)]
pub struct StoreFlags {
    /// The configuration document whose tenants are checked [default: the server's `--config`].
    #[arg(long = "config", value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// The SQLite database file [default: the server's `--db`, countersign.db].
    #[arg(long = "db", value_name = "DB")]
    db: Option<PathBuf>,
    /// A Postgres database instead of the SQLite file (as the server's `--database-url`).
    #[arg(long = "database-url", value_name = "URL", hide_env_values = true)]
    database_url: Option<String>,
}

impl StoreFlags {
    /// The server's flags with these on top.
    pub fn over(self, mut args: super::Args) -> super::Args {
        args.config = self.config.unwrap_or(args.config);
        args.db = self.db.unwrap_or(args.db);
        args.database_url = self.database_url.or(args.database_url);
        args
    }
}

pub async fn run(
    args: &super::Args,
    table: Option<String>,
    json: bool,
    at: Option<jiff::Timestamp>,
) -> ExitCode {
    match check(args, table, at.unwrap_or_else(|| SystemClock.now())).await {
        Ok(report) => {
            print(&report, json);
            if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("countersign-server verify: {e}");
            ExitCode::from(2)
        }
    }
}

async fn check(
    args: &super::Args,
    table: Option<String>,
    at: jiff::Timestamp,
) -> Result<invariants::Report, Box<dyn std::error::Error + Send + Sync>> {
    let config = Config::from_file(&args.config)?;
    let tenants: Vec<String> = config.tenants.keys().cloned().collect();
    let store = open(args, table).await?;
    Ok(invariants::check(&*store, &tenants, at).await?)
}

/// The store as it is: `verify` creates and migrates nothing, so a path, URL or table with no
/// countersign store is an error (exit 2), never an empty store that passes.
async fn open(
    args: &super::Args,
    table: Option<String>,
) -> Result<Arc<dyn Store>, Box<dyn std::error::Error + Send + Sync>> {
    match (table, args.database()) {
        (None, Database::Postgres { url, options }) => Ok(Arc::new(
            PostgresStore::connect_existing(&url, &options).await?,
        )),
        (None, Database::Sqlite(path)) => Ok(Arc::new(SqliteStore::open_existing(&path)?)),
        #[cfg(feature = "aws")]
        (Some(table), _) => {
            let sdk = countersign::boot::aws::sdk_config().await;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            Ok(Arc::new(
                countersign::store::dynamodb::DynamoStore::existing(client, table).await?,
            ))
        }
        #[cfg(not(feature = "aws"))]
        (Some(_), _) => Err("--table needs a build with `--features aws`".into()),
    }
}

fn print(report: &invariants::Report, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).expect("a report serializes")
        );
        return;
    }
    let states: Vec<String> = report
        .states
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    println!(
        "tenants {}, actions {} ({}), events {}, quarantined {}, violations {}",
        report.tenants,
        report.actions,
        states.join(", "),
        report.events,
        report.quarantined,
        report.violations.len()
    );
    for v in &report.violations {
        println!(
            "violation: {}/{} {:?}: {}",
            v.tenant, v.action_id, v.rule, v.detail
        );
    }
}
