//! `POST /v1/policy/explain` (SC-POL-05): the HTTP shape of an explanation. Admins only;
//! nothing is stored.

use super::{
    body::RequestedWindow,
    error::{ApiError, ErrorBody},
    Caller,
};
use crate::{
    domain::{
        policy::{Matched, ShadowVerdict, Step},
        Call, Decision, Window,
    },
    Engine, Error,
};
use axum::{body::Body, extract::State as Shared, response::IntoResponse, Json};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use utoipa::ToSchema;

/// A call as an agent would submit it, and the agent it would come from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainRequest {
    #[schema(min_length = 1)]
    pub tool: String,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub args: Map<String, Value>,
    #[schema(min_length = 1)]
    pub agent_id: String,
    #[serde(default)]
    pub action_kind: Option<String>,
    #[serde(default)]
    pub schedule: Option<RequestedWindow>,
}

/// Which rule decides and why: every rule looked at, in order, up to the one that decided.
#[derive(Debug, Serialize, ToSchema)]
pub struct Explanation {
    pub decision: Decision,
    /// The rule that decided; null when none matched (absence denies).
    pub rule: Option<Matched>,
    /// For `require_approval`: distinct approvals needed, and the groups that may give them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approver_groups: Vec<String>,
    /// A condition that could not be evaluated: the call would be denied (SC-POL-02).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition_error: Option<String>,
    /// What the rules in shadow before the deciding one would have decided, beside the
    /// enforced decision above (SC-GR-21); absent when none matched.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadow: Vec<ShadowVerdict>,
    pub steps: Vec<Step>,
}

/// Explain which policy rule a call would match, storing nothing.
#[utoipa::path(
    post,
    path = crate::api::paths::EXPLAIN,
    tag = "actions",
    request_body = ExplainRequest,
    responses(
        (status = 200, description = "The rule that would decide, and each rule looked at", body = Explanation),
        (status = 400, description = "validation_failed", body = ErrorBody),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
    )
)]
pub(super) async fn explain(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    body: Body,
) -> Result<axum::response::Response, ApiError> {
    // The role before the body: a key that may not explain learns nothing from its shape.
    engine.may_explain(&who)?;
    let req: ExplainRequest = super::extract::read_json(body).await?;
    // The schema's `minLength: 1`, which serde does not hold.
    for (param, value) in [("tool", &req.tool), ("agent_id", &req.agent_id)] {
        if value.trim().is_empty() {
            return Err(Error::validation(param, format!("{param} must not be empty")).into());
        }
    }
    let schedule = match &req.schedule {
        Some(w) => Some(
            Window::parse(w.not_before.as_deref(), w.not_after.as_deref())
                .map_err(|m| Error::validation("schedule", m))?,
        ),
        None => None,
    };
    let call = Call::hypothetical(
        &who.tenant,
        &req.agent_id,
        req.tool,
        req.args,
        req.action_kind,
        schedule,
    );
    let (gate, steps) = engine.explain(&who, &call)?;
    let asks = gate.decision == Decision::RequireApproval;
    let answer = Explanation {
        decision: gate.decision,
        rule: gate.rule,
        approvals: asks.then_some(gate.countersigners.approvals),
        approver_groups: gate.countersigners.groups,
        condition_error: gate.failed.map(|f| f.message),
        shadow: gate.shadow,
        steps,
    };
    Ok(Json(answer).into_response())
}
