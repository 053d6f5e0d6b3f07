//! The scoped grants' routes (served by the cancel function, like the stops): the tenant's
//! grants with their uses left, and a revocation that takes effect at once (docs/grants.md).

use super::{
    auth::Caller,
    error::{ApiError, ErrorBody},
    extract::Segment,
    paths,
};
use crate::{
    domain::grant::{Grant, Revoked, Terms},
    Engine,
};
use axum::{
    extract::State as Shared,
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;
use std::sync::Arc;
use utoipa::ToSchema;

/// The grants' routes, added to the cancel function's.
pub(super) fn routes(r: super::Routes) -> super::Routes {
    use axum::routing::{delete, get};
    r.route(paths::GRANTS, get(list))
        .route(paths::GRANT, delete(revoke))
}

/// A grant as the API shows it: its terms and their digest, what is left, whether it may still
/// allow a call.
#[derive(Serialize, ToSchema)]
pub struct GrantView {
    pub id: String,
    pub terms: Terms,
    /// `sha256:` of the canonical terms: what a granted call's audit event names.
    pub digest: String,
    pub uses_left: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked: Option<Revoked>,
    /// The one who granted may no longer decide (their key removed or moved out of the
    /// grant's groups, or their issuer no longer trusted): it allows nothing while so.
    pub lapsed: bool,
    /// Not revoked, a use left, unexpired now, and its granter still stands.
    pub active: bool,
}

impl GrantView {
    fn of(g: &Grant, engine: &Engine) -> GrantView {
        let lapsed = !engine.granter_stands(g);
        GrantView {
            id: g.id().to_owned(),
            terms: g.terms().clone(),
            digest: g.digest().to_owned(),
            uses_left: g.uses_left(),
            revoked: g.revoked().cloned(),
            lapsed,
            active: g.live(engine.now()).is_ok() && !lapsed,
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct GrantList {
    /// Newest first.
    pub grants: Vec<GrantView>,
}

/// Approvers and admins: the tenant's grants, newest first, with their uses left.
#[utoipa::path(
    get,
    path = crate::api::paths::GRANTS,
    tag = "grants",
    responses(
        (status = 200, description = "The tenant's grants", body = GrantList),
        (status = 403, description = "forbidden: an agent key", body = ErrorBody),
    )
)]
pub(super) async fn list(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
) -> Result<Response, ApiError> {
    let grants = engine.grants(&who).await?;
    let grants = grants.iter().map(|g| GrantView::of(g, &engine)).collect();
    Ok(Json(GrantList { grants }).into_response())
}

/// Approvers and admins: revoke a grant at once (SC-GR-07). The uses before it stand.
#[utoipa::path(
    delete,
    path = crate::api::paths::GRANT,
    tag = "grants",
    params(("id" = String, Path, description = "`grt_` + ULID")),
    responses(
        (status = 200, description = "Revoked (or revoked already): the grant as it stands", body = GrantView),
        (status = 403, description = "forbidden: an agent key", body = ErrorBody),
        (status = 404, description = "not_found: no such grant", body = ErrorBody),
    )
)]
pub(super) async fn revoke(
    Shared(engine): Shared<Arc<Engine>>,
    Caller(who): Caller,
    Segment(id): Segment,
) -> Result<Response, ApiError> {
    let revoked = engine.revoke_grant(&who, &id).await?;
    Ok(Json(GrantView::of(&revoked, &engine)).into_response())
}
