//! The engine's errors. Each variant is one stable API code; `api::error::ApiError` wraps them
//! beside the refusals only HTTP makes, and maps them all to HTTP in exactly one place.

use crate::domain::{countersign::Objection, SealReason, State};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    Validation { param: String, message: String },
    #[error("{0}")]
    Forbidden(String),
    /// A resource that is not there (another tenant's counts as not there).
    #[error("{0}")]
    NotFound(Missing),
    /// Intake refusals: the action is recorded sealed `denied`; the id lets the caller read it.
    #[error("{message}")]
    Refused {
        code: Refusal,
        message: String,
        action_id: String,
    },
    #[error("the approval context changed: approve the current context_digest")]
    ContextChanged { current_digest: String },
    #[error("the action is executing; it can no longer be cancelled")]
    ActionExecuting,
    #[error("the action is sealed ({state})")]
    ActionSealed { state: State },
    /// A deed exists only once the action is sealed (SC-SEC-07).
    #[error("the action is not sealed yet ({state})")]
    ActionNotSealed { state: State },
    #[error("this Idempotency-Key was used with a different payload")]
    IdempotencyConflict,
    /// A dependency (store, wake) failed; retryable by the caller.
    #[error("temporarily unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// What was not found, named in the answer's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    Action,
    /// A notification id (`ntf_…`) with no notice in the outbox.
    Notification(String),
    /// A stop to lift: an agent id, or `*` for the tenant's.
    Stop(String),
    /// A grant to revoke (`grt_…`).
    Grant,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Action => f.write_str("no such action"),
            Missing::Notification(id) => write!(f, "no such notification: {}", shown(id)),
            Missing::Stop(scope) if scope == "*" => f.write_str("no stop for the whole tenant"),
            Missing::Stop(agent) => write!(f, "no stop for agent {}", shown(agent)),
            Missing::Grant => f.write_str("no such grant"),
        }
    }
}

/// A caller's text echoed in a message, cut short: an id may be kilobytes long.
pub fn shown(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The intake outcomes that are recorded as sealed `denied` and answered with 403.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Denied,
    ScheduleNeedsApproval,
    CapabilityBound,
    AgentStopped,
    /// A policy condition could not be evaluated (SC-POL-02): answered as a denial.
    ConditionFailed,
}

impl Refusal {
    /// The reason recorded on the sealed action.
    pub fn reason(self) -> SealReason {
        match self {
            Refusal::Denied => SealReason::PolicyDenied,
            Refusal::ScheduleNeedsApproval => SealReason::ScheduleNeedsApproval,
            Refusal::CapabilityBound => SealReason::CapabilityBound,
            Refusal::AgentStopped => SealReason::Stopped,
            Refusal::ConditionFailed => SealReason::ConditionFailed(Default::default()),
        }
    }

    pub fn from_reason(reason: &str) -> Option<Refusal> {
        [
            Refusal::Denied,
            Refusal::ScheduleNeedsApproval,
            Refusal::CapabilityBound,
            Refusal::AgentStopped,
            Refusal::ConditionFailed,
        ]
        .into_iter()
        .find(|r| r.reason().as_str() == reason)
    }

    pub fn code(self) -> &'static str {
        match self {
            Refusal::Denied | Refusal::ConditionFailed => "denied",
            Refusal::ScheduleNeedsApproval => "schedule_needs_approval",
            Refusal::CapabilityBound => "capability_bound",
            Refusal::AgentStopped => "agent_stopped",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::Denied => "the policy denies this tool call",
            Refusal::ScheduleNeedsApproval => {
                "an allowed call runs at once; a later window needs an approval or a schedule rule"
            }
            Refusal::CapabilityBound => "this action_kind is not declared for the tenant",
            Refusal::AgentStopped => "the agent or tenant is stopped",
            Refusal::ConditionFailed => {
                "a policy condition could not be evaluated for this call, so it is denied (the action's outcome names the rule)"
            }
        }
    }
}

impl Error {
    pub fn validation(param: &str, message: impl Into<String>) -> Self {
        Error::Validation {
            param: param.to_owned(),
            message: message.into(),
        }
    }
}

/// A refused approve, deny or cancel (`domain::countersign`), as its API error.
impl From<Objection> for Error {
    fn from(o: Objection) -> Self {
        match o {
            Objection::OwnCall => Error::Forbidden(
                "an approver cannot approve an action submitted under its own identity".into(),
            ),
            Objection::NotInGroups(groups) => Error::Forbidden(format!(
                "this action is countersigned by the approver group(s) {}; this key is in none of them",
                groups.join(", ")
            )),
            Objection::CommittedByPolicy => Error::Forbidden(
                "this action was committed by policy; it takes no countersignature".into(),
            ),
            Objection::ContextChanged { current_digest } => Error::ContextChanged { current_digest },
            Objection::AlreadyApproved => Error::validation(
                "state",
                "the action is already approved; cancel it instead",
            ),
            Objection::Executing => Error::ActionExecuting,
            Objection::Sealed(state) => Error::ActionSealed { state },
        }
    }
}

/// A refused grant (`domain::grant`): nothing is stored, the approval is not given.
impl From<crate::domain::grant::Refusal> for Error {
    fn from(r: crate::domain::grant::Refusal) -> Self {
        use crate::domain::grant::Refusal;
        let message = r.to_string();
        match r {
            Refusal::Bounds { param, .. } => Error::validation(param, message),
            Refusal::NoSuchArg(_) => Error::validation("grant.pin", message),
            Refusal::Condition(_) => Error::validation("grant.when", message),
            Refusal::NotInGroups(_) => Error::Forbidden(message),
            Refusal::NotAsked | Refusal::Quorum(_) | Refusal::QuorumDisagrees(_) => {
                Error::validation("grant", message)
            }
        }
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::Unavailable(m) => Error::Unavailable(m),
            other => Error::Internal(other.to_string()),
        }
    }
}
