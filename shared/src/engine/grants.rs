//! Scoped grants (SC-GR-…): intake uses one for a call that would wait for a person, an
//! approval may grant one, approvers and admins list and revoke them. Every use and every
//! revocation is one conditional write on the grant's version (`store::Grants`); a lost write
//! reads again and is judged on what won.

use super::handle::{require, Engine};
use crate::{
    config::{Principal, Role},
    domain::{
        grant::{self, Grant},
        policy::Gate,
        quorum::in_groups,
        Call,
    },
    error::Missing,
    store::StoreError,
    Error,
};
use jiff::Timestamp;

/// Lost writes one use re-reads before the call waits for a person instead.
const USE_ATTEMPTS: usize = 8;
/// The most grants `GET /v1/grants` answers.
pub const LIST_LIMIT: usize = 500;

impl Engine {
    /// Use the oldest grant that allows `call` at `now`, if any: one conditional write. `None`:
    /// no grant allows it, or its last use went to another call — it waits for a person.
    pub(super) async fn use_grant(
        &self,
        call: &Call,
        gate: &Gate,
        now: Timestamp,
    ) -> Result<Option<Grant>, Error> {
        for _ in 0..USE_ATTEMPTS {
            let mut live = self
                .store
                .grants_for(call.tenant(), call.agent_id(), call.tool(), now)
                .await?;
            // A grant allows only while the one who granted may still decide under the rule
            // now: a key moved out of its groups or removed, or a person whose issuer the
            // tenant no longer trusts, grants nothing more (SC-GR-02, as SC-POL-04).
            live.retain(|g| {
                let by = &g.terms().granted_by;
                self.stands(call.tenant(), &by.approver, by.person.as_ref(), |groups| {
                    gate.countersigners.admits(groups)
                })
            });
            let Some(chosen) = grant::first_admitting(&live, call, gate, now) else {
                return Ok(None);
            };
            let Ok(next) = chosen.spend(now) else {
                return Ok(None);
            };
            match self.store.update_grant(&next).await {
                Ok(()) => {
                    tracing::info!(tenant = %call.tenant(), action_id = %call.id(), grant = %next.id(),
                        uses_left = next.uses_left(), "grant used");
                    crate::telemetry::grant_used();
                    return Ok(Some(next));
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// Store the grant an approval granted (its terms already on the approved record). Put
    /// once: a retried approve finds it there.
    pub(super) async fn keep_grant(&self, terms: &grant::Terms) -> Result<(), Error> {
        match self.store.put_grant(&Grant::new(terms.clone())).await {
            Ok(()) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the one who granted `g` may still decide in its groups, as the config reads now
    /// (the list's `lapsed`): a grant whose granter left allows nothing. Intake judges it on
    /// the rule that holds the call; the list, on the groups recorded with the grant.
    pub fn granter_stands(&self, g: &Grant) -> bool {
        let by = &g.terms().granted_by;
        self.stands(
            &g.terms().tenant,
            &by.approver,
            by.person.as_ref(),
            |groups| in_groups(&by.groups, groups),
        )
    }

    /// The caller's tenant's grants, newest first (approvers and admins).
    pub async fn grants(&self, who: &Principal) -> Result<Vec<Grant>, Error> {
        require(who, &[Role::Approver, Role::Admin], "list grants")?;
        Ok(self.store.grants(&who.tenant, LIST_LIMIT).await?)
    }

    /// Revoke a grant at once (SC-GR-07): from this write on it allows nothing; the uses that
    /// landed before stand, and the record counts them. Revoking a revoked grant answers it as
    /// it is.
    pub async fn revoke_grant(&self, who: &Principal, id: &str) -> Result<Grant, Error> {
        require(who, &[Role::Approver, Role::Admin], "revoke grants")?;
        let missing = || Error::NotFound(Missing::Grant);
        if !grant::is_grant_id(id) {
            return Err(missing());
        }
        loop {
            let current = self
                .store
                .grant(&who.tenant, id)
                .await?
                .ok_or_else(missing)?;
            let now = self.clock.now();
            let Some(next) = current.revoke(&who.id, who.person.as_ref(), now) else {
                return Ok(current);
            };
            match self.store.update_grant(&next).await {
                Ok(()) => {
                    tracing::info!(tenant = %who.tenant, grant = %id, by = %who.id, "grant revoked");
                    return Ok(next);
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
