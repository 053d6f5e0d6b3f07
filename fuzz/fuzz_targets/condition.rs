//! Policy conditions (SC-POL-01/02): a `when` expression as any text (up to the first newline)
//! and the call's args as any JSON (after it). Never a panic or a stack overflow: compiling
//! answers an expression or a reason, and evaluating a compiled one a boolean or an error.
//! And the call read where it lies (the resolver: fields converted as selected, chains of
//! selects answered as one name) answers what the variables bound whole answer, with and
//! without a window.
#![no_main]

use countersign::domain::condition::{Bound, CallFacts, Condition};
use countersign::domain::Window;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let (when, args) = text.split_once('\n').unwrap_or((text, "{}"));
    let Ok(condition) = Condition::compile(when) else {
        return;
    };
    let args: serde_json::Value = serde_json::from_str(args).unwrap_or_default();
    let at = |s| jiff::Timestamp::from_second(s).unwrap();
    let call = CallFacts {
        tool: "payments.transfer",
        args: &args,
        agent_id: "agent-1",
        action_kind: None,
        schedule: None,
        now: at(1_900_000_000),
    };
    let scheduled = CallFacts {
        action_kind: Some("report"),
        schedule: Some(Window {
            not_before: at(1_900_007_200),
            not_after: at(1_900_009_000),
        }),
        ..call
    };
    for call in [call, scheduled] {
        let (held, whole) = (
            condition.holds(&Bound::new(&call)),
            condition.holds_bound_whole(&call),
        );
        // Error texts may print a map, in its hash order; that both fail is what must agree.
        assert_eq!(held.ok(), whole.ok(), "{when} over {args}");
    }
});
