//! Transitions: each turns the current action into the next one plus its audit event.
//! The store commits a [`Creation`] (the record must not exist yet) or a [`Transition`] (the
//! record must still be at its expected `(state, version)`) in one conditional write.

use super::{
    action::{Action, Actor, Lease, Outcome, Signoff, Standing, State, Terminal},
    audit::{self, Entry, Event},
    granted::{Asked, GrantRef, Terms as GrantTerms},
    notice::{NoticeKind, OutboxEntry},
    policy::ShadowVerdict,
    quorum::Signer,
    seal::SealReason,
    state::may_move,
    ticket::Ticket,
};

/// What a ticket is committed with besides the action's call.
pub use super::ticket::Terms as TicketTerms;
use jiff::Timestamp;
use serde_json::{json, Value};

/// How an event names the grant on its record.
fn named(terms: &GrantTerms) -> GrantRef {
    GrantRef {
        id: terms.id.clone(),
        digest: terms.digest(),
    }
}

/// What one write commits: the new record and its audit event.
#[derive(Debug, Clone)]
pub struct Change {
    pub action: Action,
    /// An event this write appends before `event`: the countersignature of an approval that
    /// claims its ticket in the same write (`pending_approval → approved → executing`).
    pub prior: Option<Event>,
    /// The last event this write appends: the one that ends in `action`'s state.
    pub event: Event,
    /// Write the event's notice to the outbox with this commit (SC-NOT-01). Set when the event
    /// notifies; the engine clears it for a tenant no endpoint listens to, which then pays nothing.
    pub notify: bool,
}

impl Change {
    /// Every event this write appends, in order (the store writes each).
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.prior.iter().chain(std::iter::once(&self.event))
    }

    /// The entry this write puts into the outbox with its commit, if any (SC-NOT-01).
    pub fn outbox_entry(&self) -> Option<OutboxEntry> {
        self.notify
            .then(|| OutboxEntry::for_event(&self.action, &self.event))
            .flatten()
    }
}

/// The first commit of a new action: version 1, event `none → state`.
#[derive(Debug, Clone)]
pub struct Creation(Change);

/// A change of an existing record, valid only while the record is still at `expected`.
#[derive(Debug, Clone)]
pub struct Transition {
    pub expected: (State, u64),
    change: Change,
}

impl std::ops::Deref for Creation {
    type Target = Change;
    fn deref(&self) -> &Change {
        &self.0
    }
}

impl std::ops::DerefMut for Creation {
    fn deref_mut(&mut self) -> &mut Change {
        &mut self.0
    }
}

impl std::ops::Deref for Transition {
    type Target = Change;
    fn deref(&self) -> &Change {
        &self.change
    }
}

impl std::ops::DerefMut for Transition {
    fn deref_mut(&mut self) -> &mut Change {
        &mut self.change
    }
}

impl Creation {
    /// The first commit of a new action (version 1, event `none → state`).
    pub fn new(action: Action, actor: Actor, reason: Option<&str>, now: Timestamp) -> Self {
        Self::noting(action, actor, reason, now, Vec::new())
    }

    /// The same, its event noting what the policy's rules in shadow would have decided
    /// (SC-GR-21): hashed into the chain with the rest.
    pub fn noting(
        mut action: Action,
        actor: Actor,
        reason: Option<&str>,
        now: Timestamp,
        shadow: Vec<ShadowVerdict>,
    ) -> Self {
        action.version = 1;
        action.actor = actor.clone();
        action.created_at = now;
        action.updated_at = now;
        if let Standing::Sealed { at, .. } = &mut action.standing {
            *at = now;
        }
        let to = action.state();
        assert!(may_move(None, to), "no action starts {to}");
        let event = Entry {
            seq: 1,
            at: now,
            actor,
            from: None,
            to: action.state(),
            reason: reason.map(str::to_owned),
            context_digest: None,
            outcome_digest: audit::sealed_outcome(&action),
            grant: action.grant.as_ref().map(named),
            shadow,
        }
        .chain(&audit::genesis(&audit::Origin::of(&action)));
        action.chain_head = event.hash.clone();
        Creation(Change {
            action,
            prior: None,
            notify: NoticeKind::of(&event).is_some(),
            event,
        })
    }
}

impl Transition {
    /// Move `current` to `standing`; `edit` changes what else the move changes (the approval).
    fn advance(
        current: &Action,
        standing: Standing,
        actor: Actor,
        reason: Option<&str>,
        now: Timestamp,
        edit: impl FnOnce(&mut Action),
    ) -> Self {
        let mut next = current.clone();
        next.standing = standing;
        next.version = current.version + 1;
        next.actor = actor.clone();
        next.updated_at = now;
        edit(&mut next);
        let (from, to) = (current.state(), next.state());
        // Fail closed on a bug: an illegal move is never written (its trail would not verify).
        assert!(from.may_move_to(to), "no move from {from} to {to}");
        // The countersignature names what was countersigned (SC-SEC-06).
        let context_digest = super::audit::countersigns(Some(from), to)
            .then(|| next.approval.as_ref().map(|a| a.context_digest.clone()))
            .flatten();
        let event = Entry {
            seq: next.version,
            at: now,
            actor,
            from: Some(from),
            to,
            reason: reason.map(str::to_owned),
            context_digest,
            outcome_digest: audit::sealed_outcome(&next),
            // The event that puts a grant on the record names it (SC-GR-08).
            grant: match (&current.grant, &next.grant) {
                (None, Some(terms)) => Some(named(terms)),
                _ => None,
            },
            shadow: Vec::new(),
        }
        .chain(&current.chain_head);
        next.chain_head = event.hash.clone();
        Transition {
            expected: (from, current.version),
            change: Change {
                action: next,
                prior: None,
                notify: NoticeKind::of(&event).is_some(),
                event,
            },
        }
    }

    /// A move the system makes (a claim, the tool's answer): nothing else changes.
    fn by_system(current: &Action, standing: Standing, reason: &str, now: Timestamp) -> Self {
        Self::advance(
            current,
            standing,
            Actor::system(),
            Some(reason),
            now,
            |_| {},
        )
    }

    /// Seal with a reason (cancel, deny, expiry, stop, missed window, …), in the reason's state.
    /// Sealing drops the ticket and lease: a sealed action has nothing left to wake.
    pub fn seal(current: &Action, actor: Actor, reason: &SealReason, now: Timestamp) -> Self {
        let mut outcome = reason.outcome();
        if *reason == SealReason::OutcomeUnknown {
            outcome.error = Some(json!({
                "kind": "outcome_unknown",
                "message": "an attempt may have reached the tool and no result committed; reconcile with the tool (its Idempotency-Key is the action id)",
            }));
        }
        let standing = Standing::Sealed {
            end: reason.state(),
            outcome,
            at: now,
        };
        Self::advance(current, standing, actor, Some(reason.as_str()), now, |_| {})
    }

    /// Countersign: `pending_approval → approved`, committing the ticket.
    pub fn approve<'a>(
        current: &Action,
        approver: impl Into<Signer<'a>>,
        ticket: TicketTerms,
        now: Timestamp,
    ) -> Self {
        Self::countersign(
            current,
            approver.into(),
            Ticket::commit(&current.call, &ticket),
            None,
            now,
        )
    }

    /// The countersignature that also grants further calls (SC-GR-03): the grant's terms go on
    /// the record and its approve event names them, so what the approver granted is part of
    /// what they countersigned. Claimed at once under `lease`, as [`Transition::approve_claimed`].
    pub fn approve_granting<'a>(
        current: &Action,
        approver: impl Into<Signer<'a>>,
        ticket: TicketTerms,
        lease: Option<Lease>,
        grant: GrantTerms,
        now: Timestamp,
    ) -> Self {
        let ticket = Ticket::commit(&current.call, &ticket);
        let approved =
            Self::countersign(current, approver.into(), ticket.clone(), Some(grant), now);
        match lease {
            None => approved,
            Some(lease) => Self::then_claimed(approved, ticket, lease, now),
        }
    }

    /// Countersign a ticket that runs at once in the approving request: `pending_approval →
    /// approved → executing` under `lease` in the same write, so no sweep can claim it in
    /// between. Both events are recorded: the approval (the approver, the context digest),
    /// then the claim.
    pub fn approve_claimed<'a>(
        current: &Action,
        approver: impl Into<Signer<'a>>,
        ticket: TicketTerms,
        lease: Lease,
        now: Timestamp,
    ) -> Self {
        let ticket = Ticket::commit(&current.call, &ticket);
        let approved = Self::countersign(current, approver.into(), ticket.clone(), None, now);
        Self::then_claimed(approved, ticket, lease, now)
    }

    /// `approved`, then claimed under `lease` in the same write.
    fn then_claimed(approved: Self, ticket: Ticket, lease: Lease, now: Timestamp) -> Self {
        let standing = Standing::Executing { ticket, lease };
        let mut claimed = Self::by_system(&approved.action, standing, "claimed", now);
        claimed.expected = approved.expected;
        claimed.change.prior = Some(approved.change.event);
        claimed
    }

    /// One approval of a quorum that still needs more (SC-POL-04): `pending_approval →
    /// pending_approval` with the approver added, its event naming the context digest. The
    /// earlier approvals of `lapsed` approvers (who may no longer decide it) are dropped in the
    /// same write, and the event's reason names them: `approval_recorded; lapsed: fin-1`.
    /// `None` unless `current` is pending and `approver` has not approved it yet.
    pub fn sign<'a>(
        current: &Action,
        approver: impl Into<Signer<'a>>,
        lapsed: &[String],
        now: Timestamp,
    ) -> Option<Self> {
        Self::sign_asking(current, approver, lapsed, None, now)
    }

    /// [`Transition::sign`], the approval asking for `grant` with the others of a grantable
    /// quorum (SC-GR-03): recorded on its signoff, for the approval that completes the quorum
    /// to find.
    pub fn sign_asking<'a>(
        current: &Action,
        approver: impl Into<Signer<'a>>,
        lapsed: &[String],
        grant: Option<Asked>,
        now: Timestamp,
    ) -> Option<Self> {
        let approver = approver.into();
        let Standing::PendingApproval { approvals } = &current.standing else {
            return None;
        };
        if approvals.iter().any(|s| s.by(approver)) {
            return None;
        }
        let mut approvals: Vec<Signoff> = approvals
            .iter()
            .filter(|s| !lapsed.contains(&s.approver))
            .cloned()
            .collect();
        approvals.push(Signoff {
            grant,
            ..approver.signoff(now)
        });
        let reason = match lapsed {
            [] => "approval_recorded".to_owned(),
            _ => format!("approval_recorded; lapsed: {}", lapsed.join(", ")),
        };
        let standing = Standing::PendingApproval { approvals };
        let t = Self::advance(
            current,
            standing,
            approver.actor(),
            Some(&reason),
            now,
            |_| {},
        );
        Some(t)
    }

    fn countersign(
        current: &Action,
        approver: Signer<'_>,
        ticket: Ticket,
        grant: Option<GrantTerms>,
        now: Timestamp,
    ) -> Self {
        // A quorum's record keeps every approver, this last one included (SC-POL-04).
        let mut signed = current.approvals().to_vec();
        signed.push(approver.signoff(now));
        let standing = Standing::Approved { ticket };
        Self::advance(
            current,
            standing,
            approver.actor(),
            Some("approved"),
            now,
            |a| {
                if grant.is_some() {
                    a.grant = grant;
                }
                if let Some(approval) = a.approval.as_mut() {
                    approval.approver = Some(approver.id.to_owned());
                    approval.person = approver.person.cloned();
                    approval.decided_at = Some(now);
                    if approval.quorum.required > 1 {
                        approval.quorum.signed = signed;
                    }
                }
            },
        )
    }

    /// Claim: `approved → executing` (or a recovery re-claim of an expired lease with a new
    /// epoch). The version bump fences every earlier holder. `None` for an action without a
    /// committed ticket: there is nothing to claim.
    pub fn claim(
        current: &Action,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Option<Self> {
        let ticket = current.ticket()?.clone();
        let epoch = current.lease().map_or(0, |l| l.epoch) + 1;
        let reason = if epoch == 1 { "claimed" } else { "reclaimed" };
        let lease = Lease {
            owner: owner.to_owned(),
            epoch,
            until: lease_until,
        };
        let standing = Standing::Executing { ticket, lease };
        Some(Self::by_system(current, standing, reason, now))
    }

    /// The tool answered: `executing → succeeded | failed`.
    pub fn finish(current: &Action, result: Result<Value, Value>, now: Timestamp) -> Self {
        let (end, outcome, reason) = match result {
            Ok(result) => (
                Terminal::Succeeded,
                Outcome {
                    result: Some(result),
                    ..Outcome::default()
                },
                "tool_succeeded",
            ),
            Err(error) => (
                Terminal::Failed,
                Outcome {
                    error: Some(error),
                    ..Outcome::default()
                },
                "tool_failed",
            ),
        };
        let standing = Standing::Sealed {
            end,
            outcome,
            at: now,
        };
        Self::by_system(current, standing, reason, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fixtures::{at, pending};
    use serde_json::json;

    /// Every transition asserts the table of moves (`state::MOVES`): sealing a sealed action
    /// again is refused where it is built. Before issue 29 it built a `cancelled → cancelled`
    /// move (the engine's state checks were all that kept it from the store).
    #[test]
    #[should_panic(expected = "no move from cancelled to cancelled")]
    fn sc_sec_06_a_transition_refuses_an_illegal_move() {
        let created = Creation::new(
            pending("act_A", json!({})),
            Actor::agent("agent-1"),
            None,
            at(0),
        );
        let cancelled = Transition::seal(
            &created.action,
            Actor::agent("agent-1"),
            &SealReason::Cancelled,
            at(1),
        );
        Transition::seal(
            &cancelled.action,
            Actor::system(),
            &SealReason::ApprovalExpired,
            at(2),
        );
    }
}
