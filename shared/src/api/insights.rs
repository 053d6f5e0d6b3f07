//! `GET /v1/insights?from=&to=` (SC-GR-22): decision insights for admins.

use super::{
    error::{ApiError, ErrorBody},
    Caller,
};
use crate::{domain::insights::Row, Engine, Error};
use axum::{
    extract::{Query, State as Shared},
    response::IntoResponse,
    Json,
};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use std::{collections::HashMap, sync::Arc};
use utoipa::ToSchema;

/// The range asked for when `from` is not given: the week before `to`.
const DEFAULT_RANGE: SignedDuration = SignedDuration::from_hours(7 * 24);

/// Per tool and rule: what people were asked, what they decided, how fast.
#[derive(Debug, Serialize, ToSchema)]
pub struct InsightsView {
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub from: Timestamp,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub to: Timestamp,
    /// By tool, then rule.
    pub rows: Vec<Row>,
    /// Actions read to answer (at most 2,000).
    pub read: usize,
    /// False when the range held more actions than one request reads: the rows then cover
    /// `covered_from` up to `to`; ask again with `to` = `covered_from` for the rest.
    pub complete: bool,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub covered_from: Timestamp,
}

/// Decision insights of the actions created in `[from, to)`: per tool and rule, requests,
/// approvals, denials, expiries, the approval rate and the median and 90th percentile time to
/// decide. At most 31 days; one request reads at most 2,000 actions, newest first.
#[utoipa::path(
    get,
    path = crate::api::paths::INSIGHTS,
    tag = "actions",
    params(
        ("from" = Option<String>, Query, format = DateTime, description = "RFC 3339; default: a week before `to`"),
        ("to" = Option<String>, Query, format = DateTime, description = "RFC 3339, exclusive; default: now"),
    ),
    responses(
        (status = 200, description = "The figures of the range", body = InsightsView),
        (status = 400, description = "validation_failed: a time that does not parse, from not before to, more than 31 days, an unknown parameter", body = ErrorBody),
        (status = 403, description = "forbidden: not an admin key", body = ErrorBody),
    )
)]
pub(super) async fn insights(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<axum::response::Response, ApiError> {
    engine.may_see_insights(&who)?;
    if let Some(other) = params
        .keys()
        .find(|k| !["from", "to"].contains(&k.as_str()))
    {
        return Err(Error::validation(other, format!("unknown query parameter {other:?}")).into());
    }
    let instant = |name: &str| -> Result<Option<Timestamp>, Error> {
        params
            .get(name)
            .map(|v| {
                v.parse::<Timestamp>().map_err(|_| {
                    Error::validation(
                        name,
                        format!("{name} must be an RFC 3339 time with an offset"),
                    )
                })
            })
            .transpose()
    };
    let to = instant("to")?.unwrap_or_else(|| engine.now());
    let from = match instant("from")? {
        Some(from) => from,
        None => to
            .saturating_sub(DEFAULT_RANGE)
            .map_err(|_| Error::validation("to", "to is too early"))?,
    };
    let i = engine.insights(&who, from, to).await?;
    Ok(Json(InsightsView {
        from: i.from,
        to: i.to,
        rows: i.rows,
        read: i.read,
        complete: i.complete,
        covered_from: i.covered_from,
    })
    .into_response())
}
