//! The tests of [`super`]: what compiles, what a condition answers, and the resolver held to
//! the variables bound whole.

use super::*;
use serde_json::json;

fn facts(args: &Value) -> CallFacts<'_> {
    CallFacts {
        tool: "payments.transfer",
        args,
        agent_id: "agent-1",
        action_kind: None,
        schedule: None,
        now: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
    }
}

fn eval(when: &str, args: Value) -> Result<bool, String> {
    let c = Condition::compile(when).expect("compiles");
    c.holds(&Bound::new(&facts(&args)))
}

#[test]
fn sc_pol_01_conditions_read_the_call() {
    let over = "args.currency == 'EUR' && args.amount > 1000";
    assert_eq!(
        eval(over, json!({"currency": "EUR", "amount": 1500})),
        Ok(true)
    );
    assert_eq!(
        eval(over, json!({"currency": "EUR", "amount": 999.5})),
        Ok(false)
    );
    assert_eq!(
        eval(over, json!({"currency": "USD", "amount": 5000})),
        Ok(false)
    );
    let own = "args.to.all(r, r.endsWith('@acme.example'))";
    assert_eq!(
        eval(own, json!({"to": ["a@acme.example", "b@acme.example"]})),
        Ok(true)
    );
    assert_eq!(
        eval(own, json!({"to": ["a@acme.example", "x@evil.example"]})),
        Ok(false)
    );
    assert_eq!(eval("tool.startsWith('payments.') && agent_id == 'agent-1' && action_kind == null && schedule == null && now > 0", json!({})), Ok(true));
    assert_eq!(eval("has(args.memo)", json!({})), Ok(false));
    // A binary `-` before `!` or `-`, and the pair inside a string, are not a unary run.
    let arithmetic = "2 - -1 == 3 && '!-' != '-!' && !(1 - 2 > 0) && [1, -1][1] == -1";
    assert_eq!(eval(arithmetic, json!({})), Ok(true));
    let big = json!({"amount": 18_446_744_073_709_551_615u64});
    assert_eq!(eval("args.amount > 1000u", big), Ok(true));
}

/// A gate converts `args` whole only for a condition that reads it whole; what each
/// condition sees is what it would alone, whatever the conditions before it read.
#[test]
fn sc_pol_01_a_gate_converts_only_what_its_conditions_read() {
    let whole = |w: &str| {
        Condition::compile(w)
            .unwrap()
            .compiled()
            .unwrap()
            .reads
            .whole_args
    };
    let cases = [
        ("args.amount > 1 && has(args.to)", false),
        ("args.to.all(r, r.endsWith('@x')) && args.a.b == 1", false),
        ("size(args) > 1", true),
        ("args[args.k] == 1", true),
        ("has(args.a) && args == {}", true),
        ("[1].exists(args, args > 0)", true),
        ("tool == 'x' && now > 0", false),
        ("false", false),
    ];
    for (when, reads_whole) in cases {
        assert_eq!(whole(when), reads_whole, "{when}");
    }
    let args = json!({"a": 1, "b": "two", "to": ["x@y"], "n": {"m": 3}});
    let whens = [
        "args.a == 1",
        "has(args.b) && !has(args.c)",
        "args.n.m == 3 && args.to.exists(t, t == 'x@y')",
        "size(args) == 4 && args.a == 1",
        "args.c == 1",
        "tool == 'payments.transfer' && now > 0",
        // Chains of selects, answered as one qualified name, or not where a field is missing.
        "args.n.x == 1",
        "args.a.b == 1",
        "args.n.m.q == 1",
        "has(args.n.m) && !has(args.n.z)",
        "[1].exists(args, args.x == 1)",
        "[{'x': 2}].all(args, args.x == 2)",
        "schedule.not_before > now",
        "has(schedule.not_after)",
    ];
    let later = Window {
        not_before: jiff::Timestamp::from_second(1_800_007_200).unwrap(),
        not_after: jiff::Timestamp::from_second(1_800_009_000).unwrap(),
    };
    let scheduled = |args| CallFacts {
        schedule: Some(later),
        ..facts(args)
    };
    let shared = Bound::new(&facts(&args));
    for when in whens
        .iter()
        .chain(&["schedule.not_before - now == 7200", "schedule.x == 1"])
    {
        let c = Condition::compile(when).unwrap();
        let alone = c.holds(&Bound::new(&facts(&args)));
        assert_eq!(c.holds(&shared), alone, "{when}");
        // Fields converted as selected answer what the whole variables do.
        assert_eq!(c.holds_bound_whole(&facts(&args)), alone, "{when}");
        let alone = c.holds(&Bound::new(&scheduled(&args)));
        assert_eq!(c.holds_bound_whole(&scheduled(&args)), alone, "{when}");
    }
    drop(shared);
    assert_eq!(eval("args.n.m == 3", args.clone()), Ok(true));
    assert_eq!(
        eval("args.n.x == 1", args.clone()),
        Err("No such key: x".into())
    );
    assert_eq!(
        eval("args.c == 1", args.clone()),
        Err("No such key: c".into())
    );
    assert_eq!(eval("size(args) == 4", args), Ok(true));
}

/// Expressions spelled from CEL's whole grammar, nested up to `depth`: every operator,
/// literal form (escapes, raw and triple-quoted strings, bytes, `u`, exponents, hex), select,
/// index, call, macro, list, map, a leading dot, and text that is not CEL at all.
fn spellings(seed: u64, count: usize, depth: u32) -> Vec<String> {
    let mut next = random(seed);
    (0..count).map(|_| spell(&mut next, depth)).collect()
}

/// A seeded generator of choices: `next(n)` picks one of `n`, the same sequence every run.
fn random(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as usize
    }
}

fn spell(next: &mut dyn FnMut(usize) -> usize, depth: u32) -> String {
    const LEAVES: &[&str] = &[
        "args",
        "args.amount",
        "args.to",
        ".tool",
        "agent_id",
        "now",
        "schedule",
        "action_kind",
        "1",
        "-7",
        "0x1F",
        "1u",
        "2.5",
        "1e3",
        "-1.5e-2",
        "true",
        "false",
        "null",
        "'EUR'",
        r#""a\nb""#,
        r"r'\d+'",
        "'''x\ny'''",
        r"b'\xff'",
        "''",
        "[]",
        "{}",
        "[1, 'a', null]",
        "{'k': 1, 2: [3]}",
        "args['to']",
        "args.a.b.c",
        "has(args.to)",
        "size(args)",
        "args.to.exists(t, t == 'x')",
        "[1].all(x, x > 0)",
        "[1, 2].exists_one(x, x == 1)",
        "[1].map(x, x + 1)",
        "[1].filter(x, x > 0)",
        "int('1')",
        "string(1)",
        "double(2)",
        "uint(3)",
        "type(1)",
        "dyn(1)",
    ];
    const BINARY: &[&str] = &[
        "&&", "||", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "in",
    ];
    const BROKEN: &[&str] = &[
        "(",
        ")",
        "args.",
        "1 +",
        "? :",
        "{1:}",
        "[1,,2]",
        "'unterminated",
        "a.b(",
        "!",
        "1 2",
        "has(1)",
        "args.all(x)",
        "&&",
        "..a",
        "1..2",
        "@",
        "#",
        "[",
        "}",
    ];
    const METHODS: &[&str] = &["startsWith", "endsWith", "contains", "size"];
    if depth == 0 {
        return LEAVES[next(LEAVES.len())].to_owned();
    }
    let sub = |next: &mut dyn FnMut(usize) -> usize| spell(next, depth - 1);
    match next(11) {
        0..=2 => {
            let (a, b) = (sub(next), sub(next));
            format!("{a} {} {b}", BINARY[next(BINARY.len())])
        }
        3 => format!("!{}", sub(next)),
        4 => format!("-{}", sub(next)),
        5 => format!("({})", sub(next)),
        6 => format!("{} ? {} : {}", sub(next), sub(next), sub(next)),
        7 => {
            let (target, arg) = (sub(next), sub(next));
            format!("{target}.{}({arg})", METHODS[next(METHODS.len())])
        }
        8 => format!("[{}, {}][{}]", sub(next), sub(next), sub(next)),
        9 => format!("{{{}: {}}}", sub(next), sub(next)),
        _ => {
            let (a, b) = (sub(next), sub(next));
            format!("{a}{}{b}", BROKEN[next(BROKEN.len())])
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    Number,
    Text,
    Any,
}

/// Expressions over the call, spelled by the kind they should answer; one leaf in eight
/// is of any kind, so many evaluate on values of the wrong kind too. `item` is a
/// comprehension's variable.
fn spell_typed(
    next: &mut dyn FnMut(usize) -> usize,
    kind: Kind,
    depth: u32,
    item: Option<&str>,
) -> String {
    const BOOLS: &[&str] = &[
        "true",
        "false",
        "has(args.a)",
        "has(args.n.m)",
        "has(args.zz)",
        "has(schedule.not_after)",
        "args.nul",
    ];
    const NUMBERS: &[&str] = &[
        "0",
        "1",
        "-1",
        "7",
        "2.5",
        "0.0",
        "1u",
        "9223372036854775807",
        "args.a",
        "args.n.m",
        "args.big",
        "now",
        "schedule.not_before",
        "schedule.not_after",
        "size(args)",
        "size(args.to)",
        "args.to.size()",
        "size(tool)",
        "size(schedule)",
        "size('é')",
        "size(args.to[0])",
        "args.tags[0]",
        "args['a']",
    ];
    const TEXTS: &[&str] = &[
        "'EUR'",
        "''",
        "'x@y'",
        "'é'",
        "'@acme'",
        "'y'",
        "'x'",
        "'@y'",
        "args.b",
        "tool",
        "agent_id",
        "action_kind",
        "args.to[0]",
        "args['b']",
    ];
    const ANY: &[&str] = &[
        "null",
        "['EUR', 'USD']",
        "[1, 2u, 2.0]",
        "[]",
        "args",
        "args.to",
        "args.tags",
        "args.n",
        "args.missing",
        "schedule",
        "int(args.a)",
        "{'k': 1}",
        "b'x'",
        "type(1)",
    ];
    const LISTS: &[&str] = &[
        "['EUR', 'USD']",
        "[1, 2u, 2.0]",
        "[]",
        "args.to",
        "args.tags",
        "args.n",
    ];
    let pick =
        |next: &mut dyn FnMut(usize) -> usize, from: &[&str]| from[next(from.len())].to_owned();
    let kind = if next(8) == 0 { Kind::Any } else { kind };
    if depth == 0 {
        if let (Some(t), 0) = (item, next(3)) {
            return if next(3) == 0 {
                format!("{t}.m")
            } else {
                t.to_owned()
            };
        }
        return match kind {
            Kind::Bool => pick(next, BOOLS),
            Kind::Number => pick(next, NUMBERS),
            Kind::Text => pick(next, TEXTS),
            Kind::Any => match next(4) {
                0 => pick(next, BOOLS),
                1 => pick(next, NUMBERS),
                2 => pick(next, TEXTS),
                _ => pick(next, ANY),
            },
        };
    }
    let sub = |next: &mut dyn FnMut(usize) -> usize, kind| spell_typed(next, kind, depth - 1, item);
    let choice = |next: &mut dyn FnMut(usize) -> usize, kind: Kind| {
        let c = sub(next, Kind::Bool);
        format!("({c} ? {} : {})", sub(next, kind), sub(next, kind))
    };
    match kind {
        Kind::Bool => match next(10) {
            0 => {
                let (a, b) = (sub(next, Kind::Number), sub(next, Kind::Number));
                format!("({a} {} {b})", ["==", "!=", "<", "<=", ">", ">="][next(6)])
            }
            1 => {
                let (a, b) = (sub(next, Kind::Text), sub(next, Kind::Text));
                format!("({a} {} {b})", ["==", "!=", "<", ">="][next(4)])
            }
            2 => {
                let (a, b) = (sub(next, Kind::Text), sub(next, Kind::Text));
                format!(
                    "{a}.{}({b})",
                    ["startsWith", "endsWith", "contains"][next(3)]
                )
            }
            3 => {
                let (a, b) = (sub(next, Kind::Any), sub(next, Kind::Any));
                format!("({a} {} {b})", ["==", "!="][next(2)])
            }
            4 | 5 => {
                let (a, b) = (sub(next, Kind::Bool), sub(next, Kind::Bool));
                format!("({a} {} {b})", ["&&", "||"][next(2)])
            }
            6 => format!("!{}", sub(next, Kind::Bool)),
            7 => choice(next, Kind::Bool),
            8 => format!("({} in {})", sub(next, Kind::Any), pick(next, LISTS)),
            _ if item.is_none() => {
                let range = pick(next, LISTS);
                let var = ["t", "tool", "args"][next(3)];
                let body = spell_typed(next, Kind::Bool, depth - 1, Some(var));
                let fold = ["all", "exists", "exists_one"][next(3)];
                format!("{range}.{fold}({var}, {body})")
            }
            _ => sub(next, Kind::Bool),
        },
        Kind::Number => match next(4) {
            0 | 1 => {
                let (a, b) = (sub(next, Kind::Number), sub(next, Kind::Number));
                format!("({a} {} {b})", ["+", "-", "*", "/", "%"][next(5)])
            }
            2 => format!("-({})", sub(next, Kind::Number)),
            _ => choice(next, Kind::Number),
        },
        Kind::Text => match next(2) {
            0 => choice(next, Kind::Text),
            _ => format!(
                "size({}) > 0 ? {} : ''",
                sub(next, Kind::Text),
                sub(next, Kind::Text)
            ),
        },
        Kind::Any => {
            let kind = [Kind::Bool, Kind::Number, Kind::Text][next(3)];
            sub(next, kind)
        }
    }
}

/// Args with values of every kind where [`spell_typed`]'s expressions look.
fn calls() -> Vec<Value> {
    vec![
        json!({"a": 1, "b": "EUR", "n": {"m": 3}, "to": ["x@y", "z@acme"], "tags": ["urgent"],
               "big": 18_446_744_073_709_551_615u64, "nul": null}),
        json!({"a": 2.5, "b": "USD", "n": {"m": "3"}, "to": [], "tags": [1, 2.0, "urgent"],
               "big": -9_223_372_036_854_775_808i64, "nul": false}),
        json!({"a": "1", "b": 1, "n": {}, "to": "x@y", "tags": {"urgent": true}, "big": 0}),
        json!({"a": [1], "b": null, "n": {"m": [3]}, "to": ["é"], "tags": [], "nul": {}}),
        json!({"a": 9_223_372_036_854_775_807i64, "b": "", "n": {"m": -1}, "to": ["", "x@y"]}),
        json!({}),
    ]
}

/// The resolver answers as the variables bound whole: `holds` (a call's fields converted as
/// selected, chains of selects answered as one name, one `Bound` shared by every condition of
/// a gate) against [`Condition::holds_bound_whole`] (every variable converted before the
/// expression runs), over written and 3,000 generated expressions × 12 calls — the same
/// boolean, or the same error. The corpus was the removed plan's (issue 18); it reaches the
/// resolver's shortcuts on values of every kind, and its counts are asserted so that it
/// reaches both answers and errors.
#[test]
fn sc_pol_01_the_resolver_answers_as_the_variables_bound_whole() {
    let mut next = random(0x5eed);
    let window = Window {
        not_before: jiff::Timestamp::from_second(1_800_007_200).unwrap(),
        not_after: jiff::Timestamp::from_second(1_800_009_000).unwrap(),
    };
    let args = calls();
    let mut situations: Vec<CallFacts<'_>> = Vec::new();
    for a in &args {
        situations.push(facts(a));
        situations.push(CallFacts {
            schedule: Some(window),
            action_kind: Some("report"),
            ..facts(a)
        });
    }
    let shared: Vec<Bound<'_>> = situations.iter().map(Bound::new).collect();
    let written = [
        "'x@y'.endsWith('y') && !'x@y'.endsWith('x')",
        "'x@y'.startsWith('x') && !'x@y'.startsWith('y')",
        "'x@y'.contains('@') && !'x@y'.contains('z')",
        "['a', 'b'][1] == 'b' && [1, 2][0] == 1",
        "now == 1800000000 && now - 1 < 1800000000",
        "schedule.not_after - schedule.not_before == 1800",
        "schedule.not_before - now == 7200",
        "size('é') == 1 && size(['a']) == 1 && size(schedule) == 2",
        "args.to.exists_one(t, t.endsWith('@acme'))",
        "args.to.all(t, t.contains('@'))",
        "args.n.exists(k, k == 'm')",
        "'m' in args.n && !('q' in args.n)",
        "args.b in ['EUR', 'USD']",
        "7 % 3 == 1 && 7 / 2 == 3 && -7 / 2 == -3 && 2 * 3 == 6",
        "2.5 + 0.5 == 3.0 && 2.5 - 0.5 == 2.0",
        "action_kind == 'report' || action_kind == null",
        "agent_id.startsWith('agent-') && tool.endsWith('.transfer')",
        "(args.a > 1 ? 'big' : 'small') == 'small'",
    ];
    let spelled = (0..3_000).map(|round| spell_typed(&mut next, Kind::Bool, 1 + round % 4, None));
    let (mut yes, mut no, mut errors) = (0, 0, 0);
    for when in written.map(String::from).into_iter().chain(spelled) {
        let Ok(c) = Condition::compile(&when) else {
            assert!(!written.contains(&when.as_str()), "{when}");
            continue;
        };
        for (call, shared) in situations.iter().zip(&shared) {
            let lazy = c.holds(&Bound::new(call));
            for other in [c.holds(shared), c.holds_bound_whole(call)] {
                match (&lazy, &other) {
                    // An error that prints a map prints it in its hash order, map by map.
                    (Err(a), Err(b)) if a.contains("Map(") && b.contains("Map(") => {}
                    _ => assert_eq!(other, lazy, "{when} over {:?}", call.args),
                }
            }
            match lazy {
                Ok(true) => yes += 1,
                Ok(false) => no += 1,
                Err(_) => errors += 1,
            }
        }
    }
    assert!(
        yes > 1_000 && no > 1_000 && errors > 5_000,
        "{yes} true, {no} false, {errors} errors"
    );
}

/// A tree without its node ids: the two parsers number a map's entries and keys in
/// different orders, and nothing but error positions reads an id.
fn shape_of(tree: &IdedExpr) -> String {
    let text = format!("{:?}", tree.expr);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find("id: ") {
        out.push_str(&rest[..at]);
        rest = rest[at + 4..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out + rest
}

/// What compiles parses as the crate's default (ANTLR) parser reads it: the same tree, its
/// node ids aside. The Pratt parser that runs ([`parse`]) reads every expression the ANTLR
/// one does, and more: `!` and `-` mixed (`!-x`, `-!x`), where it also reads `!-7.f()` as
/// `!(-(7.f()))` and the ANTLR one as `!((-7).f())`. [`Shape`] refuses those. The test holds
/// a later `cel` release, or a change of parser, to what the rules were written against.
#[test]
fn sc_pol_01_what_compiles_parses_as_the_cel_grammar_reads_it() {
    let antlr = |s: &str| env().parser().parse(s);
    let mut corpus: Vec<String> = [
        include_str!("../../../../tests/bench/ten-conditions.txt"),
        include_str!("../../../../fuzz/seeds/condition/all"),
        include_str!("../../../../fuzz/seeds/condition/deep"),
        include_str!("../../../../fuzz/seeds/condition/threshold"),
        include_str!("../../../../fuzz/seeds/condition/vars"),
    ]
    .iter()
    .flat_map(|text| text.lines())
    .filter(|line| !line.starts_with('{'))
    .map(str::to_owned)
    .collect();
    corpus.extend(
        [
            "--1 == 1",
            "- -1 == 1",
            "!!true",
            "-9223372036854775808 < 0",
        ]
        .map(String::from),
    );
    corpus.extend(spellings(1, 3000, 2));
    corpus.extend(spellings(2, 1000, 3));
    let (mut compiled, mut refused, mut mixed) = (0, 0, 0);
    for source in &corpus {
        let theirs = parse_with(source, antlr);
        match Condition::compile(source) {
            Ok(ours) => {
                let ours = &ours.compiled().expect("compiled").expr;
                let theirs = theirs.unwrap_or_else(|e| panic!("only ours accepts {source:?}: {e}"));
                assert_eq!(shape_of(ours), shape_of(&theirs), "{source:?}");
                compiled += 1;
            }
            Err(why) => {
                if theirs.is_ok() {
                    // Refused for its shape (map, nesting, mixed `!` and `-`), never unread.
                    assert!(
                        parse(source).is_ok(),
                        "only the ANTLR parser reads {source:?}"
                    );
                    mixed += usize::from(why.contains("side by side"));
                }
                refused += 1;
            }
        }
    }
    // The corpus reaches every side: none of the counts may be a handful.
    assert!(
        compiled > 1000 && refused > 500 && mixed > 20,
        "{compiled} compiled, {refused} refused ({mixed} mixing ! and -)"
    );
}

#[test]
fn sc_pol_01_the_window_is_in_unix_seconds() {
    let args = json!({});
    let mut call = facts(&args);
    call.schedule = Some(Window {
        not_before: jiff::Timestamp::from_second(1_800_000_000 + 7200).unwrap(),
        not_after: jiff::Timestamp::from_second(1_800_000_000 + 9000).unwrap(),
    });
    let c = Condition::compile(
        "schedule.not_before - now > 3600 && schedule.not_after - schedule.not_before == 1800",
    )
    .unwrap();
    assert_eq!(c.holds(&Bound::new(&call)), Ok(true));
}

/// The deepest accepted trees evaluate on an ordinary (2 MiB) thread stack.
#[test]
fn sc_pol_01_the_deepest_accepted_expression_evaluates() {
    let deepest = |spell: &dyn Fn(usize) -> String| {
        (1..=MAX_DEPTH)
            .map(spell)
            .take_while(|w| Condition::compile(w).is_ok())
            .last()
            .expect("some depth compiles")
    };
    let nots = deepest(&|n| format!("{}true", "!".repeat(n)));
    assert!(nots.len() > MAX_DEPTH / 2, "{nots}");
    assert!(eval(&nots, json!({})).is_ok());
    let lists = deepest(&|n| format!("{}args.a{} == 1", "[".repeat(n), "]".repeat(n)));
    assert_eq!(eval(&lists, json!({"a": 1})), Ok(false));
}

#[test]
fn sc_pol_02_errors_at_run_time_are_reported_not_guessed() {
    // A missing key, a type mismatch, a non-boolean answer: each an error, never `false`.
    let missing = eval("args.amount > 1000", json!({}));
    assert!(
        missing.as_ref().is_err_and(|e| e.contains("amount")),
        "{missing:?}"
    );
    assert!(eval("args.amount > 1000", json!({"amount": "lots"})).is_err());
    let answer = eval("args.amount", json!({"amount": 3}));
    assert!(answer.is_err_and(|e| e.contains("not a boolean")));
    let long = "x".repeat(5000);
    let clipped = eval("args[args.k] == 1", json!({"k": long})).unwrap_err();
    assert!(
        clipped.chars().count() <= MAX_ERROR + 1,
        "{}",
        clipped.len()
    );
}

#[test]
fn sc_pol_01_unbounded_or_broken_expressions_do_not_compile() {
    let refused = [
        ("", "non-empty"),
        ("args.amount >", "parse"),
        ("args.to.map(r, r + r).size() > 0", "map or filter"),
        ("args.to.filter(r, true).size() > 0", "map or filter"),
        ("args.a.all(x, args.b.exists(y, x == y))", "nest"),
        ("[1].all(x, true) && [1].all(x, true) && [1].all(x, true) && [1].all(x, true) && [1].all(x, true)", "more than"),
        ("!-args.amount", "side by side"),
        ("-!has(args.a) == 1", "side by side"),
        ("1 + !--1 == 2", "side by side"),
    ];
    for (when, why) in refused {
        let e = Condition::compile(when).unwrap_err();
        assert!(e.contains(why), "{when:?}: {e}");
    }
    // Deep enough to overflow a test thread's stack in the parser: refused, not a crash.
    let deep = format!("{}1{} == [1]", "[".repeat(200), "]".repeat(200));
    let e = Condition::compile(&deep).unwrap_err();
    assert!(
        e.contains("deeper") || e.contains("recursion limit exceeded"),
        "{e}"
    );
    let chain = format!("{}1 == 2", "1 + ".repeat(250));
    assert!(Condition::compile(&chain).unwrap_err().contains("deeper"));
    let long = format!("args.a == '{}'", "x".repeat(MAX_SOURCE));
    assert!(Condition::compile(&long).unwrap_err().contains("at most"));
}
