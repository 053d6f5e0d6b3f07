//! The gate alone, in process (issue 18, SC-POL-01): what deciding one submit costs with ten
//! conditional rules ahead of the allow, beside ten glob-only ones — no server, no store, the
//! domain's `gate` called in a loop. The section `gate` measures the same ten end to end.
//! Every rule is looked at: all ten are skipped before the allow, on both sides.

use crate::gate::CONDITIONS;
use countersign::domain::condition::{CallFacts, Condition};
use countersign::domain::policy::{gate, Rule};
use countersign::domain::Decision;
use serde_json::json;
use std::time::{Duration, Instant};

/// Batches per policy: the figure is their median, so one disturbed batch does not move it.
const BATCHES: usize = 5;

pub struct GateAlone {
    /// Each policy's name and its median time per gate.
    pub policies: Vec<(&'static str, Duration)>,
    pub calls: usize,
}

fn conditional(when: &str) -> Rule {
    Rule::new("*", Decision::RequireApproval, None).when(Condition::compile(when).unwrap())
}

fn allow_last(rules: impl Iterator<Item = Rule>) -> Vec<Rule> {
    rules
        .chain([Rule::new("search.*", Decision::Allow, None)])
        .collect()
}

fn ten(conditions: bool) -> Vec<Rule> {
    allow_last(CONDITIONS.lines().enumerate().map(|(i, when)| {
        if conditions {
            conditional(when)
        } else {
            Rule::new(&format!("tool{i}.*"), Decision::RequireApproval, None)
        }
    }))
}

fn policies() -> Vec<(&'static str, Vec<Rule>)> {
    // No rule reads `args` whole: the `size(args)` one reads one field instead, so only the
    // fields named are converted.
    let fields_only = allow_last(CONDITIONS.lines().enumerate().map(|(i, when)| match i {
        6 => conditional("has(args.items) && size(args.items) > 20"),
        _ => conditional(when),
    }));
    // What every gate paid before binding followed the expressions: every variable and the
    // whole args converted, then one trivial condition.
    let everything = allow_last(std::iter::once(conditional(
        "size(args) >= 0 && tool == tool && agent_id == agent_id && action_kind == action_kind \
         && schedule == schedule && now == now && false",
    )));
    vec![
        ("10 glob-only rules", ten(false)),
        (
            "10 rules whose `when` is `false`",
            allow_last((0..10).map(|_| conditional("false"))),
        ),
        ("10 conditions", ten(true)),
        ("10 conditions, none reading `args` whole", fields_only),
        (
            "every variable and the whole `args` bound, one rule",
            everything,
        ),
    ]
}

pub fn measure(calls: usize) -> GateAlone {
    let args = json!({"query": "quarterly revenue", "currency": "EUR", "amount": 20, "limit": 10});
    let call = CallFacts {
        tool: "search.web",
        args: &args,
        agent_id: "agent-1",
        action_kind: None,
        schedule: None,
        now: jiff::Timestamp::from_second(1_900_000_000).unwrap(),
    };
    let policies = policies()
        .into_iter()
        .map(|(name, rules)| (name, per_gate(&rules, &call, calls)))
        .collect();
    GateAlone { policies, calls }
}

fn per_gate(rules: &[Rule], call: &CallFacts<'_>, calls: usize) -> Duration {
    // Every condition is false for the call: the same last rule allows it on every side.
    assert_eq!(gate(rules, call).decision, Decision::Allow);
    let mut batches: Vec<Duration> = (0..BATCHES)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..calls {
                std::hint::black_box(gate(rules, std::hint::black_box(call)));
            }
            started.elapsed() / calls as u32
        })
        .collect();
    batches.sort();
    batches[BATCHES / 2]
}
