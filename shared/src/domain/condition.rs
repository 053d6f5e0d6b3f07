//! A policy rule's condition (SC-POL-01, SC-POL-02): `when = "<CEL expression>"` over the call.
//!
//! Compiled once, when the config loads — or, in a process that never gates, on the first
//! evaluation ([`Condition::deferred`]); evaluated per submit against [`CallFacts`]. The cost of
//! one evaluation is bounded by what is compiled, not by what an agent sends: the expression is
//! at most [`MAX_SOURCE`] bytes and [`MAX_DEPTH`] levels deep, and its only loops are the boolean
//! macros (`all`, `exists`, `exists_one`) over a list, never nested — so each node runs at most
//! once per element of one list of the call's `args` (itself at most 64 KiB, SC-INT-01).
//! `map` and `filter` are refused because they build values per element; CEL has no other loop,
//! no recursion and no variables, and the interpreter has no regex here (`matches` is off).
//! An expression that does not answer a boolean is an evaluation error: the rule fails closed.

mod bind;
mod plan;

pub use bind::Bound;
use bind::{Reads, View};
use plan::Plan;

use super::window::Window;
use cel::common::ast::Expr;
use cel::{Context, Env, IdedExpr, Value as Cel};
use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// Longest accepted expression, in bytes.
pub const MAX_SOURCE: usize = 1024;
/// Deepest accepted expression tree (the parser's own limit is higher).
pub const MAX_DEPTH: usize = 24;
/// Most comprehensions (`all`, `exists`, `exists_one`) in one expression.
pub const MAX_LOOPS: usize = 4;
/// An evaluation error's text kept in an outcome: enough to see the cause, never a whole arg.
const MAX_ERROR: usize = 240;

/// What a condition sees of a call: the variables `tool`, `args`, `agent_id`, `action_kind`,
/// `schedule` (`null` or `{not_before, not_after}` in Unix seconds) and `now` (Unix seconds).
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    pub tool: &'a str,
    pub args: &'a Value,
    pub agent_id: &'a str,
    pub action_kind: Option<&'a str>,
    pub schedule: Option<Window>,
    pub now: jiff::Timestamp,
}

/// A `when`: its source, and the expression compiled from it once.
#[derive(Debug, Clone)]
pub struct Condition {
    source: String,
    compiled: Arc<OnceLock<Result<Compiled, String>>>,
}

#[derive(Debug)]
struct Compiled {
    expr: IdedExpr,
    /// How it reads `args`: converting the call is the cost per submit.
    reads: Reads,
    /// The common case answered without the interpreter, where the expression allows it.
    plan: Option<Plan>,
}

impl PartialEq for Condition {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib()))
}

impl Condition {
    /// Compile `source`, or say why not (the config names the rule).
    pub fn compile(source: &str) -> Result<Condition, String> {
        let condition = Condition::deferred(source)?;
        condition.compiled()?;
        Ok(condition)
    }

    /// Check `source`'s size only and compile it when it is first evaluated: for a process
    /// that loads the policy but never gates (the approve, cancel and resume functions), where
    /// the parser's one-time set-up, ≈ 5 ms, would be a cold start's largest cost
    /// (BENCHMARKS.md, init). An expression that does not compile then fails its rule closed
    /// when evaluated; the gating process compiles at load and refuses it there.
    pub fn deferred(source: &str) -> Result<Condition, String> {
        if source.trim().is_empty() {
            return Err("when must be a non-empty CEL expression".into());
        }
        if source.len() > MAX_SOURCE {
            return Err(format!(
                "when is {} bytes; at most {MAX_SOURCE}",
                source.len()
            ));
        }
        Ok(Condition {
            source: source.to_owned(),
            compiled: Arc::new(OnceLock::new()),
        })
    }

    fn compiled(&self) -> Result<&Compiled, String> {
        self.compiled
            .get_or_init(|| {
                let expr = parse(&self.source)?;
                if mixes_not_and_minus(&self.source) {
                    return Err(
                        "when may not put ! and - side by side (! takes a bool, - a number)".into(),
                    );
                }
                let mut shape = Shape::default();
                shape.walk(&expr, 1, false)?;
                let mut reads = Reads::default();
                reads.walk(&expr);
                let plan = Plan::of(&expr);
                Ok(Compiled { expr, reads, plan })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the condition holds for `call`; an error (a missing key, a type mismatch, a
    /// non-boolean answer) is returned for the caller to fail closed on.
    pub fn holds(&self, call: &Bound<'_>) -> Result<bool, String> {
        let compiled = self.compiled()?;
        match compiled.plan.as_ref().and_then(|p| p.holds(call.facts())) {
            Some(answer) => Ok(answer),
            None => self.holds_interpreted(call),
        }
    }

    /// [`Condition::holds`] by the interpreter alone, never the plan: what the fuzz target
    /// and the tests hold the plan to.
    #[doc(hidden)]
    pub fn holds_interpreted(&self, call: &Bound<'_>) -> Result<bool, String> {
        let compiled = self.compiled()?;
        evaluate(&compiled.expr, &call.view(&compiled.reads))
    }
}

fn evaluate(expr: &IdedExpr, view: &View<'_, '_>) -> Result<bool, String> {
    let mut context = Context::with_env(Arc::clone(env()));
    context.set_variable_resolver(view);
    answer(expr, &context)
}

fn answer(expr: &IdedExpr, context: &Context<'_, '_>) -> Result<bool, String> {
    match Cel::resolve(expr, context) {
        Ok(Cel::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("when answered {}, not a boolean", other.type_of())),
        Err(e) => Err(clip(&e.to_string())),
    }
}

/// The `cel` crate's hand-written Pratt parser, not its default ANTLR one: nothing then links
/// the ANTLR runtime and grammar, 0.15 MB of the intake function's zip and ≈ 0.5–1 ms of its
/// cold start (BENCHMARKS.md, "the CEL parser"). Both expand the same macros (`has`, `all`,
/// `exists`, `exists_one`; `map` and `filter`, which [`Shape`] refuses) into the same trees; the
/// Pratt parser also reads `!` beside a unary `-`, which [`mixes_not_and_minus`] refuses.
/// `sc_pol_01_what_compiles_parses_as_the_cel_grammar_reads_it` holds the two to one another.
///
/// A parser recurses per bracket before any of our limits can look at the tree, and an
/// unoptimized build's frames are large: it runs once per rule, at load, on a thread whose
/// stack holds the deepest expression [`MAX_SOURCE`] bytes can spell.
fn parse(source: &str) -> Result<IdedExpr, String> {
    parse_with(source, |s| cel::parser::PrattParser::new().parse(s))
}

fn parse_with(
    source: &str,
    parser: fn(&str) -> Result<IdedExpr, cel::ParseErrors>,
) -> Result<IdedExpr, String> {
    const PARSE_STACK: usize = 256 << 20;
    let owned = source.to_owned();
    let parsed = std::thread::Builder::new()
        .name("cel-parse".into())
        .stack_size(PARSE_STACK)
        .spawn(move || {
            parser(&owned).map_err(|e| format!("when does not parse: {}", one_line(&e.to_string())))
        })
        .map_err(|e| format!("when could not be parsed: {e}"))?
        .join();
    parsed.unwrap_or_else(|_| Err("when could not be parsed".into()))
}

/// The compile-time bounds of an expression's tree.
#[derive(Default)]
struct Shape {
    loops: usize,
}

impl Shape {
    fn walk(&mut self, e: &IdedExpr, depth: usize, in_loop: bool) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("when is nested deeper than {MAX_DEPTH} levels"));
        }
        let next = depth + 1;
        match &e.expr {
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.walk(target, next, in_loop)?;
                }
                call.args
                    .iter()
                    .try_for_each(|a| self.walk(a, next, in_loop))
            }
            Expr::Comprehension(c) => {
                // `map` and `filter` accumulate a list; the boolean macros a bool or a count.
                if matches!(c.accu_init.expr, Expr::List(_)) {
                    return Err("when may not use map or filter (use exists or all)".into());
                }
                if in_loop {
                    return Err("when may not nest all/exists/exists_one".into());
                }
                self.loops += 1;
                if self.loops > MAX_LOOPS {
                    return Err(format!(
                        "when has more than {MAX_LOOPS} all/exists/exists_one"
                    ));
                }
                self.walk(&c.iter_range, next, false)?;
                for part in [&c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                    self.walk(part, next, true)?;
                }
                Ok(())
            }
            Expr::List(list) => list
                .elements
                .iter()
                .try_for_each(|x| self.walk(x, next, in_loop)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                cel::common::ast::EntryExpr::MapEntry(m) => {
                    self.walk(&m.key, next, in_loop)?;
                    self.walk(&m.value, next, in_loop)
                }
                cel::common::ast::EntryExpr::StructField(f) => self.walk(&f.value, next, in_loop),
            }),
            Expr::Select(s) => self.walk(&s.operand, next, in_loop),
            Expr::Struct(_) => Err("when may not build messages".into()),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }
}

/// Whether `source` puts `!` and a unary `-` side by side (`!-x`, `-!x`, `!--1`). CEL's
/// grammar has no such operand (a run of `!` or of `-` takes a member), and the Pratt parser
/// reads one anyway, folding pairs away (`!--1` becomes `!1`). It could only ever be a type
/// error (`!` takes a bool, `-` a number), so it is refused: what compiles is what the grammar,
/// and the ANTLR parser, read the same way. The crate's own lexer splits the tokens, so text in
/// strings and comments is not mistaken for operators.
fn mixes_not_and_minus(source: &str) -> bool {
    use cel::parser::pratt_parser::{Lexer, TokenKind as T};
    let mut lexer = Lexer::new(source);
    let (mut operand_due, mut unary) = (true, None);
    loop {
        let token = lexer.lex().kind;
        match token {
            T::TokWhitespace | T::TokComment => continue,
            T::TokEnd | T::TokError => return false,
            T::TokExclamation | T::TokMinus if operand_due => {
                if unary.is_some_and(|previous| previous != token) {
                    return true;
                }
                unary = Some(token);
            }
            _ => {
                unary = None;
                operand_due = !matches!(
                    token,
                    T::TokIdent
                        | T::TokInt
                        | T::TokUint
                        | T::TokFloat
                        | T::TokString
                        | T::TokBytes
                        | T::TokNull
                        | T::TokTrue
                        | T::TokFalse
                        | T::TokRightParen
                        | T::TokRightBracket
                        | T::TokRightBrace
                );
            }
        }
    }
}

fn one_line(s: &str) -> String {
    clip(&s.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(MAX_ERROR) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn facts(args: &Value) -> CallFacts<'_> {
        CallFacts {
            tool: "payments.transfer",
            args,
            agent_id: "agent-1",
            action_kind: None,
            schedule: None,
            now: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        }
    }

    /// `holds` with every variable bound the plain way, converted whole into the context
    /// before the expression runs, as before the call's facts were read where they lie: the
    /// oracle the resolver's shortcuts are held to.
    pub(super) fn holds_bound_plainly(c: &Condition, call: &CallFacts<'_>) -> Result<bool, String> {
        let whole = Bound::new(call);
        let reads = Reads { whole_args: true };
        let view = whole.view(&reads);
        let mut context = Context::with_env(Arc::clone(env()));
        for name in ["tool", "args", "agent_id", "action_kind", "schedule", "now"] {
            let value = cel::context::VariableResolver::resolve(&view, name).expect(name);
            context.add_variable_as_val(name, value.into_owned());
        }
        answer(&c.compiled()?.expr, &context)
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
            assert_eq!(holds_bound_plainly(&c, &facts(&args)), alone, "{when}");
            let alone = c.holds(&Bound::new(&scheduled(&args)));
            assert_eq!(holds_bound_plainly(&c, &scheduled(&args)), alone, "{when}");
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
        let mut state = seed;
        let mut next = move |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % n as u64) as usize
        };
        (0..count).map(|_| spell(&mut next, depth)).collect()
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
            include_str!("../../../tests/bench/ten-conditions.txt"),
            include_str!("../../../fuzz/seeds/condition/all"),
            include_str!("../../../fuzz/seeds/condition/deep"),
            include_str!("../../../fuzz/seeds/condition/threshold"),
            include_str!("../../../fuzz/seeds/condition/vars"),
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
                    let theirs =
                        theirs.unwrap_or_else(|e| panic!("only ours accepts {source:?}: {e}"));
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
}
