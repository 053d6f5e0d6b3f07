//! The MCP executor: a tool served by a downstream MCP server over Streamable HTTP, called with
//! one stateless 2026-07-28 `tools/call` — the committed arguments, the same on every attempt
//! (SC-EDGE-06), `_meta` naming the action and the attempt, `Idempotency-Key: <action id>` —
//! under the tool's timeout and the webhook's target rules (SC-SEC-08) and result cap. How the
//! answer is read — JSON or SSE, up to our response, bounded — is `read`.

mod read;

use super::{
    webhook::{ready, transport_failure, truncated, Ready, RESULT_CAP},
    Call, ToolAnswer,
};
use crate::target;
use read::{Unread, REQUEST_ID};
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
            "id": REQUEST_ID,
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
        // The status decides before a byte of the body is read: a 5xx is retried whatever it
        // carries, any other non-2xx fails.
        let status = response.status();
        if status.is_server_error() {
            return ToolAnswer::Retryable(json!({"kind": "http", "status": status.as_u16()}));
        }
        if !status.is_success() {
            return ToolAnswer::Failed(json!({"kind": "http", "status": status.as_u16()}));
        }
        match read::response(response).await {
            Ok(message) => answer(message),
            Err(Unread::Transport(e)) => transport_failure(&e),
            Err(unread) => invalid(unread.detail()),
        }
    }
}

/// A downstream server's `tools/list`, every page (`nextCursor`), with one stateless
/// 2026-07-28 request each: what `countersign-server tools import` writes into the catalog.
#[cfg(feature = "embedded")]
pub async fn list_tools(url: &str, token: Option<&str>) -> Result<Vec<Value>, String> {
    let http = target::direct()
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
        let body =
            json!({"jsonrpc": "2.0", "id": REQUEST_ID, "method": "tools/list", "params": params});
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
        if !status.is_success() {
            return Err(format!("{url} answered HTTP {status}"));
        }
        let message = read::response(response)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
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

/// Our response, as an answer: a JSON-RPC error → failed (`mcp_error`); a result with `isError`
/// → failed (`tool_error`); any other result → succeeded with its `structuredContent`, else its
/// content. A response with neither is not one (`mcp_invalid_response`). What is kept of each is
/// capped as a webhook's result.
fn answer(message: Value) -> ToolAnswer {
    if let Some(error) = message.get("error") {
        return ToolAnswer::Failed(json!({
            "kind": "mcp_error",
            "code": error["code"],
            "message": capped(error["message"].clone()),
        }));
    }
    let Some(result) = message.get("result").filter(|r| r.is_object()) else {
        return invalid(json!({"detail": "no_result"}));
    };
    let payload = match result.get("structuredContent") {
        Some(structured) => structured.clone(),
        None => json!({"content": result["content"]}),
    };
    if result["isError"] == json!(true) {
        ToolAnswer::Failed(json!({"kind": "tool_error", "result": capped(payload)}))
    } else {
        ToolAnswer::Succeeded(capped(payload))
    }
}

/// An answer that is not a readable response to our request: failed, never retried — the server
/// received the call and answered, so it may have acted, and a server that answers so will again.
fn invalid(detail: Value) -> ToolAnswer {
    let mut error = json!({"kind": "mcp_invalid_response"});
    if let (Some(error), Value::Object(detail)) = (error.as_object_mut(), detail) {
        error.extend(detail);
    }
    ToolAnswer::Failed(error)
}

/// A value as stored: itself, or the truncation marker when it is over the result cap.
fn capped(value: Value) -> Value {
    let stored = serde_json::to_vec(&value).map_or(usize::MAX, |v| v.len());
    if stored > RESULT_CAP {
        truncated(stored)
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_a_success_only_as_a_result_without_is_error() {
        let response = |body: Value| {
            let mut message = json!({"jsonrpc": "2.0", "id": 1});
            message
                .as_object_mut()
                .unwrap()
                .extend(body.as_object().unwrap().clone());
            answer(message)
        };
        let pad = "x".repeat(RESULT_CAP);
        let failed = |error: Value| ToolAnswer::Failed(error);
        let cases = [
            (
                json!({"result": {"content": [], "structuredContent": {"ok": true}}}),
                ToolAnswer::Succeeded(json!({"ok": true})),
            ),
            (
                json!({"result": {"content": [{"type": "text", "text": "hi"}]}}),
                ToolAnswer::Succeeded(json!({"content": [{"type": "text", "text": "hi"}]})),
            ),
            (
                json!({"result": {"structuredContent": {"pad": pad}}}),
                ToolAnswer::Succeeded(truncated(RESULT_CAP + 10)),
            ),
            (
                json!({"result": {"content": [], "isError": true}}),
                failed(json!({"kind": "tool_error", "result": {"content": []}})),
            ),
            (
                json!({"result": {"content": [{"type": "text", "text": pad}], "isError": true}}),
                failed(json!({"kind": "tool_error", "result": truncated(RESULT_CAP + 39)})),
            ),
            (
                json!({"error": {"code": -32603, "message": "down", "data": pad}}),
                failed(json!({"kind": "mcp_error", "code": -32603, "message": "down"})),
            ),
            (
                json!({"error": {"code": -32603, "message": pad}}),
                failed(
                    json!({"kind": "mcp_error", "code": -32603, "message": truncated(RESULT_CAP + 2)}),
                ),
            ),
            (
                json!({"error": {"code": 1}, "result": {"content": []}}),
                failed(json!({"kind": "mcp_error", "code": 1, "message": null})),
            ),
            (
                json!({}),
                failed(json!({"kind": "mcp_invalid_response", "detail": "no_result"})),
            ),
            (
                json!({"result": null}),
                failed(json!({"kind": "mcp_invalid_response", "detail": "no_result"})),
            ),
            (
                json!({"result": "done"}),
                failed(json!({"kind": "mcp_invalid_response", "detail": "no_result"})),
            ),
        ];
        for (n, (body, want)) in cases.into_iter().enumerate() {
            assert_eq!(response(body), want, "case {n}");
        }
    }

    #[test]
    fn a_tool_name_is_a_header_value() {
        assert_eq!(header_value("send"), "send");
        assert_eq!(header_value("grüß"), "=?base64?Z3LDvMOf?=");
    }
}
