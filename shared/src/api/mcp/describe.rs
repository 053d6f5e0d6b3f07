//! What a tool's listing tells a model about the policy (SC-MCP-11): every rule a call of the
//! tool can meet, in the gate's order, and so whether its schema carries `countersign_window`
//! and whether the window is required. Pure: the policy in, words and a verdict out.

use crate::domain::{
    policy::{self, Countersigners, Rule},
    Decision,
};

/// Where the schema stands on `countersign_window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WindowUse {
    /// No call waits: the schema has no window.
    None,
    /// Some calls may take one (a countersigned call, to run later) or need one (a scheduled
    /// call under some conditions only).
    Optional { needed_sometimes: bool },
    /// Every call that can run is scheduled: the window is required.
    Required,
}

/// What the policy does with a tool's calls, as its listing says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Described {
    /// Sentences for the end of the description; empty when every call simply runs at once.
    pub text: String,
    pub window: WindowUse,
}

/// The rules of `tool` in words: "What happens to a call: if …, it runs at once; otherwise it
/// waits until a person countersigns it before it runs." A named rule is named (its condition
/// is not shown: the name is the operator's words for it); an unnamed one shows its `when`.
pub(super) fn describe(rules: &[Rule], tool: &str, window_arg: &str) -> Described {
    let reachable = policy::reachable(rules, tool);
    let falls_off = reachable.last().is_none_or(|r| r.when.is_some());
    let window = window_use(&reachable);
    let mut sentences = Vec::new();
    match (reachable.as_slice(), falls_off) {
        ([only], false) if only.decision == Decision::Allow => {}
        ([only], false) => sentences.push(format!("Every call {}.", fate(only, window_arg))),
        _ => sentences.push(branches(&reachable, falls_off, window_arg)),
    }
    let decides = |d: Decision| reachable.iter().any(|r| r.decision == d);
    if decides(Decision::RequireApproval) || decides(Decision::Schedule) {
        sentences.push(format!(
            "A call that waits answers at once with an action_id: follow it with {}.",
            super::text::STATUS_TOOL
        ));
    }
    if decides(Decision::RequireApproval) {
        sentences.push(format!(
            "Pass {window_arg} to have a countersigned call run later, inside that window."
        ));
    }
    if decides(Decision::Allow) && window != WindowUse::None {
        sentences.push(format!(
            "A call that runs at once takes no {window_arg} that opens later: that is refused."
        ));
    }
    Described {
        text: sentences.join(" "),
        window,
    }
}

/// "What happens to a call: if A, it …; otherwise, if B, it …; otherwise it …."
fn branches(reachable: &[&Rule], falls_off: bool, window_arg: &str) -> String {
    let mut parts = Vec::new();
    for (i, rule) in reachable.iter().enumerate() {
        let lead = if i == 0 { "if" } else { "otherwise, if" };
        let fate = fate(rule, window_arg);
        parts.push(match (&rule.when, &rule.name) {
            (None, _) => format!("otherwise it {fate}"),
            (Some(_), Some(name)) => format!("{lead} the rule \"{name}\" applies, it {fate}"),
            (Some(when), None) => format!("{lead} `{}` holds, it {fate}", when.source()),
        });
    }
    if falls_off {
        parts.push("otherwise it is refused".to_owned());
    }
    format!("What happens to a call: {}.", parts.join("; "))
}

/// What one rule does with a call, as a verb phrase.
fn fate(rule: &Rule, window_arg: &str) -> String {
    match rule.decision {
        Decision::Allow => "runs at once".to_owned(),
        Decision::SetResult => "is answered at once by policy; the tool does not run".to_owned(),
        Decision::Deny => "is refused".to_owned(),
        Decision::RequireApproval => {
            format!("waits until {} before it runs", who(&rule.countersigners))
        }
        Decision::Schedule => {
            format!("runs unattended, only inside the window it must give in {window_arg}")
        }
    }
}

/// "a person countersigns it", "2 people from finance countersign it".
fn who(c: &Countersigners) -> String {
    let (people, verb) = match c.approvals {
        0 | 1 => ("a person".to_owned(), "countersigns"),
        n => (format!("{n} different people"), "countersign"),
    };
    match c.groups.as_slice() {
        [] => format!("{people} {verb} it"),
        groups => format!("{people} from {} {verb} it", groups.join(" or ")),
    }
}

/// Required when every call that can run is scheduled; optional when some call may wait.
fn window_use(reachable: &[&Rule]) -> WindowUse {
    let runs: Vec<Decision> = reachable
        .iter()
        .map(|r| r.decision)
        .filter(|d| {
            matches!(
                d,
                Decision::Allow | Decision::RequireApproval | Decision::Schedule
            )
        })
        .collect();
    let scheduled = runs.iter().filter(|d| **d == Decision::Schedule).count();
    let waits = runs.iter().any(|d| *d != Decision::Allow);
    match (scheduled, waits) {
        (0, false) => WindowUse::None,
        (n, _) if n == runs.len() => WindowUse::Required,
        (n, _) => WindowUse::Optional {
            needed_sometimes: n > 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::condition::Condition;

    fn rule(decision: Decision, when: Option<&str>) -> Rule {
        let r = Rule::new("t", decision, None);
        match when {
            Some(w) => r.when(Condition::compile(w).unwrap()),
            None => r,
        }
    }

    fn said(rules: &[Rule]) -> (String, WindowUse) {
        let d = describe(rules, "t", "countersign_window");
        (d.text, d.window)
    }

    /// SC-MCP-11: each shape of policy in words, and where the window stands.
    #[test]
    fn sc_mcp_11_every_reachable_rule_is_described_in_the_gates_order() {
        use Decision::*;
        let (text, window) = said(&[rule(Allow, None)]);
        assert_eq!((text.as_str(), window), ("", WindowUse::None));

        let (text, window) = said(&[rule(Schedule, None)]);
        assert!(text.starts_with("Every call runs unattended, only inside the window it must give in countersign_window."), "{text}");
        assert_eq!(window, WindowUse::Required);

        let inside =
            rule(Allow, Some("args.to.endsWith('@acme.example')")).named("mail inside acme");
        let (text, window) = said(&[inside, rule(RequireApproval, None)]);
        assert!(text.starts_with("What happens to a call: if the rule \"mail inside acme\" applies, it runs at once; otherwise it waits until a person countersigns it before it runs."), "{text}");
        assert!(text.contains("opens later: that is refused"), "{text}");
        assert!(
            !text.contains("endsWith"),
            "a named rule's condition is its name: {text}"
        );
        assert_eq!(
            window,
            WindowUse::Optional {
                needed_sometimes: false
            }
        );

        let (text, window) = said(&[rule(Deny, Some("args.env == 'prod'")), rule(Allow, None)]);
        assert!(text.starts_with("What happens to a call: if `args.env == 'prod'` holds, it is refused; otherwise it runs at once."), "{text}");
        assert_eq!(window, WindowUse::None);

        let quorum =
            rule(RequireApproval, Some("args.amount > 1000")).countersigned_by(Countersigners {
                groups: vec!["finance".into()],
                approvals: 2,
                grantable: false,
            });
        let (text, window) = said(&[quorum, rule(Schedule, Some("args.amount > 10"))]);
        assert!(text.contains("if `args.amount > 1000` holds, it waits until 2 different people from finance countersign it before it runs; otherwise, if `args.amount > 10` holds, it runs unattended"), "{text}");
        assert!(text.contains("; otherwise it is refused."), "{text}");
        assert_eq!(
            window,
            WindowUse::Optional {
                needed_sometimes: true
            }
        );

        let (text, window) = said(&[rule(SetResult, None)]);
        assert!(text.contains("the tool does not run"), "{text}");
        assert_eq!(window, WindowUse::None);
    }
}
