//! SC-EDGE-08: one unreadable record never takes the rest down. A reader that meets a stored
//! action that does not load quarantines it — logged with its key, recorded for the tenant's
//! admins, taken out of lists and the sweep — and goes on with the rest. The record itself
//! stays in the store for inspection and repair.

use super::handle::{require, Engine};
use crate::{
    config::{Principal, Role},
    domain::Action,
    store::{Quarantined, StoreError, Unreadable},
    Error,
};

/// An action as a background pass (sweep, start-up) finds it.
pub(super) enum Loaded {
    Found(Box<Action>),
    Missing,
    /// It did not load and is now quarantined.
    Quarantined,
}

impl Engine {
    /// Take `bad` out of service. Best effort: if the write fails, the next read tries again.
    pub(super) async fn quarantine(&self, bad: Unreadable) {
        tracing::error!(tenant = %bad.tenant, action_id = %bad.action_id, reason = %bad.reason, "unreadable action record: quarantined");
        crate::telemetry::quarantined();
        if let Err(e) = self.store.quarantine(&bad, self.clock.now()).await {
            tracing::warn!(tenant = %bad.tenant, action_id = %bad.action_id, error = %e, "could not record the quarantine; the next read retries");
        }
    }

    /// Load an action, quarantining it if it does not load.
    pub(super) async fn load_or_quarantine(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> Result<Loaded, Error> {
        match self.store.load(tenant, action_id).await {
            Ok(Some(action)) => Ok(Loaded::Found(Box::new(action))),
            Ok(None) => Ok(Loaded::Missing),
            Err(StoreError::Malformed(reason)) => {
                self.quarantine(Unreadable {
                    tenant: tenant.to_owned(),
                    action_id: action_id.to_owned(),
                    reason,
                })
                .await;
                Ok(Loaded::Quarantined)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The tenant's quarantined actions (admins only), oldest first.
    pub async fn quarantined(&self, who: &Principal) -> Result<Vec<Quarantined>, Error> {
        require(who, &[Role::Admin], "list quarantined actions")?;
        Ok(self.store.quarantined(&who.tenant).await?)
    }
}
