//! The webhook executor: `POST {action_id, tool, args}` — the same bytes on every attempt
//! (SC-EDGE-06) — with `Idempotency-Key`, `Countersign-Attempt` and an HMAC-SHA256
//! `Countersign-Signature`, a per-tool timeout cut at the window's end and a 64 KiB result cap.

use super::{Call, ToolAnswer};
use crate::{config::Signing, target};
use base64::{engine::general_purpose::STANDARD as BASE64, Engine as _};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// Results larger than this are not stored; the call still succeeded.
pub const RESULT_CAP: usize = 64 * 1024;

pub struct Webhook {
    /// Public-only unless the tenant lists the host (SC-SEC-08).
    clients: target::Clients,
}

/// `t=<unix>,v1=<hex hmac-sha256(secret, "<t>.<body>")>`
pub fn signature(secret: &[u8], unix: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("hmac takes any key length");
    mac.update(format!("{unix}.").as_bytes());
    mac.update(body);
    format!("t={unix},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The headers that sign `body`. `id` is what a Standard Webhooks receiver deduplicates on
/// (`webhook-id`): a tool call's action id — the same on every attempt — or a notice's event id.
/// Fails only for a `standard-webhooks` secret that is not `whsec_<base64>`.
pub fn signed_headers(
    signing: Signing,
    secret: &str,
    id: &str,
    unix: i64,
    body: &[u8],
) -> Result<Vec<(&'static str, String)>, String> {
    match signing {
        Signing::Countersign => Ok(vec![(
            "countersign-signature",
            signature(secret.as_bytes(), unix, body),
        )]),
        Signing::StandardWebhooks => {
            let key = secret
                .strip_prefix("whsec_")
                .and_then(|k| BASE64.decode(k).ok())
                .ok_or("the secret is not whsec_<base64>")?;
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("hmac takes any key length");
            mac.update(format!("{id}.{unix}.").as_bytes());
            mac.update(body);
            let v1 = BASE64.encode(mac.finalize().into_bytes());
            Ok(vec![
                ("webhook-id", id.to_owned()),
                ("webhook-timestamp", unix.to_string()),
                ("webhook-signature", format!("v1,{v1}")),
            ])
        }
    }
}

impl Webhook {
    pub fn new() -> Self {
        // Redirects are never followed: a 3xx is the tool's answer (4xx-like: failed).
        Webhook {
            clients: target::Clients::new(None),
        }
    }

    pub async fn run(
        &self,
        call: &Call<'_>,
        url: &str,
        secret: Option<String>,
        allow_private: bool,
        signing: Signing,
    ) -> ToolAnswer {
        let Ready {
            http,
            secret,
            budget,
        } = match ready(&self.clients, call, url, allow_private, secret) {
            Ok(ready) => ready,
            Err(refused) => return refused,
        };
        // The attempt number travels in a header: the signed body a receiver deduplicates on
        // (its `action_id`) is the same bytes on every attempt (SC-EDGE-06).
        let body = serde_json::to_vec(&json!({
            "action_id": call.action_id,
            "tool": call.tool.name,
            "args": call.args,
        }))
        .expect("a call serializes");
        // The engine's clock, as every other instant the engine records.
        let signed =
            match signed_headers(signing, &secret, call.action_id, call.at.as_second(), &body) {
                Ok(headers) => headers,
                Err(_) => return ToolAnswer::Failed(json!({"kind": "misconfigured"})),
            };
        let mut request = http
            .post(url)
            .timeout(budget)
            .header("content-type", "application/json")
            .header("idempotency-key", call.action_id)
            .header("countersign-attempt", call.attempt);
        for (name, value) in signed {
            request = request.header(name, value);
        }
        let sent = request.body(body).send().await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return transport_failure(&e),
        };
        let status = response.status();
        let body = match read_capped(response).await {
            Ok(body) => body,
            Err(e) => return transport_failure(&e),
        };
        let payload = match body {
            Body::Complete(bytes) => serde_json::from_slice::<Value>(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
            Body::TooLarge(n) => truncated(n),
        };
        // The cap holds for what is stored: a non-JSON body kept as a string can grow several
        // times when escaped (control bytes become \u00XX).
        let stored = serde_json::to_vec(&payload).map_or(usize::MAX, |v| v.len());
        let payload = if stored > RESULT_CAP {
            truncated(stored)
        } else {
            payload
        };
        if status.is_success() {
            ToolAnswer::Succeeded(payload)
        } else if status.is_server_error() {
            ToolAnswer::Retryable(
                json!({"kind": "http", "status": status.as_u16(), "body": payload}),
            )
        } else {
            ToolAnswer::Failed(json!({"kind": "http", "status": status.as_u16(), "body": payload}))
        }
    }
}

/// What an attempt is sent with: the client for a target the tenant allows, the tool's secret,
/// and the time the attempt may take (it ends by the deadline: SC-EDGE-01). Or the failure to
/// record without sending.
pub(super) struct Ready<'a> {
    pub http: &'a reqwest::Client,
    pub secret: String,
    pub budget: std::time::Duration,
}

pub(super) fn ready<'a>(
    clients: &'a target::Clients,
    call: &Call<'_>,
    url: &str,
    allow_private: bool,
    secret: Option<String>,
) -> Result<Ready<'a>, ToolAnswer> {
    let Some(http) = clients.for_url(url, allow_private) else {
        return Err(ToolAnswer::Failed(json!({"kind": "target_refused"})));
    };
    // Checked at boot; a secret that vanished since is a misconfiguration, named by kind only.
    let Some(secret) = secret else {
        return Err(ToolAnswer::Failed(json!({"kind": "misconfigured"})));
    };
    // Connect, send and answer all end by the deadline; with no time left nothing is sent,
    // and the answer says so.
    let budget = call.budget();
    if budget.is_zero() {
        return Err(ToolAnswer::Failed(
            json!({"kind": "deadline", "sent": false}),
        ));
    }
    Ok(Ready {
        http,
        secret,
        budget,
    })
}

impl Default for Webhook {
    fn default() -> Self {
        Self::new()
    }
}

/// A failure before a status arrived, named by its kind only: reqwest's text carries the URL,
/// which may hold credentials, and every key of the tenant reads the outcome (SC-SEC-02).
pub(super) fn transport_failure(e: &reqwest::Error) -> ToolAnswer {
    if target::refused(e) {
        return ToolAnswer::Failed(json!({"kind": "target_refused"}));
    }
    let kind = if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "unreachable"
    } else {
        "transport"
    };
    ToolAnswer::Retryable(json!({"kind": kind}))
}

pub(super) fn truncated(bytes: usize) -> Value {
    json!({"truncated": true, "bytes_at_least": bytes, "cap": RESULT_CAP})
}

pub(super) enum Body {
    Complete(Vec<u8>),
    TooLarge(usize),
}

/// Read at most the cap, so a huge answer cannot exhaust memory.
pub(super) async fn read_capped(mut response: reqwest::Response) -> Result<Body, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > RESULT_CAP {
            return Ok(Body::TooLarge(bytes.len()));
        }
    }
    Ok(Body::Complete(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn standard_webhooks_signature_matches_the_specs_vector() {
        // The Standard Webhooks example (as the PyPI `standardwebhooks` library signs it).
        let headers = super::signed_headers(
            crate::config::Signing::StandardWebhooks,
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(
            headers[2],
            (
                "webhook-signature",
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=".to_owned()
            )
        );
        assert!(super::signed_headers(
            crate::config::Signing::StandardWebhooks,
            "not-whsec",
            "x",
            0,
            b"{}"
        )
        .is_err());
    }

    #[test]
    fn signature_matches_a_known_vector() {
        // echo -n "1700000000.{}" | openssl dgst -sha256 -hmac secret
        let sig = super::signature(b"secret", 1_700_000_000, b"{}");
        assert!(sig.starts_with("t=1700000000,v1="));
        assert_eq!(sig.len(), "t=1700000000,v1=".len() + 64);
    }
}
