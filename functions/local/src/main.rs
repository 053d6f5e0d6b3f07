//! countersign in one process: the HTTP API, an SQLite store and the in-process waker.

use clap::Parser;
use countersign::{
    config::Config,
    store::sqlite::SqliteStore,
    tools::Executors,
    wake::in_process::{deliver, InProcessWaker},
    Clock, Engine, SystemClock,
};
use std::{net::SocketAddr, path::PathBuf, sync::Arc};

#[derive(Parser, Debug)]
#[command(name = "countersign-local", version, about = "Run countersign on one machine")]
struct Args {
    /// Address to serve the API on.
    #[arg(long, env = "COUNTERSIGN_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The configuration document (tenants, keys, policy, tools).
    #[arg(long, env = "COUNTERSIGN_CONFIG_FILE", default_value = "config/local.toml")]
    config: PathBuf,
    /// The SQLite database file (created if missing).
    #[arg(long, env = "COUNTERSIGN_DB", default_value = "countersign.db")]
    db: PathBuf,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "COUNTERSIGN_LOG_JSON")]
    log_json: bool,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    init_logs(args.log_json);
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("countersign-local: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = Arc::new(Config::from_file(&args.config)?);
    let store = Arc::new(SqliteStore::open(&args.db)?);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let (waker, wakes) = InProcessWaker::new(clock.clone());
    let engine = Arc::new(Engine::new(config.clone(), store, Arc::new(waker), Arc::new(Executors::new()), clock));

    tokio::spawn(deliver(engine.clone(), wakes));
    engine.rediscover().await?;
    let sweep_every = std::time::Duration::try_from(config.limits.sweep_interval)?;
    tokio::spawn({
        let engine = engine.clone();
        async move {
            let mut tick = tokio::time::interval(sweep_every);
            loop {
                tick.tick().await;
                if let Err(e) = engine.sweep().await {
                    tracing::error!(error = %e, "sweep failed; next tick retries");
                }
            }
        }
    });

    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(listen = %listener.local_addr()?, db = %args.db.display(), config = %args.config.display(),
        tenants = config.tenants.len(), "countersign is serving");
    axum::serve(listener, countersign::api::router(engine))
        .with_graceful_shutdown(shutdown())
        .await?;
    tracing::info!("stopped; committed tickets stay in the store and are rediscovered on start");
    Ok(())
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
