//! An action as a Slack message (Block Kit; docs/slack.md, SC-CH-02): pure. While the action
//! waits for approval the message carries **Approve** and **Deny** buttons whose value names the
//! action and the context digest the message shows; once it moved on, the same message without
//! buttons says where it stands. The notifier posts it and updates it (`crate::notify::slack`).
//!
//! Everything the agent wrote (tool, arguments, agent id) is escaped for Slack's `mrkdwn`, so an
//! argument cannot mention `@channel` or forge a link.

use super::{action::Action, State};
use jiff::{tz::TimeZone, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The Approve button's `action_id`.
pub const APPROVE: &str = "countersign_approve";
/// The Deny button's `action_id`: it opens the reason modal.
pub const DENY: &str = "countersign_deny";
/// The reason modal's `callback_id`; its submission denies.
pub const DENY_VIEW: &str = "countersign_deny";
/// The modal's reason input: its block and action ids.
pub const REASON_BLOCK: &str = "reason";
pub const REASON_INPUT: &str = "reason_input";

/// An argument value longer than this is folded in the message (the page shows it whole).
const FOLD_AT: usize = 200;
/// Slack's limit on a section's text is 3000 characters; the arguments stay well inside it.
const ARGS_BUDGET: usize = 2500;

/// What a button and the deny modal carry: the action, and the context digest of the message
/// the person saw — an approval commits only if the action still hashes to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ButtonValue {
    #[serde(rename = "t")]
    pub tenant: String,
    #[serde(rename = "a")]
    pub action_id: String,
    #[serde(rename = "d")]
    pub context_digest: String,
}

impl ButtonValue {
    pub fn text(&self) -> String {
        serde_json::to_string(self).expect("a button value serializes")
    }

    pub fn parse(text: &str) -> Option<ButtonValue> {
        serde_json::from_str(text).ok()
    }
}

/// The message of `action` as it stands: `{"text", "blocks"}` for `chat.postMessage` and
/// `chat.update`. `zone` is the tenant's time zone (expiries are shown in it).
pub fn message(action: &Action, page_url: &str, zone: &TimeZone) -> Value {
    let call = action.call();
    let approval = action.approval();
    let context = approval.map(|a| &a.context);
    let mut fields = vec![
        field("Agent", &code(call.agent_id())),
        field(
            "Rule",
            &context
                .and_then(|c| c["policy"]["label"].as_str())
                .map(code)
                .unwrap_or_else(|| "—".into()),
        ),
        field(
            "Window",
            &escape(
                context
                    .and_then(|c| c["schedule"]["summary"].as_str())
                    .unwrap_or("as soon as approved"),
            ),
        ),
    ];
    let pending = action.state() == State::PendingApproval;
    if let (true, Some(approval)) = (pending, approval) {
        fields.push(field("Approvals", &escape(&quorum_text(action))));
        fields.push(field("Expires", &escape(&when(approval.expires_at, zone))));
    }
    let mut blocks = vec![
        json!({"type": "header", "text": plain(&header(action))}),
        json!({"type": "section", "fields": fields}),
        json!({"type": "section", "text": mrkdwn(&format!("*Arguments*\n{}", arguments(call.args())))}),
    ];
    match (pending, approval) {
        (true, Some(approval)) => {
            let value = ButtonValue {
                tenant: action.tenant().to_owned(),
                action_id: action.id().to_owned(),
                context_digest: approval.context_digest.clone(),
            }
            .text();
            blocks.push(json!({"type": "actions", "block_id": "decide", "elements": [
                {"type": "button", "action_id": APPROVE, "style": "primary", "text": plain("Approve"), "value": value},
                {"type": "button", "action_id": DENY, "style": "danger", "text": plain("Deny"), "value": value},
            ]}));
        }
        _ => blocks
            .push(json!({"type": "section", "text": mrkdwn(&escape(&standing(action, zone)))})),
    }
    blocks.push(json!({"type": "context", "elements": [mrkdwn(&format!(
        "{} · <{}|Open in countersign>",
        code(action.id()),
        page_url.replace('|', "%7C").replace('>', "%3E")
    ))]}));
    json!({"text": summary(action), "blocks": blocks})
}

/// The deny modal (`views.open`): a reason, required; `private_metadata` carries the button's
/// value to the submission.
pub fn deny_view(value: &ButtonValue, tool: &str) -> Value {
    json!({
        "type": "modal",
        "callback_id": DENY_VIEW,
        "private_metadata": value.text(),
        "title": plain("Deny"),
        "submit": plain("Deny"),
        "close": plain("Cancel"),
        "blocks": [
            {"type": "section", "text": mrkdwn(&format!("Deny {} ({})?", code(tool), code(&value.action_id)))},
            {"type": "input", "block_id": REASON_BLOCK, "label": plain("Reason"),
             "element": {"type": "plain_text_input", "action_id": REASON_INPUT, "multiline": true, "max_length": 500}},
        ],
    })
}

/// The notification text (what a phone shows): one line.
fn summary(action: &Action) -> String {
    let call = action.call();
    match action.state() {
        State::PendingApproval => format!(
            "Approval requested: {} from agent {}",
            call.tool(),
            call.agent_id()
        ),
        state => format!("{} from agent {}: {state}", call.tool(), call.agent_id()),
    }
}

fn header(action: &Action) -> String {
    let tool = action.call().tool();
    let head = match action.state() {
        State::PendingApproval => format!("Approval requested: {tool}"),
        State::Approved | State::Executing => format!("Approved: {tool}"),
        State::Succeeded => format!("Ran: {tool}"),
        State::Failed => format!("Failed: {tool}"),
        State::Denied => format!("Denied: {tool}"),
        State::Cancelled => format!("Cancelled: {tool}"),
    };
    // A header's text is at most 150 characters.
    fold(&head, 140)
}

/// Where a decided action stands, in a sentence.
fn standing(action: &Action, zone: &TimeZone) -> String {
    let approver = action.approval().and_then(|a| a.approver.as_deref());
    let by = |who: Option<&str>| who.map(|w| format!(" by {w}")).unwrap_or_default();
    let reason = action.reason().unwrap_or("no reason given");
    match action.state() {
        State::PendingApproval => String::new(),
        State::Approved => format!(
            "✅ Approved{}; runs {}",
            by(approver),
            action
                .ticket()
                .map(|t| format!("from {}", when(t.due_at(), zone)))
                .unwrap_or_default()
        ),
        State::Executing => format!("✅ Approved{}; running", by(approver)),
        State::Succeeded => format!("✅ Approved{}; ran and succeeded", by(approver)),
        State::Failed => format!("⚠️ Failed: {reason}"),
        State::Denied => format!(
            "⛔ Denied{}: {reason}",
            by(action.actor().id.as_deref().filter(|_| approver.is_none()))
        ),
        State::Cancelled if reason == "approval_expired" => {
            "⌛ Expired: nobody approved it in time".into()
        }
        State::Cancelled => format!("🚫 Cancelled: {reason}"),
    }
}

fn quorum_text(action: &Action) -> String {
    let given: Vec<&str> = action
        .approvals()
        .iter()
        .map(|s| s.approver.as_str())
        .collect();
    let needed = match action.next_action() {
        super::NextAction::Approval { still_needed, .. } => still_needed,
        _ => 0,
    };
    match given.as_slice() {
        [] => format!("{needed} needed"),
        _ => format!(
            "{} given ({}), {needed} more needed",
            given.len(),
            given.join(", ")
        ),
    }
}

/// An instant in the tenant's zone: "Tue 21 Oct 2026 17:30 CEST".
fn when(t: Timestamp, zone: &TimeZone) -> String {
    t.to_zoned(zone.clone())
        .strftime("%a %-d %b %Y %H:%M %Z")
        .to_string()
}

/// The arguments, one line each, long values folded; the page shows them whole.
fn arguments(args: &Value) -> String {
    let lines: Vec<String> = match args {
        Value::Object(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| format!("{}: {}", code(k), code(&fold(&compact(v), FOLD_AT))))
            .collect(),
        Value::Object(_) => vec!["(none)".into()],
        other => vec![code(&fold(&compact(other), FOLD_AT))],
    };
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if out.len() + line.len() > ARGS_BUDGET {
            out.push_str(&format!("… and {} more", lines.len() - i));
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` cut to `at` characters, saying how many were left out.
fn fold(text: &str, at: usize) -> String {
    let count = text.chars().count();
    if count <= at {
        return text.to_owned();
    }
    let kept: String = text.chars().take(at).collect();
    format!("{kept}… ({} more characters)", count - at)
}

/// Inline code, escaped; a backtick inside would end it, so it becomes a similar quote.
fn code(text: &str) -> String {
    format!("`{}`", escape(&text.replace('`', "ˋ").replace('\n', " ")))
}

/// Slack's three control characters in `mrkdwn`: no mention, link or entity can be forged.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn field(name: &str, value: &str) -> Value {
    mrkdwn(&format!("*{name}*\n{value}"))
}

fn plain(text: &str) -> Value {
    json!({"type": "plain_text", "text": text})
}

fn mrkdwn(text: &str) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::fixtures::pending;

    #[test]
    fn sc_ch_02_a_pending_action_shows_its_call_and_carries_its_digest_in_the_buttons() {
        let long = "x".repeat(500);
        let a = pending(
            "act_01J0000000000000000000000N",
            json!({"to": "<!channel> & <https://evil|click>", "body": long}),
        );
        let m = message(&a, "https://cs.example/ui/#action=act_1", &TimeZone::UTC);
        let text = m.to_string();
        assert!(!text.contains("<!channel>"), "{text}");
        assert!(text.contains("&lt;!channel&gt; &amp; &lt;https://evil|click&gt;"));
        assert!(text.contains("(300 more characters)"), "{text}");
        let buttons = &m["blocks"][3]["elements"];
        assert_eq!(buttons[0]["action_id"], APPROVE);
        let value = ButtonValue::parse(buttons[0]["value"].as_str().unwrap()).unwrap();
        assert_eq!(value.action_id, a.id());
        assert_eq!(value.context_digest, a.approval().unwrap().context_digest);
        assert!(buttons[0]["value"].as_str().unwrap().len() <= 2000);
    }
}
