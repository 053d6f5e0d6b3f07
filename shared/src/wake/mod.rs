//! The wake port. A wake is only a signal: the resume re-reads the committed ticket and decides.

pub mod in_process;
#[cfg(feature = "aws")]
pub mod scheduler;

use crate::domain::resume::Wake;
use async_trait::async_trait;
use jiff::Timestamp;

#[derive(Debug, thiserror::Error)]
#[error("wake: {0}")]
pub struct WakeError(pub String);

#[async_trait]
pub trait Waker: Send + Sync + 'static {
    /// Deliver `wake` at (or soon after) `at`. Arming the same correlation id again is
    /// idempotent. `deadline` bounds how long a delivery is still worth retrying.
    async fn arm(&self, wake: &Wake, at: Timestamp, deadline: Timestamp) -> Result<(), WakeError>;
    /// Arm again after `wake` arrived early (SC-EDGE-09): the signal that delivered it has fired,
    /// so one of the same name is not "already armed", and the new one must lie in the future
    /// even when this process's clock disagrees with the signal's.
    async fn rearm(
        &self,
        wake: &Wake,
        at: Timestamp,
        deadline: Timestamp,
    ) -> Result<(), WakeError> {
        self.arm(wake, at, deadline).await
    }
    /// Best effort: a wake that still arrives is rejected by the resume checks.
    async fn disarm(&self, wake: &Wake) -> Result<(), WakeError>;
    /// Arm a stand-in for a ticket another process committed and armed itself (instances
    /// sharing a store): unless this waker holds a timer for it already, deliver `wake` a
    /// grace after `at`, so the committing process's own wake claims it and this one costs a
    /// read — or, if that process died, runs it. Adapters with one wake per ticket arm it.
    async fn arm_backup(
        &self,
        wake: &Wake,
        at: Timestamp,
        deadline: Timestamp,
    ) -> Result<(), WakeError> {
        self.arm(wake, at, deadline).await
    }
    /// Whether this waker holds a timer for the action (adapters that keep none: false).
    fn holds(&self, _tenant: &str, _action_id: &str) -> bool {
        false
    }
}
