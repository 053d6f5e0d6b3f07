//! `GET /v1/me`: who the presented key is, so a client (the approver page) can tell an
//! approver key from an agent key before it offers to approve anything.

use super::{
    auth::Caller,
    error::{ApiError, ErrorBody},
};
use crate::{Engine, Error};
use axum::{extract::State, Json};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// The caller's key: its tenant, its role and its id in the tenant's `keys`; and the tenant's
/// time zone, in which a client shows every time (as the server writes windows).
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    pub tenant: String,
    /// `agent`, `approver` or `admin`.
    #[schema(value_type = String, example = "approver")]
    pub role: crate::config::Role,
    pub key_id: String,
    /// IANA name, e.g. `Europe/Berlin`.
    pub time_zone: String,
}

/// Any key: who it is.
#[utoipa::path(
    get,
    path = crate::api::paths::ME,
    tag = "keys",
    responses(
        (status = 200, description = "The caller's key", body = Me),
        (status = 401, description = "unauthenticated: no key or an unknown one", body = ErrorBody),
    )
)]
pub(super) async fn me(
    State(engine): State<Arc<Engine>>,
    Caller(who): Caller,
) -> Result<Json<Me>, ApiError> {
    let time_zone = engine
        .config()
        .tenants
        .get(&who.tenant)
        .map(|t| t.time_zone_name.clone())
        .ok_or_else(|| Error::Internal(format!("no tenant {} for a known key", who.tenant)))?;
    Ok(Json(Me {
        time_zone,
        tenant: who.tenant,
        role: who.role,
        key_id: who.id,
    }))
}
