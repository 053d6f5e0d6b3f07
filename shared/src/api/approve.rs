//! The approve function's routes and their handlers: the countersignature and the denial, also
//! through Slack and a mailed link (their handlers in `slack` and `email`).

use super::email;
use super::{
    auth::Caller,
    body::{ApproveBody, DenyBody},
    error::{ApiError, ErrorBody},
    extract::{read_json, Segment, Through},
    paths,
    routes::Routes,
    view::{action_response, ActionView},
};
use crate::Engine;
use axum::{
    body::Body,
    extract::State as Shared,
    http::StatusCode,
    response::Response,
    routing::{get, post},
};
use std::sync::Arc;

/// The approve function's routes: the countersignature, also through Slack and a mailed link.
pub(super) fn routes(r: Routes) -> Routes {
    r.route(paths::APPROVE, post(approve))
        .route(paths::DENY, post(deny))
        .route(paths::DECISIONS, post(super::decide::decide))
        .route(paths::SLACK_INTERACTIONS, post(super::slack::interactions))
        .route(paths::EMAIL_CONFIRM, get(email::show).post(email::decide))
}

/// Countersign: commit the ticket for exactly this context (SPEC §4 Approval).
#[utoipa::path(
    post,
    path = crate::api::paths::APPROVE,
    tag = "approval",
    params(
        ("id" = String, Path, description = "`act_` + ULID"),
        ("Countersign-Channel" = Option<String>, Header, description = "`page` or `cli`: the client deciding, recorded on the audit event (SC-CH-08); absent: `api`"),
    ),
    request_body = ApproveBody,
    responses(
        (status = 200, description = "Approved (and run, if its window is open)", body = ActionView),
        (status = 400, description = "validation_error: a grant's term out of bounds, a pin the call lacks, a condition that does not compile, a rule that cannot be granted", body = ErrorBody),
        (status = 403, description = "forbidden: not an approver key, the action's own agent, or (with a grant) an approver outside the rule's groups", body = ErrorBody),
        (status = 404, description = "not_found", body = ErrorBody),
        (status = 409, description = "context_changed or action_sealed", body = ErrorBody),
    )
)]
pub(super) async fn approve(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Through(channel): Through,
    Segment(id): Segment,
    body: Body,
) -> Result<Response, ApiError> {
    let body: ApproveBody = read_json(body).await?;
    let grant = body.grant.map(|g| g.ask()).transpose()?;
    let approved = engine
        .approve_through(&who, &id, &body.context_digest, Some(channel), grant)
        .await?;
    Ok(action_response(StatusCode::OK, &approved))
}

/// Deny: seal `denied` with the approver's reason.
#[utoipa::path(
    post,
    path = crate::api::paths::DENY,
    tag = "approval",
    params(
        ("id" = String, Path, description = "`act_` + ULID"),
        ("Countersign-Channel" = Option<String>, Header, description = "`page` or `cli`: the client deciding, recorded on the audit event (SC-CH-08); absent: `api`"),
    ),
    request_body = DenyBody,
    responses(
        (status = 200, description = "Denied", body = ActionView),
        (status = 403, description = "forbidden: not an approver key", body = ErrorBody),
        (status = 404, description = "not_found", body = ErrorBody),
        (status = 409, description = "action_executing or action_sealed", body = ErrorBody),
    )
)]
pub(super) async fn deny(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Through(channel): Through,
    Segment(id): Segment,
    body: Body,
) -> Result<Response, ApiError> {
    let body: DenyBody = read_json(body).await?;
    let denied = engine
        .deny_through(&who, &id, body.reason()?, Some(channel))
        .await?;
    Ok(action_response(StatusCode::OK, &denied))
}
