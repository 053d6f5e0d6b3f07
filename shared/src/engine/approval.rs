//! Countersign (SPEC §4 Approval): load the action, ask the rule (`domain::countersign`),
//! commit what it answers, and after a lost race ask again with the record that won. The last
//! approval commits the ticket and arms the wake (or runs it, when due now); a deny seals.

use super::{
    commit::Committed,
    handle::{require, Engine},
    runs::Running,
};
use crate::{
    config::{Principal, Role},
    domain::{
        actor::{Channel, Person},
        countersign::{self, Approve, ApproveFacts, Decider},
        grant::{self, Ask, Asked, Granting},
        policy,
        quorum::Signoff,
        transition::TicketTerms,
        Action, Actor, Lease, SealReason, State, Transition,
    },
    Error,
};
use jiff::Timestamp;
use std::sync::Arc;

/// Re-tries of one approve that lost its write to another approver's partial approval.
const APPROVE_ATTEMPTS: usize = 8;

/// What one approve attempt came to.
enum Step {
    Done(Action),
    /// Another write landed first: ask again on this record.
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
        self.approve_through(who, action_id, context_digest, None, None)
            .await
    }

    /// The same approval, its audit event naming the `channel` it came through (`api`, `page`,
    /// `cli`, `slack`, `email`), granting further calls of the same tool with it when `grant`
    /// asks (SC-GR-01/03): the grant's terms are judged before anything is written, go on the
    /// approved record and its approve event, and the grant is stored once the approval landed.
    /// A refused grant refuses the approve: nothing is written.
    pub async fn approve_through(
        self: &Arc<Self>,
        who: &Principal,
        action_id: &str,
        context_digest: &str,
        channel: Option<Channel>,
        grant: Option<Ask>,
    ) -> Result<Action, Error> {
        let by = Via {
            who: who.clone(),
            channel,
            inline: true,
            grant,
        };
        self.approve_by(by, action_id, context_digest).await
    }

    /// An approval by `by`, as a task the process owns ([`Engine::owned`]).
    pub(super) async fn approve_by(
        self: &Arc<Self>,
        by: Via,
        action_id: &str,
        context_digest: &str,
    ) -> Result<Action, Error> {
        let (id, digest) = (action_id.to_owned(), context_digest.to_owned());
        self.owned(move |engine| async move { engine.countersign(&by, &id, &digest).await })
            .await
    }

    async fn countersign(
        &self,
        by: &Via,
        action_id: &str,
        context_digest: &str,
    ) -> Result<Action, Error> {
        let who = &by.who;
        require(who, &[Role::Approver], "approve actions")?;
        let mut action = self.load_for(who, action_id).await?;
        let mut lost = 0;
        loop {
            match self.approve_once(by, &action, context_digest).await? {
                Step::Done(done) => return Ok(done),
                // Only a quorum still pending takes another write: re-tried a bounded number
                // of times. Any other winner is judged once more, and answered.
                Step::Again(current) if current.state() == State::PendingApproval => {
                    lost += 1;
                    if lost == APPROVE_ATTEMPTS {
                        return Err(Error::Unavailable(
                            "other approvals kept landing first; retry".into(),
                        ));
                    }
                    action = current;
                }
                Step::Again(current) => action = current,
            }
        }
    }

    async fn approve_once(
        &self,
        by: &Via,
        action: &Action,
        context_digest: &str,
    ) -> Result<Step, Error> {
        let who = &by.who;
        let tool = self.tenant(action.tenant())?.tool(action.call().tool());
        let fingerprint = tool.map(|t| t.fingerprint());
        let now = self.clock.now();
        let correlation_id = super::intake::new_id("cor");
        let lapsed = self.lapsed(action);
        let earlier: Vec<Signoff> = action
            .approvals()
            .iter()
            .filter(|s| !lapsed.contains(&s.approver))
            .cloned()
            .collect();
        // Judged before the approval's own checks run, refused only after them: a grant is
        // never the reason given for what the approval itself refuses.
        let asked = by
            .grant
            .as_ref()
            .map(|ask| self.granting(ask, by, action, &earlier, now));
        let facts = ApproveFacts {
            action,
            approver: by.decider(),
            context_digest,
            lapsed: &lapsed,
            grant: asked
                .as_ref()
                .and_then(|a| a.as_ref().ok())
                .map(|(asked, _)| asked),
            catalog_fingerprint: fingerprint.as_deref(),
            correlation_id: &correlation_id,
            run_deadline: self.config.limits.run_deadline,
            now,
        };
        let t = match countersign::approve(&facts) {
            Approve::AlreadyApproved => {
                match (asked, action.state()) {
                    (None, _) => {}
                    // This approver's own signoff is among the earlier ones judged: the same
                    // grant again is answered as it stands, another refused naming them.
                    (Some(asked), State::PendingApproval) => drop(asked?),
                    (Some(_), _) => self.granted_already(action).await?,
                }
                return Ok(Step::Done(action.clone()));
            }
            Approve::Refused(objection) => return Err(objection.into()),
            Approve::Seal(reason) => return Err(self.seal_refused(action, reason).await),
            Approve::Sign(t) => {
                asked.transpose()?;
                *t
            }
            Approve::Commit(terms) => {
                let grant = asked.transpose()?.map(|(_, terms)| terms);
                // A request that decides many arms each ticket's wake instead (SC-GR-20).
                let inline = tool
                    .filter(|_| by.inline)
                    .and_then(|tool| self.inline_claim(tool, terms.due_at, now));
                return self
                    .commit_ticket(by, action, terms, inline, grant, now)
                    .await;
            }
        };
        Ok(match self.commit_now(&t).await? {
            Committed::Landed(signed) => {
                tracing::info!(tenant = %signed.tenant(), action_id = %signed.id(), approver = %who.id, "approval recorded; more needed");
                Step::Done(signed)
            }
            Committed::LostTo(current) => Step::Again(current),
        })
    }

    /// The last approval: commit the ticket — already claimed by this request (`inline`) when
    /// it is due now and fits the request (SC-EDGE-07) — then run it or arm its wake.
    async fn commit_ticket(
        &self,
        by: &Via,
        action: &Action,
        terms: TicketTerms,
        inline: Option<(Running<'_>, Lease)>,
        grant: Option<grant::Terms>,
        now: Timestamp,
    ) -> Result<Step, Error> {
        let who = &by.who;
        let signer = by.decider().signer();
        let t = match (&inline, grant) {
            (_, Some(grant)) => {
                let lease = inline.as_ref().map(|(_, lease)| lease.clone());
                Transition::approve_granting(action, signer, terms, lease, grant, now)
            }
            (Some((_, lease)), None) => Transition::approve_claimed(
                action,
                by.decider().signer(),
                terms,
                lease.clone(),
                now,
            ),
            (None, None) => Transition::approve(action, by.decider().signer(), terms, now),
        };
        match self.commit_now(&t).await? {
            Committed::Landed(approved) => {
                tracing::info!(tenant = %approved.tenant(), action_id = %approved.id(), approver = %who.id, "approved; ticket committed");
                crate::telemetry::decided_by_person(&approved);
                if by.grant.is_some() {
                    if let Some(terms) = approved.grant() {
                        // The approval stands; a retried approve with the grant stores it.
                        self.keep_grant(terms).await.map_err(|e| {
                            Error::Unavailable(format!("approved, but the grant was not stored ({e}); approve again with the same grant"))
                        })?;
                    }
                }
                let running = inline.map(|(running, _)| running);
                Ok(Step::Done(self.hand_off(approved, running).await))
            }
            Committed::LostTo(current) => Ok(Step::Again(current)),
        }
    }

    /// The approvers of `action`'s approvals so far who may no longer decide it (SC-POL-04,
    /// SC-ID-06), as this process reads the config. A key's approval lapses when the config
    /// holds no approver key of that name in a group the action's rule names (removed, or
    /// moved out of the group), or the tenant no longer takes keys for people. A person's
    /// approval was judged on their token's groups when they gave it, and the provider — not
    /// this config — says who is in a group: it stands while the tenant still trusts the
    /// issuer that named them.
    fn lapsed(&self, action: &Action) -> Vec<String> {
        let may_still = |s: &Signoff| {
            self.stands(action.tenant(), &s.approver, s.person.as_ref(), |groups| {
                countersign::may_decide(groups, action)
            })
        };
        action
            .approvals()
            .iter()
            .filter(|s| !may_still(s))
            .map(|s| s.approver.clone())
            .collect()
    }

    /// Whether a signer of `tenant` — an approver key by name, or a person a token named — may
    /// still decide under a rule that admits the groups `admits` takes, as this process reads
    /// the config: an earlier approval of a quorum (above), or the approval that gave a grant
    /// (SC-GR-02). A key stands while the config holds an approver key of that name in such a
    /// group and the tenant still takes keys for people; a person, while the tenant still
    /// trusts the issuer that named them (their groups were judged on their token).
    pub(super) fn stands(
        &self,
        tenant: &str,
        approver: &str,
        person: Option<&Person>,
        admits: impl Fn(&[String]) -> bool,
    ) -> bool {
        let identity = self.config.tenant(tenant).and_then(|t| t.identity.as_ref());
        match person {
            Some(person) => identity.is_some_and(|i| i.issuer == person.issuer),
            None => {
                identity.is_none_or(|i| i.keys_for_people)
                    && self
                        .config
                        .principals_named(tenant, approver)
                        .any(|p| p.role == Role::Approver && admits(&p.groups))
            }
        }
    }

    /// The grant `by` asks for with this approval, judged on the policy's answer for the call
    /// now and on the quorum's `earlier` approvals that still count: as asked (what a quorum's
    /// signoff records) and the terms it gives should this approval complete the quorum.
    fn granting(
        &self,
        ask: &Ask,
        by: &Via,
        action: &Action,
        earlier: &[Signoff],
        now: Timestamp,
    ) -> Result<(Asked, grant::Terms), Error> {
        let tenant = self.tenant(action.tenant())?;
        let gate = policy::gate(&tenant.policy, &action.call().facts(now));
        let granting = Granting {
            call: action.call(),
            gate: &gate,
            approver: by.decider(),
            earlier,
            now,
        };
        let asked = grant::judge(ask, &granting)?;
        let terms = grant::terms(&asked, &granting)?;
        Ok((asked, terms))
    }

    /// An approve with a grant of an action approved already: answered as it stands when its
    /// approval granted one (stored now, if the first answer was lost before it was); refused
    /// when it was approved without.
    async fn granted_already(&self, action: &Action) -> Result<(), Error> {
        match action.grant() {
            Some(terms) => self.keep_grant(terms).await,
            None => Err(Error::validation(
                "grant",
                "the action was approved without a grant; a grant is asked with the approval itself",
            )),
        }
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

    /// SC-APP-05: an eligible approver's deny seals the action in its words. A deny that lost
    /// its write is asked again on the record that won: another approver's partial approval
    /// leaves it to deny (SC-POL-04), anything else answers why not.
    pub async fn deny(
        &self,
        who: &Principal,
        action_id: &str,
        reason: &str,
    ) -> Result<Action, Error> {
        self.deny_through(who, action_id, reason, None).await
    }

    /// The same deny, its audit event naming the `channel` it came through (`slack`).
    pub async fn deny_through(
        &self,
        who: &Principal,
        action_id: &str,
        reason: &str,
        channel: Option<Channel>,
    ) -> Result<Action, Error> {
        let by = Via {
            who: who.clone(),
            channel,
            inline: true,
            grant: None,
        };
        self.deny_by(&by, action_id, reason, None).await
    }

    /// A deny by `by`, of the context it was shown when it names one (`seen`, SC-GR-20).
    pub(super) async fn deny_by(
        &self,
        by: &Via,
        action_id: &str,
        reason: &str,
        seen: Option<&str>,
    ) -> Result<Action, Error> {
        let who = &by.who;
        require(who, &[Role::Approver], "deny actions")?;
        let mut action = self.load_for(who, action_id).await?;
        loop {
            let denial = countersign::deny_seen(&action, by.decider(), reason, seen)?;
            let actor = by.decider().signer().actor();
            match self.seal(&action, actor, &denial).await? {
                Committed::Landed(sealed) => {
                    crate::telemetry::decided_by_person(&sealed);
                    return Ok(sealed);
                }
                Committed::LostTo(current) => action = current,
            }
        }
    }
}

/// An approver, by key or by token, and the channel its decision came through.
pub(super) struct Via {
    pub(super) who: Principal,
    pub(super) channel: Option<Channel>,
    /// Whether this request may run a call its approval makes due now (SC-EDGE-07); a batch
    /// of decisions arms each wake instead, so one request never runs many tools.
    pub(super) inline: bool,
    /// The grant it asks for with an approval (SC-GR-01).
    pub(super) grant: Option<Ask>,
}

impl Via {
    /// As the rules see it.
    fn decider(&self) -> Decider<'_> {
        Decider {
            id: &self.who.id,
            groups: &self.who.groups,
            person: self.who.person.as_ref(),
            channel: self.channel,
        }
    }
}
