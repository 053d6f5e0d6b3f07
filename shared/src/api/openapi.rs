//! The OpenAPI 3.1 document, generated from the handlers' annotations and the answer types
//! (`utoipa`). Served at `/openapi.json`; committed as `docs/openapi.json` (a test holds the
//! two equal; regenerate with `cargo run -q -p countersign-server -- openapi > docs/openapi.json`).

use super::{approve, cancel, intake};
use super::{
    body::{ApproveBody, ConfirmForm, DenyBody, RequestedWindow, StopBody, SubmitRequest},
    error::{ErrorBody, ErrorDetail},
    view,
};
use crate::{
    domain::{
        action::Approval,
        deed::{Call, Countersignature, Deed, SignatureBlock, Signed},
        Actor, ActorKind, Decision, Event, NextAction, Outcome, RunRef, State, Window,
    },
    store::Stop,
};
use utoipa::{
    openapi::{
        path::Operation,
        response::{Response, ResponseBuilder},
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
        Content, HeaderBuilder, Ref, RefOr,
    },
    Modify, OpenApi,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "countersign",
        description = "A gateway for AI agents' tool calls that must be approved now and run later. \
            Every /v1 route takes `Authorization: Bearer <key>`; the key's tenant scopes every \
            read and write, and another tenant's ids answer exactly as missing ones.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    paths(
        intake::submit,
        intake::list,
        intake::get_action,
        intake::events,
        intake::deed,
        approve::approve,
        approve::deny,
        super::decide::decide,
        super::email::show,
        super::email::decide,
        cancel::cancel,
        cancel::stop,
        cancel::lift_stop,
        cancel::dead_notifications,
        cancel::redeliver,
        super::grants::list,
        super::grants::revoke,
        intake::quarantined,
        super::me::me,
        super::explain::explain,
        super::insights::insights,
        super::ui::index,
        super::ui::asset,
        openapi_json,
        super::mcp::endpoint,
        super::resource::api,
        super::resource::mcp,
        super::slack::interactions,
    ),
    components(schemas(
        super::grants::GrantView,
        super::grants::GrantList,
        view::ActionView,
        view::ActionPage,
        view::EventList,
        view::QuarantineList,
        super::me::Me,
        crate::store::Quarantined,
        view::DeadNotification,
        view::DeadNotifications,
        ErrorBody,
        super::mcp::JsonRpcRequest,
        ErrorDetail,
        SubmitRequest,
        RequestedWindow,
        ApproveBody,
        DenyBody,
        super::body::DecideBody,
        super::body::DecisionItem,
        super::body::Verdict,
        super::decide::DecisionResults,
        super::decide::DecisionResult,
        ConfirmForm,
        StopBody,
        Stop,
        Approval,
        Actor,
        ActorKind,
        Decision,
        Event,
        NextAction,
        Outcome,
        RunRef,
        State,
        Window,
        Signed,
        SignatureBlock,
        Deed,
        Call,
        Countersignature,
        super::explain::ExplainRequest,
        super::explain::Explanation,
        crate::domain::policy::Matched,
        crate::domain::policy::Step,
        crate::domain::policy::ShadowVerdict,
        super::insights::InsightsView,
        crate::domain::insights::Row,
        crate::domain::action::Quorum,
        crate::domain::action::Signoff,
    )),
    modifiers(&Refusals),
    tags(
        (name = "actions", description = "Submit, read and prove actions"),
        (name = "approval", description = "Countersign or deny"),
        (name = "cancel", description = "Cancel actions; stop and resume agents"),
        (name = "notifications", description = "Dead letters of the notifications outbox"),
        (name = "grants", description = "Scoped grants: list and revoke (docs/grants.md)"),
        (name = "page", description = "The approver page and this document"),
        (name = "identity", description = "OAuth protected resource metadata: where tokens come from (docs/identity.md)"),
    )
)]
pub struct ApiDoc;

/// The document generated from the code: what `countersign-server openapi` prints, and what
/// `tests/openapi.rs` holds [`COMMITTED`] to.
pub fn document() -> String {
    let mut json = ApiDoc::openapi()
        .to_pretty_json()
        .expect("the document serializes");
    json.push('\n');
    json
}

/// The document as committed (`docs/openapi.json`) and served. The server sends these bytes
/// rather than generating them, so the intake function does not link the generator (utoipa's
/// schema builders: intake's zip 3.19 → 3.08 MB, BENCHMARKS.md); the test that holds them to
/// [`document`] is what keeps the two one document.
pub const COMMITTED: &str = include_str!("../../../docs/openapi.json");

/// The OpenAPI 3.1 document of this API.
#[utoipa::path(
    get,
    path = crate::api::paths::OPENAPI,
    tag = "page",
    security(()),
    responses((status = 200, description = "This document", content_type = "application/json"))
)]
pub(super) async fn openapi_json() -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        COMMITTED,
    )
        .into_response()
}

/// The access-token scheme, as a client reads it (docs/identity.md).
const ACCESS_TOKEN: &str = "An OAuth 2.0 access token (a JWT, RFC 9068) from the tenant's \
identity provider, issued for this server's resource (RFC 8707 `resource`, the token's `aud`). \
Its scopes give the role: `countersign:agent` to submit (and `/mcp`), `countersign:approve` to \
approve or deny, `countersign:admin` for stops, policy explain, notifications and quarantine; \
any of them for the reads, cancel and `/v1/me` (a tenant may rename them). A request without a \
credential is answered 401 with `WWW-Authenticate: Bearer resource_metadata=\"…\"`, which names \
the document (`/.well-known/oauth-protected-resource`) listing the authorization servers; a \
token without the scope a route needs, 403 `insufficient_scope`.";

/// The answers every authenticated route may give besides its own: bad input, no key, too
/// large, rate limited, a fault of ours, store unavailable. Added here once instead of on every handler.
struct Refusals;

fn refusal(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name("ErrorBody"))),
        )
        .build()
        .into()
}

impl Modify for Refusals {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("An API key of the tenant (agent, approver or admin)"))
                    .build(),
            ),
        );
        // A tenant's provider issues the token, so its endpoints are the tenant's, not the
        // document's: a client finds them from the 401's `resource_metadata` (RFC 9728).
        components.add_security_scheme(
            "accessToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(ACCESS_TOKEN))
                    .build(),
            ),
        );
        let either = |scheme: &str| {
            utoipa::openapi::security::SecurityRequirement::new(scheme, Vec::<String>::new())
        };
        doc.security = Some(vec![either("bearer"), either("accessToken")]);
        for (path, item) in doc.paths.paths.iter_mut() {
            if !path.starts_with("/v1/") {
                continue;
            }
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.delete,
                &mut item.put,
                &mut item.patch,
            ];
            for op in operations.into_iter().flatten() {
                add_refusals(op);
            }
        }
    }
}

fn add_refusals(op: &mut Operation) {
    let responses = &mut op.responses.responses;
    for (status, description) in [
        (
            "400",
            "validation_failed: `param` names the field, header or parameter",
        ),
        (
            "401",
            "unauthenticated: no credential, an unknown key, or a token that does not verify \
             (`WWW-Authenticate: Bearer resource_metadata=\"…\"`, with `error=\"invalid_token\"` \
             where one was sent)",
        ),
        (
            "403",
            "forbidden: the caller's role may not do this; for a token, it lacks the scope the \
             route needs (`WWW-Authenticate: Bearer …, error=\"insufficient_scope\", scope=\"…\"`)",
        ),
        ("413", "payload_too_large: the body exceeds 256 KiB"),
        (
            "500",
            "internal: a fault of ours, logged; the answer carries no details",
        ),
        (
            "503",
            "unavailable: the store did not answer, or the identity provider's keys cannot be \
             had (token callers; keys still work); retry",
        ),
    ] {
        responses
            .entry(status.into())
            .or_insert_with(|| refusal(description));
    }
    let mut limited = ResponseBuilder::new()
        .description("rate_limited: this key is over its rate; wait `Retry-After` seconds")
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name("ErrorBody"))),
        )
        .build();
    limited.headers.insert(
        "Retry-After".into(),
        HeaderBuilder::new()
            .schema(
                utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::Type::Integer),
            )
            .description(Some("Seconds until the key may call again"))
            .build(),
    );
    responses.entry("429".into()).or_insert(limited.into());
}
