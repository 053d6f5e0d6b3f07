//! Routes and request parsing. Handlers only translate HTTP ⇄ engine calls.

use super::{Caller, MAX_BODY};
use crate::{
    domain::State,
    engine::{ListFilter, SubmitRequest},
    Engine, Error,
};
use axum::{
    body::Body,
    extract::{Path, Query, State as Shared},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{delete, get, post},
    Json, Router,
};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::{collections::HashMap, sync::Arc};

pub fn router(engine: Arc<Engine>) -> Router {
    // Built once per router: per process locally, per container on Lambda (SC-SEC-04).
    let rate_limits = Arc::new(super::rate::RateLimits::new(&engine.config().limits));
    Router::new()
        .route("/v1/actions", post(submit).get(list))
        .route("/v1/actions/{id}", get(get_action))
        .route("/v1/actions/{id}/events", get(events))
        .route("/v1/actions/{id}/deed", get(deed))
        .route("/v1/actions/{id}/approve", post(approve))
        .route("/v1/actions/{id}/deny", post(deny))
        .route("/v1/actions/{id}/cancel", post(cancel))
        .route("/v1/stops", post(stop))
        .route("/v1/stops/{scope}", delete(lift_stop))
        .route("/ui", get(super::ui::to_index))
        .route("/ui/", get(super::ui::index))
        .route("/ui/{asset}", get(super::ui::asset))
        .route("/v1/notifications/dead", get(dead_notifications))
        .route("/v1/notifications/{id}/redeliver", post(redeliver))
        .route("/v1/quarantine", get(quarantined))
        .route("/healthz", get(|| async { Json(json!({"ok": true})) }))
        .fallback(|| async { Error::NotFound })
        .method_not_allowed_fallback(|| async {
            Error::validation("method", "this route does not accept that method")
        })
        .layer(axum::Extension(rate_limits))
        .with_state(engine)
}

/// A path segment (`{id}`, `{scope}`). One that does not decode (e.g. `%FF`) names nothing:
/// 404 in the API's JSON shape, not the framework's plain-text rejection.
pub(super) struct Segment(pub(super) String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Segment {
    type Rejection = Error;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Error> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(segment)| Segment(segment))
            .map_err(|_| Error::NotFound)
    }
}

/// Read a JSON body: size-capped, parsed strictly, then shaped so that `param` names the
/// offending field.
async fn read_json<T: DeserializeOwned>(body: Body) -> Result<T, Error> {
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| Error::PayloadTooLarge(format!("the body exceeds {MAX_BODY} bytes")))?;
    if bytes.is_empty() {
        return Err(Error::validation("body", "a JSON object body is required"));
    }
    // Strict: hostile depth, duplicate keys and inexact numbers are refused here (SC-SEC-03).
    let value = super::json::parse(&bytes)?;
    if !value.is_object() {
        return Err(Error::validation("body", "the body must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // The path already ends at an unknown field; a missing one is named only in the message.
        let param = match (path.as_str(), missing_field(&inner)) {
            (".", Some(field)) => field,
            (".", None) => "body".to_owned(),
            (p, Some(field)) => format!("{p}.{field}"),
            (p, None) => p.to_owned(),
        };
        Error::validation(&param, inner)
    })
}

/// serde says "missing field `x`": name that field.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next().map(str::to_owned)
}

fn action_response(status: StatusCode, action: &crate::domain::Action) -> Response {
    (status, Json(action.view())).into_response()
}

async fn submit(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Error> {
    let key = match headers.get("idempotency-key") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| Error::validation("Idempotency-Key", "must be visible ASCII"))?,
        ),
        None => None,
    };
    let req: SubmitRequest = read_json(body).await?;
    let submitted = engine.submit(&who, req, key).await?;
    let status = match submitted.action.decision {
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

async fn get_action(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, Error> {
    Ok(action_response(
        StatusCode::OK,
        &engine.get(&who, &id).await?,
    ))
}

async fn list(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, Error> {
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
                return Err(Error::validation(
                    other,
                    format!("unknown query parameter {other:?}"),
                ))
            }
        }
    }
    let (actions, next_cursor) = engine.list(&who, filter).await?;
    let data: Vec<Value> = actions.iter().map(|a| a.view()).collect();
    Ok(Json(json!({"data": data, "next_cursor": next_cursor})).into_response())
}

async fn events(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, Error> {
    let events = engine.events(&who, &id).await?;
    Ok(Json(json!({"data": events})).into_response())
}

/// The deed file exactly as signed: any re-encoding would break its verification.
async fn deed(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, Error> {
    let file = engine.deed(&who, &id).await?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        file,
    )
        .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    context_digest: String,
}

async fn approve(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
    body: Body,
) -> Result<Response, Error> {
    let body: ApproveBody = read_json(body).await?;
    Ok(action_response(
        StatusCode::OK,
        &engine.approve(&who, &id, &body.context_digest).await?,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    reason: String,
}

async fn deny(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
    body: Body,
) -> Result<Response, Error> {
    let body: DenyBody = read_json(body).await?;
    Ok(action_response(
        StatusCode::OK,
        &engine.deny(&who, &id, &body.reason).await?,
    ))
}

async fn cancel(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, Error> {
    Ok(action_response(
        StatusCode::OK,
        &engine.cancel(&who, &id).await?,
    ))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopBody {
    #[serde(default)]
    agent_id: Option<String>,
}

async fn stop(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    body: Body,
) -> Result<Response, Error> {
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| Error::PayloadTooLarge(format!("the body exceeds {MAX_BODY} bytes")))?;
    // An empty body stops the whole tenant.
    let body: StopBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        StopBody::default()
    } else {
        read_json(Body::from(bytes)).await?
    };
    let stop = engine.stop(&who, body.agent_id.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(json!(stop))).into_response())
}

async fn lift_stop(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(scope): Segment,
) -> Result<Response, Error> {
    engine.lift_stop(&who, &scope).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn dead_notifications(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, Error> {
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
                return Err(Error::validation(
                    other,
                    format!("unknown query parameter {other:?}"),
                ))
            }
        }
    }
    let dead = engine.dead_notifications(&who, limit).await?;
    let data: Vec<Value> = dead.iter().map(|e| e.view()).collect();
    Ok(Json(json!({ "data": data })).into_response())
}

async fn redeliver(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, Error> {
    let entry = engine.redeliver(&who, &id).await?;
    Ok((StatusCode::ACCEPTED, Json(entry.view())).into_response())
}
/// Admins: the tenant's actions whose stored record does not load (SC-EDGE-08).
async fn quarantined(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
) -> Result<Response, Error> {
    let data = engine.quarantined(&who).await?;
    Ok(Json(json!({ "data": data })).into_response())
}
