//! A tenant's `policy` list: tool globs, decisions, conditions (`when`, SC-POL-01), approver
//! groups and quorums (SC-POL-03/04). Every expression is compiled here, at load: a bad one
//! is a config error naming its rule.

use super::{
    parse::{bad, ConfigError},
    principal::{Principal, Role},
};
use crate::domain::{
    condition::Condition,
    policy::{Countersigners, Mode, Rule},
    Decision,
};
use serde::Deserialize;

/// When the policy's conditions compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conditions {
    /// At load: a bad expression is a config error naming its rule. Every process that gates.
    Compile,
    /// On first evaluation, for a process that loads the policy but never gates (the approve,
    /// cancel and resume functions): their cold starts skip the parser's set-up.
    Defer,
}

/// The most approvals a rule may ask for.
const MAX_APPROVALS: u32 = 10;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    tool: String,
    decision: Decision,
    result: Option<toml::Value>,
    /// How approvers and explanations name the rule (default: its tool glob).
    name: Option<String>,
    /// A CEL expression over the call; the rule matches only where it holds.
    when: Option<String>,
    /// Approver groups that may decide a call this rule holds (default: any approver).
    #[serde(default)]
    approvers: Vec<String>,
    /// Distinct approvals needed (default 1).
    approvals: Option<u32>,
    /// `enforce` (default) or `shadow`: judged and recorded, deciding nothing (SC-GR-21).
    #[serde(default)]
    mode: Mode,
    /// The Slack channel its approval requests go to (SC-CH-15; default: the tenant's).
    slack_channel: Option<String>,
    /// A quorum rule whose approvers may grant further calls (SC-GR-03; default false).
    #[serde(default)]
    grantable: bool,
}

/// The rules in order, checked against the tenant's approver keys: a group no approver is in,
/// or a quorum more than its eligible approvers can give, could never be decided.
pub(super) fn rules<'a>(
    at: &str,
    raw: Vec<RawRule>,
    principals: impl Iterator<Item = &'a Principal> + Clone,
    conditions: Conditions,
    provider: bool,
) -> Result<Vec<Rule>, ConfigError> {
    let mut out = Vec::new();
    for (i, rule) in raw.into_iter().enumerate() {
        let rule_at = format!("{at}.policy[{i}]");
        out.push(one(
            &rule_at,
            rule,
            principals.clone(),
            conditions,
            provider,
        )?);
    }
    Ok(out)
}

fn one<'a>(
    at: &str,
    rule: RawRule,
    principals: impl Iterator<Item = &'a Principal>,
    conditions: Conditions,
    // The tenant has an identity provider: its people and groups are the provider's, so the
    // keys are not all the approvers there are (SC-ID-03).
    provider: bool,
) -> Result<Rule, ConfigError> {
    if rule.tool.is_empty() {
        return Err(bad(at, "tool glob must not be empty"));
    }
    let result = match (rule.decision, rule.result) {
        (Decision::SetResult, Some(v)) => {
            Some(serde_json::to_value(v).map_err(|e| bad(at, format!("result: {e}")))?)
        }
        (Decision::SetResult, None) => return Err(bad(at, "decision set_result needs a result")),
        (_, Some(_)) => return Err(bad(at, "only a set_result rule carries a result")),
        (_, None) => None,
    };
    let mut built = Rule::new(&rule.tool, rule.decision, result).in_mode(rule.mode);
    if let Some(name) = &rule.name {
        if name.trim().is_empty() || name.len() > 200 {
            return Err(bad(at, "name must be 1–200 characters"));
        }
        built = built.named(name);
    }
    if let Some(when) = &rule.when {
        let condition = match conditions {
            Conditions::Compile => Condition::compile(when),
            Conditions::Defer => Condition::deferred(when),
        }
        .map_err(|e| bad(format!("{at}.when"), e))?;
        built = built.when(condition);
    }
    let asks_people = rule.decision == Decision::RequireApproval;
    let approvals = rule.approvals.unwrap_or(1);
    if !asks_people && (rule.approvals.is_some() || !rule.approvers.is_empty()) {
        return Err(bad(
            at,
            "approvers and approvals belong to a require_approval rule",
        ));
    }
    if !(1..=MAX_APPROVALS).contains(&approvals) {
        return Err(bad(
            format!("{at}.approvals"),
            format!("approvals must be 1–{MAX_APPROVALS}"),
        ));
    }
    // Distinct people: two keys of one approver id count once, as their approvals do.
    let eligible = principals
        .filter(|p| p.role == Role::Approver)
        .filter(|p| {
            rule.approvers.is_empty() || p.groups.iter().any(|g| rule.approvers.contains(g))
        })
        .map(|p| p.id.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if let Some(group) = rule.approvers.iter().find(|g| g.trim().is_empty()) {
        return Err(bad(
            format!("{at}.approvers"),
            format!("{group:?} is not a group name"),
        ));
    }
    let restricted = approvals > 1 || !rule.approvers.is_empty();
    if asks_people && restricted && !provider && eligible < approvals as usize {
        return Err(bad(
            at,
            format!(
                "needs {approvals} distinct approver(s){}; the tenant has {eligible} approver key(s) that may decide it",
                if rule.approvers.is_empty() { String::new() } else { format!(" of {}", rule.approvers.join(", ")) }
            ),
        ));
    }
    if let Some(channel) = &rule.slack_channel {
        if !asks_people {
            return Err(bad(at, "slack_channel belongs to a require_approval rule"));
        }
        super::slack::channel_id(&format!("{at}.slack_channel"), channel)?;
        built.slack_channel = Some(channel.clone());
    }
    if rule.grantable && !asks_people {
        return Err(bad(at, "grantable belongs to a require_approval rule"));
    }
    Ok(built.countersigned_by(Countersigners {
        groups: rule.approvers,
        approvals,
        grantable: rule.grantable,
    }))
}

#[cfg(test)]
mod tests {
    use super::Conditions;
    use crate::config::Config;
    use crate::domain::Decision;

    const H1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
    const H2: &str = "2222222222222222222222222222222222222222222222222222222222222222";

    fn err(policy: &str) -> String {
        let text = format!(
            "[tenants.acme]\ntime_zone = \"UTC\"\nkeys = [\n  {{ id = \"fin-1\", role = \"approver\", groups = [\"finance\"], sha256 = \"{H1}\" }},\n  {{ id = \"agent-1\", role = \"agent\", sha256 = \"{H2}\" }},\n]\npolicy = [{policy}]\n"
        );
        Config::from_toml(&text)
            .map(|_| ())
            .unwrap_err()
            .to_string()
    }

    /// SC-POL-02: where the conditions are deferred (a Lambda function that never gates), a bad
    /// expression loads, and if a gate ever evaluates it the rule fails closed: deny, with the
    /// parser's reason. Compiled (every process that gates), the same text does not load.
    #[test]
    fn sc_pol_02_a_deferred_bad_condition_fails_its_rule_closed() {
        use crate::domain::{condition::CallFacts, policy::gate};
        let text = format!(
            "[tenants.acme]\ntime_zone = \"UTC\"\nkeys = [{{ id = \"agent-1\", role = \"agent\", sha256 = \"{H2}\" }}]\npolicy = [{{ tool = \"pay\", decision = \"allow\", when = \"args.amount >\" }}, {{ tool = \"*\", decision = \"allow\" }}]\n"
        );
        let e = Config::from_toml(&text)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("policy[0].when") && e.contains("parse"), "{e}");
        let deferred = Config::from_toml_with(&text, Conditions::Defer).expect("loads unchecked");
        let args = serde_json::json!({"amount": 5});
        let call = CallFacts {
            tool: "pay",
            args: &args,
            agent_id: "agent-1",
            action_kind: None,
            schedule: None,
            now: jiff::Timestamp::from_second(1_900_000_000).unwrap(),
        };
        for _ in 0..2 {
            let g = gate(&deferred.tenants["acme"].policy, &call);
            assert_eq!(g.decision, Decision::Deny, "fails closed, each time");
            let failed = g.failed.expect("the failure is recorded");
            assert!(format!("{failed:?}").contains("parse"), "{failed:?}");
        }
        let other = CallFacts {
            tool: "search",
            ..call
        };
        assert_eq!(
            gate(&deferred.tenants["acme"].policy, &other).decision,
            Decision::Allow
        );
    }

    /// SC-POL-01: a bad condition is a config error naming the rule, found at load.
    #[test]
    fn sc_pol_01_bad_conditions_and_countersigners_name_their_rule() {
        let e = err("{ tool = \"*\", decision = \"allow\" }, { tool = \"pay\", decision = \"allow\", when = \"args.amount >\" }");
        assert!(
            e.contains("tenants.acme.policy[1].when") && e.contains("parse"),
            "{e}"
        );
        let e = err(
            "{ tool = \"pay\", decision = \"allow\", when = \"args.to.map(x, x).size() > 0\" }",
        );
        assert!(e.contains("policy[0].when") && e.contains("map"), "{e}");
        let e =
            err("{ tool = \"pay\", decision = \"require_approval\", approvers = [\"fiance\"] }");
        assert!(e.contains("policy[0]") && e.contains("fiance"), "{e}");
        let e = err("{ tool = \"pay\", decision = \"require_approval\", approvers = [\"finance\"], approvals = 2 }");
        assert!(
            e.contains("needs 2 distinct approver") && e.contains("has 1"),
            "{e}"
        );
        let e = err("{ tool = \"pay\", decision = \"allow\", mode = \"dry_run\" }");
        assert!(
            e.contains("dry_run") && e.contains("shadow"),
            "SC-GR-21: {e}"
        );
        let e = err("{ tool = \"pay\", decision = \"allow\", approvals = 2 }");
        assert!(e.contains("belong to a require_approval rule"), "{e}");
        let e = err("{ tool = \"pay\", decision = \"require_approval\", approvals = 0 }");
        assert!(e.contains("policy[0].approvals"), "{e}");
        let text = format!("[tenants.acme]\ntime_zone = \"UTC\"\nkeys = [{{ id = \"a\", role = \"agent\", groups = [\"x\"], sha256 = \"{H1}\" }}]\n");
        let e = Config::from_toml(&text)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("keys[0]") && e.contains("only approver keys"),
            "{e}"
        );
    }
}
