//! The policy gate: the first rule whose tool glob matches and whose condition holds decides;
//! no match denies (SC-INT-05, SC-POL-01). A condition that cannot be evaluated denies, naming
//! the rule and the error (SC-POL-02): it never falls through to a later, laxer rule. A rule in
//! shadow (SC-GR-21) is judged where it stands and decides nothing: what it would have decided
//! is noted beside the gate's answer, and the gate goes on to the next rule.

use super::condition::{Bound, CallFacts, Condition};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use wildmatch::WildMatch;

/// The policy gate's outcome (the runtime contract's Allow, Block, SetResult,
/// RequireConfirmation, Schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    SetResult,
    RequireApproval,
    Schedule,
}

/// Whether a rule decides (`enforce`, the default) or only says what it would have decided
/// (`shadow`, SC-GR-21): a rule is rolled out in shadow first and its verdicts read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Enforce,
    Shadow,
}

/// What a rule in shadow would have decided of a call it matched (SC-GR-21): recorded in the
/// action's first audit event and counted, never acted on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ShadowVerdict {
    /// Its position in the tenant's `policy` list, from 0.
    pub rule: usize,
    pub label: String,
    /// The rule's decision, or `deny` where its condition could not be evaluated.
    pub decision: Decision,
    /// The evaluator's words, when the condition could not be evaluated (SC-POL-02 in shadow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Who may countersign what a rule holds for a person, and how many must (SC-POL-03/04).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Countersigners {
    /// Approver groups allowed to decide; empty: any approver of the tenant.
    pub groups: Vec<String>,
    /// Distinct approvals needed before the ticket commits (1 unless the rule says more).
    pub approvals: u32,
    /// A quorum rule's approvers may grant further calls (SC-GR-03); a rule of one approver
    /// always may.
    pub grantable: bool,
}

impl Countersigners {
    /// Whether an approver in `groups` may decide under this rule (SC-POL-03).
    pub fn admits(&self, groups: &[String]) -> bool {
        super::quorum::in_groups(&self.groups, groups)
    }
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub tool: String,
    pattern: WildMatch,
    pub decision: Decision,
    /// The answer a `set_result` rule gives instead of running the tool.
    pub result: Option<Value>,
    /// The rule's `name`, shown to approvers and in explanations; else its glob.
    pub name: Option<String>,
    pub when: Option<Condition>,
    pub countersigners: Countersigners,
    pub mode: Mode,
    /// The Slack channel this rule's approval requests are posted to (SC-CH-15); `None`: the
    /// tenant's.
    pub slack_channel: Option<String>,
}

impl Rule {
    pub fn new(tool: &str, decision: Decision, result: Option<Value>) -> Self {
        Rule {
            tool: tool.to_owned(),
            pattern: WildMatch::new(tool),
            decision,
            result,
            name: None,
            when: None,
            slack_channel: None,
            countersigners: Countersigners {
                groups: Vec::new(),
                approvals: 1,
                grantable: false,
            },
            mode: Mode::Enforce,
        }
    }

    /// In shadow: judged, noted, never deciding (SC-GR-21).
    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn when(mut self, condition: Condition) -> Self {
        self.when = Some(condition);
        self
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    pub fn countersigned_by(mut self, countersigners: Countersigners) -> Self {
        self.countersigners = countersigners;
        self
    }

    /// How approvers and explanations name the rule.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.tool.clone())
    }
}

/// The rule that decided, as the approval context and explanations name it (SC-POL-05).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Matched {
    /// Its position in the tenant's `policy` list, from 0.
    pub index: usize,
    pub label: String,
}

/// A condition that could not be evaluated: the call is denied with this (SC-POL-02).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConditionFailed {
    pub rule: usize,
    pub message: String,
}

/// What the gate said, and which rule said it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub decision: Decision,
    pub result: Option<Value>,
    pub rule: Option<Matched>,
    /// Set when a condition failed: the decision is then `deny`.
    pub failed: Option<ConditionFailed>,
    pub countersigners: Countersigners,
    /// What the rules in shadow before the deciding one would have decided (SC-GR-21).
    pub shadow: Vec<ShadowVerdict>,
}

/// One rule's part in a decision, for explanations (SC-POL-05).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Step {
    pub index: usize,
    pub label: String,
    /// `tool_differs`, `condition_false`, `condition_error` or `matched`; for a rule in shadow
    /// (SC-GR-21) `shadow_matched` or `shadow_condition_error` where it would have decided.
    #[schema(value_type = String)]
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Absence is denial (SPEC §1.6). The per-submit path: no explanation is built.
pub fn gate(rules: &[Rule], call: &CallFacts<'_>) -> Gate {
    decide(rules, call, None)
}

/// The gate's answer with every rule it looked at, in order, up to the one that decided.
pub fn explain(rules: &[Rule], call: &CallFacts<'_>) -> (Gate, Vec<Step>) {
    let mut steps = Vec::new();
    let gate = decide(rules, call, Some(&mut steps));
    (gate, steps)
}

fn decide(rules: &[Rule], call: &CallFacts<'_>, mut steps: Option<&mut Vec<Step>>) -> Gate {
    // Nothing is converted until a condition reads it; `args` read whole, once per gate.
    let bound = Bound::new(call);
    let mut shadow = Vec::new();
    let mut note = |index: usize, rule: &Rule, verdict, error| {
        if let Some(steps) = steps.as_mut() {
            steps.push(Step {
                index,
                label: rule.label(),
                verdict,
                error,
            });
        }
    };
    for (index, rule) in rules.iter().enumerate() {
        if !rule.pattern.matches(call.tool) {
            note(index, rule, "tool_differs", None);
            continue;
        }
        let holds = match &rule.when {
            None => Ok(true),
            Some(c) => c.holds(&bound),
        };
        if rule.mode == Mode::Shadow {
            let (verdict, would) = match holds {
                Ok(false) => ("condition_false", None),
                Ok(true) => ("shadow_matched", Some((rule.decision, None))),
                Err(message) => (
                    "shadow_condition_error",
                    Some((Decision::Deny, Some(message))),
                ),
            };
            let error = would.as_ref().and_then(|(_, e)| e.clone());
            note(index, rule, verdict, error);
            if let Some((decision, error)) = would {
                shadow.push(ShadowVerdict {
                    rule: index,
                    label: rule.label(),
                    decision,
                    error,
                });
            }
            continue;
        }
        let gate = match holds {
            Ok(false) => {
                note(index, rule, "condition_false", None);
                continue;
            }
            Ok(true) => {
                note(index, rule, "matched", None);
                decided(index, rule)
            }
            Err(message) => {
                note(index, rule, "condition_error", Some(message.clone()));
                let mut gate = denied();
                gate.rule = Some(Matched {
                    index,
                    label: rule.label(),
                });
                gate.failed = Some(ConditionFailed {
                    rule: index,
                    message,
                });
                gate
            }
        };
        return Gate { shadow, ..gate };
    }
    Gate { shadow, ..denied() }
}

/// Every rule that may decide a call of `tool`, whatever its args, in the gate's order: for
/// catalogs that describe a tool without a call (MCP `tools/list`). A conditional rule may or
/// may not match; the first unconditional one ends the list. A list that ends in a conditional
/// rule lets calls fall off the end, which denies.
pub fn reachable<'r>(rules: &'r [Rule], tool: &str) -> Vec<&'r Rule> {
    let mut out = Vec::new();
    let enforced = rules.iter().filter(|r| r.mode == Mode::Enforce);
    for rule in enforced.filter(|r| r.pattern.matches(tool)) {
        out.push(rule);
        if rule.when.is_none() {
            break;
        }
    }
    out
}

/// Every decision a call of `tool` can get, whatever its args: the reachable rules' decisions,
/// and `deny` where calls can fall off the end (or a condition fail).
pub fn possible(rules: &[Rule], tool: &str) -> Vec<Decision> {
    let reachable = reachable(rules, tool);
    let falls_off = reachable.last().is_none_or(|r| r.when.is_some());
    reachable
        .iter()
        .map(|r| r.decision)
        .chain(falls_off.then_some(Decision::Deny))
        .collect()
}

fn decided(index: usize, r: &Rule) -> Gate {
    Gate {
        decision: r.decision,
        result: r.result.clone(),
        rule: Some(Matched {
            index,
            label: r.label(),
        }),
        failed: None,
        countersigners: r.countersigners.clone(),
        shadow: Vec::new(),
    }
}

fn denied() -> Gate {
    Gate {
        decision: Decision::Deny,
        result: None,
        rule: None,
        failed: None,
        countersigners: Countersigners::default(),
        shadow: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call<'a>(tool: &'a str, args: &'a Value) -> CallFacts<'a> {
        CallFacts {
            tool,
            args,
            agent_id: "agent-1",
            action_kind: None,
            schedule: None,
            now: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        }
    }

    fn decide(rules: &[Rule], tool: &str) -> Decision {
        gate(rules, &call(tool, &json!({}))).decision
    }

    #[test]
    fn sc_int_05_first_match_wins_and_absence_denies() {
        let rules = vec![
            Rule::new("mail.send", Decision::Allow, None),
            Rule::new("mail.*", Decision::RequireApproval, None),
            Rule::new("*", Decision::Schedule, None),
        ];
        assert_eq!(decide(&rules, "mail.send"), Decision::Allow);
        assert_eq!(decide(&rules, "mail.draft"), Decision::RequireApproval);
        assert_eq!(decide(&rules, "deploy"), Decision::Schedule);
        assert_eq!(decide(&rules[..2], "deploy"), Decision::Deny);
        assert_eq!(decide(&[], "x"), Decision::Deny);
    }

    fn transfers() -> Vec<Rule> {
        let when = |s| Condition::compile(s).unwrap();
        vec![
            Rule::new("payments.transfer", Decision::RequireApproval, None)
                .named("two-person rule above 50,000 EUR")
                .when(when("args.amount > 50000"))
                .countersigned_by(Countersigners {
                    groups: vec!["finance".into()],
                    approvals: 2,
                    grantable: false,
                }),
            Rule::new("payments.transfer", Decision::RequireApproval, None)
                .named("transfers above 1,000 EUR")
                .when(when("args.amount > 1000")),
            Rule::new("payments.*", Decision::Allow, None),
        ]
    }

    #[test]
    fn sc_pol_01_the_first_rule_whose_condition_holds_decides() {
        let rules = transfers();
        let at = |amount: i64| {
            let args = json!({ "amount": amount });
            let g = gate(&rules, &call("payments.transfer", &args));
            (
                g.decision,
                g.rule.map(|m| m.index),
                g.countersigners.approvals,
            )
        };
        assert_eq!(at(60_000), (Decision::RequireApproval, Some(0), 2));
        assert_eq!(at(5_000), (Decision::RequireApproval, Some(1), 1));
        assert_eq!(at(20), (Decision::Allow, Some(2), 1));
        let (g, steps) = explain(&rules, &call("payments.refund", &json!({})));
        assert_eq!(g.decision, Decision::Allow);
        let verdicts: Vec<_> = steps.iter().map(|s| s.verdict).collect();
        assert_eq!(verdicts, ["tool_differs", "tool_differs", "matched"]);
    }

    #[test]
    fn sc_pol_02_a_failing_condition_denies_and_names_the_rule() {
        let rules = transfers();
        // No amount: the first rule cannot tell — deny, never fall through to `allow`.
        let args = json!({"currency": "EUR"});
        let (g, steps) = explain(&rules, &call("payments.transfer", &args));
        assert_eq!(g.decision, Decision::Deny);
        let failed = g.failed.expect("the failure is recorded");
        assert_eq!(failed.rule, 0);
        assert!(failed.message.contains("amount"), "{}", failed.message);
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].verdict, "condition_error");
    }

    /// SC-GR-21: a rule in shadow decides nothing — the gate answers as if it were not there —
    /// and where it stands before the deciding rule and matches, what it would have decided is
    /// noted (a failing condition as `deny` with the evaluator's words, never failing the gate);
    /// behind the deciding rule it is not reached; catalogs never offer it.
    #[test]
    fn sc_gr_21_a_rule_in_shadow_is_noted_and_decides_nothing() {
        let when = |s| Condition::compile(s).unwrap();
        let shadow = |r: Rule| r.in_mode(Mode::Shadow);
        let rules = vec![
            shadow(
                Rule::new("payments.transfer", Decision::Deny, None)
                    .named("no huge")
                    .when(when("args.amount > 10000")),
            ),
            shadow(
                Rule::new("payments.*", Decision::RequireApproval, None)
                    .named("strict")
                    .when(when("args.currency == 'EUR'")),
            ),
            Rule::new("payments.transfer", Decision::RequireApproval, None)
                .named("above 1,000")
                .when(when("args.amount > 1000")),
            Rule::new("payments.*", Decision::Allow, None).named("rest"),
            shadow(Rule::new("payments.*", Decision::Deny, None).named("behind")),
        ];
        let v = |rule: usize, label: &str, decision, error: Option<&str>| ShadowVerdict {
            rule,
            label: label.into(),
            decision,
            error: error.map(str::to_owned),
        };
        use Decision::*;
        type Row<'a> = (&'a str, Value, Decision, Option<usize>, Vec<ShadowVerdict>);
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            ("both in shadow match, the enforced decides", json!({"amount": 20000, "currency": "EUR"}), RequireApproval, Some(2), vec![v(0, "no huge", Deny, None), v(1, "strict", RequireApproval, None)]),
            ("one in shadow matches", json!({"amount": 20000, "currency": "USD"}), RequireApproval, Some(2), vec![v(0, "no huge", Deny, None)]),
            ("none in shadow matches", json!({"amount": 50, "currency": "USD"}), Allow, Some(3), vec![]),
            ("a shadow condition fails: noted, the gate goes on", json!({"currency": "USD"}), Deny, Some(2), vec![v(0, "no huge", Deny, Some("amount"))]),
        ];
        for (name, args, decision, rule, want) in table {
            let (g, steps) = explain(&rules, &call("payments.transfer", &args));
            assert_eq!(
                (g.decision, g.rule.map(|m| m.index)),
                (decision, rule),
                "{name}"
            );
            let got: Vec<_> = g
                .shadow
                .iter()
                .map(|s| ShadowVerdict {
                    error: s.error.as_ref().map(|e| {
                        if e.contains("amount") {
                            "amount".into()
                        } else {
                            e.clone()
                        }
                    }),
                    ..s.clone()
                })
                .collect();
            assert_eq!(got, want, "{name}");
            assert!(
                steps.iter().all(|s| s.index != 4),
                "{name}: the rule behind is not reached"
            );
            assert_eq!(
                gate(&rules, &call("payments.transfer", &args)).shadow,
                g.shadow,
                "{name}"
            );
        }
        // Without its shadow rules the policy answers the same.
        let enforced: Vec<Rule> = rules
            .iter()
            .filter(|r| r.mode == Mode::Enforce)
            .cloned()
            .collect();
        let args = json!({"amount": 20000, "currency": "EUR"});
        assert_eq!(
            gate(&enforced, &call("payments.transfer", &args)).decision,
            RequireApproval
        );
        assert_eq!(possible(&rules, "payments.refund"), [Allow]);
    }

    #[test]
    fn sc_pol_01_possible_decisions_of_a_tool_for_catalogs() {
        let rules = transfers();
        use Decision::*;
        assert_eq!(
            possible(&rules, "payments.transfer"),
            [RequireApproval, RequireApproval, Allow]
        );
        assert_eq!(
            possible(&rules[..2], "payments.transfer"),
            [RequireApproval, RequireApproval, Deny]
        );
        assert_eq!(possible(&rules, "mail.send"), [Deny]);
    }
}
