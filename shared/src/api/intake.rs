//! The intake function's routes and their handlers: submit, the reads, the approver page, the
//! documents, MCP. Each handler only translates HTTP ⇄ engine calls: a body becomes a domain
//! value (`body`), an answer a view (`view`), an error the one error body (`error`).

use super::{
    auth::Caller,
    body::{idempotency_key, SubmitRequest},
    error::{ApiError, ErrorBody},
    extract::{read_json, Segment},
    paths,
    view::{action_response, ActionPage, ActionView, EventList, QuarantineList},
    Routes,
};
use super::{mcp, resource, ui};
use crate::{
    domain::{deed::Signed, State},
    engine::ListFilter,
    Engine, Error,
};
use axum::{
    body::Body,
    extract::{Query, State as Shared},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json,
};
use std::{collections::HashMap, sync::Arc};

/// The intake function's routes but the OpenAPI document (the router adds it: the document
/// describes these handlers, so it sits above them): submit, the reads, the approver page, MCP.
pub(super) fn routes(r: Routes) -> Routes {
    r.route(paths::ACTIONS, post(submit).get(list))
        .route(paths::ACTION, get(get_action))
        .route(paths::EVENTS, get(events))
        .route(paths::DEED, get(deed))
        // Whoever opens the server's address means the approver page.
        .route("/", get(ui::to_index))
        .route("/ui", get(ui::to_index))
        .route(paths::UI, get(ui::index))
        .route(paths::UI_ASSET, get(ui::asset))
        .route(paths::QUARANTINE, get(quarantined))
        .route(paths::ME, get(super::me::me))
        .route(paths::EXPLAIN, post(super::explain::explain))
        .route(paths::INSIGHTS, get(super::insights::insights))
        .route(paths::MCP, post(mcp::endpoint))
        .route(paths::RESOURCE_METADATA, get(resource::api))
        .route(paths::MCP_RESOURCE_METADATA, get(resource::mcp))
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
