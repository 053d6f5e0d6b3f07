//! Why an action was sealed: one closed set of reason codes, each with the state it seals in.
//! The code is what the API shows in `outcome.reason` and the audit event's `reason`.

use super::action::{Outcome, Terminal};
use super::policy::ConditionFailed;
use serde::{Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealReason {
    /// SC-CAN-01: the submitting agent, an approver or an admin cancelled.
    Cancelled,
    /// SC-INT-03, SC-RES-03, SC-EDGE-02: a stop of the tenant or agent stood.
    Stopped,
    /// SC-RES-04: the tool's catalog entry changed (or left) since the ticket committed.
    CatalogChanged,
    /// SC-RES-06, §1.4: the window closed before a run could start.
    ScheduleMissed,
    /// SC-APP-04: nobody decided in time.
    ApprovalExpired,
    /// SC-REC-02: a worker's lease lapsed before a result committed; the tool may have run.
    OutcomeUnknown,
    /// SC-INT-05: the policy denies the call.
    PolicyDenied,
    /// SC-INT-05: an allowed call with a later window.
    ScheduleNeedsApproval,
    /// SC-INT-04: an `action_kind` the tenant did not declare.
    CapabilityBound,
    /// SC-INT-08: the policy answered with a fixed result; the tool never ran.
    SetResult,
    /// SC-APP-05: an approver denied, in its own words.
    Denied(String),
    /// SC-POL-02: a policy rule's condition could not be evaluated; the call is denied.
    ConditionFailed(ConditionFailed),
}

impl SealReason {
    /// The terminal state this reason seals in.
    pub fn state(&self) -> Terminal {
        match self {
            SealReason::Cancelled
            | SealReason::CatalogChanged
            | SealReason::ScheduleMissed
            | SealReason::ApprovalExpired => Terminal::Cancelled,
            SealReason::Stopped
            | SealReason::PolicyDenied
            | SealReason::ScheduleNeedsApproval
            | SealReason::CapabilityBound
            | SealReason::Denied(_)
            | SealReason::ConditionFailed(_) => Terminal::Denied,
            SealReason::OutcomeUnknown => Terminal::Failed,
            SealReason::SetResult => Terminal::Succeeded,
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            SealReason::Cancelled => "cancelled",
            SealReason::Stopped => "stopped",
            SealReason::CatalogChanged => "catalog_changed",
            SealReason::ScheduleMissed => "schedule_missed",
            SealReason::ApprovalExpired => "approval_expired",
            SealReason::OutcomeUnknown => "outcome_unknown",
            SealReason::PolicyDenied => "policy_denied",
            SealReason::ScheduleNeedsApproval => "schedule_needs_approval",
            SealReason::CapabilityBound => "capability_bound",
            SealReason::SetResult => "set_result",
            SealReason::Denied(words) => words,
            SealReason::ConditionFailed(_) => "condition_error",
        }
    }
}

impl SealReason {
    /// The outcome of an action sealed for this reason before any tool answered.
    pub fn outcome(&self) -> Outcome {
        // The failing rule and the evaluator's words travel with the denial (SC-POL-02).
        let error = match self {
            SealReason::ConditionFailed(f) => Some(serde_json::json!({
                "kind": "condition_error",
                "rule": f.rule,
                "message": f.message,
            })),
            _ => None,
        };
        Outcome {
            reason: Some(self.as_str().to_owned()),
            error,
            ..Outcome::default()
        }
    }
}

impl std::fmt::Display for SealReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SealReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::State;

    #[test]
    fn each_reason_seals_in_its_state() {
        let table = [
            (SealReason::Cancelled, Terminal::Cancelled, "cancelled"),
            (SealReason::Stopped, Terminal::Denied, "stopped"),
            (
                SealReason::CatalogChanged,
                Terminal::Cancelled,
                "catalog_changed",
            ),
            (
                SealReason::ScheduleMissed,
                Terminal::Cancelled,
                "schedule_missed",
            ),
            (
                SealReason::ApprovalExpired,
                Terminal::Cancelled,
                "approval_expired",
            ),
            (
                SealReason::OutcomeUnknown,
                Terminal::Failed,
                "outcome_unknown",
            ),
            (SealReason::PolicyDenied, Terminal::Denied, "policy_denied"),
            (
                SealReason::ScheduleNeedsApproval,
                Terminal::Denied,
                "schedule_needs_approval",
            ),
            (
                SealReason::CapabilityBound,
                Terminal::Denied,
                "capability_bound",
            ),
            (SealReason::SetResult, Terminal::Succeeded, "set_result"),
            (
                SealReason::ConditionFailed(ConditionFailed {
                    rule: 0,
                    message: "No such key: amount".into(),
                }),
                Terminal::Denied,
                "condition_error",
            ),
            (
                SealReason::Denied("too risky".into()),
                Terminal::Denied,
                "too risky",
            ),
        ];
        for (reason, state, code) in table {
            assert_eq!(reason.state(), state, "{reason}");
            assert!(State::from(state).is_sealed());
            assert_eq!(reason.as_str(), code);
        }
    }
}
