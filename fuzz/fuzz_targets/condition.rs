//! Policy conditions (SC-POL-01/02): a `when` expression as any text (up to the first newline)
//! and the call's args as any JSON (after it). Never a panic or a stack overflow: compiling
//! answers an expression or a reason, and evaluating a compiled one a boolean or an error.
//! And what a condition answers is the interpreter's: the plan compiled beside it (for the
//! common forms) answers the same boolean, or gives the question up to the interpreter.
#![no_main]

use countersign::domain::condition::{Bound, CallFacts, Condition};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let (when, args) = text.split_once('\n').unwrap_or((text, "{}"));
    let Ok(condition) = Condition::compile(when) else {
        return;
    };
    let args: serde_json::Value = serde_json::from_str(args).unwrap_or_default();
    let call = CallFacts {
        tool: "payments.transfer",
        args: &args,
        agent_id: "agent-1",
        action_kind: None,
        schedule: None,
        now: jiff::Timestamp::from_second(1_900_000_000).unwrap(),
    };
    let bound = Bound::new(&call);
    let (held, interpreted) = (condition.holds(&bound), condition.holds_interpreted(&bound));
    // Error texts may print a map, in its hash order; that both fail is what must agree.
    assert_eq!(held.ok(), interpreted.ok(), "{when} over {args}");
});
