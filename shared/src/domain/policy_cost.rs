//! The gate's cost per submit, a 10-rule policy with conditions beside a glob-only one (figures
//! in BENCHMARKS.md). Not a test of behaviour; run optimized, on a quiet machine:
//! `cargo test -p countersign --profile bench --lib policy_cost -- --ignored --nocapture`

use super::condition::{CallFacts, Condition};
use super::policy::{gate, Rule};
use super::Decision;
use serde_json::json;
use std::time::Instant;

fn ten_rules(conditional: bool) -> Vec<Rule> {
    // The bench's `gate` section runs the same ten end to end.
    let when = include_str!("../../../tests/bench/ten-conditions.txt");
    when.lines()
        .enumerate()
        .map(|(i, w)| {
            let rule = Rule::new(&format!("tool{i}.*"), Decision::RequireApproval, None);
            if conditional {
                Rule::new("*", Decision::RequireApproval, None).when(Condition::compile(w).unwrap())
            } else {
                rule
            }
        })
        .chain([Rule::new("search.*", Decision::Allow, None)])
        .collect()
}

#[test]
#[ignore = "a measurement: run it optimized, by hand"]
fn policy_cost_per_submit() {
    let args = json!({"query": "quarterly revenue", "currency": "EUR", "amount": 20, "limit": 10});
    let call = CallFacts {
        tool: "search.web",
        args: &args,
        agent_id: "agent-1",
        action_kind: None,
        schedule: None,
        now: jiff::Timestamp::from_second(1_900_000_000).unwrap(),
    };
    let trivial: Vec<Rule> = (0..10)
        .map(|_| {
            Rule::new("*", Decision::RequireApproval, None)
                .when(Condition::compile("false").unwrap())
        })
        .chain([Rule::new("search.*", Decision::Allow, None)])
        .collect();
    for (name, rules) in [
        ("glob-only", ten_rules(false)),
        ("10 × `false`", trivial),
        ("10 conditions", ten_rules(true)),
    ] {
        // Every rule is looked at: all ten are skipped before the allow.
        let per = per_gate(&rules, &call);
        println!("{name}, {} rules: {per:?} per gate", rules.len());
    }
    // No rule reads `args` whole (the `size(args)` rule reads one field instead): only the
    // fields named are converted.
    let fields_only: Vec<Rule> = ten_rules(true)
        .into_iter()
        .enumerate()
        .map(|(i, rule)| match i {
            6 => Rule::new("*", Decision::RequireApproval, None)
                .when(Condition::compile("has(args.items) && size(args.items) > 20").unwrap()),
            _ => rule,
        })
        .collect();
    println!(
        "10 conditions, none reading args whole, {} rules: {:?} per gate",
        fields_only.len(),
        per_gate(&fields_only, &call)
    );
    // What every gate paid before binding followed the expressions: every variable and the
    // whole args converted, then one trivial condition.
    let everything = Condition::compile(
        "size(args) >= 0 && tool == tool && agent_id == agent_id && action_kind == action_kind \
         && schedule == schedule && now == now && false",
    )
    .unwrap();
    let everything = vec![
        Rule::new("*", Decision::RequireApproval, None).when(everything),
        Rule::new("search.*", Decision::Allow, None),
    ];
    println!(
        "binding every variable and the whole args (one rule): {:?} per gate",
        per_gate(&everything, &call)
    );
}

fn per_gate(rules: &[Rule], call: &CallFacts<'_>) -> std::time::Duration {
    assert_eq!(gate(rules, call).decision, Decision::Allow);
    let n = 20_000;
    let started = Instant::now();
    for _ in 0..n {
        std::hint::black_box(gate(rules, std::hint::black_box(call)));
    }
    started.elapsed() / n
}
