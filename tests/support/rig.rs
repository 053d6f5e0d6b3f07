//! One engine over one store, as the scenario tests drive it: a fresh store on a [`Backend`],
//! tools over real HTTP, a manual clock, a recording wake port. A test file that needs more (a
//! fault-injecting store, its own helpers) wraps it.

use crate::{stores::Backend, RecordingWaker, ToolServer};
use countersign::{
    clock::ManualClock,
    config::{Config, Principal},
    store::Store,
    tools::{Executors, ToolRunner},
    Clock, Engine,
};
use jiff::{SignedDuration, Timestamp};
use std::sync::Arc;

pub struct Rig {
    pub engine: Arc<Engine>,
    /// The store the engine holds.
    pub store: Arc<dyn Store>,
    pub waker: Arc<RecordingWaker>,
    pub clock: Arc<ManualClock>,
    pub tools: ToolServer,
    pub config: Arc<Config>,
}

impl Rig {
    /// A fresh store on `backend` (`label` names it), a tool server, and the configuration
    /// `config` writes around the tool server's address.
    pub async fn start(
        backend: Backend,
        label: &str,
        config: impl FnOnce(&ToolServer) -> String,
    ) -> Rig {
        let tools = ToolServer::start().await;
        let config = Arc::new(Config::from_toml(&config(&tools)).unwrap());
        let store = crate::stores::store(backend, label).await;
        Rig::on(tools, config, store, Arc::new(Executors::new()))
    }

    /// An engine over `store` with `runner` as its tool port, its clock set to now.
    pub fn on(
        tools: ToolServer,
        config: Arc<Config>,
        store: Arc<dyn Store>,
        runner: Arc<dyn ToolRunner>,
    ) -> Rig {
        let waker = Arc::new(RecordingWaker::default());
        let clock = Arc::new(ManualClock::new(Timestamp::now()));
        let engine = Arc::new(Engine::new(
            config.clone(),
            store.clone(),
            waker.clone(),
            runner,
            clock.clone(),
        ));
        Rig {
            engine,
            store,
            waker,
            clock,
            tools,
            config,
        }
    }

    /// The principal of a configured key.
    pub fn who(&self, key: &str) -> Principal {
        self.config.principal(key).cloned().unwrap()
    }

    /// `secs` from the rig's clock.
    pub fn at(&self, secs: i64) -> Timestamp {
        self.clock.now() + SignedDuration::from_secs(secs)
    }
}
