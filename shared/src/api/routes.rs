//! The API's handlers. Each only translates HTTP ⇄ engine calls: a body becomes a domain value
//! (`body`), an answer a view (`view`), an error the one error body (`error`).

use super::{
    auth::Caller,
    body::{idempotency_key, ApproveBody, DenyBody, StopBody, SubmitRequest},
    error::{ApiError, ErrorBody},
    extract::{bytes, read_json, Segment},
    view::{
        ActionPage, ActionView, DeadNotification, DeadNotifications, EventList, QuarantineList,
    },
};
use crate::{
    domain::{deed::Signed, State},
    engine::ListFilter,
    store::Stop,
    Engine, Error,
};
use axum::{
    body::Body,
    extract::{Query, State as Shared},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;
use std::{collections::HashMap, sync::Arc};

fn action_response(status: StatusCode, action: &crate::domain::Action) -> Response {
    (status, Json(ActionView::from(action))).into_response()
}

/// Submit one exact tool call (SPEC §4 Intake). The policy decides: run now, answer a set
/// result, commit it for a later window, ask a person, or refuse (recorded sealed `denied`).
#[utoipa::path(
    post,
    path = crate::api::paths::ACTIONS,
    tag = "actions",
    request_body = SubmitRequest,
    params(
        ("Idempotency-Key" = Option<String>, Header, description = "Same key and payload → the original action; same key, other payload → 409 idempotency_conflict. Scope: tenant + agent, kept ≥ 24 h."),
    ),
    responses(
        (status = 200, description = "Ran now (allow) or answered by policy (set_result). An idempotent replay answers the original action with the status it was first answered with (200, 201 or 202) and `Idempotent-Replayed: true`.", body = ActionView,
            headers(("Idempotent-Replayed" = String, description = "`true` on an idempotent replay; absent otherwise"))),
        (status = 201, description = "Committed by policy for its window (schedule)", body = ActionView,
            headers(("Idempotent-Replayed" = String, description = "`true` on an idempotent replay; absent otherwise"))),
        (status = 202, description = "Waiting for a countersignature (require_approval)", body = ActionView,
            headers(("Idempotent-Replayed" = String, description = "`true` on an idempotent replay; absent otherwise"))),
        (status = 403, description = "forbidden (not an agent key), denied, schedule_needs_approval, capability_bound or agent_stopped", body = ErrorBody),
        (status = 409, description = "idempotency_conflict", body = ErrorBody),
    )
)]
pub(super) async fn submit(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let key = match headers.get("idempotency-key") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| Error::validation("Idempotency-Key", "must be visible ASCII"))?,
        ),
        None => None,
    };
    let call = read_json::<SubmitRequest>(body).await?.into_submission()?;
    let key = key.map(idempotency_key).transpose()?;
    let submitted = engine.submit(&who, call, key).await?;
    let status = match submitted.action.decision() {
        crate::domain::Decision::RequireApproval => StatusCode::ACCEPTED,
        crate::domain::Decision::Schedule => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    let mut response = action_response(status, &submitted.action);
    if submitted.replayed {
        response.headers_mut().insert(
            "idempotent-replayed",
            "true".parse().expect("static header"),
        );
    }
    Ok(response)
}

/// One action: to an agent key only its own, to approver and admin keys the tenant's.
#[utoipa::path(
    get,
    path = crate::api::paths::ACTION,
    tag = "actions",
    params(("id" = String, Path, description = "`act_` + ULID")),
    responses(
        (status = 200, description = "The action", body = ActionView),
        (status = 404, description = "not_found: no such action in this tenant, or (to an agent key) another agent's", body = ErrorBody),
    )
)]
pub(super) async fn get_action(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    Ok(action_response(
        StatusCode::OK,
        &engine.get(&who, &id).await?,
    ))
}

/// The tenant's actions, newest first; to an agent key only its own.
///
/// An agent key's list is filtered to its own `agent_id` (asked for another agent's, it is empty). A page may hold fewer than `limit` actions, even none, and still carry a `next_cursor`: one request reads a bounded number of stored items
/// (SC-SEC-05). Follow `next_cursor` until it is null to see every match.
#[utoipa::path(
    get,
    path = crate::api::paths::ACTIONS,
    tag = "actions",
    params(
        ("state" = Option<State>, Query, description = "Only actions in this state"),
        ("agent_id" = Option<String>, Query, description = "Only this agent's actions"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size (default 50)"),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page"),
    ),
    responses((status = 200, description = "A page of actions", body = ActionPage))
)]
pub(super) async fn list(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut filter = ListFilter::default();
    for (name, value) in params {
        match name.as_str() {
            "state" => {
                filter.state = Some(State::parse(&value).ok_or_else(|| {
                    Error::validation("state", format!("unknown state {value:?}"))
                })?)
            }
            "agent_id" => filter.agent_id = Some(value),
            "limit" => {
                filter.limit = Some(
                    value
                        .parse()
                        .map_err(|_| Error::validation("limit", "limit must be a whole number"))?,
                )
            }
            "cursor" => filter.cursor = Some(value),
            other => {
                return Err(
                    Error::validation(other, format!("unknown query parameter {other:?}")).into(),
                )
            }
        }
    }
    let (actions, next_cursor) = engine.list(&who, filter).await?;
    let page = ActionPage {
        data: actions.iter().map(ActionView::from).collect(),
        next_cursor,
    };
    Ok(Json(page).into_response())
}

/// The action's audit chain, verified against its record first (SC-SEC-06).
#[utoipa::path(
    get,
    path = crate::api::paths::EVENTS,
    tag = "actions",
    params(("id" = String, Path, description = "`act_` + ULID")),
    responses(
        (status = 200, description = "Every transition, oldest first", body = EventList),
        (status = 404, description = "not_found: no such action, or (to an agent key) another agent's", body = ErrorBody),
    )
)]
pub(super) async fn events(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    let data = engine.events(&who, &id).await?;
    Ok(Json(EventList { data }).into_response())
}

/// A sealed action's deed (SC-SEC-07), signed with the tenant's Ed25519 key. Served exactly as
/// signed (canonical JSON): verify the bytes as received, any re-encoding fails verification.
#[utoipa::path(
    get,
    path = crate::api::paths::DEED,
    tag = "actions",
    params(("id" = String, Path, description = "`act_` + ULID")),
    responses(
        (status = 200, description = "The signed deed", body = Signed),
        (status = 403, description = "forbidden: the tenant has no deed key", body = ErrorBody),
        (status = 404, description = "not_found: no such action, or (to an agent key) another agent's", body = ErrorBody),
        (status = 409, description = "action_not_sealed or action_executing: no deed yet", body = ErrorBody),
    )
)]
pub(super) async fn deed(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    let file = engine.deed(&who, &id).await?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        file,
    )
        .into_response())
}

/// Countersign: commit the ticket for exactly this context (SPEC §4 Approval).
#[utoipa::path(
    post,
    path = crate::api::paths::APPROVE,
    tag = "approval",
    params(("id" = String, Path, description = "`act_` + ULID")),
    request_body = ApproveBody,
    responses(
        (status = 200, description = "Approved (and run, if its window is open)", body = ActionView),
        (status = 403, description = "forbidden: not an approver key, or the action's own agent", body = ErrorBody),
        (status = 404, description = "not_found", body = ErrorBody),
        (status = 409, description = "context_changed or action_sealed", body = ErrorBody),
    )
)]
pub(super) async fn approve(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
    body: Body,
) -> Result<Response, ApiError> {
    let body: ApproveBody = read_json(body).await?;
    Ok(action_response(
        StatusCode::OK,
        &engine.approve(&who, &id, &body.context_digest).await?,
    ))
}

/// Deny: seal `denied` with the approver's reason.
#[utoipa::path(
    post,
    path = crate::api::paths::DENY,
    tag = "approval",
    params(("id" = String, Path, description = "`act_` + ULID")),
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
    Segment(id): Segment,
    body: Body,
) -> Result<Response, ApiError> {
    let body: DenyBody = read_json(body).await?;
    Ok(action_response(
        StatusCode::OK,
        &engine.deny(&who, &id, body.reason()?).await?,
    ))
}

/// Cancel a pending or approved action: by its agent, an approver or an admin.
#[utoipa::path(
    post,
    path = crate::api::paths::CANCEL,
    tag = "cancel",
    params(("id" = String, Path, description = "`act_` + ULID")),
    responses(
        (status = 200, description = "Cancelled", body = ActionView),
        (status = 404, description = "not_found: no such action, or (to an agent key) another agent's", body = ErrorBody),
        (status = 409, description = "action_executing or action_sealed", body = ErrorBody),
    )
)]
pub(super) async fn cancel(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    Ok(action_response(
        StatusCode::OK,
        &engine.cancel(&who, &id).await?,
    ))
}

/// Stop an agent or the whole tenant: no tool attempt of its scope starts afterwards.
#[utoipa::path(
    post,
    path = crate::api::paths::STOPS,
    tag = "cancel",
    request_body(content = Option<StopBody>, description = "Empty: stop the whole tenant"),
    responses(
        (status = 201, description = "The committed stop", body = Stop),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
    )
)]
pub(super) async fn stop(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = bytes(body).await?;
    // An empty body stops the whole tenant.
    let body: StopBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        StopBody::default()
    } else {
        read_json(Body::from(bytes)).await?
    };
    let stop = engine.stop(&who, body.agent_id()?).await?;
    Ok((StatusCode::CREATED, Json(json!(stop))).into_response())
}

/// Lift a stop (`*` for the tenant's); actions sealed while it stood stay sealed.
#[utoipa::path(
    delete,
    path = crate::api::paths::STOP,
    tag = "cancel",
    params(("scope" = String, Path, description = "An agent id, or `*`")),
    responses(
        (status = 204, description = "Lifted"),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
        (status = 404, description = "not_found: no such stop", body = ErrorBody),
    )
)]
pub(super) async fn lift_stop(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(scope): Segment,
) -> Result<Response, ApiError> {
    engine.lift_stop(&who, &scope).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Admins: notifications whose tries are used up (SC-NOT-02), newest first.
#[utoipa::path(
    get,
    path = crate::api::paths::DEAD_NOTIFICATIONS,
    tag = "notifications",
    params(("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Page size")),
    responses(
        (status = 200, description = "Dead letters", body = DeadNotifications),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
    )
)]
pub(super) async fn dead_notifications(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut limit = None;
    for (name, value) in params {
        match name.as_str() {
            "limit" => {
                limit = Some(
                    value
                        .parse()
                        .map_err(|_| Error::validation("limit", "limit must be a whole number"))?,
                )
            }
            other => {
                return Err(
                    Error::validation(other, format!("unknown query parameter {other:?}")).into(),
                )
            }
        }
    }
    let dead = engine.dead_notifications(&who, limit).await?;
    let data = dead.iter().map(DeadNotification::from).collect();
    Ok(Json(DeadNotifications { data }).into_response())
}

/// Admins: try a dead notification again.
#[utoipa::path(
    post,
    path = crate::api::paths::REDELIVER,
    tag = "notifications",
    params(("id" = String, Path, description = "`ntf_…`, the notification's stable id")),
    responses(
        (status = 202, description = "Queued again", body = DeadNotification),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
        (status = 404, description = "not_found", body = ErrorBody),
    )
)]
pub(super) async fn redeliver(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    let entry = engine.redeliver(&who, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(DeadNotification::from(&entry))).into_response())
}
/// Admins: the tenant's actions whose stored record does not load (SC-EDGE-08).
#[utoipa::path(
    get,
    path = crate::api::paths::QUARANTINE,
    tag = "actions",
    responses(
        (status = 200, description = "Quarantined records", body = QuarantineList),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
    )
)]
pub(super) async fn quarantined(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
) -> Result<Response, ApiError> {
    let data = engine.quarantined(&who).await?;
    Ok(Json(QuarantineList { data }).into_response())
}
