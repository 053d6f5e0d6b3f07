//! Which revision a request speaks (SC-MCP-10): the four served, how a request names its own —
//! `_meta` and the mirrored headers on 2026-07-28, `MCP-Protocol-Version` after the handshake
//! — and what each revision has.

use axum::http::HeaderMap;
use serde_json::{json, Map, Value};

/// The stateless revision.
pub const MODERN: &str = "2026-07-28";

pub(super) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(super) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(super) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The 2026-07-28 tasks extension.
pub(super) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

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
    pub(super) const ALL: [Version; 4] = [
        Version::V2026_07_28,
        Version::V2025_11_25,
        Version::V2025_06_18,
        Version::V2025_03_26,
    ];
    /// The newest handshake revision: what `initialize` answers a version it does not serve.
    pub(super) const LATEST_HANDSHAKE: Version = Version::V2025_11_25;

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Version::V2026_07_28 => MODERN,
            Version::V2025_11_25 => "2025-11-25",
            Version::V2025_06_18 => "2025-06-18",
            Version::V2025_03_26 => "2025-03-26",
        }
    }

    pub(super) fn parse(version: &str) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.as_str() == version)
    }

    pub(super) fn supported() -> Value {
        json!(Version::ALL.map(Version::as_str))
    }

    pub(super) fn revision(self) -> Revision {
        match self {
            Version::V2026_07_28 => Revision::Modern,
            _ => Revision::Legacy,
        }
    }

    /// Core tasks (`params.task`, `tasks/*`) arrived, experimental, in 2025-11-25; 2026-07-28
    /// has the tasks extension instead. Older revisions get the plain result.
    pub(super) fn has_core_tasks(self) -> bool {
        self == Version::V2025_11_25
    }
}

/// Why a request's revision cannot be told; `rpc.rs` answers each as its JSON-RPC error.
#[derive(Debug, PartialEq)]
pub(super) enum Refused {
    /// A mirrored header is missing, unreadable or says other than the body (-32020).
    Header(String),
    /// The version named is not one served (-32022).
    Unsupported(String),
}

/// Which revision a request speaks: `_meta` carries the version on 2026-07-28; without it the
/// request is a handshake-era one, named by `MCP-Protocol-Version`. On 2026-07-28 the mirrored
/// headers must match the body.
pub(super) fn version(
    method: &str,
    params: &Map<String, Value>,
    headers: &HeaderMap,
) -> Result<Version, Refused> {
    let header_text = |name: &str| -> Result<Option<String>, Refused> {
        headers
            .get(name)
            .map(|v| {
                v.to_str()
                    .map(str::to_owned)
                    .map_err(|_| Refused::Header(format!("{name} is not visible ASCII")))
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
            Some((_, Some(Version::V2026_07_28))) => Err(Refused::Header(format!(
                "MCP-Protocol-Version is {MODERN} but params._meta has no {META_VERSION}"
            ))),
            Some((_, Some(version))) => Ok(version),
            Some((other, None)) => Err(Refused::Unsupported(other.to_owned())),
        };
    };
    if version != MODERN {
        return Err(Refused::Unsupported(version));
    }
    let expect = |name: &str, got: Option<String>, want: &str| match got {
        Some(v) if v == want => Ok(()),
        Some(v) => Err(Refused::Header(format!(
            "Header mismatch: {name} header value {v:?} does not match body value {want:?}"
        ))),
        None => Err(Refused::Header(format!("the {name} header is required"))),
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
fn decode_header(value: &str) -> Result<String, Refused> {
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
        .ok_or_else(|| Refused::Header("Mcp-Name is not valid base64 UTF-8".into()))
}
