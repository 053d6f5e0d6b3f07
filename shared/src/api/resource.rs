//! countersign as an OAuth 2.0 protected resource (RFC 9728, SC-ID-01): the metadata that tells
//! a client — an MCP client above all — which authorization servers issue tokens for this
//! server, and which scopes those tokens carry. One document for the API and one, in the path
//! form, for the MCP endpoint (the resource MCP clients ask tokens for).
//!
//! The resource is the server's public address: `[server] public_url` without its `/ui/` page
//! path, or, where none is set, `http://` and the request's `Host` (a local server). Every
//! tenant's issuer is listed; a client picks one, and the token's issuer names its tenant.

use crate::{config::Config, Engine};
use axum::{
    extract::State,
    http::{header, HeaderMap},
    response::{IntoResponse, Response},
    Json,
};
use serde::Serialize;
use std::{collections::BTreeSet, sync::Arc};

/// RFC 9728 §2, the fields we publish.
#[derive(Debug, Serialize)]
struct Metadata {
    resource: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    authorization_servers: Vec<String>,
    scopes_supported: Vec<String>,
    bearer_methods_supported: [&'static str; 1],
    resource_name: &'static str,
}

/// This server's resource identifier, from its public address.
fn base(config: &Config, headers: &HeaderMap) -> String {
    if let Some(url) = &config.public_url {
        let url = url.trim_end_matches('/');
        return url.strip_suffix("/ui").unwrap_or(url).to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && !h.contains(['"', '\\', ' ', '/']))
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// The metadata's address for the API (`mcp` false) or the MCP endpoint.
pub fn metadata_url(config: &Config, headers: &HeaderMap, mcp: bool) -> String {
    let base = base(config, headers);
    // The well-known path goes after the host and before any path the resource has.
    let (origin, path) = match base.find("://").map(|i| i + 3) {
        Some(start) => match base[start..].find('/') {
            Some(slash) => base.split_at(start + slash),
            None => (base.as_str(), ""),
        },
        None => (base.as_str(), ""),
    };
    let mcp = if mcp { super::paths::MCP } else { "" };
    format!("{origin}{}{path}{mcp}", super::paths::RESOURCE_METADATA)
}

fn metadata(config: &Config, headers: &HeaderMap, mcp: bool) -> Response {
    let base = base(config, headers);
    let providers = config.tenants.values().filter_map(|t| t.identity.as_ref());
    let issuers: BTreeSet<String> = providers.clone().map(|i| i.issuer.clone()).collect();
    let mut scopes: Vec<String> = Vec::new();
    for id in providers {
        let own: &[&String] = if mcp {
            &[&id.agent_scope]
        } else {
            &[&id.agent_scope, &id.approve_scope, &id.admin_scope]
        };
        for scope in own {
            if !scopes.contains(scope) {
                scopes.push((*scope).clone());
            }
        }
    }
    let document = Metadata {
        resource: if mcp {
            format!("{base}{}", super::paths::MCP)
        } else {
            base
        },
        authorization_servers: issuers.into_iter().collect(),
        scopes_supported: scopes,
        bearer_methods_supported: ["header"],
        resource_name: "countersign",
    };
    (
        [(header::CACHE_CONTROL, "public, max-age=300")],
        Json(document),
    )
        .into_response()
}

/// The API's OAuth protected resource metadata (RFC 9728): the tenants' identity providers and
/// the scopes their tokens carry.
#[utoipa::path(
    get,
    path = crate::api::paths::RESOURCE_METADATA,
    tag = "identity",
    security(()),
    responses((status = 200, description = "RFC 9728 metadata: resource, authorization_servers, scopes_supported, bearer_methods_supported", content_type = "application/json"))
)]
pub(super) async fn api(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> Response {
    metadata(engine.config(), &headers, false)
}

/// The MCP endpoint's metadata: its resource is `…/mcp`, its scope the agent's.
#[utoipa::path(
    get,
    path = crate::api::paths::MCP_RESOURCE_METADATA,
    tag = "identity",
    security(()),
    responses((status = 200, description = "RFC 9728 metadata of the MCP endpoint", content_type = "application/json"))
)]
pub(super) async fn mcp(State(engine): State<Arc<Engine>>, headers: HeaderMap) -> Response {
    metadata(engine.config(), &headers, true)
}
