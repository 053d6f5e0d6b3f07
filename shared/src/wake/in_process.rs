//! In-process wake adapter: one tokio timer per armed ticket, delivering into a channel whose
//! receiver the embedded server drains into the engine (`embedded.rs`; this adapter knows
//! nothing of the engine). Timers die with the process; on start the engine rediscovers every
//! waiting ticket from the store (`Engine::rediscover`).

use super::{WakeError, Waker};
use crate::{domain::resume::Wake, Clock};
use async_trait::async_trait;
use jiff::{SignedDuration, Timestamp};
use std::{collections::HashMap, sync::Arc, sync::Mutex};
use tokio::{
    sync::mpsc,
    task::{AbortHandle, Id},
};

/// The shortest delay of a re-arm after an early wake (SC-EDGE-09). An early wake means this
/// waker's clock and the worker's disagree; a re-arm computed by this clock alone could fire at
/// once, again and again, until the clocks agree. The floor makes every re-arm a future wake.
const REARM_FLOOR: SignedDuration = SignedDuration::from_secs(1);

type Timers = Arc<Mutex<HashMap<String, AbortHandle>>>;

pub struct InProcessWaker {
    tx: mpsc::UnboundedSender<Wake>,
    timers: Timers,
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

    /// One timer for this wake after `delay`, replacing (and stopping) any earlier one.
    fn schedule(&self, wake: &Wake, delay: SignedDuration) -> Result<(), WakeError> {
        let delay = std::time::Duration::try_from(delay.max(SignedDuration::ZERO))
            .map_err(|e| WakeError(e.to_string()))?;
        let (tx, timers, wake) = (self.tx.clone(), self.timers.clone(), wake.clone());
        let key = wake.correlation_id.clone();
        let mut guard = self.timers.lock().expect("timers lock");
        let task = tokio::spawn({
            let key = key.clone();
            async move {
                tokio::time::sleep(delay).await;
                forget_own(&timers, &key, tokio::task::id());
                // A closed channel means the process is shutting down; the store keeps the ticket.
                let _ = tx.send(wake);
            }
        });
        if let Some(previous) = guard.insert(key, task.abort_handle()) {
            previous.abort();
        }
        Ok(())
    }
}

/// A fired timer removes its own handle only: a newer timer of the same wake may have replaced
/// it meanwhile, and must stay cancellable.
fn forget_own(timers: &Timers, key: &str, own: Id) {
    let mut timers = timers.lock().expect("timers lock");
    if timers.get(key).is_some_and(|h| h.id() == own) {
        timers.remove(key);
    }
}

#[async_trait]
impl Waker for InProcessWaker {
    async fn arm(&self, wake: &Wake, at: Timestamp, _deadline: Timestamp) -> Result<(), WakeError> {
        self.schedule(wake, at.duration_since(self.clock.now()))
    }

    async fn rearm(
        &self,
        wake: &Wake,
        at: Timestamp,
        _deadline: Timestamp,
    ) -> Result<(), WakeError> {
        self.schedule(wake, at.duration_since(self.clock.now()).max(REARM_FLOOR))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fired timer whose handle was replaced by a newer one leaves the newer one in place.
    #[tokio::test]
    async fn a_finished_timer_keeps_a_newer_timers_handle() {
        let timers: Timers = Arc::default();
        let old = tokio::spawn(async {});
        let old_id = old.id();
        let newer = tokio::spawn(std::future::pending::<()>());
        timers
            .lock()
            .unwrap()
            .insert("cor_1".into(), newer.abort_handle());
        forget_own(&timers, "cor_1", old_id);
        assert_eq!(timers.lock().unwrap().len(), 1, "the newer handle stays");
        forget_own(&timers, "cor_1", newer.id());
        assert!(timers.lock().unwrap().is_empty());
        newer.abort();
    }
}
