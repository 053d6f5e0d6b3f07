//! What an action waits for: the API's `next_action`, read from where the action stands.

use super::action::{Action, Standing};
use jiff::Timestamp;
use serde::Serialize;
use utoipa::ToSchema;

impl Action {
    /// `next_action` of the API: what this action waits for.
    pub fn next_action(&self) -> NextAction {
        match (&self.standing, &self.approval, self.ticket()) {
            (Standing::PendingApproval { approvals }, Some(approval), _) => NextAction::Approval {
                context_digest: approval.context_digest.clone(),
                still_needed: approval
                    .quorum
                    .required
                    .saturating_sub(approvals.len() as u32),
            },
            (_, _, Some(ticket)) => NextAction::Scheduled {
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
    /// A person's countersignature of this digest; `still_needed` approvals of distinct
    /// approvers before the ticket commits (1 unless the rule asks for a quorum, SC-POL-04).
    Approval {
        context_digest: String,
        still_needed: u32,
    },
    /// Its window: the committed ticket runs from `not_before` until `not_after`.
    Scheduled {
        #[schema(value_type = String, format = DateTime)]
        #[serde(with = "crate::domain::time::fixed")]
        not_before: Timestamp,
        #[schema(value_type = String, format = DateTime)]
        #[serde(with = "crate::domain::time::fixed")]
        not_after: Timestamp,
    },
    /// Nothing: the action is sealed.
    None,
}
