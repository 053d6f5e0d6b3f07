//! Policy tests (SC-POL-06): a table of calls, each with the decision (and optionally the rule)
//! the tenant's policy must give it — run by `countersign-server policy test <cases.toml>`, so a
//! policy is tested in CI like code. The same gate as intake ([`policy::explain`]); nothing is
//! stored and no tool runs.
//!
//! ```toml
//! tenant = "acme"            # optional when the config has one tenant
//! [[case]]
//! name = "a small transfer runs"
//! tool = "payments.transfer"
//! args = { amount = 500 }
//! agent_id = "agent-dev"     # optional (default "agent")
//! expect = "allow"           # allow | deny | set_result | require_approval | schedule
//! rule = "small transfers"   # optional: the deciding rule's label, or its index
//! shadow = ["deny"]          # optional: what the rules in shadow would decide, in order
//! ```
//!
//! Each verdict also says what the rules in shadow (`mode = "shadow"`, SC-GR-21) would have
//! decided beside the enforced decision; `shadow` in a case holds them to a list.

use crate::config::Config;
use crate::domain::{condition::CallFacts, policy, window::Window, Decision};
use jiff::Timestamp;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    tenant: Option<String>,
    #[serde(default, rename = "case")]
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: Option<String>,
    tool: String,
    #[serde(default)]
    args: toml::Table,
    #[serde(default = "default_agent")]
    agent_id: String,
    action_kind: Option<String>,
    /// RFC 3339 times, as an agent would request them.
    schedule: Option<CaseWindow>,
    /// The instant the call is judged at (default: now).
    now: Option<Timestamp>,
    expect: Decision,
    rule: Option<RuleRef>,
    /// What the rules in shadow must say, in order (`[]`: none matches).
    shadow: Option<Vec<Decision>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseWindow {
    not_before: Timestamp,
    not_after: Timestamp,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RuleRef {
    Index(usize),
    Label(String),
}

fn default_agent() -> String {
    "agent".into()
}

/// One case's verdict, printed as a line.
#[derive(Debug, PartialEq)]
pub struct Verdict {
    pub name: String,
    /// `None`: as expected; else what differed.
    pub mismatch: Option<String>,
    /// What the rules in shadow would have decided, one line each (SC-GR-21).
    pub shadow: Vec<String>,
}

/// Run every case of `cases` (TOML) against `config`'s policy, judged at `now` unless a case
/// names its own instant.
pub fn run(config: &Config, cases: &str, now: Timestamp) -> Result<Vec<Verdict>, String> {
    let cases: Cases = toml::from_str(cases).map_err(|e| format!("cases: {e}"))?;
    let tenant = match &cases.tenant {
        Some(name) => config.tenant(name),
        None if config.tenants.len() == 1 => config.tenants.values().next(),
        None => {
            return Err("cases: name the tenant (`tenant = \"…\"`): the config has several".into())
        }
    }
    .ok_or_else(|| {
        format!(
            "cases: no tenant {:?} in the config",
            cases.tenant.unwrap_or_default()
        )
    })?;
    if cases.cases.is_empty() {
        return Err("cases: no [[case]] given".into());
    }
    cases
        .cases
        .into_iter()
        .enumerate()
        .map(|(i, case)| judge(&tenant.policy, i, case, now))
        .collect()
}

fn judge(rules: &[policy::Rule], i: usize, case: Case, now: Timestamp) -> Result<Verdict, String> {
    let name = case
        .name
        .clone()
        .unwrap_or_else(|| format!("case[{i}] {}", case.tool));
    let args = serde_json::to_value(&case.args).map_err(|e| format!("case[{i}].args: {e}"))?;
    let facts = CallFacts {
        tool: &case.tool,
        args: &args,
        agent_id: &case.agent_id,
        action_kind: case.action_kind.as_deref(),
        schedule: case.schedule.as_ref().map(|w| Window {
            not_before: w.not_before,
            not_after: w.not_after,
        }),
        now: case.now.unwrap_or(now),
    };
    let (gate, _) = policy::explain(rules, &facts);
    let got_rule = gate.rule.as_ref();
    let rule_ok = match &case.rule {
        None => true,
        Some(RuleRef::Index(n)) => got_rule.is_some_and(|m| m.index == *n),
        Some(RuleRef::Label(l)) => got_rule.is_some_and(|m| &m.label == l),
    };
    let shadow: Vec<String> = gate
        .shadow
        .iter()
        .map(|s| {
            let error = s.error.as_ref().map(|e| format!(" (condition error: {e})"));
            format!(
                "shadow rule {} ({:?}) would {}{}",
                s.rule,
                s.label,
                name_of(s.decision),
                error.unwrap_or_default()
            )
        })
        .collect();
    let said: Vec<Decision> = gate.shadow.iter().map(|s| s.decision).collect();
    let shadow_ok = case.shadow.as_ref().is_none_or(|want| *want == said);
    let mismatch = (gate.decision != case.expect || !rule_ok || !shadow_ok).then(|| {
        let rule = got_rule.map_or("no rule".to_owned(), |m| {
            format!("rule {} ({:?})", m.index, m.label)
        });
        let error = gate
            .failed
            .as_ref()
            .map(|f| format!("; condition error: {}", f.message))
            .unwrap_or_default();
        let names = |ds: &[Decision]| ds.iter().map(|d| name_of(*d)).collect::<Vec<_>>();
        let shadows = match &case.shadow {
            Some(want) if !shadow_ok => format!(
                "; expected shadow {:?}, got {:?}",
                names(want),
                names(&said)
            ),
            _ => String::new(),
        };
        format!(
            "expected {}{}, got {} by {rule}{error}{shadows}",
            name_of(case.expect),
            case.rule
                .as_ref()
                .map(|r| format!(" by {r:?}"))
                .unwrap_or_default(),
            name_of(gate.decision)
        )
    });
    Ok(Verdict {
        name,
        mismatch,
        shadow,
    })
}

fn name_of(d: Decision) -> String {
    serde_json::to_value(d)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SC-POL-06: the sample config's own cases pass; a wrong expectation is reported, naming
    /// what the policy said instead.
    #[test]
    fn sc_pol_06_policy_cases_pass_or_name_the_mismatch() {
        let config = Config::from_toml(include_str!("../../../config/local.toml")).unwrap();
        let cases = include_str!("../../../config/policy-cases.toml");
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let verdicts = run(&config, cases, now).unwrap();
        assert!(verdicts.len() >= 6);
        let failed: Vec<_> = verdicts.iter().filter(|v| v.mismatch.is_some()).collect();
        assert!(failed.is_empty(), "{failed:?}");
        let wrong = r#"
[[case]]
name = "a large transfer runs (wrong)"
tool = "payments.transfer"
args = { amount = 60000, currency = "EUR" }
expect = "allow"
"#;
        let verdicts = run(&config, wrong, now).unwrap();
        let said = verdicts[0].mismatch.as_deref().unwrap();
        assert!(
            said.contains("expected allow, got require_approval"),
            "{said}"
        );
        assert!(run(&config, "[[case]]\ntool = 1", now)
            .unwrap_err()
            .starts_with("cases:"));
    }

    /// SC-GR-21: a case's verdict says what the rules in shadow would have decided beside the
    /// enforced decision, and a case's `shadow` holds them to a list.
    #[test]
    fn sc_gr_21_policy_cases_show_and_check_shadow_verdicts() {
        let h = "1".repeat(64);
        let text = format!(
            "[tenants.acme]\ntime_zone = \"UTC\"\nkeys = [{{ id = \"a\", role = \"agent\", sha256 = \"{h}\" }}]\npolicy = [\n  {{ name = \"no huge\", tool = \"pay\", when = \"args.amount > 100\", decision = \"deny\", mode = \"shadow\" }},\n  {{ tool = \"pay\", decision = \"allow\" }},\n]\n[tenants.acme.tools.pay]\nexecutor = \"builtin.echo\"\n"
        );
        let config = Config::from_toml(&text).unwrap();
        let cases = r#"
[[case]]
name = "huge"
tool = "pay"
args = { amount = 500 }
expect = "allow"
shadow = ["deny"]
[[case]]
name = "small"
tool = "pay"
args = { amount = 5 }
expect = "allow"
shadow = []
[[case]]
name = "huge, expected quiet"
tool = "pay"
args = { amount = 500 }
expect = "allow"
shadow = []
"#;
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let v = run(&config, cases, now).unwrap();
        assert_eq!(v[0].mismatch, None);
        assert_eq!(v[0].shadow, ["shadow rule 0 (\"no huge\") would deny"]);
        assert_eq!((v[1].mismatch.as_deref(), v[1].shadow.len()), (None, 0));
        let said = v[2].mismatch.as_deref().unwrap();
        assert!(
            said.contains(r#"expected shadow [], got ["deny"]"#),
            "{said}"
        );
    }
}
