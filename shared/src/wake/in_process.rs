//! In-process wake adapter: one tokio timer per armed ticket, delivering into a channel that
//! [`deliver`] drains into the engine. Timers die with the process; on start the engine
//! rediscovers every waiting ticket from the store (`Engine::rediscover`).

use super::{WakeError, Waker};
use crate::{domain::resume::Wake, Clock, Engine};
use async_trait::async_trait;
use jiff::Timestamp;
use std::{collections::HashMap, sync::Arc, sync::Mutex};
use tokio::{sync::mpsc, task::AbortHandle};

pub struct InProcessWaker {
    tx: mpsc::UnboundedSender<Wake>,
    timers: Arc<Mutex<HashMap<String, AbortHandle>>>,
    clock: Arc<dyn Clock>,
}

impl InProcessWaker {
    pub fn new(clock: Arc<dyn Clock>) -> (Self, mpsc::UnboundedReceiver<Wake>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            InProcessWaker {
                tx,
                timers: Arc::default(),
                clock,
            },
            rx,
        )
    }

    /// How many timers are armed (for logs and tests).
    pub fn armed(&self) -> usize {
        self.timers.lock().expect("timers lock").len()
    }
}

#[async_trait]
impl Waker for InProcessWaker {
    async fn arm(&self, wake: &Wake, at: Timestamp, _deadline: Timestamp) -> Result<(), WakeError> {
        let delay = at
            .duration_since(self.clock.now())
            .max(jiff::SignedDuration::ZERO);
        let delay = std::time::Duration::try_from(delay).map_err(|e| WakeError(e.to_string()))?;
        let (tx, timers, wake) = (self.tx.clone(), self.timers.clone(), wake.clone());
        let key = wake.correlation_id.clone();
        let mut guard = self.timers.lock().expect("timers lock");
        let task = tokio::spawn({
            let key = key.clone();
            async move {
                tokio::time::sleep(delay).await;
                timers.lock().expect("timers lock").remove(&key);
                // A closed channel means the process is shutting down; the store keeps the ticket.
                let _ = tx.send(wake);
            }
        });
        if let Some(previous) = guard.insert(key, task.abort_handle()) {
            previous.abort();
        }
        Ok(())
    }

    async fn disarm(&self, wake: &Wake) -> Result<(), WakeError> {
        if let Some(timer) = self
            .timers
            .lock()
            .expect("timers lock")
            .remove(&wake.correlation_id)
        {
            timer.abort();
        }
        Ok(())
    }
}

/// Hand each delivered wake to the engine, concurrently, until the channel closes.
pub async fn deliver(engine: Arc<Engine>, mut rx: mpsc::UnboundedReceiver<Wake>) {
    while let Some(wake) = rx.recv().await {
        let engine = engine.clone();
        tokio::spawn(async move {
            if let Err(e) = engine.resume(&wake).await {
                tracing::error!(tenant = %wake.tenant, action_id = %wake.action_id, error = %e, "wake failed; the sweep will retry");
            }
        });
    }
}
