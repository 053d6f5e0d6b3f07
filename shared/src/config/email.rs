//! `[tenants.<name>.email]`: approval requests mailed to the approvers (docs/email.md). The
//! document names the secrets — the SMTP URL and the link key, each an environment variable or
//! an SSM parameter — and the process reads them where it boots (the AWS functions fetch the
//! parameters), so parsing reads no secret.

use super::{
    catalog::{named_secret, Secret},
    parse::{bad, ConfigError},
};
use lettre::message::Mailbox;
use serde::Deserialize;
use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

/// The shortest link key accepted, in bytes (an HMAC-SHA256 key: 256 bits).
pub const MIN_LINK_SECRET: usize = 32;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEmail {
    smtp_url_env: Option<String>,
    smtp_url_ssm: Option<String>,
    from: String,
    link_secret_env: Option<String>,
    link_secret_ssm: Option<String>,
    ca_file: Option<PathBuf>,
    #[serde(default)]
    insecure_plaintext: bool,
    /// Rules (by label: `name`, else the tool glob) whose mailed links decide only with the
    /// approver signed in as well (SC-CH-16).
    #[serde(default)]
    sign_in_for: Vec<String>,
}

/// A tenant's approval mail.
#[derive(Debug, Clone, PartialEq)]
pub struct EmailConfig {
    /// Where `smtps://…` or `smtp://…` (STARTTLS required) is: `smtp_url_env` or `smtp_url_ssm`.
    pub smtp_url: Secret,
    /// The sender, `Name <address>` or a bare address.
    pub from: Mailbox,
    /// Where the key that signs the confirmation links is: `link_secret_env` or `_ssm`.
    pub link_secret: Secret,
    /// A PEM file of CAs trusted beside the public roots (a private relay's).
    pub ca_file: Option<PathBuf>,
    /// Development only: `smtp://` without TLS (a local mail catcher).
    pub insecure_plaintext: bool,
    /// Each approver's address, by approver id (`email = "…"` on its keys).
    pub to: BTreeMap<String, Mailbox>,
    /// The labels of the rules whose mailed links need the approver signed in (SC-CH-16).
    pub sign_in_for: BTreeSet<String>,
}

impl EmailConfig {
    /// Whether a call asked for by the rule labelled `rule` is decided through its mailed link
    /// only with the approver signed in as well.
    pub fn needs_sign_in(&self, rule: Option<&str>) -> bool {
        rule.is_some_and(|r| self.sign_in_for.contains(r))
    }
}

pub(super) fn email(
    at: &str,
    raw: RawEmail,
    to: BTreeMap<String, Mailbox>,
) -> Result<EmailConfig, ConfigError> {
    let at = format!("{at}.email");
    let smtp_url = named_secret(&at, "smtp_url", raw.smtp_url_env, raw.smtp_url_ssm)?;
    let link_secret = named_secret(&at, "link_secret", raw.link_secret_env, raw.link_secret_ssm)?;
    let from = raw.from.parse::<Mailbox>().map_err(|e| {
        bad(
            format!("{at}.from"),
            format!(
                "{:?} is not an address like \"countersign <approvals@example.com>\" ({e})",
                raw.from
            ),
        )
    })?;
    if to.is_empty() {
        return Err(bad(
            &at,
            "no approver key has an email: add email = \"…\" to the approvers' keys",
        ));
    }
    Ok(EmailConfig {
        smtp_url,
        from,
        link_secret,
        ca_file: raw.ca_file,
        insecure_plaintext: raw.insecure_plaintext,
        to,
        sign_in_for: raw.sign_in_for.into_iter().collect(),
    })
}

/// `sign_in_for` names `require_approval` rules by their label, and a tenant that signs people
/// in: a link whose rule needs it is decided only by the person it was mailed to, signed in.
pub(super) fn sign_in_rules(
    at: &str,
    email: &EmailConfig,
    policy: &[crate::domain::policy::Rule],
    provider: bool,
) -> Result<(), ConfigError> {
    let at = format!("{at}.email.sign_in_for");
    if !email.sign_in_for.is_empty() && !provider {
        return Err(bad(
            &at,
            "needs the tenant's [identity]: the approver signs in with its provider",
        ));
    }
    for label in &email.sign_in_for {
        let asks = policy
            .iter()
            .any(|r| r.decision == crate::domain::Decision::RequireApproval && r.label() == *label);
        if !asks {
            return Err(bad(
                &at,
                format!(
                    "{label:?} names no require_approval rule (a rule's name, else its tool glob)"
                ),
            ));
        }
    }
    Ok(())
}

/// An approver key's `email`, checked where the key is read: only approvers have one, and one
/// approver (an id, which may hold several keys) one address.
pub(super) fn address(
    key_at: &str,
    id: &str,
    email: &str,
    to: &mut BTreeMap<String, Mailbox>,
) -> Result<(), ConfigError> {
    let at = format!("{key_at}.email");
    let mailbox = email
        .parse::<Mailbox>()
        .map_err(|e| bad(&at, format!("{email:?} is not an email address ({e})")))?;
    match to.get(id) {
        Some(known) if *known != mailbox => Err(bad(
            &at,
            format!("approver {id} already has the address {known}"),
        )),
        _ => {
            to.insert(id.to_owned(), mailbox);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const APPROVER: &str = "{ id = \"approver-1\", role = \"approver\", sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\", email = \"a1@example.com\" }";
    const EMAIL: &str = "[tenants.acme.email]\nsmtp_url_env = \"SMTP_URL\"\nfrom = \"countersign <approvals@example.com>\"\nlink_secret_env = \"LINK_SECRET\"\n";

    fn load(keys: &[&str], email: &str) -> Result<Config, String> {
        Config::from_toml(&format!(
            "[tenants.acme]\ntime_zone = \"UTC\"\nkeys = [{}]\n{email}",
            keys.join(", ")
        ))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn sc_ch_10_email_loads_and_errors_name_the_field() {
        let config = load(&[APPROVER], EMAIL).unwrap();
        let email = config.tenant("acme").unwrap().email.clone().unwrap();
        assert_eq!(
            email.from.to_string(),
            "countersign <approvals@example.com>"
        );
        assert_eq!(email.to["approver-1"].to_string(), "a1@example.com");
        assert!(!email.insecure_plaintext && email.ca_file.is_none());
        // An address without the table is kept for later use, and sends nothing.
        assert!(load(&[APPROVER], "")
            .unwrap()
            .tenant("acme")
            .unwrap()
            .email
            .is_none());

        let agent = APPROVER.replace("\"approver\"", "\"agent\"");
        let nobody = APPROVER.replace("a1@example.com", "nobody");
        let same_id_other_address = APPROVER.replace("aaaa", "bbbb").replace("a1@", "other@");
        let cases = [
            (vec![APPROVER], EMAIL.replace("countersign <approvals@example.com>", "not an address"), "tenants.acme.email.from: \"not an address\" is not an address"),
            (vec![APPROVER], EMAIL.replace("\"SMTP_URL\"", "\"\""), "tenants.acme.email: needs exactly one of smtp_url_env, smtp_url_ssm"),
            (vec![APPROVER], EMAIL.replace("\"LINK_SECRET\"", "\" \""), "tenants.acme.email: needs exactly one of link_secret_env, link_secret_ssm"),
            (vec![APPROVER], format!("{EMAIL}smtp_url_ssm = \"/countersign-channels/acme/smtp\"\n"), "tenants.acme.email: needs exactly one of smtp_url_env, smtp_url_ssm"),
            (vec![APPROVER], EMAIL.replace("link_secret_env = \"LINK_SECRET\"", "link_secret_ssm = \"link\""), "tenants.acme.email.link_secret_ssm: must be a parameter name"),
            (vec![APPROVER], EMAIL.replace("smtp_url_env = \"SMTP_URL\"\n", ""), "tenants.acme.email: needs exactly one of smtp_url_env, smtp_url_ssm"),
            (vec![APPROVER], format!("{EMAIL}port = 25\n"), "unknown field `port`"),
            (vec![], EMAIL.to_owned(), "tenants.acme.email: no approver key has an email"),
            (vec![&agent], String::new(), "tenants.acme.keys[0]: only approver keys have an email"),
            (vec![&nobody], String::new(), "tenants.acme.keys[0].email: \"nobody\" is not an email address"),
            (vec![APPROVER, &same_id_other_address], String::new(), "tenants.acme.keys[1].email: approver approver-1 already has the address a1@example.com"),
        ];
        for (keys, email, expected) in cases {
            let err = load(&keys, &email).unwrap_err();
            assert!(err.contains(expected), "{err} lacks {expected}");
        }
    }
}
