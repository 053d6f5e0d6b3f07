//! The action record: what the API returns and what the store keeps.

use super::{ticket::Ticket, window::Window};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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

    /// Terminal states are sealed: they never change again.
    pub fn is_sealed(self) -> bool {
        matches!(
            self,
            State::Succeeded | State::Failed | State::Cancelled | State::Denied
        )
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

/// The policy gate's outcome (the runtime contract's Allow, Block, SetResult,
/// RequireConfirmation, Schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    SetResult,
    RequireApproval,
    Schedule,
}

/// Caller-side identifiers an agent may attach, echoed back untouched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    Agent,
    User,
    System,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Actor {
    #[serde(rename = "type")]
    pub kind: ActorKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl Actor {
    pub fn system() -> Self {
        Actor {
            kind: ActorKind::System,
            id: None,
        }
    }
    pub fn agent(id: &str) -> Self {
        Actor {
            kind: ActorKind::Agent,
            id: Some(id.to_owned()),
        }
    }
    pub fn user(id: &str) -> Self {
        Actor {
            kind: ActorKind::User,
            id: Some(id.to_owned()),
        }
    }
}

/// The countersignature: the context shown to the approver, its digest, and the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Approval {
    pub context: Value,
    pub context_digest: String,
    /// When a pending approval lapses (SC-APP-04).
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub decided_at: Option<Timestamp>,
}

/// How a sealed action ended: a tool result, a tool error, and/or a reason code.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Outcome {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The claim on an executing action: who holds it, which claim it is, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub epoch: u32,
    pub until: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub id: String,
    pub tenant: String,
    pub agent_id: String,
    pub tool: String,
    pub args: Value,
    pub args_digest: String,
    pub action_kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunRef>,
    pub schedule: Option<Window>,
    pub decision: Decision,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    pub actor: Actor,
    pub version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_at: Option<Timestamp>,
    /// The committed ticket while `approved` or `executing`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<Ticket>,
    /// Held while `executing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// Hash of the last audit event: the next event chains onto it.
    pub chain_head: String,
}

/// An executing action's claim: its committed ticket and the lease it runs under.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub ticket: &'a Ticket,
    pub lease: &'a Lease,
}

/// Why a stored record was refused on load.
#[derive(Debug, thiserror::Error)]
#[error("malformed action record: {0}")]
pub struct Malformed(pub String);

impl Action {
    /// Load a stored record, failing closed on anything inconsistent (SPEC §1.2).
    pub fn from_stored(bytes: &[u8]) -> Result<Action, Malformed> {
        let action: Action = serde_json::from_slice(bytes).map_err(|e| Malformed(e.to_string()))?;
        action.check_invariants()?;
        Ok(action)
    }

    pub fn to_stored(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an action serializes")
    }

    fn check_invariants(&self) -> Result<(), Malformed> {
        let waiting = matches!(self.state, State::Approved | State::Executing);
        match (&self.ticket, waiting) {
            (Some(_), false) => return Err(Malformed(format!("{} holds a ticket", self.state))),
            (None, true) => return Err(Malformed(format!("{} without a ticket", self.state))),
            (Some(ticket), true) => {
                if ticket.action_id() != self.id || ticket.tenant() != self.tenant {
                    return Err(Malformed("ticket belongs to another action".into()));
                }
                if ticket.pending_tool() != self.tool || ticket.target().args != self.args {
                    return Err(Malformed("ticket call differs from the action".into()));
                }
                let call_id = self.run.as_ref().and_then(|r| r.call_id.as_deref());
                if ticket.call_id() != call_id.unwrap_or(&self.id) {
                    return Err(Malformed("ticket call id differs from the action".into()));
                }
                // A ticket never runs past the window the action was submitted with.
                if self
                    .schedule
                    .is_some_and(|w| ticket.deadline() != w.not_after)
                {
                    return Err(Malformed("ticket deadline differs from the window".into()));
                }
            }
            (None, false) => {}
        }
        if (self.state == State::Executing) != self.lease.is_some() {
            return Err(Malformed(format!("lease inconsistent with {}", self.state)));
        }
        if self.state == State::PendingApproval && self.approval.is_none() {
            return Err(Malformed("pending without approval context".into()));
        }
        if self.state.is_sealed() != self.sealed_at.is_some() {
            return Err(Malformed("sealed_at inconsistent with state".into()));
        }
        Ok(())
    }

    /// When the sweep must look at this action next; `None` once sealed. One sparse index
    /// serves the three sweeps: due tickets, expired leases and lapsed approvals.
    pub fn sweep_at(&self) -> Option<Timestamp> {
        match self.state {
            State::PendingApproval => self.approval.as_ref().map(|a| a.expires_at),
            State::Approved => self.ticket.as_ref().map(|t| t.due_at()),
            State::Executing => self.lease.as_ref().map(|l| l.until),
            _ => None,
        }
    }

    /// The ticket and lease of an executing action: what a worker holding its claim runs.
    pub fn held(&self) -> Option<Held<'_>> {
        match (self.state, &self.ticket, &self.lease) {
            (State::Executing, Some(ticket), Some(lease)) => Some(Held { ticket, lease }),
            _ => None,
        }
    }

    /// The reason code of the outcome, if any.
    pub fn reason(&self) -> Option<&str> {
        self.outcome.as_ref().and_then(|o| o.reason.as_deref())
    }

    /// `next_action` of the API: what this action waits for.
    pub fn next_action(&self) -> NextAction {
        match (self.state, &self.approval, &self.ticket) {
            (State::PendingApproval, Some(approval), _) => NextAction::Approval {
                context_digest: approval.context_digest.clone(),
            },
            (State::Approved | State::Executing, _, Some(ticket)) => NextAction::Scheduled {
                not_before: ticket.due_at(),
                not_after: ticket.deadline(),
            },
            _ => NextAction::None,
        }
    }
}

/// What an action waits for (SPEC §2 `next_action`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NextAction {
    /// A person's countersignature of this digest.
    Approval { context_digest: String },
    /// Its window: the committed ticket runs from `not_before` until `not_after`.
    Scheduled {
        #[schema(value_type = String, format = DateTime)]
        not_before: Timestamp,
        #[schema(value_type = String, format = DateTime)]
        not_after: Timestamp,
    },
    /// Nothing: the action is sealed.
    None,
}
