//! The names of where an action stands, and the one table of moves between them.
//!
//! [`State`] is the name the API, the store and the audit trail use (`"state": "approved"`);
//! [`Standing`](super::action::Standing) is the same place with what only it holds (a ticket, a
//! lease, an outcome). A sealed standing holds a [`Terminal`], so no record can be sealed in a
//! live state. Every move — each transition the domain builds, each event of a verified audit
//! trail — is one the table of [`may_move`] allows.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    PendingApproval,
    Approved,
    Executing,
    Succeeded,
    Failed,
    Cancelled,
    Denied,
}

impl State {
    pub const ALL: [State; 7] = [
        State::PendingApproval,
        State::Approved,
        State::Executing,
        State::Succeeded,
        State::Failed,
        State::Cancelled,
        State::Denied,
    ];

    /// The terminal state this is, if it is one.
    pub fn terminal(self) -> Option<Terminal> {
        match self {
            State::Succeeded => Some(Terminal::Succeeded),
            State::Failed => Some(Terminal::Failed),
            State::Cancelled => Some(Terminal::Cancelled),
            State::Denied => Some(Terminal::Denied),
            State::PendingApproval | State::Approved | State::Executing => None,
        }
    }

    /// Terminal states are sealed: they never change again.
    pub fn is_sealed(self) -> bool {
        self.terminal().is_some()
    }

    /// Whether an action in this state may move to `to` (see [`may_move`]).
    pub fn may_move_to(self, to: State) -> bool {
        may_move(Some(self), to)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::PendingApproval => "pending_approval",
            State::Approved => "approved",
            State::Executing => "executing",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
            State::Denied => "denied",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The four states a sealed action ends in. [`Standing::Sealed`](super::action::Standing)
/// holds one of these: "sealed but pending" is not a value the code can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Terminal {
    Succeeded,
    Failed,
    Cancelled,
    Denied,
}

impl Terminal {
    pub fn state(self) -> State {
        match self {
            Terminal::Succeeded => State::Succeeded,
            Terminal::Failed => State::Failed,
            Terminal::Cancelled => State::Cancelled,
            Terminal::Denied => State::Denied,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.state().as_str()
    }
}

impl From<Terminal> for State {
    fn from(t: Terminal) -> State {
        t.state()
    }
}

impl std::fmt::Display for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

use State::{Approved, Cancelled, Denied, Executing, Failed, PendingApproval, Succeeded};

/// Every legal move: from a state (`None`: a new action's first commit) to the states it may go
/// to. A sealed state has no row: it never changes again (SPEC §1.7).
pub const MOVES: [(Option<State>, &[State]); 4] = [
    // Intake's first commit (SC-INT-03..09): waiting for people, a ticket committed by policy
    // (already claimed when it runs in the request, SC-EDGE-07), denied, or a policy's result.
    (
        None,
        &[PendingApproval, Approved, Executing, Denied, Succeeded],
    ),
    // One approval of a quorum (SC-POL-04), the countersignature (SC-APP-03; straight to
    // `executing` in trails written before an approve that claims recorded two events,
    // SC-EDGE-07), a deny (SC-APP-05), a cancel, an expiry or a tool gone from the catalog.
    (
        Some(PendingApproval),
        &[PendingApproval, Approved, Executing, Cancelled, Denied],
    ),
    // The claim (SC-RES-07); a cancel, a missed window or a changed catalog; a stop.
    (Some(Approved), &[Executing, Cancelled, Denied]),
    // A recovery's re-claim (SC-REC-02), the tool's answer or an unknown outcome, a claim that
    // started no attempt sealed as not run (SC-EDGE-02, SC-EDGE-11).
    (
        Some(Executing),
        &[Executing, Succeeded, Failed, Cancelled, Denied],
    ),
];

/// Whether `from → to` is a legal move ([`MOVES`]). Asserted by every transition the domain
/// builds, and checked on every event when an audit trail is verified.
pub fn may_move(from: Option<State>, to: State) -> bool {
    MOVES
        .iter()
        .find(|(f, _)| *f == from)
        .is_some_and(|(_, next)| next.contains(&to))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC §1.7 and the state diagram of §2: the whole table, cell by cell, so a move added or
    /// dropped shows up here.
    #[test]
    fn sc_sec_06_the_table_of_moves() {
        let none_to = |s: State| may_move(None, s);
        let legal: Vec<(Option<State>, State)> = [None]
            .into_iter()
            .chain(State::ALL.map(Some))
            .flat_map(|from| State::ALL.map(move |to| (from, to)))
            .filter(|(from, to)| may_move(*from, *to))
            .collect();
        let expected = [
            (None, PendingApproval),
            (None, Approved),
            (None, Executing),
            (None, Succeeded),
            (None, Denied),
            (Some(PendingApproval), PendingApproval),
            (Some(PendingApproval), Approved),
            (Some(PendingApproval), Executing),
            (Some(PendingApproval), Cancelled),
            (Some(PendingApproval), Denied),
            (Some(Approved), Executing),
            (Some(Approved), Cancelled),
            (Some(Approved), Denied),
            (Some(Executing), Executing),
            (Some(Executing), Succeeded),
            (Some(Executing), Failed),
            (Some(Executing), Cancelled),
            (Some(Executing), Denied),
        ];
        assert_eq!(legal, expected);
        // Nothing leaves a sealed state, not even to itself; nothing is born cancelled or failed.
        for sealed in State::ALL.into_iter().filter(|s| s.is_sealed()) {
            assert!(State::ALL.iter().all(|to| !sealed.may_move_to(*to)));
        }
        assert!(!none_to(Cancelled) && !none_to(Failed));
        // A result needs a run: no tool answer before a claim.
        assert!(!PendingApproval.may_move_to(Succeeded) && !Approved.may_move_to(Failed));
    }

    #[test]
    fn terminal_states_are_the_sealed_ones() {
        for state in State::ALL {
            assert_eq!(
                state.terminal().map(State::from),
                state.is_sealed().then_some(state)
            );
        }
    }
}
