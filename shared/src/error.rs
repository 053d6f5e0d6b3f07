//! The engine's errors. Each variant is one stable API code; `api::error` maps them to HTTP in
//! exactly one place.

use crate::domain::{SealReason, State};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{message}")]
    Validation { param: String, message: String },
    #[error("missing or unknown API key")]
    Unauthenticated,
    #[error("{0}")]
    Forbidden(String),
    #[error("no such action")]
    NotFound,
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
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("too many requests: retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// A dependency (store, wake) failed; retryable by the caller.
    #[error("temporarily unavailable: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

/// The intake outcomes that are recorded as sealed `denied` and answered with 403.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Denied,
    ScheduleNeedsApproval,
    CapabilityBound,
    AgentStopped,
}

impl Refusal {
    /// The reason recorded on the sealed action.
    pub fn reason(self) -> SealReason {
        match self {
            Refusal::Denied => SealReason::PolicyDenied,
            Refusal::ScheduleNeedsApproval => SealReason::ScheduleNeedsApproval,
            Refusal::CapabilityBound => SealReason::CapabilityBound,
            Refusal::AgentStopped => SealReason::Stopped,
        }
    }

    pub fn from_reason(reason: &str) -> Option<Refusal> {
        [
            Refusal::Denied,
            Refusal::ScheduleNeedsApproval,
            Refusal::CapabilityBound,
            Refusal::AgentStopped,
        ]
        .into_iter()
        .find(|r| r.reason().as_str() == reason)
    }

    pub fn code(self) -> &'static str {
        match self {
            Refusal::Denied => "denied",
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

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::Unavailable(m) => Error::Unavailable(m),
            other => Error::Internal(other.to_string()),
        }
    }
}
