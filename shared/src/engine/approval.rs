//! Countersign (SPEC §4 Approval): approve commits the ticket in one conditional write, then
//! arms the wake; deny seals. A rule's approver groups say who may decide (SC-POL-03); a quorum
//! records each approval as its own write until the last commits the ticket (SC-POL-04).

use super::{commit::Committed, require, Engine};
use crate::{
    config::{Principal, Role},
    domain::{
        action::Approval, transition::TicketTerms, Action, Actor, SealReason, State, Transition,
    },
    Error,
};
use std::sync::Arc;

/// Re-tries of one approve that lost its write to another approver's partial approval.
const APPROVE_ATTEMPTS: usize = 8;

/// What one approve attempt came to.
enum Step {
    Done(Action),
    /// Another approver's write landed first on a quorum still pending: try on this record.
    Again(Action),
}

impl Engine {
    /// One approver's countersignature. Runs as a task the process owns ([`Engine::owned`]):
    /// the last approval of a call due now claims and runs it inside that task, whether or not
    /// the approver's client waits for the answer.
    pub async fn approve(
        self: &Arc<Self>,
        who: &Principal,
        action_id: &str,
        context_digest: &str,
    ) -> Result<Action, Error> {
        let (who, id, digest) = (who.clone(), action_id.to_owned(), context_digest.to_owned());
        self.owned(move |engine| async move { engine.countersign(&who, &id, &digest).await })
            .await
    }

    async fn countersign(
        &self,
        who: &Principal,
        action_id: &str,
        context_digest: &str,
    ) -> Result<Action, Error> {
        require(who, &[Role::Approver], "approve actions")?;
        let mut action = self.load_for(who, action_id).await?;
        if action.call().agent_id() == who.id {
            return Err(Error::Forbidden(
                "an approver cannot approve an action submitted under its own identity".into(),
            ));
        }
        eligible(who, &action)?;
        for _ in 0..APPROVE_ATTEMPTS {
            match self.approve_once(who, &action, context_digest).await? {
                Step::Done(done) => return Ok(done),
                Step::Again(current) => action = current,
            }
        }
        Err(Error::Unavailable(
            "other approvals kept landing first; retry".into(),
        ))
    }

    async fn approve_once(
        &self,
        who: &Principal,
        action: &Action,
        context_digest: &str,
    ) -> Result<Step, Error> {
        let tenant = self.tenant(action.tenant())?;
        let now = self.clock.now();
        let approval = match awaiting(action, context_digest)? {
            Awaiting::Countersignature(approval) => approval,
            Awaiting::AlreadyApproved => return Ok(Step::Done(action.clone())),
        };
        // SC-APP-04: a lapsed approval is sealed here too, not only by the sweep.
        if now >= approval.expires_at {
            return Err(self.seal_refused(action, SealReason::ApprovalExpired).await);
        }
        // SC-APP-02
        if approval.context_digest != context_digest {
            return Err(Error::ContextChanged {
                current_digest: approval.context_digest.clone(),
            });
        }
        let given = action.approvals();
        // SC-POL-04: one approver counts once; a repeated approve is answered, not counted.
        if given.iter().any(|s| s.approver == who.id) {
            return Ok(Step::Done(action.clone()));
        }
        // An earlier approval counts only while its approver may still decide: those that
        // lapsed are dropped with this one, and the quorum waits for as many more.
        let lapsed = self.lapsed(action);
        let counted = given.len() - lapsed.len();
        if (counted as u64) + 1 < u64::from(approval.quorum.required) {
            let Some(t) = Transition::sign(action, &who.id, &lapsed, now) else {
                return Ok(Step::Done(action.clone()));
            };
            return self.landed(self.commit_now(&t).await?, who);
        }
        let Some(tool) = tenant.tool(action.call().tool()) else {
            return Err(self.seal_refused(action, SealReason::CatalogChanged).await);
        };
        // SC-APP-03; due now and fitting the request: committed already claimed (SC-EDGE-07).
        let terms = TicketTerms::new(
            action.call(),
            super::intake::new_id("cor"),
            tool.fingerprint(),
            false,
            now,
            self.config.limits.run_deadline,
        );
        let inline = self.inline_claim(tool, terms.due_at, now);
        let t = match &inline {
            Some((_, lease)) => {
                Transition::approve_claimed(action, &who.id, terms, lease.clone(), now)
            }
            None => Transition::approve(action, &who.id, terms, now),
        };
        match self.commit_now(&t).await? {
            Committed::Landed(approved) => {
                tracing::info!(tenant = %approved.tenant(), action_id = %approved.id(), approver = %who.id, "approved; ticket committed");
                Ok(Step::Done(
                    self.hand_off(approved, inline.map(|(running, _)| running))
                        .await,
                ))
            }
            lost => self.landed(lost, who),
        }
    }

    /// The answer to an approval write: ours, or what won — a quorum still pending is tried
    /// again on the winner's record, a sealed one refused.
    fn landed(&self, committed: Committed, who: &Principal) -> Result<Step, Error> {
        match committed {
            Committed::Landed(signed) => {
                tracing::info!(tenant = %signed.tenant(), action_id = %signed.id(), approver = %who.id, "approval recorded; more needed");
                Ok(Step::Done(signed))
            }
            Committed::LostTo(current) if current.state() == State::PendingApproval => {
                Ok(Step::Again(current))
            }
            Committed::LostTo(current) if current.state().is_sealed() => Err(Error::ActionSealed {
                state: current.state(),
            }),
            Committed::LostTo(current) => Ok(Step::Done(current)),
        }
    }

    /// The approvers of `action`'s approvals so far who may no longer decide it (SC-POL-04):
    /// the config, as this process read it, holds no approver key of theirs in a group the
    /// action's rule names — the key was removed, or moved out of the group.
    fn lapsed(&self, action: &Action) -> Vec<String> {
        let may_still = |approver: &str| {
            self.config
                .principals_named(action.tenant(), approver)
                .any(|p| p.role == Role::Approver && may_decide(p, action))
        };
        action
            .approvals()
            .iter()
            .filter(|s| !may_still(&s.approver))
            .map(|s| s.approver.clone())
            .collect()
    }

    /// Seal an approval that can no longer be given and answer why the approve is refused.
    async fn seal_refused(&self, action: &Action, reason: SealReason) -> Error {
        match self.seal(action, Actor::system(), &reason).await {
            Ok(sealed) => Error::ActionSealed {
                state: sealed.into_action().state(),
            },
            Err(e) => e,
        }
    }

    pub async fn deny(
        &self,
        who: &Principal,
        action_id: &str,
        reason: &str,
    ) -> Result<Action, Error> {
        require(who, &[Role::Approver], "deny actions")?;
        let action = self.load_for(who, action_id).await?;
        // SC-POL-03, SC-POL-04: any eligible approver's deny seals, a quorum's too.
        eligible(who, &action)?;
        match action.state() {
            State::PendingApproval => {}
            State::Approved => {
                return Err(Error::validation(
                    "state",
                    "the action is already approved; cancel it instead",
                ))
            }
            State::Executing => return Err(Error::ActionExecuting),
            state => return Err(Error::ActionSealed { state }),
        }
        // SC-APP-05
        let denial = SealReason::Denied(reason.to_owned());
        match self.seal(&action, Actor::user(&who.id), &denial).await? {
            Committed::Landed(sealed) => Ok(sealed),
            Committed::LostTo(current) => Err(Error::ActionSealed {
                state: current.state(),
            }),
        }
    }
}

/// Whether `who` may decide `action`'s approval: in one of the groups its rule names
/// (SC-POL-03). An action without an approval has nothing to decide; its state answers.
pub(crate) fn may_decide(who: &Principal, action: &Action) -> bool {
    action
        .approval()
        .as_ref()
        .is_none_or(|a| a.quorum.admits(&who.groups))
}

fn eligible(who: &Principal, action: &Action) -> Result<(), Error> {
    if may_decide(who, action) {
        return Ok(());
    }
    let groups = action
        .approval()
        .as_ref()
        .map(|a| a.quorum.groups.join(", "))
        .unwrap_or_default();
    Err(Error::Forbidden(format!(
        "this action is countersigned by the approver group(s) {groups}; this key is in none of them"
    )))
}

/// What an approve meets.
enum Awaiting<'a> {
    Countersignature(&'a Approval),
    /// A retried approve of the same context: answered, not refused.
    AlreadyApproved,
}

/// Whether `action` waits for the countersignature of `context_digest`.
fn awaiting<'a>(action: &'a Action, context_digest: &str) -> Result<Awaiting<'a>, Error> {
    match (action.state(), &action.approval()) {
        (State::PendingApproval, Some(approval)) => Ok(Awaiting::Countersignature(approval)),
        (State::Approved | State::Executing, Some(a)) if a.context_digest == context_digest => {
            Ok(Awaiting::AlreadyApproved)
        }
        (State::Approved | State::Executing, None) => Err(Error::Forbidden(
            "this action was committed by policy; it takes no countersignature".into(),
        )),
        (State::Approved | State::Executing, _) => Err(Error::ContextChanged {
            current_digest: current_digest(action),
        }),
        (state, _) => Err(Error::ActionSealed { state }),
    }
}

fn current_digest(action: &Action) -> String {
    action
        .approval()
        .as_ref()
        .map(|a| a.context_digest.clone())
        .unwrap_or_default()
}
