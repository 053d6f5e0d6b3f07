//! The MCP executor: a tool served by a downstream MCP server over Streamable HTTP, called with
//! one stateless 2026-07-28 `tools/call` — the committed arguments, the same on every attempt
//! (SC-EDGE-06), `_meta` naming the action and the attempt, `Idempotency-Key: <action id>` —
//! under the tool's timeout and the webhook's target rules (SC-SEC-08) and result cap.

use super::{
    webhook::{read_capped, ready, transport_failure, truncated, Body, Ready, RESULT_CAP},
    Call, ToolAnswer,
};
use crate::target;
use serde_json::{json, Value};

const VERSION: &str = "2026-07-28";

pub struct Mcp {
    clients: target::Clients,
}

impl Mcp {
    pub fn new() -> Self {
        Mcp {
            clients: target::Clients::new(None),
        }
    }

    pub async fn run(
        &self,
        call: &Call<'_>,
        url: &str,
        tool: &str,
        secret: Option<String>,
        allow_private: bool,
    ) -> ToolAnswer {
        let Ready {
            http,
            secret,
            budget,
        } = match ready(&self.clients, call, url, allow_private, secret) {
            Ok(ready) => ready,
            Err(refused) => return refused,
        };
        let mut meta = meta();
        meta["io.countersign/action"] =
            json!({"action_id": call.action_id, "attempt": call.attempt});
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": call.args, "_meta": meta},
        });
        let sent = http
            .post(url)
            .timeout(budget)
            .bearer_auth(secret)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", "tools/call")
            .header("mcp-name", header_value(tool))
            .header("idempotency-key", call.action_id)
            .json(&body)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return transport_failure(&e),
        };
        let status = response.status();
        let event_stream = is_event_stream(&response);
        let bytes = match read_capped(response).await {
            Ok(Body::Complete(bytes)) => bytes,
            Ok(Body::TooLarge(n)) => return too_large(status, n),
            Err(e) => return transport_failure(&e),
        };
        if status.is_server_error() {
            return ToolAnswer::Retryable(json!({"kind": "http", "status": status.as_u16()}));
        }
        if !status.is_success() {
            return ToolAnswer::Failed(json!({"kind": "http", "status": status.as_u16()}));
        }
        match response_message(&bytes, event_stream) {
            Some(message) => answer(message),
            None => ToolAnswer::Failed(json!({"kind": "mcp_invalid_response"})),
        }
    }
}

/// A downstream server's `tools/list`, every page (`nextCursor`), with one stateless
/// 2026-07-28 request each: what `countersign-local tools import` writes into the catalog.
#[cfg(feature = "embedded")]
pub async fn list_tools(url: &str, token: Option<&str>) -> Result<Vec<Value>, String> {
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut params = json!({"_meta": meta()});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params});
        let mut request = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", "tools/list")
            .json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
        let status = response.status();
        let event_stream = is_event_stream(&response);
        let bytes = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{url} answered HTTP {status}"));
        }
        let message = response_message(&bytes, event_stream)
            .ok_or_else(|| format!("{url} did not answer a JSON-RPC response"))?;
        if let Some(error) = message.get("error") {
            return Err(format!("{url} answered a JSON-RPC error: {error}"));
        }
        let result = &message["result"];
        let page = result["tools"]
            .as_array()
            .ok_or_else(|| format!("{url}: the tools/list result has no tools"))?;
        tools.extend(page.iter().cloned());
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(tools),
        }
    }
}

/// The 2026-07-28 request `_meta` countersign sends as a client.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "countersign", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

impl Default for Mcp {
    fn default() -> Self {
        Self::new()
    }
}

/// A name as a header value: plain when it is visible ASCII, else the `=?base64?…?=` form.
fn header_value(name: &str) -> String {
    use base64::Engine as _;
    let plain = !name.is_empty()
        && name.bytes().all(|b| (0x21..=0x7e).contains(&b))
        && !(name.starts_with("=?base64?") && name.ends_with("?="));
    if plain {
        name.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(name)
        )
    }
}

fn too_large(status: reqwest::StatusCode, n: usize) -> ToolAnswer {
    if status.is_success() {
        ToolAnswer::Succeeded(truncated(n))
    } else {
        ToolAnswer::Failed(json!({"kind": "http", "status": status.as_u16()}))
    }
}

/// The JSON-RPC response: the body itself, or the SSE event that carries it.
fn response_message(bytes: &[u8], event_stream: bool) -> Option<Value> {
    if !event_stream {
        return serde_json::from_slice(bytes).ok();
    }
    let text = String::from_utf8_lossy(bytes);
    text.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            serde_json::from_str::<Value>(&data.join("\n")).ok()
        })
        .find(|m| m.get("id") == Some(&json!(1)))
}

/// `isError` → failed; a JSON-RPC error → failed; a result → its `structuredContent`, else its
/// content.
fn answer(message: Value) -> ToolAnswer {
    if let Some(error) = message.get("error") {
        return ToolAnswer::Failed(json!({
            "kind": "mcp_error",
            "code": error["code"],
            "message": error["message"],
        }));
    }
    let result = &message["result"];
    let payload = match result.get("structuredContent") {
        Some(structured) => structured.clone(),
        None => json!({"content": result["content"]}),
    };
    let stored = serde_json::to_vec(&payload).map_or(usize::MAX, |v| v.len());
    let payload = if stored > RESULT_CAP {
        truncated(stored)
    } else {
        payload
    };
    if result["isError"] == json!(true) {
        ToolAnswer::Failed(json!({"kind": "tool_error", "result": payload}))
    } else {
        ToolAnswer::Succeeded(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sse_answer_is_read_like_a_json_one() {
        let sse = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"structuredContent\":{\"ok\":true}}}\n\n";
        let message = response_message(sse, true).unwrap();
        assert_eq!(answer(message), ToolAnswer::Succeeded(json!({"ok": true})));
        let failed = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}});
        assert!(matches!(answer(failed), ToolAnswer::Failed(_)));
        assert_eq!(header_value("send"), "send");
        assert_eq!(header_value("grüß"), "=?base64?Z3LDvMOf?=");
    }
}
