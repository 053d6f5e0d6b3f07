//! The action record: what the API returns and what the store keeps.

pub use super::actor::{Actor, ActorKind, Person};
pub use super::policy::Decision;
pub use super::quorum::{Quorum, Signoff};
pub use super::state::{State, Terminal};
pub use super::submission::RunRef;
use super::{call::Call, granted::Terms as GrantTerms, ticket::Ticket};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The countersignature: the context shown to the approver, its digest, and the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Approval {
    /// What the approver is shown; `context_digest` is the digest of its canonical JSON.
    #[schema(value_type = super::context::ApprovalContext)]
    pub context: Value,
    pub context_digest: String,
    /// When a pending approval lapses (SC-APP-04).
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub expires_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// The person who gave the approval that committed the ticket, when a verified token named
    /// one (SC-ID-07); absent for an approver key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Person>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed_opt")]
    pub decided_at: Option<Timestamp>,
    /// Who may countersign and how many must (SC-POL-03/04), as the matched rule said at
    /// intake; absent in records written before: any approver, one approval.
    #[serde(default, skip_serializing_if = "Quorum::is_single")]
    pub quorum: Quorum,
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

/// Where an action stands, with what only that state holds: a ticket exists only while
/// approved or executing, a lease only while executing, an outcome only once sealed, and a
/// sealed standing only in a [`Terminal`] state. Its [`State`] is the name of the place; this
/// is the place itself. Made by transitions (and intake's first commit); a stored record loads
/// into one of them or is refused (SC-EDGE-08).
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Waits for a countersignature; its context is the action's `approval`. A quorum's
    /// approvals so far, each a distinct approver (SC-POL-04); empty for a single approval.
    PendingApproval { approvals: Vec<Signoff> },
    /// A committed ticket waits for its wake.
    Approved { ticket: Ticket },
    /// A worker holds the claim under `lease`.
    Executing { ticket: Ticket, lease: Lease },
    /// Sealed in `end` at `at`: it never changes again.
    Sealed {
        end: Terminal,
        outcome: Outcome,
        at: Timestamp,
    },
}

/// An action record: the committed call, where it stands, and its audit head. Stored and
/// answered in one flat JSON shape (the call's members, then `state`, `ticket`, `lease`,
/// `outcome`, `sealed_at`); [`Standing`] is how the code holds it. Its fields are the domain's:
/// others read them, and only the domain's transitions change them.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub(super) call: Call,
    pub(super) decision: Decision,
    pub(super) standing: Standing,
    /// The countersignature: asked for while pending, kept once decided.
    pub(super) approval: Option<Approval>,
    pub(super) actor: Actor,
    pub(super) version: u64,
    pub(super) created_at: Timestamp,
    pub(super) updated_at: Timestamp,
    /// Hash of the last audit event: the next event chains onto it.
    pub(super) chain_head: String,
    /// The grant this action's trail names (SC-GR-08): the one that allowed it, or the one its
    /// approval granted.
    pub(super) grant: Option<GrantTerms>,
}

/// The stored shape of an action, as read: checked into an [`Action`] by `TryFrom`.
#[derive(Deserialize)]
struct Stored {
    #[serde(flatten)]
    call: Call,
    decision: Decision,
    state: State,
    #[serde(default)]
    approval: Option<Approval>,
    #[serde(default)]
    outcome: Option<Outcome>,
    actor: Actor,
    version: u64,
    #[serde(with = "crate::domain::time::fixed")]
    created_at: Timestamp,
    #[serde(with = "crate::domain::time::fixed")]
    updated_at: Timestamp,
    #[serde(default)]
    #[serde(with = "crate::domain::time::fixed_opt")]
    sealed_at: Option<Timestamp>,
    #[serde(default)]
    ticket: Option<Ticket>,
    #[serde(default)]
    lease: Option<Lease>,
    /// A pending quorum's approvals so far; absent (none) in records written before.
    #[serde(default)]
    approvals: Vec<Signoff>,
    chain_head: String,
    #[serde(default)]
    grant: Option<GrantTerms>,
}

/// The stored shape of an action, as written (borrowed: no copy of the args).
#[derive(Serialize)]
struct StoredRef<'a> {
    #[serde(flatten)]
    call: &'a Call,
    decision: Decision,
    state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval: &'a Option<Approval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a Outcome>,
    actor: &'a Actor,
    version: u64,
    #[serde(with = "crate::domain::time::fixed")]
    created_at: Timestamp,
    #[serde(with = "crate::domain::time::fixed")]
    updated_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(with = "crate::domain::time::fixed_opt")]
    sealed_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ticket: Option<&'a Ticket>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<&'a Lease>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approvals: Option<&'a [Signoff]>,
    chain_head: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    grant: Option<&'a GrantTerms>,
}

impl Serialize for Action {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StoredRef {
            call: &self.call,
            decision: self.decision,
            state: self.state(),
            approval: &self.approval,
            outcome: self.outcome(),
            actor: &self.actor,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
            sealed_at: self.sealed_at(),
            ticket: self.ticket(),
            lease: self.lease(),
            approvals: Some(self.approvals()).filter(|a| !a.is_empty()),
            chain_head: &self.chain_head,
            grant: self.grant.as_ref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Action::try_from(Stored::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<Stored> for Action {
    type Error = Malformed;

    /// One standing from the stored fields, or a refusal naming what does not fit.
    fn try_from(r: Stored) -> Result<Self, Malformed> {
        if r.state != State::PendingApproval && !r.approvals.is_empty() {
            return Err(Malformed(format!("{} with pending approvals", r.state)));
        }
        let standing = match (r.state, r.state.terminal(), r.ticket, r.lease, r.sealed_at) {
            (State::PendingApproval, _, None, None, None) => Standing::PendingApproval {
                approvals: r.approvals,
            },
            (State::Approved, _, Some(ticket), None, None) => Standing::Approved { ticket },
            (State::Executing, _, Some(ticket), Some(lease), None) => {
                Standing::Executing { ticket, lease }
            }
            (_, Some(end), None, None, Some(at)) => Standing::Sealed {
                end,
                outcome: r.outcome.unwrap_or_default(),
                at,
            },
            (state, _, ticket, lease, sealed_at) => {
                return Err(Malformed(format!(
                    "{state} with{} a ticket, with{} a lease, with{} a seal time",
                    if ticket.is_some() { "" } else { "out" },
                    if lease.is_some() { "" } else { "out" },
                    if sealed_at.is_some() { "" } else { "out" },
                )))
            }
        };
        let action = Action {
            call: r.call,
            decision: r.decision,
            standing,
            approval: r.approval,
            actor: r.actor,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
            chain_head: r.chain_head,
            grant: r.grant,
        };
        action.check_invariants()?;
        Ok(action)
    }
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
    /// The first form of an action, before its first commit: [`super::Creation::new`] numbers
    /// it, stamps it and starts its chain. Intake's is built by [`super::admission`].
    pub fn first(
        call: Call,
        decision: Decision,
        standing: Standing,
        approval: Option<Approval>,
        now: Timestamp,
    ) -> Action {
        Action {
            actor: Actor::agent(call.agent_id()),
            call,
            decision,
            standing,
            approval,
            version: 0,
            created_at: now,
            updated_at: now,
            // Set by the first transition (the chain's genesis binds this action).
            chain_head: String::new(),
            grant: None,
        }
    }

    /// The committed call: the same in every state.
    pub fn call(&self) -> &Call {
        &self.call
    }
    /// The action id (the call's).
    pub fn id(&self) -> &str {
        self.call.id()
    }
    pub fn tenant(&self) -> &str {
        self.call.tenant()
    }
    /// The policy gate's outcome at intake.
    pub fn decision(&self) -> Decision {
        self.decision
    }
    pub fn standing(&self) -> &Standing {
        &self.standing
    }
    /// The countersignature: asked for while pending, kept once decided.
    pub fn approval(&self) -> Option<&Approval> {
        self.approval.as_ref()
    }
    /// The grant its trail names: the one that allowed it, or the one its approval granted
    /// (SC-GR-08).
    pub fn grant(&self) -> Option<&GrantTerms> {
        self.grant.as_ref()
    }
    /// Who made the last transition.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }
    /// One per transition; equals the number of audit events.
    pub fn version(&self) -> u64 {
        self.version
    }
    pub fn created_at(&self) -> Timestamp {
        self.created_at
    }
    pub fn updated_at(&self) -> Timestamp {
        self.updated_at
    }
    /// Hash of the last audit event: the next event chains onto it.
    pub fn chain_head(&self) -> &str {
        &self.chain_head
    }

    /// Load a stored record, failing closed on anything inconsistent (SPEC §1.2).
    pub fn from_stored(bytes: &[u8]) -> Result<Action, Malformed> {
        let stored: Stored = serde_json::from_slice(bytes).map_err(|e| Malformed(e.to_string()))?;
        Action::try_from(stored)
    }

    pub fn to_stored(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an action serializes")
    }

    pub fn state(&self) -> State {
        match &self.standing {
            Standing::PendingApproval { .. } => State::PendingApproval,
            Standing::Approved { .. } => State::Approved,
            Standing::Executing { .. } => State::Executing,
            Standing::Sealed { end, .. } => end.state(),
        }
    }

    /// The committed ticket while approved or executing.
    pub fn ticket(&self) -> Option<&Ticket> {
        match &self.standing {
            Standing::Approved { ticket } | Standing::Executing { ticket, .. } => Some(ticket),
            _ => None,
        }
    }

    /// The claim's lease while executing.
    pub fn lease(&self) -> Option<&Lease> {
        match &self.standing {
            Standing::Executing { lease, .. } => Some(lease),
            _ => None,
        }
    }

    /// How it ended, once sealed.
    pub fn outcome(&self) -> Option<&Outcome> {
        match &self.standing {
            Standing::Sealed { outcome, .. } => Some(outcome),
            _ => None,
        }
    }

    pub fn sealed_at(&self) -> Option<Timestamp> {
        match &self.standing {
            Standing::Sealed { at, .. } => Some(*at),
            _ => None,
        }
    }

    /// A pending quorum's approvals so far (none in any other state).
    pub fn approvals(&self) -> &[Signoff] {
        match &self.standing {
            Standing::PendingApproval { approvals } => approvals,
            _ => &[],
        }
    }

    /// The ticket and lease of an executing action: what a worker holding its claim runs.
    pub fn held(&self) -> Option<Held<'_>> {
        match &self.standing {
            Standing::Executing { ticket, lease } => Some(Held { ticket, lease }),
            _ => None,
        }
    }

    /// The standing's own consistency is its type; what is left is that the ticket is this
    /// action's call, and that a pending action has its approval context.
    fn check_invariants(&self) -> Result<(), Malformed> {
        if let Some(ticket) = self.ticket() {
            let call = &self.call;
            if ticket.action_id() != call.id() || ticket.tenant() != call.tenant() {
                return Err(Malformed("ticket belongs to another action".into()));
            }
            if ticket.pending_tool() != call.tool() || ticket.target().args != *call.args() {
                return Err(Malformed("ticket call differs from the action".into()));
            }
            let call_id = call.run().and_then(|r| r.call_id.as_deref());
            if ticket.call_id() != call_id.unwrap_or(call.id()) {
                return Err(Malformed("ticket call id differs from the action".into()));
            }
            // A ticket never runs past the window the action was submitted with.
            if call
                .schedule()
                .is_some_and(|w| ticket.deadline() != w.not_after)
            {
                return Err(Malformed("ticket deadline differs from the window".into()));
            }
        }
        if let Standing::PendingApproval { approvals } = &self.standing {
            let Some(approval) = &self.approval else {
                return Err(Malformed("pending without approval context".into()));
            };
            if !approval.quorum.holds_pending(approvals) {
                return Err(Malformed(
                    "pending approvals repeat or reach the quorum".into(),
                ));
            }
        }
        Ok(())
    }

    /// When the sweep must look at this action next; `None` once sealed. One sparse index
    /// serves the three sweeps: due tickets, expired leases and lapsed approvals.
    pub fn sweep_at(&self) -> Option<Timestamp> {
        match &self.standing {
            Standing::PendingApproval { .. } => self.approval.as_ref().map(|a| a.expires_at),
            Standing::Approved { ticket } => Some(ticket.due_at()),
            Standing::Executing { lease, .. } => Some(lease.until),
            Standing::Sealed { .. } => None,
        }
    }

    /// The reason code of the outcome, if any.
    pub fn reason(&self) -> Option<&str> {
        self.outcome().and_then(|o| o.reason.as_deref())
    }
}
