//! The embedded deployment: the engine with an SQLite store, the in-process waker, the sweep
//! loop and the HTTP API in one process. `functions/local` is a thin binary over this; tests
//! start it the same way.

use crate::{
    config::Config,
    domain::resume::Wake,
    notify::{self, Notifier},
    store::{sqlite::SqliteStore, Store},
    tools::{Executors, ToolRunner},
    wake::in_process::InProcessWaker,
    Clock, Engine, SystemClock,
};
use std::{net::SocketAddr, path::Path, sync::Arc};
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

/// Wraps the opened store (e.g. in a fault-injecting decorator).
pub type WrapStore = Box<dyn FnOnce(Arc<dyn Store>) -> Arc<dyn Store> + Send>;

/// What the embedded server is assembled from besides its configuration and database.
pub struct Parts {
    pub tools: Arc<dyn ToolRunner>,
    /// The engine's (the workers') clock.
    pub clock: Arc<dyn Clock>,
    /// The in-process waker's clock.
    pub waker_clock: Arc<dyn Clock>,
    pub wrap_store: WrapStore,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            tools: Arc::new(Executors::new()),
            clock: Arc::new(SystemClock),
            waker_clock: Arc::new(SystemClock),
            wrap_store: Box::new(|store| store),
        }
    }
}

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
        Self::start_with(config, db, listen, Parts::default()).await
    }

    /// As [`Server::start`], with other parts (tests and the chaos run inject faults, skew
    /// clocks or count tool runs).
    pub async fn start_with(
        config: Arc<Config>,
        db: &Path,
        listen: SocketAddr,
        parts: Parts,
    ) -> Result<Server, Box<dyn std::error::Error + Send + Sync>> {
        let store = (parts.wrap_store)(Arc::new(SqliteStore::open(db)?));
        let (waker, wakes) = InProcessWaker::new(parts.waker_clock);
        let engine = Arc::new(Engine::new(
            config.clone(),
            store.clone(),
            Arc::new(waker),
            parts.tools,
            parts.clock.clone(),
        ));
        let (stop, stopped) = watch::channel(false);

        let mut background = vec![tokio::spawn(deliver(engine.clone(), wakes))];
        engine.rediscover().await?;
        let every = std::time::Duration::try_from(config.limits.sweep_interval)?;
        background.push(tokio::spawn(sweep_loop(engine.clone(), every)));

        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let page = format!("http://{addr}/ui/");
        let notifier = Arc::new(Notifier::new(config.clone(), store, parts.clock, &page));
        background.push(tokio::spawn(notify::run(notifier, NOTIFY_EVERY)));
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

    /// Graceful shutdown (SC-EDGE-05): stop serving (requests under way finish, their inline
    /// runs included), claim nothing new, let the runs under way (wakes, sweep) finish their
    /// attempts and commit their results, then stop the timers and the sweep. Committed tickets
    /// stay in the store and are rediscovered by the next start.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.stop.send(true);
        let (served, ()) = tokio::join!(self.serving, self.engine.drain());
        for task in self.background {
            task.abort();
        }
        served.unwrap_or(Ok(()))
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

/// How often the embedded worker looks for notifications to deliver (an indexed read).
const NOTIFY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Hand each delivered wake to the engine, concurrently, until the channel closes. Wakes due
/// together are taken together: one receive per burst, not one turn of the scheduler per wake.
async fn deliver(engine: Arc<Engine>, mut rx: mpsc::UnboundedReceiver<Wake>) {
    let mut wakes = Vec::with_capacity(DELIVER_AT_ONCE);
    while rx.recv_many(&mut wakes, DELIVER_AT_ONCE).await > 0 {
        for wake in wakes.drain(..) {
            let engine = engine.clone();
            tokio::spawn(async move {
                if let Err(e) = engine.resume(&wake).await {
                    tracing::error!(tenant = %wake.tenant, action_id = %wake.action_id, error = %e, "wake failed; the sweep will retry");
                }
            });
        }
    }
}

/// Most wakes [`deliver`] takes from the channel at once.
const DELIVER_AT_ONCE: usize = 1024;

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
