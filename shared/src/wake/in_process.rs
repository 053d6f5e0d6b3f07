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

/// How long after its due instant a stand-in timer fires ([`Waker::arm_backup`]): the
/// committing instance's own timer has claimed the ticket by then unless that instance is down
/// (or far behind), so the stand-in costs one read.
pub const BACKUP_GRACE: SignedDuration = SignedDuration::from_secs(5);

/// One timer per action (an action waits on one ticket at a time; a wake of an older ticket is
/// rejected by its correlation id anyway), so the due-index poll can ask whether one is held.
type Key = (String, String);

struct Timer {
    correlation_id: String,
    handle: AbortHandle,
}

type Timers = Arc<Mutex<HashMap<Key, Timer>>>;

pub struct InProcessWaker {
    tx: mpsc::UnboundedSender<Wake>,
    timers: Timers,
    clock: Arc<dyn Clock>,
}

fn key(wake: &Wake) -> Key {
    (wake.tenant.clone(), wake.action_id.clone())
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

    /// One timer for this wake after `delay`, replacing (and stopping) any earlier one of its
    /// action — unless `keep` and one is armed already.
    fn schedule(&self, wake: &Wake, delay: SignedDuration, keep: bool) -> Result<(), WakeError> {
        let delay = std::time::Duration::try_from(delay.max(SignedDuration::ZERO))
            .map_err(|e| WakeError(e.to_string()))?;
        let (tx, timers, wake) = (self.tx.clone(), self.timers.clone(), wake.clone());
        let key = key(&wake);
        let mut guard = self.timers.lock().expect("timers lock");
        if keep && guard.contains_key(&key) {
            return Ok(());
        }
        let correlation_id = wake.correlation_id.clone();
        let task = tokio::spawn({
            let key = key.clone();
            async move {
                tokio::time::sleep(delay).await;
                forget_own(&timers, &key, tokio::task::id());
                // A closed channel means the process is shutting down; the store keeps the ticket.
                let _ = tx.send(wake);
            }
        });
        let timer = Timer {
            correlation_id,
            handle: task.abort_handle(),
        };
        if let Some(previous) = guard.insert(key, timer) {
            previous.handle.abort();
        }
        Ok(())
    }
}

/// A fired timer removes its own handle only: a newer timer of the same action may have
/// replaced it meanwhile, and must stay cancellable.
fn forget_own(timers: &Timers, key: &Key, own: Id) {
    let mut timers = timers.lock().expect("timers lock");
    if timers.get(key).is_some_and(|t| t.handle.id() == own) {
        timers.remove(key);
    }
}

#[async_trait]
impl Waker for InProcessWaker {
    async fn arm(&self, wake: &Wake, at: Timestamp, _deadline: Timestamp) -> Result<(), WakeError> {
        self.schedule(wake, at.duration_since(self.clock.now()), false)
    }

    async fn rearm(
        &self,
        wake: &Wake,
        at: Timestamp,
        _deadline: Timestamp,
    ) -> Result<(), WakeError> {
        let delay = at.duration_since(self.clock.now()).max(REARM_FLOOR);
        self.schedule(wake, delay, false)
    }

    async fn disarm(&self, wake: &Wake) -> Result<(), WakeError> {
        let mut timers = self.timers.lock().expect("timers lock");
        let key = key(wake);
        if timers
            .get(&key)
            .is_some_and(|t| t.correlation_id == wake.correlation_id)
        {
            if let Some(timer) = timers.remove(&key) {
                timer.handle.abort();
            }
        }
        Ok(())
    }

    async fn arm_backup(
        &self,
        wake: &Wake,
        at: Timestamp,
        _deadline: Timestamp,
    ) -> Result<(), WakeError> {
        let delay = at.duration_since(self.clock.now()) + BACKUP_GRACE;
        self.schedule(wake, delay, true)
    }

    fn holds(&self, tenant: &str, action_id: &str) -> bool {
        self.timers
            .lock()
            .expect("timers lock")
            .contains_key(&(tenant.to_owned(), action_id.to_owned()))
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
        let key: Key = ("acme".into(), "act_1".into());
        timers.lock().unwrap().insert(
            key.clone(),
            Timer {
                correlation_id: "cor_1".into(),
                handle: newer.abort_handle(),
            },
        );
        forget_own(&timers, &key, old_id);
        assert_eq!(timers.lock().unwrap().len(), 1, "the newer handle stays");
        forget_own(&timers, &key, newer.id());
        assert!(timers.lock().unwrap().is_empty());
        newer.abort();
    }
}
