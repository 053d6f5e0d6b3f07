//! The policy gate: the first rule whose tool glob matches and whose condition holds decides;
//! no match denies (SC-INT-05, SC-POL-01). A condition that cannot be evaluated denies, naming
//! the rule and the error (SC-POL-02): it never falls through to a later, laxer rule.

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
            countersigners: Countersigners {
                groups: Vec::new(),
                approvals: 1,
                grantable: false,
            },
        }
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
}

/// One rule's part in a decision, for explanations (SC-POL-05).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Step {
    pub index: usize,
    pub label: String,
    /// `tool_differs`, `condition_false`, `condition_error` or `matched`.
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
        match holds {
            Ok(false) => note(index, rule, "condition_false", None),
            Ok(true) => {
                note(index, rule, "matched", None);
                return decided(index, rule);
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
                return gate;
            }
        }
    }
    denied()
}

/// Every rule that may decide a call of `tool`, whatever its args, in the gate's order: for
/// catalogs that describe a tool without a call (MCP `tools/list`). A conditional rule may or
/// may not match; the first unconditional one ends the list. A list that ends in a conditional
/// rule lets calls fall off the end, which denies.
pub fn reachable<'r>(rules: &'r [Rule], tool: &str) -> Vec<&'r Rule> {
    let mut out = Vec::new();
    for rule in rules.iter().filter(|r| r.pattern.matches(tool)) {
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
    }
}

fn denied() -> Gate {
    Gate {
        decision: Decision::Deny,
        result: None,
        rule: None,
        failed: None,
        countersigners: Countersigners::default(),
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
