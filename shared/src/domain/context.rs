//! The approval context: what the person countersigns. Its digest binds the approval to
//! exactly this call and window (SC-INT-06, SC-APP-02).

use super::{action::Quorum, canonical, policy::Matched, window::Window};
use jiff::tz::TimeZone;
use serde_json::{json, Value};

pub struct ContextInput<'a> {
    pub tool: &'a str,
    pub args: &'a Value,
    pub agent_id: &'a str,
    pub action_kind: Option<&'a str>,
    pub schedule: Option<&'a Window>,
    pub time_zone: &'a TimeZone,
    pub time_zone_name: &'a str,
    /// The rule that asked for the countersignature, and who must give it (SC-POL-05).
    pub rule: Option<&'a Matched>,
    pub quorum: &'a Quorum,
}

/// The context document and its `context_digest`.
pub fn approval_context(input: &ContextInput<'_>) -> (Value, String) {
    let mut context = json!({
        "tool": input.tool,
        "args": input.args,
        "agent_id": input.agent_id,
        "action_kind": input.action_kind,
    });
    // Why it waits, and for whom: countersigned with the rest (SC-POL-05).
    if let Some(rule) = input.rule {
        let mut policy = json!({"rule": rule.index, "label": rule.label});
        if input.quorum.required > 1 {
            policy["approvals"] = json!(input.quorum.required);
        }
        if !input.quorum.groups.is_empty() {
            policy["approver_groups"] = json!(input.quorum.groups);
        }
        context["policy"] = policy;
    }
    if let Some(window) = input.schedule {
        context["schedule"] = json!({
            "not_before": window.not_before,
            "not_after": window.not_after,
            "time_zone": input.time_zone_name,
            "summary": window_sentence(window, input.time_zone, input.time_zone_name),
        });
    }
    let digest = canonical::digest(&context);
    (context, digest)
}

/// "between Tue 21 Oct 2026 17:30 and 19:30 CEST (Europe/Berlin)"; the end carries its own
/// date when it falls on another day, and each end its own abbreviation when they differ.
pub fn window_sentence(window: &Window, tz: &TimeZone, tz_name: &str) -> String {
    let start = window.not_before.to_zoned(tz.clone());
    let end = window.not_after.to_zoned(tz.clone());
    let day = "%a %-d %b %Y";
    let start_abbr = start.strftime("%Z").to_string();
    let end_abbr = end.strftime("%Z").to_string();
    let same_day = start.date() == end.date();
    let start_text = if start_abbr == end_abbr {
        start.strftime(&format!("{day} %H:%M")).to_string()
    } else {
        start.strftime(&format!("{day} %H:%M %Z")).to_string()
    };
    let end_text = if same_day {
        end.strftime("%H:%M %Z").to_string()
    } else {
        end.strftime(&format!("{day} %H:%M %Z")).to_string()
    };
    format!("between {start_text} and {end_text} ({tz_name})")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(a: &str, b: &str) -> Window {
        Window {
            not_before: a.parse().unwrap(),
            not_after: b.parse().unwrap(),
        }
    }

    #[test]
    fn sc_int_06_window_sentence_in_the_tenant_zone() {
        let tz = TimeZone::get("Europe/Berlin").unwrap();
        let w = window("2026-10-21T15:30:00Z", "2026-10-21T17:30:00Z");
        assert_eq!(
            window_sentence(&w, &tz, "Europe/Berlin"),
            "between Wed 21 Oct 2026 17:30 and 19:30 CEST (Europe/Berlin)"
        );
        // Across the end of summer time: each end names its own offset.
        let w = window("2026-10-24T22:00:00Z", "2026-10-25T09:00:00Z");
        assert_eq!(
            window_sentence(&w, &tz, "Europe/Berlin"),
            "between Sun 25 Oct 2026 00:00 CEST and 10:00 CET (Europe/Berlin)"
        );
    }

    #[test]
    fn sc_int_06_digest_binds_the_schedule() {
        let tz = TimeZone::UTC;
        let args = json!({"to": "x"});
        let w1 = window("2026-10-21T15:30:00Z", "2026-10-21T17:30:00Z");
        let w2 = window("2026-10-21T15:31:00Z", "2026-10-21T17:30:00Z");
        let ctx = |w: Option<&Window>| {
            approval_context(&ContextInput {
                tool: "mail.send",
                args: &args,
                agent_id: "a1",
                action_kind: None,
                schedule: w,
                time_zone: &tz,
                time_zone_name: "UTC",
                rule: None,
                quorum: &Quorum::default(),
            })
        };
        let (c1, d1) = ctx(Some(&w1));
        let (_, d2) = ctx(Some(&w2));
        let (_, d3) = ctx(None);
        assert_ne!(d1, d2);
        assert_ne!(d1, d3);
        assert_eq!(d1, canonical::digest(&c1));
        assert!(d1.starts_with("sha256:"));
    }

    /// The matched rule and the quorum are part of what is countersigned.
    #[test]
    fn sc_pol_05_the_context_names_the_rule_and_the_quorum() {
        let tz = TimeZone::UTC;
        let args = json!({"amount": 60000});
        let rule = Matched {
            index: 0,
            label: "two-person rule above 50,000 EUR".into(),
        };
        let quorum = Quorum {
            required: 2,
            groups: vec!["finance".into()],
            signed: vec![],
        };
        let ctx = |rule, quorum| {
            approval_context(&ContextInput {
                tool: "payments.transfer",
                args: &args,
                agent_id: "a1",
                action_kind: None,
                schedule: None,
                time_zone: &tz,
                time_zone_name: "UTC",
                rule,
                quorum,
            })
        };
        let (c, d) = ctx(Some(&rule), &quorum);
        assert_eq!(
            c["policy"],
            json!({"rule": 0, "label": "two-person rule above 50,000 EUR", "approvals": 2, "approver_groups": ["finance"]})
        );
        let one = Quorum::default();
        let (_, single) = ctx(Some(&rule), &one);
        let (plain, none) = ctx(None, &one);
        assert!(plain.get("policy").is_none());
        assert_ne!(d, single);
        assert_ne!(single, none);
    }
}
