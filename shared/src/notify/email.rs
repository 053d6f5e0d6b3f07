//! Approval requests by mail (SC-CH-10): one mail per eligible approver, sent over SMTP with TLS
//! as one more delivery of the outbox entry the transition wrote. Each approver is a recipient
//! the entry remembers once it took its mail, so a retry (SMTP down, one address refused) sends
//! only what is missing; the Message-ID is stable per notice and approver, so a mail sent twice
//! under at-least-once delivery is one message to a mail client.

use crate::{
    config::{Config, EmailConfig, Role, Secret},
    domain::{
        countersign::may_decide,
        email_link::Link,
        mail::Request,
        notice::{endpoint_key, OutboxEntry},
        Action, State,
    },
    tools::secrets::Secrets,
};
use jiff::Timestamp;
use lettre::{
    message::{header::ContentType, Mailbox, MultiPart, SinglePart},
    transport::smtp::{
        authentication::Credentials,
        client::{Certificate, Tls, TlsParameters},
        extension::ClientId,
    },
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};

/// The confirmation page, beside the approver page (`…/ui/`).
const CONFIRM: &str = "email/confirm";

/// The approvers `action` waits for who have an address: they hold an approver key whose
/// groups may decide it, it is not their own agent's call, they have not approved it yet.
pub(super) fn recipients<'a>(
    config: &Config,
    email: &'a EmailConfig,
    action: &Action,
) -> Vec<(&'a str, &'a Mailbox)> {
    if action.state() != State::PendingApproval {
        return Vec::new();
    }
    let approved = action.approvals();
    email
        .to
        .iter()
        .filter(|(id, _)| {
            id.as_str() != action.call().agent_id()
                && !approved.iter().any(|s| &s.approver == *id)
                && config
                    .principals_named(action.tenant(), id)
                    .any(|p| p.role == Role::Approver && may_decide(&p.groups, action))
        })
        .map(|(id, to)| (id.as_str(), to))
        .collect()
}

/// How the outbox entry names one approver's mail (never the address itself).
pub(super) fn recipient_key(approver: &str, to: &Mailbox) -> String {
    endpoint_key(&format!("mailto:{approver}:{to}"))
}

/// One try: a mail to each recipient of `action` not yet in `entry.delivered`. Answers the keys
/// of those sent and, if any failed, why (a kind and an SMTP code; never the URL).
pub(super) async fn send(
    config: &Config,
    email: &EmailConfig,
    secrets: &Secrets,
    entry: &OutboxEntry,
    action: &Action,
    page: &str,
    now: Timestamp,
) -> (Vec<String>, Option<String>) {
    let due: Vec<_> = recipients(config, email, action)
        .into_iter()
        .filter(|(id, to)| !entry.delivered.contains(&recipient_key(id, to)))
        .collect();
    if due.is_empty() {
        return (Vec::new(), None);
    }
    let prepared = (|| {
        let confirm = reqwest::Url::parse(page)
            .and_then(|p| p.join(CONFIRM))
            .map_err(|_| "server.public_url is not set".to_owned())?;
        let key = link_key(email, secrets)?;
        let url = value(&email.smtp_url, secrets)?;
        Ok::<_, String>((confirm, key, transport(&url, email)?))
    })();
    let (confirm, key, smtp) = match prepared {
        Ok(ready) => ready,
        Err(why) => {
            crate::telemetry::mailed(0, due.len());
            return (Vec::new(), Some(why));
        }
    };
    let zone = config
        .tenant(action.tenant())
        .map(|t| t.time_zone.clone())
        .unwrap_or(jiff::tz::TimeZone::UTC);
    let page_url = format!("{page}#action={}", action.id());
    let (mut took, mut failure) = (Vec::new(), None);
    let tried = due.len();
    for (approver, to) in due {
        let Some(approval) = action.approval() else {
            break;
        };
        let token = Link {
            tenant: action.tenant().to_owned(),
            action_id: action.id().to_owned(),
            approver: approver.to_owned(),
            context_digest: approval.context_digest.clone(),
            expires_at: approval.expires_at.as_second(),
        }
        .sign(&key);
        let mut link = confirm.clone();
        link.query_pairs_mut().append_pair("token", &token);
        let mail = Request {
            action,
            time_zone: &zone,
            link: link.as_str(),
            page_url: &page_url,
        }
        .render();
        let recipient = recipient_key(approver, to);
        let message = Message::builder()
            .from(email.from.clone())
            .to(to.clone())
            .subject(mail.subject)
            .date(now.into())
            .message_id(Some(format!("<{}.{recipient}@countersign>", entry.id())))
            .multipart(
                MultiPart::alternative()
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_PLAIN)
                            .body(mail.text),
                    )
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_HTML)
                            .body(mail.html),
                    ),
            );
        let sent = match message {
            Ok(message) => smtp.send(message).await.map_err(|e| smtp_error(&e)),
            Err(_) => Err("message refused by the builder".to_owned()),
        };
        match sent {
            Ok(_) => took.push(recipient),
            Err(why) => failure = Some(why),
        }
    }
    crate::telemetry::mailed(took.len(), tried - took.len());
    (took, failure)
}

/// The tenant's link key (at least [`crate::config::MIN_LINK_SECRET`] bytes), from its
/// variable or the parameter fetched at boot: it signs the links and checks them.
pub fn link_key(email: &EmailConfig, secrets: &Secrets) -> Result<Vec<u8>, String> {
    let key = value(&email.link_secret, secrets)?;
    if key.len() < crate::config::MIN_LINK_SECRET {
        return Err(format!(
            "secret {} is shorter than {} bytes",
            shown(&email.link_secret),
            crate::config::MIN_LINK_SECRET
        ));
    }
    Ok(key.into_bytes())
}

/// A secret's value, or that it is not set — by its name (`SMTP_URL`, `/countersign-channels/…`),
/// never its value.
fn value(secret: &Secret, secrets: &Secrets) -> Result<String, String> {
    secrets
        .value(secret)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("secret {} is not set", shown(secret)))
}

fn shown(secret: &Secret) -> &str {
    match secret {
        Secret::Env(name) | Secret::Ssm(name) => name,
    }
}

/// The SMTP client `url` names: `smtps://` (TLS from the first byte, port 465 by default) or
/// `smtp://` (STARTTLS required, port 587 — submission — by default), `user:password@` the
/// credentials (percent-encoded). Plain `smtp://` without TLS only with `insecure_plaintext`.
/// Errors never repeat the URL: it holds a password.
pub fn transport(
    url: &str,
    email: &EmailConfig,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("the SMTP URL does not parse ({e})"))?;
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or("the SMTP URL names no host")?
        .to_owned();
    let tls = || {
        let mut params = TlsParameters::builder(host.clone());
        if let Some(file) = &email.ca_file {
            let pem = std::fs::read(file)
                .map_err(|e| format!("cannot read ca_file {} ({e})", file.display()))?;
            let ca = Certificate::from_pem(&pem)
                .map_err(|_| format!("ca_file {} holds no PEM certificate", file.display()))?;
            params = params.add_root_certificate(ca);
        }
        params.build_rustls().map_err(|e| format!("TLS: {e}"))
    };
    let (tls, default_port) = match (parsed.scheme(), email.insecure_plaintext) {
        ("smtps", _) => (Tls::Wrapper(tls()?), 465),
        ("smtp", false) => (Tls::Required(tls()?), 587),
        ("smtp", true) => (Tls::None, 587),
        (other, _) => {
            return Err(format!(
                "the SMTP URL's scheme is {other}, not smtps or smtp"
            ))
        }
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(parsed.port().unwrap_or(default_port))
        .tls(tls)
        .timeout(Some(super::TIMEOUT))
        .hello_name(ClientId::Domain(email.from.email.domain().to_owned()));
    if !parsed.username().is_empty() {
        let decode = |s: &str| {
            percent_decode(s).ok_or("the SMTP URL's credentials are not valid percent-encoding")
        };
        let user = decode(parsed.username())?;
        let password = decode(parsed.password().unwrap_or_default())?;
        builder = builder.credentials(Credentials::new(user, password));
    }
    Ok(builder.build())
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn smtp_error(e: &lettre::transport::smtp::Error) -> String {
    let code = e.status().map(|c| format!(" {c}")).unwrap_or_default();
    if e.is_timeout() {
        "smtp timeout".into()
    } else if e.is_tls() {
        "smtp tls".into()
    } else if e.is_permanent() {
        format!("smtp permanent{code}")
    } else if e.is_transient() {
        format!("smtp transient{code}")
    } else {
        "smtp unreachable".into()
    }
}

/// At boot, for the process that sends mail (and checks links): every tenant's SMTP URL and
/// link key are set and usable — an `_ssm` one fetched (`ssm_fetched`: the AWS functions;
/// elsewhere it is refused, as a tool's `secret_ssm` is). Errors name the entry, never the URL.
pub fn check_secrets(
    config: &Config,
    secrets: &Secrets,
    ssm_fetched: bool,
) -> Result<(), crate::config::ConfigError> {
    for (tenant, t) in &config.tenants {
        let Some(email) = &t.email else { continue };
        let at = format!("tenants.{tenant}.email");
        let field = |name: &str, secret: &Secret| match secret {
            Secret::Env(_) => format!("{at}.{name}_env"),
            Secret::Ssm(_) => format!("{at}.{name}_ssm"),
        };
        let bad =
            |field: String, why: String| crate::config::ConfigError(format!("{field}: {why}"));
        for (name, secret) in [
            ("smtp_url", &email.smtp_url),
            ("link_secret", &email.link_secret),
        ] {
            if let (Secret::Ssm(parameter), false) = (secret, ssm_fetched) {
                return Err(bad(
                    field(name, secret),
                    format!("parameter {parameter} is read only by the AWS functions; use {name}_env here"),
                ));
            }
        }
        let url = value(&email.smtp_url, secrets)
            .map_err(|why| bad(field("smtp_url", &email.smtp_url), why))?;
        transport(&url, email).map_err(|why| {
            bad(
                field("smtp_url", &email.smtp_url),
                format!("{}: {why}", shown(&email.smtp_url)),
            )
        })?;
        link_key(email, secrets)
            .map_err(|why| bad(field("link_secret", &email.link_secret), why))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn email(plaintext: bool) -> EmailConfig {
        EmailConfig {
            smtp_url: Secret::Env("X".into()),
            from: "countersign <approvals@example.com>".parse().unwrap(),
            link_secret: Secret::Env("Y".into()),
            ca_file: None,
            insecure_plaintext: plaintext,
            to: Default::default(),
            sign_in_for: Default::default(),
        }
    }

    #[test]
    fn sc_ch_10_smtp_urls_need_tls_unless_the_dev_opt_out_is_set() {
        for ok in [
            "smtps://smtp.example.com",
            "smtp://user:p%2Fss@email-smtp.us-east-1.amazonaws.com:587",
        ] {
            assert!(transport(ok, &email(false)).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("http://smtp.example.com", "scheme is http"),
            ("smtp://", "no host"),
            ("not a url", "does not parse"),
            ("smtp://u:%zz@h", "percent-encoding"),
        ] {
            let err = transport(bad, &email(false)).err().unwrap();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(!err.contains("%zz"), "{err} repeats the URL");
        }
        assert!(transport("smtp://localhost:1025", &email(true)).is_ok());
        assert_eq!(percent_decode("p%2Fss%2B"), Some("p/ss+".into()));
    }
}
