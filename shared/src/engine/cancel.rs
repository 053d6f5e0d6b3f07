//! Cancel and stop (SPEC §4 Cancel and stop).

use super::{commit::Committed, require, wake_of, Engine};
use crate::{
    config::{Principal, Role},
    domain::{Action, Actor, SealReason, State},
    error::Missing,
    store::Stop,
    Error,
};

impl Engine {
    /// SC-CAN-01/02: one conditional write against the worker's claim; exactly one wins. An
    /// agent cancels its own actions; another agent's is missing to it (SC-SEC-01).
    pub async fn cancel(&self, who: &Principal, action_id: &str) -> Result<Action, Error> {
        let action = self.load_for(who, action_id).await?;
        let actor = match who.role {
            Role::Agent => Actor::agent(&who.id),
            Role::Approver | Role::Admin => Actor::user(&who.id),
        };
        match action.state() {
            State::PendingApproval | State::Approved => {}
            State::Executing => return Err(Error::ActionExecuting),
            state => return Err(Error::ActionSealed { state }),
        }
        match self.seal(&action, actor, &SealReason::Cancelled).await? {
            Committed::Landed(cancelled) => {
                tracing::info!(tenant = %cancelled.tenant(), action_id = %cancelled.id(), by = %who.id, "cancelled");
                if let Some(wake) = wake_of(&action) {
                    // Best effort: a wake that still fires finds no ticket (SC-RES-01).
                    if let Err(e) = self.waker.disarm(&wake).await {
                        tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), error = %e, "could not delete the wake");
                    }
                }
                Ok(cancelled)
            }
            Committed::LostTo(current) => match current.state() {
                State::Executing => Err(Error::ActionExecuting),
                state if state.is_sealed() => Err(Error::ActionSealed { state }),
                // Changed but still cancellable (e.g. approved meanwhile): try again on the new record.
                _ => Box::pin(self.cancel(who, action_id)).await,
            },
        }
    }

    /// SC-STOP-01: a committed stop for one agent or (`None`) the whole tenant.
    pub async fn stop(&self, who: &Principal, agent_id: Option<&str>) -> Result<Stop, Error> {
        require(who, &[Role::Admin], "set stops")?;
        let stop = Stop {
            tenant: who.tenant.clone(),
            agent_id: agent_id.map(str::to_owned),
            stopped_at: self.clock.now(),
            stopped_by: who.id.clone(),
        };
        self.store.put_stop(&stop).await?;
        tracing::warn!(tenant = %stop.tenant, scope = %stop.scope(), by = %who.id, "stop committed");
        Ok(stop)
    }

    /// Lift a stop. Actions sealed while it stood stay sealed.
    pub async fn lift_stop(&self, who: &Principal, scope: &str) -> Result<(), Error> {
        require(who, &[Role::Admin], "lift stops")?;
        let missing = || Error::NotFound(Missing::Stop(scope.to_owned()));
        if scope.is_empty() || scope.len() > crate::domain::submission::MAX_ID {
            return Err(missing());
        }
        if self.store.lift_stop(&who.tenant, scope).await? {
            tracing::warn!(tenant = %who.tenant, scope, by = %who.id, "stop lifted");
            Ok(())
        } else {
            Err(missing())
        }
    }
}
