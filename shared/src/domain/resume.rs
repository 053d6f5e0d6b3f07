//! The resume checks (SPEC §4 Resume): pure functions, a fixed order, fail closed.
//! Each check runs before any tool does; the wake payload only finds the ticket.
//!
//! Three moments, three checks:
//! - [`check`]: a wake (or the sweep) found a waiting ticket — reject, seal, wait or claim.
//! - [`check_recovery`]: the sweep found an `executing` action — leave it, re-run or seal.
//! - [`check_attempt`]: a claim is held, an attempt is next (SC-EDGE-01/02) — start it or not.

use super::{
    action::{Action, Standing, State},
    seal::SealReason,
    ticket::Ticket,
};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

/// The wake signal's payload, as EventBridge Scheduler (or the in-process waker) delivers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wake {
    pub tenant: String,
    pub action_id: String,
    pub correlation_id: String,
}

/// Why a wake changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rejection {
    /// SC-RES-01: unknown action, no waiting ticket, or not a scheduled-action wait.
    NoWaitingTicket,
    /// SC-RES-02: the wake names another (older) commit of this ticket.
    CorrelationMismatch,
}

/// What the resume must do next, with the record it acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Reject(Rejection),
    /// Seal without running, in the reason's state.
    Seal(Action, SealReason),
    /// SC-RES-05: too early; re-arm for this instant.
    Wait(Action, Timestamp),
    /// SC-RES-07: claim and run.
    Claim(Action),
}

impl Verdict {
    /// A short name for logs (the record stays out of them).
    pub fn name(&self) -> String {
        match self {
            Verdict::Reject(r) => format!("reject {r:?}"),
            Verdict::Seal(_, reason) => format!("seal {reason}"),
            Verdict::Wait(_, until) => format!("wait until {until}"),
            Verdict::Claim(_) => "claim".into(),
        }
    }
}

/// Facts gathered by the engine for the checks; the record moves into the verdict.
pub struct Facts<'a> {
    pub action: Option<Action>,
    pub stopped: bool,
    /// Fingerprint of the tool's catalog entry now; `None` if it left the catalog.
    pub current_fingerprint: Option<&'a str>,
    pub now: Timestamp,
}

pub fn check(wake: &Wake, facts: Facts<'_>) -> Verdict {
    // SC-RES-01
    let Some(action) = facts.action else {
        return Verdict::Reject(Rejection::NoWaitingTicket);
    };
    let ticket = match &action.standing {
        Standing::Approved { ticket } if action.tenant() == wake.tenant => ticket,
        _ => return Verdict::Reject(Rejection::NoWaitingTicket),
    };
    // SC-RES-02
    if ticket.correlation_id() != wake.correlation_id {
        return Verdict::Reject(Rejection::CorrelationMismatch);
    }
    // SC-RES-03
    if facts.stopped {
        return Verdict::Seal(action, SealReason::Stopped);
    }
    // SC-RES-04
    if facts.current_fingerprint != Some(ticket.catalog_fingerprint()) {
        return Verdict::Seal(action, SealReason::CatalogChanged);
    }
    // SC-RES-05
    if facts.now < ticket.due_at() {
        let due = ticket.due_at();
        return Verdict::Wait(action, due);
    }
    // SC-RES-06
    if facts.now > ticket.deadline() {
        return Verdict::Seal(action, SealReason::ScheduleMissed);
    }
    Verdict::Claim(action)
}

/// What the sweep does with an `executing` action whose worker may have died (SC-REC-02).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryVerdict {
    /// Not executing, or the lease still holds: someone is working on it.
    Leave,
    /// Re-claim with a new epoch and run again (same Idempotency-Key).
    Rerun,
    /// Seal `failed`, reason `outcome_unknown`, for reconciliation.
    SealUnknown,
}

pub struct RecoveryFacts<'a> {
    pub action: &'a Action,
    /// The tool's pinned policy is `retry` (idempotent downstream).
    pub retry_policy: bool,
    pub stopped: bool,
    pub current_fingerprint: Option<&'a str>,
    pub now: Timestamp,
}

/// The recovery checks, in order, each before any re-run: a lease still held is left alone;
/// then only a `retry` tool, for an agent that is not stopped (SC-RES-03), whose catalog entry
/// is unchanged (SC-RES-04), inside its window (§1.4), runs again. Everything else is sealed
/// as an unknown outcome: the first attempt may have reached the tool.
pub fn check_recovery(f: &RecoveryFacts<'_>) -> RecoveryVerdict {
    let (State::Executing, Some(ticket), Some(lease)) =
        (f.action.state(), &f.action.ticket(), &f.action.lease())
    else {
        return RecoveryVerdict::Leave;
    };
    if f.now < lease.until {
        return RecoveryVerdict::Leave;
    }
    let rerun = f.retry_policy
        && !f.stopped
        && f.current_fingerprint == Some(ticket.catalog_fingerprint())
        && f.now <= ticket.deadline();
    if rerun {
        RecoveryVerdict::Rerun
    } else {
        RecoveryVerdict::SealUnknown
    }
}

/// Whether the next attempt of a held claim may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptVerdict {
    Start,
    /// Not before this instant (only a clock that stepped back since the claim gets here).
    Early(Timestamp),
    /// Never: the stop or the closed window ends the run here.
    Halt(SealReason),
    /// Not by this worker: its lease would end before the attempt's timeout, and from then on
    /// recovery may claim the action again and run it. The worker commits nothing and yields.
    LeaseRunsOut,
}

/// What [`check_attempt`] decides on, read fresh right before the attempt.
#[derive(Debug, Clone, Copy)]
pub struct AttemptFacts<'a> {
    pub ticket: &'a Ticket,
    /// A stop applies (read after the claim committed).
    pub stopped: bool,
    /// The end of the lease this worker's claim holds.
    pub lease_until: Timestamp,
    /// The longest the attempt may take (the tool's timeout).
    pub attempt_takes: SignedDuration,
    pub now: Timestamp,
}

/// Checked immediately before every attempt — the first, a retry after its backoff, a
/// recovery re-run — with a stop read made after the claim committed and a fresh `now`:
/// a stop first (SC-EDGE-02), then the window's start and end (SC-EDGE-01), then the worker's
/// own lease: an attempt starts only if it ends, timing out at worst, before the lease does,
/// so it never overlaps a recovery's re-run of the same action (a worker stalled past its
/// lease, e.g. a paused process, yields instead).
pub fn check_attempt(f: &AttemptFacts) -> AttemptVerdict {
    let (ticket, now) = (f.ticket, f.now);
    if f.stopped {
        return AttemptVerdict::Halt(SealReason::Stopped);
    }
    if now < ticket.due_at() {
        return AttemptVerdict::Early(ticket.due_at());
    }
    if now > ticket.deadline() {
        return AttemptVerdict::Halt(SealReason::ScheduleMissed);
    }
    if now.saturating_add(f.attempt_takes).ok() > Some(f.lease_until) {
        return AttemptVerdict::LeaseRunsOut;
    }
    AttemptVerdict::Start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        action::{Actor, Decision, Lease},
        call::Call,
        ticket::Ticket,
        transition::TicketTerms,
    };

    const FP: &str = "fp-1";

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    /// An approved action due at t(100), deadline t(200).
    fn approved() -> Action {
        let call = Call::for_test(
            "act_01JZ0000000000000000000000",
            "mail.send",
            serde_json::json!({"to": "x"}),
        );
        let terms = TicketTerms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: FP.into(),
            due_at: t(100),
            deadline: t(200),
        };
        let ticket = Ticket::commit(&call, &terms);
        let mut a = Action::first(
            call,
            Decision::Schedule,
            Standing::Approved { ticket },
            None,
            t(0),
        );
        a.actor = Actor::system();
        a.version = 1;
        a
    }

    fn wake_of(a: &Action) -> Wake {
        Wake {
            tenant: a.tenant().to_owned(),
            action_id: a.id().to_owned(),
            correlation_id: a.ticket().unwrap().correlation_id().into(),
        }
    }

    #[derive(Debug, PartialEq)]
    enum Expect {
        Reject(Rejection),
        Seal(SealReason),
        Wait(Timestamp),
        Claim,
    }

    fn expect(v: Verdict) -> Expect {
        match v {
            Verdict::Reject(r) => Expect::Reject(r),
            Verdict::Seal(_, r) => Expect::Seal(r),
            Verdict::Wait(_, at) => Expect::Wait(at),
            Verdict::Claim(_) => Expect::Claim,
        }
    }

    /// Each row breaks one more rule than the checks after it see: the first failing check in
    /// SPEC order decides, and only a clean record is claimed.
    #[test]
    fn resume_checks_fail_closed_in_order() {
        let a = approved();
        let wake = wake_of(&a);
        let mut sealed = a.clone();
        sealed.standing = Standing::Sealed {
            end: crate::domain::Terminal::Cancelled,
            outcome: Default::default(),
            at: t(5),
        };
        let other_wake = Wake {
            correlation_id: "cor_older".into(),
            ..wake.clone()
        };
        let other_tenant = Wake {
            tenant: "globex".into(),
            ..wake.clone()
        };
        // (wake, action, stopped, fingerprint, now, expected)
        type Row<'a> = (&'a Wake, Option<Action>, bool, Option<&'a str>, i64, Expect);
        let table: Vec<Row> = vec![
            (
                &wake,
                None,
                true,
                None,
                300,
                Expect::Reject(Rejection::NoWaitingTicket),
            ),
            (
                &wake,
                Some(sealed),
                true,
                None,
                300,
                Expect::Reject(Rejection::NoWaitingTicket),
            ),
            (
                &other_tenant,
                Some(a.clone()),
                true,
                None,
                300,
                Expect::Reject(Rejection::NoWaitingTicket),
            ),
            (
                &other_wake,
                Some(a.clone()),
                true,
                None,
                300,
                Expect::Reject(Rejection::CorrelationMismatch),
            ),
            (
                &wake,
                Some(a.clone()),
                true,
                None,
                300,
                Expect::Seal(SealReason::Stopped),
            ),
            (
                &wake,
                Some(a.clone()),
                false,
                None,
                300,
                Expect::Seal(SealReason::CatalogChanged),
            ),
            (
                &wake,
                Some(a.clone()),
                false,
                Some("fp-2"),
                50,
                Expect::Seal(SealReason::CatalogChanged),
            ),
            (
                &wake,
                Some(a.clone()),
                false,
                Some(FP),
                50,
                Expect::Wait(t(100)),
            ),
            (
                &wake,
                Some(a.clone()),
                false,
                Some(FP),
                201,
                Expect::Seal(SealReason::ScheduleMissed),
            ),
            (&wake, Some(a.clone()), false, Some(FP), 100, Expect::Claim),
            (&wake, Some(a.clone()), false, Some(FP), 200, Expect::Claim),
        ];
        for (i, (wake, action, stopped, fingerprint, now, expected)) in
            table.into_iter().enumerate()
        {
            let facts = Facts {
                action,
                stopped,
                current_fingerprint: fingerprint,
                now: t(now),
            };
            assert_eq!(expect(check(wake, facts)), expected, "row {i}");
        }
    }

    #[test]
    fn a_verdict_carries_the_record_it_judged() {
        let a = approved();
        let facts = Facts {
            action: Some(a.clone()),
            stopped: false,
            current_fingerprint: Some(FP),
            now: t(150),
        };
        assert_eq!(check(&wake_of(&a), facts), Verdict::Claim(a));
    }

    #[test]
    fn recovery_reruns_only_a_clean_retry_tool_inside_its_window() {
        let mut a = approved();
        let approved_only = a.clone();
        let ticket = a.ticket().unwrap().clone();
        a.standing = Standing::Executing {
            ticket,
            lease: Lease {
                owner: "wrk".into(),
                epoch: 1,
                until: t(150),
            },
        };
        // (action, retry policy, stopped, fingerprint, now, expected)
        use RecoveryVerdict::*;
        let table = [
            (&approved_only, true, false, Some(FP), 160, Leave),
            (&a, true, false, Some(FP), 149, Leave),
            (&a, true, false, Some(FP), 160, Rerun),
            (&a, true, false, Some(FP), 200, Rerun),
            (&a, false, false, Some(FP), 160, SealUnknown),
            (&a, true, true, Some(FP), 160, SealUnknown),
            (&a, true, false, Some("fp-2"), 160, SealUnknown),
            (&a, true, false, None, 160, SealUnknown),
            (&a, true, false, Some(FP), 201, SealUnknown),
        ];
        for (i, (action, retry_policy, stopped, fp, now, expected)) in table.into_iter().enumerate()
        {
            let facts = RecoveryFacts {
                action,
                retry_policy,
                stopped,
                current_fingerprint: fp,
                now: t(now),
            };
            assert_eq!(check_recovery(&facts), expected, "row {i}");
        }
    }

    #[test]
    fn an_attempt_starts_only_unstopped_inside_its_window() {
        let a = approved();
        let ticket = a.ticket().unwrap();
        let late = t(200) + SignedDuration::from_nanos(1);
        // The lease ends at t(300); an attempt takes up to 10 s.
        let table = [
            (
                true,
                t(150),
                t(300),
                AttemptVerdict::Halt(SealReason::Stopped),
            ),
            (
                true,
                t(50),
                t(300),
                AttemptVerdict::Halt(SealReason::Stopped),
            ),
            (
                true,
                t(295),
                t(300),
                AttemptVerdict::Halt(SealReason::Stopped),
            ),
            (false, t(50), t(300), AttemptVerdict::Early(t(100))),
            (
                false,
                late,
                t(300),
                AttemptVerdict::Halt(SealReason::ScheduleMissed),
            ),
            (false, t(100), t(300), AttemptVerdict::Start),
            (false, t(200), t(300), AttemptVerdict::Start),
            (false, t(190), t(200), AttemptVerdict::Start),
            (false, t(191), t(200), AttemptVerdict::LeaseRunsOut),
            (false, t(150), t(120), AttemptVerdict::LeaseRunsOut),
        ];
        for (i, (stopped, now, lease_until, expected)) in table.into_iter().enumerate() {
            let facts = AttemptFacts {
                ticket,
                stopped,
                lease_until,
                attempt_takes: SignedDuration::from_secs(10),
                now,
            };
            assert_eq!(check_attempt(&facts), expected, "row {i}");
        }
    }
}
