//! An approval request as a mail to one approver (SC-CH-10): a subject, a plain-text body and
//! an HTML body saying the same — the tool, its arguments, the agent, the window in the
//! tenant's zone, the rule, the approvals still needed, the expiry — and the confirmation link.
//! Pure: the worker in `crate::notify::email` sends it.

use super::action::Action;
use jiff::{tz::TimeZone, Timestamp};
use serde_json::Value;

/// Arguments longer than this (as pretty JSON) are cut in the mail; the page shows them whole.
const ARGS_SHOWN: usize = 4000;

/// One approval request mail, rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// What a mail says, line by line: (label, value).
pub struct Request<'a> {
    pub action: &'a Action,
    pub time_zone: &'a TimeZone,
    /// The confirmation page, with the approver's token.
    pub link: &'a str,
    /// The approver page of the action (for a reader with a key).
    pub page_url: &'a str,
}

impl Request<'_> {
    pub fn render(&self) -> Mail {
        let a = self.action;
        let call = a.call();
        let subject = format!(
            "Approval requested: {} from agent {}",
            one_line(call.tool()),
            one_line(call.agent_id())
        );
        let facts = facts(a, self.time_zone);
        let args = args_shown(call.args());
        let mut text = format!("{subject}\n\n");
        for (label, value) in &facts {
            text.push_str(&format!("{label}: {value}\n"));
        }
        text.push_str(&format!(
            "\nArguments:\n{args}\n\nReview and approve or deny it here (opening the link changes nothing):\n{}\n\n\
             The action in the approver page: {}\nThe link is yours alone: do not forward this mail.\n",
            self.link, self.page_url
        ));
        let rows: String = facts
            .iter()
            .map(|(label, value)| {
                format!(
                    "<tr><th align=\"left\">{}</th><td>{}</td></tr>",
                    escape(label),
                    escape(value)
                )
            })
            .collect();
        let html = format!(
            "<!doctype html><html><body>\
             <h2>{}</h2><table>{rows}</table>\
             <h3>Arguments</h3><pre>{}</pre>\
             <p><a href=\"{}\">Review and approve or deny</a> (opening the link changes nothing).</p>\
             <p><small>The action in the <a href=\"{}\">approver page</a>. The link is yours alone: do not forward this mail.</small></p>\
             </body></html>",
            escape(&subject),
            escape(&args),
            escape(self.link),
            escape(self.page_url),
        );
        Mail {
            subject,
            text,
            html,
        }
    }
}

/// The lines every view of an approval request shows (the mail and the confirmation page).
pub fn facts(a: &Action, zone: &TimeZone) -> Vec<(&'static str, String)> {
    let call = a.call();
    let context = a.approval().map(|p| &p.context);
    let mut facts = vec![
        ("Tool", call.tool().to_owned()),
        ("Agent", call.agent_id().to_owned()),
        ("Action", a.id().to_owned()),
    ];
    let window = context.and_then(|c| c["schedule"]["summary"].as_str());
    facts.push(("Runs", window.unwrap_or("as soon as approved").to_owned()));
    if let Some(policy) = context.map(|c| &c["policy"]).filter(|p| p.is_object()) {
        facts.push((
            "Rule",
            format!(
                "#{} {}",
                policy["rule"],
                policy["label"].as_str().unwrap_or_default()
            ),
        ));
    }
    facts.push((
        "Approvals needed",
        super::notice::still_needed(a).to_string(),
    ));
    if let Some(p) = a.approval() {
        facts.push(("Expires", when(p.expires_at, zone)));
    }
    facts
}

/// A time as the tenant reads it, e.g. "Tue 21 Oct 2026 17:30 CEST".
pub fn when(at: Timestamp, zone: &TimeZone) -> String {
    at.to_zoned(zone.clone())
        .strftime("%a %-d %b %Y %H:%M %Z")
        .to_string()
}

/// The arguments as pretty JSON, cut past [`ARGS_SHOWN`] bytes (on a character boundary).
fn args_shown(args: &Value) -> String {
    let pretty = serde_json::to_string_pretty(args).expect("JSON serializes");
    if pretty.len() <= ARGS_SHOWN {
        return pretty;
    }
    let cut = (0..=ARGS_SHOWN)
        .rev()
        .find(|i| pretty.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}\n… (cut: the page shows them whole)", &pretty[..cut])
}

/// A header-safe single line (a subject never carries a line break from a tool name).
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Text made safe for HTML element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fixtures::pending;

    #[test]
    fn sc_ch_10_a_mail_names_the_call_and_escapes_what_the_agent_wrote() {
        let a = pending(
            "act_01J0000000000000000000000N",
            serde_json::json!({"to": "<script>alert(1)</script>"}),
        );
        let mail = Request {
            action: &a,
            time_zone: &TimeZone::get("Europe/Berlin").unwrap(),
            link: "https://cs.example.com/ui/email/confirm?token=a.b",
            page_url: "https://cs.example.com/ui/#action=x",
        }
        .render();
        assert!(mail.subject.starts_with("Approval requested: "), "{mail:?}");
        assert!(
            mail.text.contains("<script>alert(1)</script>"),
            "{}",
            mail.text
        );
        assert!(!mail.html.contains("<script>"), "{}", mail.html);
        assert!(mail.html.contains("&lt;script&gt;"), "{}", mail.html);
        for part in [&mail.text, &mail.html] {
            assert!(part.contains("confirm?token=a.b"), "{part}");
            assert!(part.contains("Approvals needed"), "{part}");
        }
        let long = args_shown(&serde_json::json!({"x": "é".repeat(5000)}));
        assert!(long.len() < ARGS_SHOWN + 100 && long.ends_with("whole)"));
    }
}
