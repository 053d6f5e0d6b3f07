//! `countersign login`: the OAuth 2.0 device authorization grant (RFC 8628). The provider comes
//! from the server's protected resource metadata (RFC 9728), its endpoints from OpenID discovery;
//! the token is asked for the server's resource (RFC 8707) with the approver scope.
//!
//! The device grant rather than a loopback redirect (RFC 8252): it works where the CLI runs
//! without a browser (over SSH, in a container) — the person confirms a short code on any
//! device — and the CLI opens no port and receives no redirect.

use crate::{
    exit::{Exit, Failure},
    session::{self, Session},
};
use serde_json::Value;
use std::time::Duration;

/// What to ask for, from the command line.
pub struct Ask<'a> {
    pub url: &'a str,
    pub issuer: Option<&'a str>,
    pub client_id: &'a str,
    pub resource: Option<&'a str>,
    pub scope: &'a str,
}

/// RFC 8628 §3.2: without `interval`, poll every 5 seconds.
const DEFAULT_INTERVAL: u64 = 5;

/// The client that talks to the provider.
fn http() -> Result<reqwest::Client, Failure> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        // The provider's answers are taken as they are: a redirect is an error, not followed.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Failure::new(Exit::Failure, e.to_string()))
}

pub async fn login(ask: Ask<'_>) -> Result<Session, Failure> {
    let http = http()?;
    let (issuer, resource) = provider(&http, &ask).await?;
    let discovery = get_json(&http, &format!("{issuer}/.well-known/openid-configuration")).await?;
    let endpoint = |name: &str| {
        discovery[name].as_str().map(str::to_owned).ok_or_else(|| {
            Failure::new(
                Exit::Failure,
                format!("{issuer} does not offer the device grant (no {name} in its discovery)"),
            )
        })
    };
    let (device, token) = (
        endpoint("device_authorization_endpoint")?,
        endpoint("token_endpoint")?,
    );
    let form = [
        ("client_id", ask.client_id),
        ("scope", ask.scope),
        ("resource", resource.as_str()),
    ];
    let grant = post_form(&http, &device, &form).await?;
    if grant.0 != 200 {
        return Err(refused(
            &grant.1,
            "the provider refused the sign-in request",
        ));
    }
    let grant = grant.1;
    let text = |name: &str| grant[name].as_str().unwrap_or_default().to_owned();
    match grant["verification_uri_complete"].as_str() {
        Some(complete) => eprintln!(
            "To sign in, open {complete}\nand check that it shows the code {}",
            text("user_code")
        ),
        None => eprintln!(
            "To sign in, open {}\nand enter the code {}",
            text("verification_uri"),
            text("user_code")
        ),
    }
    let device_code = text("device_code");
    let poll = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
        ("device_code", device_code.as_str()),
        ("client_id", ask.client_id),
        ("resource", resource.as_str()),
    ];
    let lasts = grant["expires_in"].as_u64().unwrap_or(600);
    let interval = grant["interval"].as_u64().unwrap_or(DEFAULT_INTERVAL);
    let tokens = wait(&http, &token, &poll, interval, lasts).await?;
    let mut session = Session {
        url: ask.url.trim_end_matches('/').to_owned(),
        issuer,
        client_id: ask.client_id.to_owned(),
        token_endpoint: token,
        resource,
        access_token: String::new(),
        refresh_token: None,
        expires_at: None,
    };
    tokens.into(&mut session);
    Ok(session)
}

/// A lapsed sign-in renewed with its refresh token (RFC 6749 §6), for the same resource. The
/// provider may rotate the refresh token; one it refuses ends the sign-in.
pub async fn refresh(session: &mut Session) -> Result<(), Failure> {
    let Some(refresh_token) = session.refresh_token.clone() else {
        return Err(session::expired(None));
    };
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token.as_str()),
        ("client_id", session.client_id.as_str()),
        ("resource", session.resource.as_str()),
    ];
    let (status, body) = post_form(&http()?, &session.token_endpoint, &form).await?;
    match Poll::of(status, &body) {
        Poll::Token(tokens) => {
            tokens.into(session);
            Ok(())
        }
        _ => {
            let error = body["error"].as_str().unwrap_or("no error code");
            Err(session::expired(Some(&format!(
                "the provider refused to renew it: {error}"
            ))))
        }
    }
}

/// What the token endpoint gave.
#[derive(Debug)]
struct Tokens {
    access: String,
    refresh: Option<String>,
    /// Seconds.
    lifetime: Option<u64>,
}

impl Tokens {
    fn into(self, session: &mut Session) {
        let now = jiff::Timestamp::now().as_second();
        session.access_token = self.access;
        // A provider that does not rotate sends no new refresh token: the old one serves on.
        if self.refresh.is_some() {
            session.refresh_token = self.refresh;
        }
        session.expires_at = self.lifetime.map(|s| now + s as i64);
    }
}

/// The provider's issuer and the resource to ask for: given, or from the server's metadata.
async fn provider(http: &reqwest::Client, ask: &Ask<'_>) -> Result<(String, String), Failure> {
    let base = ask.url.trim_end_matches('/');
    let metadata = match (ask.issuer, ask.resource) {
        (Some(_), Some(_)) => Value::Null,
        _ => {
            get_json(
                http,
                &format!("{base}/.well-known/oauth-protected-resource"),
            )
            .await?
        }
    };
    let resource = match ask.resource.or(metadata["resource"].as_str()) {
        Some(r) => r.to_owned(),
        None => return Err(Failure::new(Exit::Failure, "the server names no resource")),
    };
    let issuers: Vec<&str> = metadata["authorization_servers"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let issuer = match (ask.issuer, issuers.as_slice()) {
        (Some(given), _) => given,
        (None, [one]) => one,
        (None, []) => {
            return Err(Failure::new(
                Exit::Usage,
                format!("{base} trusts no identity provider: use an API key"),
            ))
        }
        (None, many) => {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "{base} trusts several providers; pick one with --issuer: {}",
                    many.join(", ")
                ),
            ))
        }
    };
    Ok((issuer.trim_end_matches('/').to_owned(), resource))
}

/// Poll the token endpoint as RFC 8628 §3.4–3.5 says, until a token, a refusal or the code's
/// end.
async fn wait(
    http: &reqwest::Client,
    token_endpoint: &str,
    form: &[(&str, &str)],
    mut interval: u64,
    lasts: u64,
) -> Result<Tokens, Failure> {
    let deadline = std::time::Instant::now() + Duration::from_secs(lasts);
    loop {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        if std::time::Instant::now() > deadline {
            return Err(Poll::expired());
        }
        let (status, body) = post_form(http, token_endpoint, form).await?;
        match Poll::of(status, &body) {
            Poll::Token(tokens) => return Ok(tokens),
            Poll::Pending => {}
            // §3.5: five seconds more, for this and every later request.
            Poll::SlowDown => interval += 5,
            Poll::Failed(failure) => return Err(failure),
        }
    }
}

/// One answer of the token endpoint while polling.
#[derive(Debug)]
enum Poll {
    Token(Tokens),
    Pending,
    SlowDown,
    Failed(Failure),
}

impl Poll {
    fn of(status: u16, body: &Value) -> Poll {
        if status == 200 {
            return match body["access_token"].as_str() {
                Some(token) => Poll::Token(Tokens {
                    access: token.to_owned(),
                    refresh: body["refresh_token"].as_str().map(str::to_owned),
                    lifetime: body["expires_in"].as_u64(),
                }),
                None => Poll::Failed(Failure::new(Exit::Failure, "the provider sent no token")),
            };
        }
        match body["error"].as_str() {
            Some("authorization_pending") => Poll::Pending,
            Some("slow_down") => Poll::SlowDown,
            Some("expired_token") => Poll::Failed(Poll::expired()),
            Some("access_denied") => Poll::Failed(Failure::new(
                Exit::Refused,
                "the sign-in was refused at the provider (access_denied): not signed in",
            )),
            _ => Poll::Failed(refused(body, "the provider refused the sign-in")),
        }
    }

    fn expired() -> Failure {
        Failure::new(
            Exit::Unauthenticated,
            "the code expired before it was confirmed (expired_token): run countersign login again",
        )
    }
}

/// An OAuth error answer (RFC 6749 §5.2) as a failure.
fn refused(body: &Value, what: &str) -> Failure {
    let error = body["error"].as_str().unwrap_or("no error code");
    let mut message = format!("{what}: {error}");
    if let Some(description) = body["error_description"].as_str() {
        message.push_str(&format!(" ({description})"));
    }
    Failure::new(Exit::Refused, message)
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, Failure> {
    let answer = http
        .get(url)
        .send()
        .await
        .map_err(|e| unreachable(url, e))?;
    let status = answer.status().as_u16();
    match answer.json::<Value>().await {
        Ok(v) if status == 200 => Ok(v),
        _ => Err(Failure::new(
            Exit::Failure,
            format!("{url} answered {status}, not the JSON document expected"),
        )),
    }
}

async fn post_form(
    http: &reqwest::Client,
    url: &str,
    form: &[(&str, &str)],
) -> Result<(u16, Value), Failure> {
    let answer = http
        .post(url)
        .form(form)
        .send()
        .await
        .map_err(|e| unreachable(url, e))?;
    let status = answer.status().as_u16();
    Ok((status, answer.json().await.unwrap_or(Value::Null)))
}

fn unreachable(url: &str, e: reqwest::Error) -> Failure {
    Failure::new(Exit::Unavailable, format!("cannot reach {url}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// SC-ID-09: each answer of the token endpoint while polling (RFC 8628 §3.5).
    #[test]
    fn sc_id_09_each_poll_answer_has_its_next_step() {
        let ok = Poll::of(
            200,
            &json!({"access_token": "t", "refresh_token": "r", "expires_in": 300}),
        );
        assert!(
            matches!(ok, Poll::Token(Tokens { access, refresh: Some(r), lifetime: Some(300) })
            if access == "t" && r == "r")
        );
        let err = |code: &str| Poll::of(400, &json!({"error": code}));
        assert!(matches!(err("authorization_pending"), Poll::Pending));
        assert!(matches!(err("slow_down"), Poll::SlowDown));
        for (code, exit, says) in [
            ("expired_token", Exit::Unauthenticated, "login again"),
            ("access_denied", Exit::Refused, "refused at the provider"),
            ("invalid_grant", Exit::Refused, "invalid_grant"),
        ] {
            match err(code) {
                Poll::Failed(f) => {
                    assert_eq!(f.exit, exit, "{code}");
                    assert!(f.message.contains(says), "{code}: {f}");
                }
                other => panic!("{code}: {other:?}"),
            }
        }
        assert!(matches!(Poll::of(200, &json!({})), Poll::Failed(_)));
    }
}
