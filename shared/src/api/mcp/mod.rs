//! MCP at `POST /mcp` (docs/mcp.md): Streamable HTTP with JSON responses, serving revision
//! 2026-07-28 (stateless: `_meta` on every request, `server/discover`, `resultType`) and the
//! handshake revisions 2025-11-25, 2025-06-18 and 2025-03-26 (`initialize`, answered without a
//! session; each request's revision from its `MCP-Protocol-Version`). A small JSON-RPC layer
//! of our own over the API's own guards — bearer keys, strict JSON, body cap, rate limits — so
//! an MCP call meets exactly what `POST /v1/actions` meets; the reasons are in docs/mcp.md.

mod catalog;
mod describe;
mod tasks;
mod text;

use super::{rate::RateLimits, MAX_BODY};
use crate::{
    config::{Principal, Role},
    Engine, Error,
};
use axum::{
    body::Body,
    extract::State,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Extension, Json,
};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The 2026-07-28 tasks extension.
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The two eras: the handshake (`initialize`, then requests that name their revision in a
/// header) and the stateless 2026-07-28.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revision {
    Legacy,
    Modern,
}

/// The revisions served, newest first (SC-MCP-10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    V2026_07_28,
    V2025_11_25,
    V2025_06_18,
    V2025_03_26,
}

impl Version {
    const ALL: [Version; 4] = [
        Version::V2026_07_28,
        Version::V2025_11_25,
        Version::V2025_06_18,
        Version::V2025_03_26,
    ];
    /// The newest handshake revision: what `initialize` answers a version it does not serve.
    const LATEST_HANDSHAKE: Version = Version::V2025_11_25;

    fn as_str(self) -> &'static str {
        match self {
            Version::V2026_07_28 => MODERN,
            Version::V2025_11_25 => "2025-11-25",
            Version::V2025_06_18 => "2025-06-18",
            Version::V2025_03_26 => "2025-03-26",
        }
    }

    fn parse(version: &str) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.as_str() == version)
    }

    fn supported() -> Value {
        json!(Version::ALL.map(Version::as_str))
    }

    fn revision(self) -> Revision {
        match self {
            Version::V2026_07_28 => Revision::Modern,
            _ => Revision::Legacy,
        }
    }

    /// Core tasks (`params.task`, `tasks/*`) arrived, experimental, in 2025-11-25; 2026-07-28
    /// has the tasks extension instead. Older revisions get the plain result.
    fn has_core_tasks(self) -> bool {
        self == Version::V2025_11_25
    }
}

/// One JSON-RPC request, authenticated, in its revision.
pub(crate) struct Rpc<'a> {
    engine: &'a Arc<Engine>,
    who: &'a Principal,
    rev: Revision,
    version: Version,
    params: &'a Map<String, Value>,
}

impl Rpc<'_> {
    fn meta(&self) -> Option<&Map<String, Value>> {
        self.params.get("_meta").and_then(Value::as_object)
    }

    /// A string parameter that must be there.
    fn text(&self, name: &str) -> Result<&str, RpcError> {
        self.params
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params(format!("params.{name} must be a string")))
    }
}

/// The caller's tenant (the catalog and the tasks both answer within it).
fn tenant<'a>(rpc: &Rpc<'a>) -> Result<&'a crate::config::Tenant, RpcError> {
    rpc.engine.config().tenant(&rpc.who.tenant).ok_or_else(|| {
        RpcError::from_engine(Error::Internal(format!(
            "tenant {} is not configured",
            rpc.who.tenant
        )))
    })
}

/// A JSON-RPC error, with the HTTP status the transport answers it with.
#[derive(Debug)]
pub(crate) struct RpcError {
    status: StatusCode,
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        RpcError {
            status,
            code,
            message: message.into(),
            data: None,
        }
    }

    fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(StatusCode::OK, -32602, message)
    }

    fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(StatusCode::BAD_REQUEST, -32600, message)
    }

    fn header_mismatch(message: impl Into<String>) -> Self {
        RpcError::new(StatusCode::BAD_REQUEST, -32020, message)
    }

    fn unsupported_version(requested: &str) -> Self {
        RpcError::new(
            StatusCode::BAD_REQUEST,
            -32022,
            "Unsupported protocol version",
        )
        .with_data(json!({"supported": Version::supported(), "requested": requested}))
    }

    /// 2026-07-28 answers an unknown method with HTTP 404 (its body tells it from a missing
    /// endpoint); 2025-11-25 with 200.
    fn method_not_found(rev: Revision, method: &str) -> Self {
        let status = match rev {
            Revision::Modern => StatusCode::NOT_FOUND,
            Revision::Legacy => StatusCode::OK,
        };
        RpcError::new(status, -32601, format!("Method not found: {method}"))
    }

    /// An engine error that is not a tool result: the store or the server itself failed.
    pub(crate) fn from_engine(e: Error) -> Self {
        let (_, code) = e.status_and_code();
        let body = e.body();
        if matches!(e, Error::Internal(_) | Error::Unavailable(_)) {
            tracing::error!(code, error = %e, "mcp request failed");
        }
        let message = body.error.message;
        let rpc_code = match e {
            Error::Unavailable(_) => -32000,
            _ => -32603,
        };
        RpcError::new(StatusCode::OK, rpc_code, message).with_data(json!({"code": code}))
    }

    /// An error answered before the request's id is known.
    fn without_id(self) -> Response {
        self.respond(Value::Null)
    }

    fn respond(self, id: Value) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = self.data {
            error["data"] = data;
        }
        (
            self.status,
            Json(json!({"jsonrpc": "2.0", "id": id, "error": error})),
        )
            .into_response()
    }
}

/// One JSON-RPC 2.0 request; without `id` (a string or an integer) a notification.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // Describes the body in the OpenAPI document; the handler reads it as JSON.
pub(super) struct JsonRpcRequest {
    #[schema(pattern = r"^2\.0$")]
    jsonrpc: String,
    /// `initialize`, `server/discover`, `tools/list`, `tools/call`, `tasks/get`, …
    method: String,
    #[schema(value_type = Option<Object>)]
    params: Option<Map<String, Value>>,
}

/// `POST /mcp`: one JSON-RPC request or notification per HTTP request (docs/mcp.md). Protocol
/// errors are JSON-RPC errors; tool outcomes are results.
#[utoipa::path(
    post,
    path = "/mcp",
    tag = "mcp",
    request_body(content = JsonRpcRequest, description = "MCP 2026-07-28 (with `params._meta` and the `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` headers), or 2025-11-25, 2025-06-18, 2025-03-26 (after `initialize`, named by `MCP-Protocol-Version`)"),
    responses(
        (status = 200, description = "The JSON-RPC response (a result, or an error such as -32601/-32602)", content_type = "application/json"),
        (status = 202, description = "A notification, accepted"),
        (status = 400, description = "Parse error (-32700), invalid request (-32600/-32602), header mismatch (-32020), unsupported version (-32022)", content_type = "application/json"),
        (status = 401, description = "No or unknown key", content_type = "application/json"),
        (status = 403, description = "Not an agent key, or an Origin that may not use the endpoint", content_type = "application/json"),
        (status = 404, description = "2026-07-28: no such method (-32601)", content_type = "application/json"),
        (status = 413, description = "The body exceeds the limit", content_type = "application/json"),
        (status = 429, description = "Rate limited; see Retry-After", content_type = "application/json"),
    )
)]
pub(super) async fn endpoint(
    State(engine): State<Arc<Engine>>,
    limits: Option<Extension<Arc<RateLimits>>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // DNS rebinding (transport spec): a browser page of another origin is refused.
    if !origin_allowed(&engine, &headers) {
        return RpcError::new(
            StatusCode::FORBIDDEN,
            -32000,
            "Forbidden: this Origin may not use the MCP endpoint",
        )
        .without_id();
    }
    let who = match authenticate(&engine, &headers, limits.as_ref().map(|l| &*l.0)) {
        Ok(who) => who,
        Err(response) => return *response,
    };
    let message = match read_message(body).await {
        Ok(message) => message,
        Err(e) => return e.without_id(),
    };
    // A malformed message is refused whether or not it has an id.
    let params = match message.get("params") {
        None => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => {
            return RpcError::new(StatusCode::BAD_REQUEST, -32602, "params must be an object")
                .without_id()
        }
    };
    let Some(id) = message.get("id").cloned() else {
        // A notification (`notifications/initialized`, `notifications/cancelled`): nothing to do.
        return StatusCode::ACCEPTED.into_response();
    };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return RpcError::invalid_request("id must be a string or an integer").without_id();
    }
    let method = message["method"].as_str().unwrap_or_default();
    let version = match version(method, &params, &headers) {
        Ok(version) => version,
        Err(e) => return e.respond(id),
    };
    let rpc = Rpc {
        engine: &engine,
        who: &who,
        rev: version.revision(),
        version,
        params: &params,
    };
    match dispatch(&rpc, method).await {
        Ok(result) => respond(id, rpc.rev, result),
        Err(e) => e.respond(id),
    }
}

async fn dispatch(rpc: &Rpc<'_>, method: &str) -> Result<Value, RpcError> {
    match (rpc.rev, method) {
        (Revision::Legacy, "initialize") => initialize(rpc),
        (Revision::Legacy, m) if m.starts_with("tasks/") && !rpc.version.has_core_tasks() => {
            Err(RpcError::method_not_found(rpc.rev, method))
        }
        (Revision::Legacy, "ping") => Ok(json!({})),
        (Revision::Modern, "server/discover") => Ok(discover()),
        (_, "tools/list") => catalog::list(rpc),
        (_, "tools/call") => catalog::call(rpc).await,
        (_, "tasks/get") => tasks::get(rpc).await,
        (_, "tasks/cancel") => tasks::cancel(rpc).await,
        (Revision::Legacy, "tasks/result") => tasks::result(rpc).await,
        (Revision::Legacy, "tasks/list") => tasks::list(rpc).await,
        (Revision::Modern, "tasks/update") => tasks::update(rpc).await,
        _ => Err(RpcError::method_not_found(rpc.rev, method)),
    }
}

fn respond(id: Value, rev: Revision, mut result: Value) -> Response {
    if rev == Revision::Modern {
        if let Some(fields) = result.as_object_mut() {
            fields
                .entry("resultType")
                .or_insert_with(|| json!("complete"));
            let meta = fields.entry("_meta").or_insert_with(|| json!({}));
            meta[META_SERVER_INFO] = server_info();
        }
    }
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

fn server_info() -> Value {
    json!({"name": "countersign", "version": env!("CARGO_PKG_VERSION")})
}

const INSTRUCTIONS: &str = "countersign runs each tool call through its tenant's policy: some run \
now, some wait for a person's countersignature or for a window. A call that waits answers with \
its action_id; call countersign_status with it to follow the call.";

/// The handshake: answered, but no session is kept (every request stands alone and names its
/// revision in `MCP-Protocol-Version`). As the lifecycle specifies, a requested revision that
/// is served is answered as asked, any other with the newest handshake revision (2026-07-28
/// included: it has no handshake). Core tasks are offered where the revision has them.
fn initialize(rpc: &Rpc<'_>) -> Result<Value, RpcError> {
    let requested = rpc.text("protocolVersion")?;
    let version = Version::parse(requested)
        .filter(|v| v.revision() == Revision::Legacy)
        .unwrap_or(Version::LATEST_HANDSHAKE);
    let mut capabilities = json!({"tools": {"listChanged": false}});
    if version.has_core_tasks() {
        capabilities["tasks"] =
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    }
    Ok(json!({
        "protocolVersion": version.as_str(),
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }))
}

fn discover() -> Value {
    json!({
        "supportedVersions": Version::supported(),
        "capabilities": {"tools": {"listChanged": false}, "extensions": {TASKS_EXTENSION: {}}},
        "instructions": INSTRUCTIONS,
        "ttlMs": 3_600_000,
        "cacheScope": "private",
    })
}

/// An `Origin` header, when sent, must be a loopback origin or the configured public URL's.
fn origin_allowed(engine: &Engine, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(origin) = origin
        .to_str()
        .ok()
        .and_then(|o| reqwest::Url::parse(o).ok())
    else {
        return false;
    };
    let loopback = matches!(origin.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let public = engine
        .config()
        .public_url
        .as_deref()
        .and_then(|u| reqwest::Url::parse(u).ok())
        .is_some_and(|u| u.origin() == origin.origin());
    loopback || public
}

/// The same bearer keys as the API (agent keys only), spending from the same buckets.
fn authenticate(
    engine: &Engine,
    headers: &HeaderMap,
    limits: Option<&RateLimits>,
) -> Result<Principal, Box<Response>> {
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|k| !k.is_empty());
    let Some(who) = key.and_then(|k| engine.config().principal(k)).cloned() else {
        let mut response = RpcError::new(
            StatusCode::UNAUTHORIZED,
            -32000,
            "Unauthorized: send an agent key as Authorization: Bearer <key>",
        )
        .without_id();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Err(Box::new(response));
    };
    if let Some(limits) = limits {
        if let Err(Error::RateLimited { retry_after_secs }) = limits.admit(&who) {
            let mut response = RpcError::new(
                StatusCode::TOO_MANY_REQUESTS,
                -32000,
                format!("Too many requests: retry after {retry_after_secs} s"),
            )
            .without_id();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_secs.into());
            return Err(Box::new(response));
        }
    }
    if who.role != Role::Agent {
        return Err(Box::new(
            RpcError::new(
                StatusCode::FORBIDDEN,
                -32000,
                "Forbidden: the MCP endpoint takes agent keys",
            )
            .without_id(),
        ));
    }
    Ok(who)
}

/// The body: size-capped and parsed as strictly as the API's (SC-SEC-03), one request object.
async fn read_message(body: Body) -> Result<Map<String, Value>, RpcError> {
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        RpcError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            format!("the body exceeds {MAX_BODY} bytes"),
        )
    })?;
    let value = super::json::parse(&bytes)
        .map_err(|e| RpcError::new(StatusCode::BAD_REQUEST, -32700, format!("Parse error: {e}")))?;
    let Value::Object(message) = value else {
        return Err(RpcError::invalid_request(
            "the body must be one JSON-RPC request object (batches are not supported)",
        ));
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0")
        || !message.get("method").is_some_and(Value::is_string)
    {
        return Err(RpcError::invalid_request(
            "a JSON-RPC 2.0 request needs jsonrpc \"2.0\" and a method",
        ));
    }
    Ok(message)
}

/// Which revision a request speaks: `_meta` carries the version on 2026-07-28; without it the
/// request is a handshake-era one, named by `MCP-Protocol-Version`. On 2026-07-28 the mirrored
/// headers must match the body.
fn version(
    method: &str,
    params: &Map<String, Value>,
    headers: &HeaderMap,
) -> Result<Version, RpcError> {
    let header_text = |name: &str| -> Result<Option<String>, RpcError> {
        headers
            .get(name)
            .map(|v| {
                v.to_str()
                    .map(str::to_owned)
                    .map_err(|_| RpcError::header_mismatch(format!("{name} is not visible ASCII")))
            })
            .transpose()
    };
    let header_version = header_text("mcp-protocol-version")?;
    let meta_version = params
        .get("_meta")
        .and_then(|m| m.get(META_VERSION))
        .map(|v| v.as_str().unwrap_or_default().to_owned());
    let Some(version) = meta_version else {
        return match header_version.as_deref().map(|v| (v, Version::parse(v))) {
            None => Ok(headerless(method, params)),
            Some((_, Some(Version::V2026_07_28))) => Err(RpcError::header_mismatch(format!(
                "MCP-Protocol-Version is {MODERN} but params._meta has no {META_VERSION}"
            ))),
            Some((_, Some(version))) => Ok(version),
            Some((other, None)) => Err(RpcError::unsupported_version(other)),
        };
    };
    if version != MODERN {
        return Err(RpcError::unsupported_version(&version));
    }
    let expect = |name: &str, got: Option<String>, want: &str| match got {
        Some(v) if v == want => Ok(()),
        Some(v) => Err(RpcError::header_mismatch(format!(
            "Header mismatch: {name} header value {v:?} does not match body value {want:?}"
        ))),
        None => Err(RpcError::header_mismatch(format!(
            "the {name} header is required"
        ))),
    };
    expect("MCP-Protocol-Version", header_version, &version)?;
    expect("Mcp-Method", header_text("mcp-method")?, method)?;
    let named = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(field) = named {
        let want = params
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let got = header_text("mcp-name")?
            .map(|v| decode_header(&v))
            .transpose()?;
        expect("Mcp-Name", got, want)?;
    }
    Ok(Version::V2026_07_28)
}

/// A handshake-era request without `MCP-Protocol-Version`: 2025-03-26, as the transport of
/// 2025-06-18 says to assume, unless the request itself shows it is newer: core tasks
/// (`params.task`, `tasks/*`) exist only in 2025-11-25. `initialize` negotiates from its body.
fn headerless(method: &str, params: &Map<String, Value>) -> Version {
    let tasks = method.starts_with("tasks/") || params.get("task").is_some_and(Value::is_object);
    if tasks {
        Version::V2025_11_25
    } else {
        Version::V2025_03_26
    }
}

/// A header value in the `=?base64?…?=` sentinel form is decoded; others are taken as sent.
fn decode_header(value: &str) -> Result<String, RpcError> {
    use base64::Engine as _;
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| RpcError::header_mismatch("Mcp-Name is not valid base64 UTF-8"))
}

/// Whether this request may be answered with a task: on 2025-11-25 the request asks for one
/// (`params.task`); on 2026-07-28 the client declares the tasks extension in `_meta`.
fn wants_task(rpc: &Rpc<'_>) -> bool {
    match rpc.rev {
        Revision::Legacy => {
            rpc.version.has_core_tasks() && rpc.params.get("task").is_some_and(Value::is_object)
        }
        Revision::Modern => rpc
            .meta()
            .and_then(|m| m.get(META_CAPABILITIES))
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.get(TASKS_EXTENSION))
            .is_some(),
    }
}
