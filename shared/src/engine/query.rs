//! Reads: one action, a page of actions, an action's audit events. Who reads what
//! (SC-SEC-01): an agent key its own actions only, approver and admin keys the tenant's;
//! anything else answers exactly as a missing action.

use super::{handle::Engine, quarantine::Loaded};
use crate::{
    config::{Principal, Role},
    domain::{audit, deed::Deed, Action, Event, State},
    error::Missing,
    store::{ListPage, ListQuery},
    Error,
};

/// Whether `who` may read `action` of its tenant: an agent its own, people every one.
pub(crate) fn may_read(who: &Principal, action: &Action) -> bool {
    who.role != Role::Agent || action.call().agent_id() == who.id
}

/// `act_` + a ULID: anything else names no action (and never reaches the store).
pub(crate) fn is_action_id(id: &str) -> bool {
    id.strip_prefix("act_")
        .is_some_and(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub state: Option<State>,
    pub agent_id: Option<String>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

pub const MAX_PAGE: usize = 100;

/// A filtered list reads at most this many stored actions per answered one.
pub const SCAN_FACTOR: usize = 5;

impl ListFilter {
    fn matches(&self, a: &Action) -> bool {
        self.state.is_none_or(|s| a.state() == s)
            && self
                .agent_id
                .as_ref()
                .is_none_or(|id| a.call().agent_id() == id)
    }

    /// The answer from one bounded read: up to `limit` matches, and the cursor after the last
    /// one answered — or, when none more matched, after the last one read.
    fn page(&self, read: ListPage, limit: usize) -> (Vec<Action>, Option<String>) {
        let mut answer = Vec::new();
        for action in read.actions {
            if self.matches(&action) {
                answer.push(action);
                if answer.len() == limit {
                    let next = answer.last().map(|a| a.id().to_owned());
                    return (answer, next);
                }
            }
        }
        (answer, read.next)
    }
}

impl Engine {
    pub async fn get(&self, who: &Principal, action_id: &str) -> Result<Action, Error> {
        self.load_for(who, action_id).await
    }

    /// Load an action of the caller's tenant; another tenant's id is simply not found.
    pub(super) async fn load(&self, tenant: &str, action_id: &str) -> Result<Action, Error> {
        if !is_action_id(action_id) {
            return Err(Error::NotFound(Missing::Action));
        }
        match self.load_or_quarantine(tenant, action_id).await? {
            Loaded::Found(action) => Ok(*action),
            Loaded::Missing => Err(Error::NotFound(Missing::Action)),
            Loaded::Quarantined => Err(Error::Internal(format!(
                "action {action_id} does not load; it is quarantined"
            ))),
        }
    }

    /// An action `who` may read. Another agent's answers an agent key exactly as a missing one,
    /// and so does a record that does not load: whose it is cannot be read (SC-EDGE-08).
    pub(super) async fn load_for(&self, who: &Principal, action_id: &str) -> Result<Action, Error> {
        if !is_action_id(action_id) {
            return Err(Error::NotFound(Missing::Action));
        }
        match self.load_or_quarantine(&who.tenant, action_id).await? {
            Loaded::Found(action) if may_read(who, &action) => Ok(*action),
            Loaded::Quarantined if who.role != Role::Agent => Err(Error::Internal(format!(
                "action {action_id} does not load; it is quarantined"
            ))),
            _ => Err(Error::NotFound(Missing::Action)),
        }
    }

    /// Newest first; `next_cursor` is set when more may follow. A filter the store indexes
    /// (`state`, `state` + `agent_id`; on DynamoDB only `pending_approval`) reads only its
    /// matches; any other reads at most [`SCAN_FACTOR`] × `limit` stored actions (SC-SEC-05) and
    /// answers what it found there, perhaps nothing, with a cursor to continue from. An agent
    /// key's list is filtered to its own actions; asked for another agent's, it is empty.
    pub async fn list(
        &self,
        who: &Principal,
        mut f: ListFilter,
    ) -> Result<(Vec<Action>, Option<String>), Error> {
        let limit = f.limit.unwrap_or(50);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::validation(
                "limit",
                format!("limit must be between 1 and {MAX_PAGE}"),
            ));
        }
        if let Some(c) = &f.cursor {
            if !is_action_id(c) {
                return Err(Error::validation(
                    "cursor",
                    "cursor must be a next_cursor from an earlier page",
                ));
            }
        }
        if who.role == Role::Agent {
            match &f.agent_id {
                Some(other) if *other != who.id => return Ok((Vec::new(), None)),
                _ => f.agent_id = Some(who.id.clone()),
            }
        }
        let filtered = f.state.is_some() || f.agent_id.is_some();
        let query = ListQuery {
            limit: if filtered { SCAN_FACTOR * limit } else { limit },
            answers: limit,
            before: f.cursor.clone(),
            state: f.state,
            agent_id: f.agent_id.clone(),
        };
        let mut read = self.store.list(&who.tenant, &query).await?;
        for bad in std::mem::take(&mut read.unreadable) {
            self.quarantine(bad).await;
        }
        // SC-POL-03: an approver is not offered what its groups may not decide.
        read.actions.retain(|a| {
            may_read(who, a)
                && (who.role != Role::Approver
                    || a.state() != State::PendingApproval
                    || crate::domain::countersign::may_decide(&who.groups, a))
        });
        Ok(f.page(read, limit))
    }

    pub async fn events(&self, who: &Principal, action_id: &str) -> Result<Vec<Event>, Error> {
        Ok(self.audited(who, action_id).await?.1)
    }

    /// The signed deed of a sealed action (SC-SEC-07), from its verified chain.
    pub async fn deed(&self, who: &Principal, action_id: &str) -> Result<Vec<u8>, Error> {
        let (action, events) = self.audited(who, action_id).await?;
        let signer = self.tenant(&who.tenant)?.deed_key.as_ref().ok_or_else(|| {
            Error::Forbidden("this tenant issues no deeds: it has no deed_key".into())
        })?;
        // The boot reads every named key (`Config::read_keys`); one left unread is our bug.
        let key = signer.key().ok_or_else(|| {
            Error::Internal("the tenant's deed key was not read when the process booted".into())
        })?;
        match Deed::of(&action, &events, &key.kid) {
            Some(deed) => Ok(deed.sign(key)),
            None if action.state() == State::Executing => Err(Error::ActionExecuting),
            None => Err(Error::ActionNotSealed {
                state: action.state(),
            }),
        }
    }

    /// An action with its whole audit chain, verified against the record (SC-SEC-06). The two
    /// reads are separate, so a transition committed between them is read again; a chain that
    /// still does not fit its record is refused, never served.
    async fn audited(
        &self,
        who: &Principal,
        action_id: &str,
    ) -> Result<(Action, Vec<Event>), Error> {
        let tenant = who.tenant.as_str();
        let mut attempt = 1;
        loop {
            let action = self.load_for(who, action_id).await?;
            let events = self.store.events(tenant, action_id).await?;
            match audit::verify(&action, &events) {
                Ok(()) => return Ok((action, events)),
                Err(e) if attempt < READS_PER_AUDIT && !action.state().is_sealed() => {
                    tracing::debug!(tenant, action_id, error = %e, "chain read mid-transition; reading again");
                    attempt += 1;
                }
                Err(e) => {
                    tracing::error!(tenant, action_id, error = %e, "audit chain does not verify");
                    return Err(Error::Internal(format!("audit chain of {action_id}: {e}")));
                }
            }
        }
    }
}

/// Reads of (record, chain) before a mismatch on a live action counts as tampering.
const READS_PER_AUDIT: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fixtures::pending;

    /// SC-SEC-01: who reads an action of its tenant, by role and by whose it is.
    #[test]
    fn sc_sec_01_an_agent_reads_its_own_people_the_tenants() {
        let action = pending("act_01J0000000000000000000000R", serde_json::json!({}));
        assert_eq!(action.call().agent_id(), "agent-1");
        let who = |role, id: &str| Principal {
            tenant: "acme".into(),
            role,
            id: id.into(),
            groups: Vec::new(),
            person: None,
        };
        for (role, id, reads) in [
            (Role::Agent, "agent-1", true),
            (Role::Agent, "agent-2", false),
            (Role::Approver, "approver-1", true),
            // An approver named like the agent is a person: it reads the tenant's.
            (Role::Approver, "agent-1", true),
            (Role::Admin, "admin-1", true),
        ] {
            assert_eq!(may_read(&who(role, id), &action), reads, "{role:?} {id}");
        }
    }
}
