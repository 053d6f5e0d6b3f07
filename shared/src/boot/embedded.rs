//! The self-hosted deployment: the engine with an SQLite or a Postgres store, the in-process
//! waker, the sweep loop and the HTTP API in one process. `functions/local` is a thin binary
//! over this; tests start it the same way.

use crate::{
    boot::live::Live,
    config::Config,
    domain::resume::Wake,
    notify::{self, Notifier},
    store::{
        postgres::{self, PostgresStore},
        sqlite::SqliteStore,
        Store,
    },
    tools::{Executors, ToolRunner},
    wake::in_process::InProcessWaker,
    Clock, Engine, SystemClock,
};
use axum::serve::Listener;
use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};
use tokio::{
    sync::{mpsc, watch},
    task::JoinHandle,
};

mod reload;
use reload::{watch_config, ConfigFile};
mod tls;

pub use reload::{load_config, read_config, CONFIG_POLL};

/// The store a server keeps its records in.
#[derive(Debug, Clone)]
pub enum Database {
    /// An SQLite file (created if missing): one process.
    Sqlite(PathBuf),
    /// A Postgres database (its schema migrated at start), which several servers may share.
    Postgres {
        url: String,
        options: postgres::Options,
    },
}

impl Database {
    pub async fn open(&self) -> Result<Arc<dyn Store>, crate::store::StoreError> {
        Ok(self.open_shared().await?.0)
    }

    /// The store, and when other instances may share it, the store itself to follow them.
    async fn open_shared(
        &self,
    ) -> Result<(Arc<dyn Store>, Option<PostgresStore>), crate::store::StoreError> {
        Ok(match self {
            Database::Sqlite(path) => (Arc::new(SqliteStore::open(path)?), None),
            Database::Postgres { url, options } => {
                let store = PostgresStore::connect(url, options).await?;
                (Arc::new(store.clone()), Some(store))
            }
        })
    }
}

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
    /// The engine it started with. After a reload, [`Server::live`] holds the current one.
    pub engine: Arc<Engine>,
    live: Arc<Live>,
    stop: watch::Sender<bool>,
    serving: JoinHandle<std::io::Result<()>>,
    background: Vec<JoinHandle<()>>,
    /// The SQLite file's lock, held while the server lives ([`hold_sqlite`]).
    _held: Option<std::fs::File>,
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
        Self::start_on(config, &Database::Sqlite(db.to_owned()), listen, parts).await
    }

    /// As [`Server::start_with`], on any [`Database`].
    pub async fn start_on(
        config: Arc<Config>,
        database: &Database,
        listen: SocketAddr,
        parts: Parts,
    ) -> Result<Server, Box<dyn std::error::Error + Send + Sync>> {
        let held = match database {
            Database::Sqlite(path) => Some(hold_sqlite(path)?),
            Database::Postgres { .. } => None,
        };
        let (opened, shared) = database.open_shared().await?;
        let store = (parts.wrap_store)(opened);
        let (waker, wakes) = InProcessWaker::new(parts.waker_clock);
        let engine = Arc::new(Engine::new(
            config.clone(),
            store.clone(),
            Arc::new(waker),
            parts.tools,
            parts.clock.clone(),
        ));
        let live = Live::new(engine.clone());
        let (stop, stopped) = watch::channel(false);

        let mut background = vec![tokio::spawn(deliver(live.clone(), wakes))];
        engine.rediscover().await?;
        // Fixed at start: a reload does not move the sweep's timer.
        let every = std::time::Duration::try_from(config.limits.sweep_interval)?;
        background.push(tokio::spawn(sweep_loop(
            live.clone(),
            every,
            shared.clone(),
        )));
        if let Some(shared) = shared {
            let clock = parts.clock.clone();
            background.push(tokio::spawn(follow(live.clone(), shared, clock, every)));
        }

        // "Address already in use" alone does not say which address.
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let page = format!("{scheme}://{addr}/ui/");
        let notifier = notifier_of(live.clone(), store, parts.clock, page);
        background.push(tokio::spawn(notify::run(notifier, NOTIFY_EVERY)));
        let app = live.serve(crate::api::all_routes);
        let serving = match &config.tls {
            None => serve(listener, app, stopped),
            Some(files) => {
                let (listener, tasks) = tls::listen(listener, files)?;
                background.extend(tasks);
                serve(listener, app, stopped)
            }
        };
        tracing::info!(%addr, scheme, tenants = config.tenants.len(), "countersign is serving");
        Ok(Server {
            addr,
            engine,
            live,
            stop,
            serving,
            background,
            _held: held,
        })
    }

    /// The configuration being served, swapped whole by a reload.
    pub fn live(&self) -> &Arc<Live> {
        &self.live
    }

    /// Reload the configuration from `path` on SIGHUP and whenever the file's content changes
    /// (looked at `every`: [`CONFIG_POLL`] in `countersign-server`), SC-OPS-03. `booted` is the
    /// text the server started with. A document that does not load keeps the current one
    /// (logged, and counted as `config_reloads{outcome="rejected"}`).
    pub fn reload_from(&mut self, path: PathBuf, booted: &str, every: std::time::Duration) {
        let file = ConfigFile::new(path, booted);
        let task = tokio::spawn(watch_config(self.live.clone(), file, every));
        self.background.push(task);
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

/// Serve the API on `listener` (plain TCP, or TLS) until `stopped` says stop.
fn serve<L: Listener<Addr = SocketAddr>>(
    listener: L,
    app: axum::Router,
    mut stopped: watch::Receiver<bool>,
) -> JoinHandle<std::io::Result<()>> {
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
    })
}

/// Lock the SQLite file for this server alone: SQLite lets two processes share a file, but two
/// servers on one would each run their own timers and sweep over the other's claims, and each
/// would recover the other's live leases as lapsed. An advisory lock on the file itself (not a
/// lock file left behind), released by the OS when the process ends however it ends.
fn hold_sqlite(path: &Path) -> Result<std::fs::File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("cannot open the database {}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "the database {} is in use by another countersign server; stop it first, or give \
             this one a database of its own (--db), or share one Postgres (--database-url)",
            path.display()
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(format!("cannot lock the database {}: {e}", path.display()))
        }
    }
}

/// How often the embedded worker looks for notifications to deliver (an indexed read).
const NOTIFY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The notifier of the configuration now, built again when a reload changed it (endpoints and
/// retry rule are the configuration's).
fn notifier_of(
    live: Arc<Live>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    page: String,
) -> impl FnMut() -> Arc<Notifier> {
    let mut built: Option<(Arc<Config>, Arc<Notifier>)> = None;
    move || {
        let config = live.engine().config().clone();
        match &built {
            Some((of, notifier)) if Arc::ptr_eq(of, &config) => notifier.clone(),
            _ => {
                let notifier = Arc::new(Notifier::new(
                    config.clone(),
                    store.clone(),
                    clock.clone(),
                    &page,
                ));
                built = Some((config, notifier.clone()));
                notifier
            }
        }
    }
}

/// Hand each delivered wake to the engine, concurrently, until the channel closes. Wakes due
/// together are taken together: one receive per burst, not one turn of the scheduler per wake.
async fn deliver(live: Arc<Live>, mut rx: mpsc::UnboundedReceiver<Wake>) {
    let mut wakes = Vec::with_capacity(DELIVER_AT_ONCE);
    while rx.recv_many(&mut wakes, DELIVER_AT_ONCE).await > 0 {
        for wake in wakes.drain(..) {
            let engine = live.engine();
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

/// Every instance sweeps each tick; on a shared store they take turns ([`sweep_turn`]).
async fn sweep_loop(live: Arc<Live>, every: std::time::Duration, shared: Option<PostgresStore>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let engine = live.engine();
        let swept = match &shared {
            None => engine.sweep().await.map(drop),
            Some(store) => sweep_turn(&engine, store, every).await.map(drop),
        };
        if let Err(e) = swept {
            tracing::error!(error = %e, "sweep failed; the next tick retries");
        }
    }
}

/// One sweep pass of an instance sharing `store`, if it is this instance's turn: one pass per
/// `every` among all of them, so they do not repeat each other's work; a pass that outlasts
/// `every` (slow tools) holds nothing, and the next instance's tick takes the next turn.
/// `None`: another instance's turn.
pub async fn sweep_turn(
    engine: &Engine,
    store: &PostgresStore,
    every: std::time::Duration,
) -> Result<Option<crate::engine::SweepReport>, crate::Error> {
    if !store.take_turn(engine.worker_id(), every).await? {
        return Ok(None);
    }
    engine.sweep().await.map(Some)
}

/// How far ahead the due-index poll of a shared store arms tickets, and how often it runs.
const FOLLOW_AHEAD: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Learn of the tickets other instances commit: arm each one announced, and poll the due index
/// for the ones due soon (what an announcement missed: this instance was starting, or its
/// listening session was down). Each timer leads to a claim, which only one instance wins.
async fn follow(
    live: Arc<Live>,
    store: PostgresStore,
    clock: Arc<dyn Clock>,
    sweep_every: std::time::Duration,
) {
    let every = FOLLOW_EVERY.min(sweep_every);
    loop {
        let mut listener = match store.listen().await {
            Ok(listener) => Some(listener),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for tickets; polling only");
                None
            }
        };
        let mut poll = tokio::time::interval(every);
        loop {
            tokio::select! {
                _ = poll.tick() => {
                    let engine = live.engine();
                    let until = clock.now().saturating_add(FOLLOW_AHEAD).unwrap_or(jiff::Timestamp::MAX);
                    if let Err(e) = engine.rediscover_until(until).await {
                        tracing::warn!(error = %e, "the due-index poll failed; the next one retries");
                    }
                }
                ticket = next_ticket(&mut listener) => match ticket {
                    Some((tenant, id)) => {
                        if let Err(e) = live.engine().arm_committed(&tenant, &id).await {
                            tracing::warn!(%tenant, action_id = %id, error = %e, "arming an announced ticket failed; the poll retries");
                        }
                    }
                    // The session ended: listen again.
                    None => break,
                },
            }
        }
    }
}

async fn next_ticket(listener: &mut Option<postgres::Listener>) -> Option<(String, String)> {
    match listener {
        Some(l) => l.next().await,
        // Not listening: wait for the poll (and try to listen again after a while).
        None => {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            None
        }
    }
}
