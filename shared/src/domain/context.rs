//! The approval context: what the person countersigns. Its digest binds the approval to
//! exactly this call and window (SC-INT-06, SC-APP-02).

use super::{call::Call, canonical, policy::Matched, quorum::Quorum, window::Window};
use jiff::tz::TimeZone;
use serde::Serialize;
use serde_json::Value;

/// What the context is made of: the call, shown as the tenant reads time, and the rule.
pub struct ContextInput<'a> {
    pub call: &'a Call,
    pub time_zone: &'a TimeZone,
    pub time_zone_name: &'a str,
    /// The rule that asked for the countersignature, and who must give it (SC-POL-05).
    pub rule: Option<&'a Matched>,
    pub quorum: &'a Quorum,
}

/// What the approver is shown and countersigns (its canonical JSON is digested).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ApprovalContext<'a> {
    pub tool: &'a str,
    /// The call's arguments, exactly as the tool will receive them.
    #[schema(value_type = Object)]
    pub args: &'a Value,
    pub agent_id: &'a str,
    pub action_kind: Option<&'a str>,
    /// Why it waits, and for whom: countersigned with the rest (SC-POL-05).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ShownRule<'a>>,
    /// Only for a call with a window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ShownWindow>,
}

/// The rule that asked for the countersignature (SC-POL-05).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ShownRule<'a> {
    /// Its position in the tenant's `policy` list, from 0.
    pub rule: usize,
    pub label: &'a str,
    /// Distinct approvals needed, when more than one (SC-POL-04).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<u32>,
    /// The approver groups that may decide; absent: any approver of the tenant.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub approver_groups: &'a [String],
}

/// The window as shown: its ends, and a sentence in the tenant's time zone.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ShownWindow {
    #[serde(flatten)]
    pub window: Window,
    /// The tenant's IANA time zone, e.g. `Europe/Berlin`.
    pub time_zone: String,
    /// e.g. "between Tue 21 Oct 2026 17:30 and 19:30 CEST (Europe/Berlin)".
    pub summary: String,
}

/// The context document and its `context_digest`.
pub fn approval_context(input: &ContextInput<'_>) -> (Value, String) {
    let call = input.call;
    let context = ApprovalContext {
        tool: call.tool(),
        args: call.args(),
        agent_id: call.agent_id(),
        action_kind: call.action_kind(),
        policy: input.rule.map(|rule| ShownRule {
            rule: rule.index,
            label: &rule.label,
            approvals: (input.quorum.required > 1).then_some(input.quorum.required),
            approver_groups: &input.quorum.groups,
        }),
        schedule: call.schedule().map(|window| ShownWindow {
            window,
            time_zone: input.time_zone_name.to_owned(),
            summary: window_sentence(&window, input.time_zone, input.time_zone_name),
        }),
    };
    let context = serde_json::to_value(&context).expect("a context serializes");
    let digest = canonical::digest(&context);
    (context, digest)
}

/// "between Tue 21 Oct 2026 17:30 and 19:30 CEST (Europe/Berlin)"; the end carries its own
/// date when it falls on another day, and each end its own abbreviation when they differ.
pub fn window_sentence(window: &Window, tz: &TimeZone, tz_name: &str) -> String {
    let start = window.not_before.to_zoned(tz.clone());
    let end = window.not_after.to_zoned(tz.clone());
    let day = "%a %-d %b %Y";
    // Seconds are shown when either end has them: 09:42:10–09:43:10 must not read as a minute.
    let has_seconds = |t: &jiff::Zoned| t.second() != 0 || t.subsec_nanosecond() != 0;
    let clock = if has_seconds(&start) || has_seconds(&end) {
        "%H:%M:%S"
    } else {
        "%H:%M"
    };
    let start_abbr = start.strftime("%Z").to_string();
    let end_abbr = end.strftime("%Z").to_string();
    let same_day = start.date() == end.date();
    let start_text = if start_abbr == end_abbr {
        start.strftime(&format!("{day} {clock}")).to_string()
    } else {
        start.strftime(&format!("{day} {clock} %Z")).to_string()
    };
    let end_text = if same_day {
        end.strftime(&format!("{clock} %Z")).to_string()
    } else {
        end.strftime(&format!("{day} {clock} %Z")).to_string()
    };
    format!("between {start_text} and {end_text} ({tz_name})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        // Issue 16: seconds are kept (this read "between … 10:42 and 10:43").
        let w = window("2026-12-01T09:42:10Z", "2026-12-01T09:43:10Z");
        assert_eq!(
            window_sentence(&w, &tz, "Europe/Berlin"),
            "between Tue 1 Dec 2026 10:42:10 and 10:43:10 CET (Europe/Berlin)"
        );
    }

    #[test]
    fn sc_int_06_digest_binds_the_schedule() {
        let tz = TimeZone::UTC;
        let args = json!({"to": "x"});
        let w1 = window("2026-10-21T15:30:00Z", "2026-10-21T17:30:00Z");
        let w2 = window("2026-10-21T15:31:00Z", "2026-10-21T17:30:00Z");
        let ctx = |w: Option<&Window>| {
            let call = Call::for_test("act_1", "mail.send", args.clone()).with_schedule(w.copied());
            approval_context(&ContextInput {
                call: &call,
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
        let call = Call::for_test("act_1", "payments.transfer", args.clone());
        let ctx = |rule, quorum| {
            approval_context(&ContextInput {
                call: &call,
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
