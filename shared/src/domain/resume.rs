//! The resume checks (SPEC §4 Resume): one function, a fixed order, fail closed.
//! Each check runs before any tool does; the wake payload only finds the ticket.

use super::{
    action::{Action, State},
    seal::SealReason,
};
use jiff::Timestamp;
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

/// What the resume must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Reject(Rejection),
    /// Seal without running, in the reason's state.
    Seal(SealReason),
    /// SC-RES-05: too early; re-arm for this instant.
    Wait(Timestamp),
    /// SC-RES-07: claim and run.
    Claim,
}

/// Facts gathered by the engine for the checks.
pub struct Facts<'a> {
    pub action: Option<&'a Action>,
    pub stopped: bool,
    /// Fingerprint of the tool's catalog entry now; `None` if it left the catalog.
    pub current_fingerprint: Option<&'a str>,
    pub now: Timestamp,
}

pub fn check(wake: &Wake, facts: &Facts<'_>) -> Verdict {
    // SC-RES-01
    let Some(action) = facts.action else {
        return Verdict::Reject(Rejection::NoWaitingTicket);
    };
    let ticket = match (&action.ticket, action.state) {
        (Some(ticket), State::Approved) if action.tenant == wake.tenant => ticket,
        _ => return Verdict::Reject(Rejection::NoWaitingTicket),
    };
    // SC-RES-02
    if ticket.correlation_id() != wake.correlation_id {
        return Verdict::Reject(Rejection::CorrelationMismatch);
    }
    // SC-RES-03
    if facts.stopped {
        return Verdict::Seal(SealReason::Stopped);
    }
    // SC-RES-04
    if facts.current_fingerprint != Some(ticket.catalog_fingerprint()) {
        return Verdict::Seal(SealReason::CatalogChanged);
    }
    // SC-RES-05
    if facts.now < ticket.due_at() {
        return Verdict::Wait(ticket.due_at());
    }
    // SC-RES-06
    if facts.now > ticket.deadline() {
        return Verdict::Seal(SealReason::ScheduleMissed);
    }
    Verdict::Claim
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
        (f.action.state, &f.action.ticket, &f.action.lease)
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
