//! The policy gate: the first rule whose tool glob matches decides; no match denies.

use super::action::Decision;
use serde_json::Value;
use wildmatch::WildMatch;

#[derive(Debug, Clone)]
pub struct Rule {
    pub tool: String,
    pattern: WildMatch,
    pub decision: Decision,
    /// The answer a `set_result` rule gives instead of running the tool.
    pub result: Option<Value>,
}

impl Rule {
    pub fn new(tool: &str, decision: Decision, result: Option<Value>) -> Self {
        Rule {
            tool: tool.to_owned(),
            pattern: WildMatch::new(tool),
            decision,
            result,
        }
    }
}

/// What the gate said, and which rule said it (for logs).
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub decision: Decision,
    pub result: Option<Value>,
    pub rule: Option<String>,
}

/// Absence is denial (SPEC §1.6).
pub fn gate(rules: &[Rule], tool: &str) -> Gate {
    rules
        .iter()
        .find(|r| r.pattern.matches(tool))
        .map(|r| Gate {
            decision: r.decision,
            result: r.result.clone(),
            rule: Some(r.tool.clone()),
        })
        .unwrap_or(Gate {
            decision: Decision::Deny,
            result: None,
            rule: None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sc_int_05_first_match_wins_and_absence_denies() {
        let rules = vec![
            Rule::new("mail.send", Decision::Allow, None),
            Rule::new("mail.*", Decision::RequireApproval, None),
            Rule::new("*", Decision::Schedule, None),
        ];
        assert_eq!(gate(&rules, "mail.send").decision, Decision::Allow);
        assert_eq!(
            gate(&rules, "mail.draft").decision,
            Decision::RequireApproval
        );
        assert_eq!(gate(&rules, "deploy").decision, Decision::Schedule);
        assert_eq!(gate(&rules[..2], "deploy").decision, Decision::Deny);
        assert_eq!(gate(&[], "x").decision, Decision::Deny);
    }
}
