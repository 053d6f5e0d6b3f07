//! The resume checks (SPEC §4 Resume): one function, a fixed order, fail closed.
//! Each check runs before any tool does; the wake payload only finds the ticket.

use super::action::{Action, State};
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
    /// Seal without running: (state, reason).
    Seal(State, &'static str),
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
        return Verdict::Seal(State::Denied, "stopped");
    }
    // SC-RES-04
    if facts.current_fingerprint != Some(ticket.catalog_fingerprint()) {
        return Verdict::Seal(State::Cancelled, "catalog_changed");
    }
    // SC-RES-05
    if facts.now < ticket.due_at() {
        return Verdict::Wait(ticket.due_at());
    }
    // SC-RES-06
    if facts.now > ticket.deadline() {
        return Verdict::Seal(State::Cancelled, "schedule_missed");
    }
    Verdict::Claim
}
