//! Cancel and stop (SPEC §4 Cancel and stop): load, ask the rule (`domain::countersign`),
//! commit, and after a lost race ask again with the record that won.

use super::{
    commit::Committed,
    handle::{require, wake_of, Engine},
};
use crate::{
    config::{Principal, Role},
    domain::{actor::Channel, countersign, Action, Actor},
    error::Missing,
    store::Stop,
    Error,
};

impl Engine {
    /// SC-CAN-01/02/03: one conditional write against the worker's claim; exactly one wins,
    /// and a cancel that lost to a write that left the action cancellable (approved meanwhile)
    /// is asked again on the record that won. An agent cancels its own actions; another
    /// agent's is missing to it (SC-SEC-01).
    pub async fn cancel(&self, who: &Principal, action_id: &str) -> Result<Action, Error> {
        self.cancel_through(who, action_id, None).await
    }

    /// The same cancel, its audit event naming the `channel` it came through (SC-CH-08).
    pub async fn cancel_through(
        &self,
        who: &Principal,
        action_id: &str,
        channel: Option<Channel>,
    ) -> Result<Action, Error> {
        let mut action = self.load_for(who, action_id).await?;
        // A token names the person who cancels, an agent's or an approver's (SC-ID-07).
        let actor = match who.role {
            Role::Agent => Actor::agent(&who.id),
            Role::Approver | Role::Admin => Actor::user(&who.id),
        };
        let actor = Actor {
            person: who.person.clone(),
            channel,
            ..actor
        };
        loop {
            let reason = countersign::cancel(&action)?;
            match self.seal(&action, actor.clone(), &reason).await? {
                Committed::Landed(cancelled) => {
                    tracing::info!(tenant = %cancelled.tenant(), action_id = %cancelled.id(), by = %who.id, "cancelled");
                    self.disarm(&action).await;
                    return Ok(cancelled);
                }
                Committed::LostTo(current) => action = current,
            }
        }
    }

    /// Delete the wake of a cancelled ticket. Best effort: a wake that still fires finds no
    /// ticket (SC-RES-01).
    async fn disarm(&self, action: &Action) {
        let Some(wake) = wake_of(action) else {
            return;
        };
        if let Err(e) = self.waker.disarm(&wake).await {
            tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), error = %e, "could not delete the wake");
        }
    }

    /// SC-STOP-01: a committed stop for one agent or (`None`) the whole tenant.
    pub async fn stop(&self, who: &Principal, agent_id: Option<&str>) -> Result<Stop, Error> {
        self.stop_through(who, agent_id, None).await
    }

    /// The same stop, recording the `channel` it came through (SC-CH-08).
    pub async fn stop_through(
        &self,
        who: &Principal,
        agent_id: Option<&str>,
        channel: Option<Channel>,
    ) -> Result<Stop, Error> {
        require(who, &[Role::Admin], "set stops")?;
        let stop = Stop {
            tenant: who.tenant.clone(),
            agent_id: agent_id.map(str::to_owned),
            stopped_at: self.clock.now(),
            stopped_by: who.id.clone(),
            channel,
        };
        self.store.put_stop(&stop).await?;
        tracing::warn!(tenant = %stop.tenant, scope = %stop.scope(), by = %who.id, "stop committed");
        Ok(stop)
    }

    /// Lift a stop. Actions sealed while it stood stay sealed.
    pub async fn lift_stop(&self, who: &Principal, scope: &str) -> Result<(), Error> {
        require(who, &[Role::Admin], "lift stops")?;
        let missing = || Error::NotFound(Missing::Stop(scope.to_owned()));
        if !countersign::names_a_stop(scope) {
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
