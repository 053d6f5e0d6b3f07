//! `POST /v1/decisions` (SC-GR-20): approve or deny several pending actions in one request,
//! each as its own approve or deny would be, each answered on its own.

use super::{
    body::{DecideBody, Verdict},
    error::{ApiError, ErrorBody, ErrorDetail},
    extract::read_json,
    view::ActionView,
    Caller,
};
use crate::Engine;
use axum::{body::Body, extract::State as Shared, response::IntoResponse, Json};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// Each decision's answer, in the order sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionResults {
    pub results: Vec<DecisionResult>,
    /// How many were taken (`status` 200) and how many refused.
    pub taken: usize,
    pub refused: usize,
}

/// One action's answer: what its own `approve` or `deny` would have answered.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionResult {
    pub id: String,
    pub decision: Verdict,
    /// 200, or the status of the refusal (`error.code` says which).
    pub status: u16,
    /// The action after the decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<ActionView>,
    /// Why this one was refused; the others stand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Decide several actions at once: each approve or deny through the same rules as its own
/// route, with its own digest, its own write and event. A refusal of one is answered in its
/// entry and leaves the others decided; the request is refused whole only for its role or its
/// shape (1–100 entries, each action once), and then nothing is decided. A ticket an approval
/// here commits is not run by the request: its wake is armed.
#[utoipa::path(
    post,
    path = crate::api::paths::DECISIONS,
    tag = "approval",
    request_body = DecideBody,
    responses(
        (status = 200, description = "Each decision's own answer, in order (some may be refused)", body = DecisionResults),
        (status = 400, description = "validation_failed: not 1–100 entries, an action named twice, an approve without context_digest, a deny without reason (nothing decided)", body = ErrorBody),
        (status = 403, description = "forbidden: not an approver key", body = ErrorBody),
    )
)]
pub(super) async fn decide(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    body: Body,
) -> Result<axum::response::Response, ApiError> {
    engine.may_decide(&who)?;
    let rulings = read_json::<DecideBody>(body).await?.rulings()?;
    let asked: Vec<(String, Verdict)> = rulings
        .iter()
        .map(|r| {
            let verdict = match r.kind {
                crate::engine::RulingKind::Approve { .. } => Verdict::Approve,
                crate::engine::RulingKind::Deny { .. } => Verdict::Deny,
            };
            (r.action_id.clone(), verdict)
        })
        .collect();
    let answers = engine.decide_all(&who, rulings).await?;
    let results: Vec<DecisionResult> = asked
        .into_iter()
        .zip(answers)
        .map(|((id, decision), answer)| match answer {
            Ok(action) => DecisionResult {
                id,
                decision,
                status: 200,
                action: Some(ActionView::from(&action)),
                error: None,
            },
            Err(e) => {
                let refusal = ApiError::from(e);
                let (status, _) = refusal.status_and_code();
                DecisionResult {
                    id,
                    decision,
                    status: status.as_u16(),
                    action: None,
                    error: Some(refusal.body().error),
                }
            }
        })
        .collect();
    let taken = results.iter().filter(|r| r.status == 200).count();
    let refused = results.len() - taken;
    Ok(Json(DecisionResults {
        results,
        taken,
        refused,
    })
    .into_response())
}
