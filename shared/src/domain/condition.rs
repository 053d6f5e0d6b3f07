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

pub use bind::Bound;
use bind::{Reads, View};

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
                let mut shape = Shape::default();
                shape.walk(&expr, 1, false)?;
                let mut reads = Reads::default();
                reads.walk(&expr);
                Ok(Compiled { expr, reads })
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
        evaluate(&compiled.expr, &call.view(&compiled.reads))
    }
}

fn evaluate(expr: &IdedExpr, view: &View<'_, '_>) -> Result<bool, String> {
    let mut context = Context::with_env(Arc::clone(env()));
    context.set_variable_resolver(view);
    match Cel::resolve(expr, &context) {
        Ok(Cel::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("when answered {}, not a boolean", other.type_of())),
        Err(e) => Err(clip(&e.to_string())),
    }
}

/// The parser recurses deeply per bracket (a dozen nested lists overflow a 2 MiB stack in a
/// debug build), before any of our limits can look at the tree: it runs once per rule, at
/// load, on a thread whose stack holds the deepest expression [`MAX_SOURCE`] bytes can spell.
fn parse(source: &str) -> Result<IdedExpr, String> {
    const PARSE_STACK: usize = 256 << 20;
    let owned = source.to_owned();
    let parsed = std::thread::Builder::new()
        .name("cel-parse".into())
        .stack_size(PARSE_STACK)
        .spawn(move || {
            env()
                .parser()
                .parse(&owned)
                .map_err(|e| format!("when does not parse: {}", one_line(&e.to_string())))
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

    /// `holds` with `args` converted whole, as before fields were converted as selected.
    fn holds_converting_whole(c: &Condition, call: &CallFacts<'_>) -> Result<bool, String> {
        let whole = Reads { whole_args: true };
        evaluate(&c.compiled()?.expr, &Bound::new(call).view(&whole))
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
        ];
        let shared = Bound::new(&facts(&args));
        for when in whens {
            let c = Condition::compile(when).unwrap();
            let alone = c.holds(&Bound::new(&facts(&args)));
            assert_eq!(c.holds(&shared), alone, "{when}");
            // Fields converted as selected answer what the whole conversion does.
            assert_eq!(holds_converting_whole(&c, &facts(&args)), alone, "{when}");
        }
        drop(shared);
        assert_eq!(
            eval("args.c == 1", args.clone()),
            Err("No such key: c".into())
        );
        assert_eq!(eval("size(args) == 4", args), Ok(true));
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
        ];
        for (when, why) in refused {
            let e = Condition::compile(when).unwrap_err();
            assert!(e.contains(why), "{when:?}: {e}");
        }
        // Deep enough to overflow a test thread's stack in the parser: refused, not a crash.
        let deep = format!("{}1{} == [1]", "[".repeat(200), "]".repeat(200));
        let e = Condition::compile(&deep).unwrap_err();
        assert!(e.contains("deeper") || e.contains("Recursion limit"), "{e}");
        let chain = format!("{}1 == 2", "1 + ".repeat(250));
        assert!(Condition::compile(&chain).unwrap_err().contains("deeper"));
        let long = format!("args.a == '{}'", "x".repeat(MAX_SOURCE));
        assert!(Condition::compile(&long).unwrap_err().contains("at most"));
    }
}
