//! The embedded deployment: the engine with an SQLite store, the in-process waker, the sweep
//! loop and the HTTP API in one process. `functions/local` is a thin binary over this; tests
//! start it the same way.

use crate::{
    config::Config,
    store::sqlite::SqliteStore,
    tools::{Executors, ToolRunner},
    wake::in_process::{deliver, InProcessWaker},
    Clock, Engine, SystemClock,
};
use std::{net::SocketAddr, path::Path, sync::Arc};
use tokio::{sync::watch, task::JoinHandle};

/// A running embedded server.
pub struct Server {
    pub addr: SocketAddr,
    pub engine: Arc<Engine>,
    stop: watch::Sender<bool>,
    serving: JoinHandle<std::io::Result<()>>,
    background: Vec<JoinHandle<()>>,
}

impl Server {
    /// Open the store, rediscover waiting tickets, start the sweep and serve on `listen`.
    pub async fn start(
        config: Arc<Config>,
        db: &Path,
        listen: SocketAddr,
    ) -> Result<Server, Box<dyn std::error::Error + Send + Sync>> {
        Self::start_with(config, db, listen, Arc::new(Executors::new())).await
    }

    /// As [`Server::start`], with another tool runner (tests gate or count tool runs).
    pub async fn start_with(
        config: Arc<Config>,
        db: &Path,
        listen: SocketAddr,
        tools: Arc<dyn ToolRunner>,
    ) -> Result<Server, Box<dyn std::error::Error + Send + Sync>> {
        let store = Arc::new(SqliteStore::open(db)?);
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let (waker, wakes) = InProcessWaker::new(clock.clone());
        let engine = Arc::new(Engine::new(
            config.clone(),
            store,
            Arc::new(waker),
            tools,
            clock,
        ));
        let (stop, stopped) = watch::channel(false);

        let mut background = vec![tokio::spawn(deliver(engine.clone(), wakes))];
        engine.rediscover().await?;
        let every = std::time::Duration::try_from(config.limits.sweep_interval)?;
        background.push(tokio::spawn(sweep_loop(engine.clone(), every)));

        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let app = crate::api::router(engine.clone());
        let serving = tokio::spawn(async move {
            let mut stopped = stopped;
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        });
        tracing::info!(%addr, tenants = config.tenants.len(), "countersign is serving");
        Ok(Server {
            addr,
            engine,
            stop,
            serving,
            background,
        })
    }

    /// Stop serving (in-flight requests finish), then stop timers and the sweep. Committed
    /// tickets stay in the store and are rediscovered by the next start.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        let served = self.serving.await.unwrap_or(Ok(()));
        for task in self.background {
            task.abort();
        }
        served
    }

    /// Serve until `signal` resolves, then shut down.
    pub async fn run_until(
        self,
        signal: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        signal.await;
        tracing::info!("shutting down");
        self.shutdown().await
    }
}

async fn sweep_loop(engine: Arc<Engine>, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = engine.sweep().await {
            tracing::error!(error = %e, "sweep failed; the next tick retries");
        }
    }
}
