//! One notice to one endpoint: the body in the endpoint's format, signed like a webhook, posted
//! once with redirects refused. What a failure says names a kind and a status, never the URL.

use crate::{
    config::{Endpoint, Format},
    domain::notice::Notice,
    target,
    tools::webhook::signed_headers,
};
use jiff::Timestamp;

/// One signed POST. The error names a kind and a status, never the URL (it may hold a token).
pub(super) async fn send(
    clients: &target::Clients,
    endpoint: &Endpoint,
    notice: &Notice<'_>,
    now: Timestamp,
) -> Result<(), String> {
    let http = clients
        .for_url(&endpoint.url, endpoint.allow_private)
        .ok_or("target_refused")?;
    let secret = std::env::var(&endpoint.secret_env)
        .map_err(|_| format!("secret {} is not set", endpoint.secret_env))?;
    let body = match endpoint.format {
        Format::Json => notice.json(),
        Format::Slack => notice.slack(),
    };
    let body = serde_json::to_vec(&body).expect("a notice serializes");
    let id = notice.id();
    let signed = signed_headers(endpoint.signing, &secret, &id, now.as_second(), &body)
        .map_err(|_| "misconfigured".to_owned())?;
    let mut request = http
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header("countersign-event-id", &id);
    for (name, value) in signed {
        request = request.header(name, value);
    }
    let sent = request.body(body).send().await;
    match sent {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(format!("http {}", r.status().as_u16())),
        Err(e) if e.is_timeout() => Err("timeout".into()),
        Err(e) if target::refused(&e) => Err("target_refused".into()),
        Err(_) => Err("unreachable".into()),
    }
}
