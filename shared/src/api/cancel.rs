//! The cancel function's routes and their handlers: cancel, the stops, the dead notifications.

use super::{
    auth::Caller,
    body::StopBody,
    error::{ApiError, ErrorBody},
    extract::{bytes, read_json, Segment, Through},
    paths,
    routes::Routes,
    view::{action_response, ActionView, DeadNotification, DeadNotifications},
};
use crate::{store::Stop, Engine, Error};
use axum::{
    body::Body,
    extract::{Query, State as Shared},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{delete, get, post},
    Json,
};
use serde_json::json;
use std::{collections::HashMap, sync::Arc};

/// The cancel function's routes: cancel, the stops, the dead notifications.
pub(super) fn routes(r: Routes) -> Routes {
    let r = r
        .route(paths::CANCEL, post(cancel))
        .route(paths::STOPS, post(stop))
        .route(paths::STOP, delete(lift_stop))
        .route(paths::DEAD_NOTIFICATIONS, get(dead_notifications))
        .route(paths::REDELIVER, post(redeliver));
    super::grants::routes(r)
}

/// Cancel a pending or approved action: by its agent, an approver or an admin.
#[utoipa::path(
    post,
    path = crate::api::paths::CANCEL,
    tag = "cancel",
    params(
        ("id" = String, Path, description = "`act_` + ULID"),
        ("Countersign-Channel" = Option<String>, Header, description = "`page` or `cli`: the client deciding, recorded on the audit event (SC-CH-08); absent: `api`"),
    ),
    responses(
        (status = 200, description = "Cancelled", body = ActionView),
        (status = 404, description = "not_found: no such action, or (to an agent key) another agent's", body = ErrorBody),
        (status = 409, description = "action_executing or action_sealed", body = ErrorBody),
    )
)]
pub(super) async fn cancel(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Through(channel): Through,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    let cancelled = engine.cancel_through(&who, &id, Some(channel)).await?;
    Ok(action_response(StatusCode::OK, &cancelled))
}

/// Stop an agent or the whole tenant: no tool attempt of its scope starts afterwards.
#[utoipa::path(
    post,
    path = crate::api::paths::STOPS,
    tag = "cancel",
    params(("Countersign-Channel" = Option<String>, Header, description = "`page` or `cli`: the client deciding, recorded on the audit event (SC-CH-08); absent: `api`"),),
    request_body(content = Option<StopBody>, description = "Empty: stop the whole tenant"),
    responses(
        (status = 201, description = "The committed stop", body = Stop),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
    )
)]
pub(super) async fn stop(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Through(channel): Through,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = bytes(body).await?;
    // An empty body stops the whole tenant.
    let body: StopBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        StopBody::default()
    } else {
        read_json(Body::from(bytes)).await?
    };
    let stop = engine
        .stop_through(&who, body.agent_id()?, Some(channel))
        .await?;
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
