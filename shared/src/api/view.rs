//! What the API answers, as types: the same types serialize the answers and describe them in
//! the OpenAPI document, so the two cannot drift apart.

use crate::domain::{
    action::{Approval, Signoff},
    notice::OutboxEntry,
    Action, Actor, Decision, Event, NextAction, Outcome, RunRef, State, Window,
};
use crate::store::Quarantined;
use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// An action (SPEC §2): the record without its ticket, lease and chain internals.
// The call's members are listed here, not flattened from `domain::Call`: the OpenAPI document
// describes them one by one (a flattened member would become an `allOf`), and the view is one of
// the three places a new member of the call is written (with the call and its DynamoDB mapping).
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionView {
    /// `act_` + a ULID.
    pub id: String,
    pub tenant: String,
    pub agent_id: String,
    pub tool: String,
    #[schema(value_type = Object)]
    pub args: Value,
    /// `sha256:<hex>` of the canonical args.
    pub args_digest: String,
    pub action_kind: Option<String>,
    pub run: Option<RunRef>,
    pub schedule: Option<Window>,
    pub decision: Decision,
    pub state: State,
    pub next_action: NextAction,
    pub approval: Option<Approval>,
    /// A pending quorum's approvals so far (SC-POL-04); absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<Signoff>,
    pub outcome: Option<Outcome>,
    /// Who made the last transition.
    pub actor: Actor,
    /// One per transition; equals the number of audit events.
    pub version: u64,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub created_at: Timestamp,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub updated_at: Timestamp,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed_opt")]
    pub sealed_at: Option<Timestamp>,
    /// The grant its trail names (docs/grants.md): the one that allowed this call without a
    /// person, or the one its approval granted; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<crate::domain::grant::Terms>,
}

impl From<&Action> for ActionView {
    fn from(a: &Action) -> Self {
        let call = a.call();
        ActionView {
            id: call.id().to_owned(),
            tenant: call.tenant().to_owned(),
            agent_id: call.agent_id().to_owned(),
            tool: call.tool().to_owned(),
            args: call.args().clone(),
            args_digest: call.args_digest().to_owned(),
            action_kind: call.action_kind().map(str::to_owned),
            run: call.run().cloned(),
            schedule: call.schedule(),
            decision: a.decision(),
            state: a.state(),
            next_action: a.next_action(),
            approval: a.approval().cloned(),
            approvals: a.approvals().to_vec(),
            outcome: a.outcome().cloned(),
            actor: a.actor().clone(),
            version: a.version(),
            created_at: a.created_at(),
            updated_at: a.updated_at(),
            sealed_at: a.sealed_at(),
            grant: a.grant().cloned(),
        }
    }
}

/// A page of actions, newest first. It may be short or empty and still have a `next_cursor`
/// (a request reads a bounded number of stored items): only a null `next_cursor` ends the list.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionPage {
    pub data: Vec<ActionView>,
    /// Pass as `cursor` for the next page; null on the last one — and only there.
    pub next_cursor: Option<String>,
}

/// An action's audit chain, oldest first; verified against the record before it is served.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventList {
    pub data: Vec<Event>,
}

/// Admins: the tenant's quarantined records (SC-EDGE-08).
#[derive(Debug, Serialize, ToSchema)]
pub struct QuarantineList {
    pub data: Vec<Quarantined>,
}

/// A notification whose tries are used up (no endpoint URLs: they may carry credentials).
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadNotification {
    /// `ntf_…`: stable across tries.
    pub id: String,
    /// approval_requested or action_sealed.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub action_id: String,
    pub attempts: u32,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub next_at: Timestamp,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed_opt")]
    pub dead_at: Option<Timestamp>,
    pub last_error: Option<String>,
}

impl From<&OutboxEntry> for DeadNotification {
    fn from(e: &OutboxEntry) -> Self {
        DeadNotification {
            id: e.id(),
            kind: e.kind.as_str(),
            action_id: e.action_id.clone(),
            attempts: e.attempts,
            next_at: e.next_at,
            dead_at: e.dead_at,
            last_error: e.last_error.clone(),
        }
    }
}

/// Admins: the tenant's dead notifications, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadNotifications {
    pub data: Vec<DeadNotification>,
}

/// An action answered with `status`, as the API shows it.
pub(super) fn action_response(
    status: axum::http::StatusCode,
    action: &Action,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    (status, axum::Json(ActionView::from(action))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{action::Standing, Call};
    use serde_json::json;

    /// Issue 29: the view lists the call's members by hand (for the OpenAPI document); each
    /// member of the call's shown form is one of the view's, with the same value — a new member
    /// of the call fails here until the view has it.
    #[test]
    fn issue29_the_view_shows_every_member_of_the_call() {
        let run = RunRef {
            run_id: Some("run-1".into()),
            thread_id: Some("th-1".into()),
            call_id: Some("call-1".into()),
        };
        let call = Call::for_test("act_1", "mail.send", json!({"to": "a@b"}))
            .with_kind_and_run(Some("email"), Some(run));
        let at = "2026-10-21T12:00:00Z".parse().unwrap();
        let pending = Standing::PendingApproval { approvals: vec![] };
        let action = Action::first(call, Decision::RequireApproval, pending, None, at);
        let view = serde_json::to_value(ActionView::from(&action)).unwrap();
        let shown = serde_json::to_value(action.call().shown()).unwrap();
        for (member, value) in shown.as_object().unwrap() {
            assert_eq!(view.get(member), Some(value), "the view's {member}");
        }
    }
}
