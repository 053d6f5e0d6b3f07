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
//!
//! One evaluator: the `cel` crate's interpreter, fed the call through the lazy resolver of
//! [`bind`]. Nothing here answers a condition by other means (a second evaluator inside a
//! security gate is a second chance to disagree).

mod bind;
#[cfg(test)]
mod tests;

pub use bind::Bound;
use bind::Reads;

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
                if mixes_not_and_minus(&self.source) {
                    return Err(
                        "when may not put ! and - side by side (! takes a bool, - a number)".into(),
                    );
                }
                let mut shape = Shape::default();
                shape.walk(&expr, 1, false)?;
                Ok(Compiled {
                    expr,
                    reads: shape.reads,
                })
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
        let view = call.view(&compiled.reads);
        let mut context = Context::with_env(Arc::clone(env()));
        context.set_variable_resolver(&view);
        answer(&compiled.expr, &context)
    }

    /// [`Condition::holds`] with every variable bound the plain way, converted whole into the
    /// context before the expression runs: the same interpreter, none of the resolver's
    /// shortcuts. What the fuzz target and the tests hold [`Condition::holds`] to.
    #[doc(hidden)]
    pub fn holds_bound_whole(&self, call: &CallFacts<'_>) -> Result<bool, String> {
        let compiled = self.compiled()?;
        let (whole, reads) = (Bound::new(call), Reads { whole_args: true });
        let view = whole.view(&reads);
        let mut context = Context::with_env(Arc::clone(env()));
        for name in bind::VARIABLES {
            let value = cel::context::VariableResolver::resolve(&view, name)
                .ok_or_else(|| format!("{name} is not bound"))?;
            context.add_variable_as_val(name, value.into_owned());
        }
        answer(&compiled.expr, &context)
    }
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

/// What one walk of an expression's tree finds when it compiles: whether it keeps within the
/// bounds, and how it reads `args`.
#[derive(Default)]
struct Shape {
    loops: usize,
    reads: Reads,
}

impl Shape {
    fn walk(&mut self, e: &IdedExpr, depth: usize, in_loop: bool) -> Result<(), String> {
        within(depth)?;
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
            // `args.f`, `has(args.f)`: one field selected, not `args` read whole.
            Expr::Select(s) => match &s.operand.expr {
                Expr::Ident(name) if is_args(name) => within(next),
                _ => self.walk(&s.operand, next, in_loop),
            },
            Expr::Ident(name) => {
                // Anywhere else `args` is read whole. A comprehension's own variable named
                // `args` counts too, which can only convert more than needed, never less.
                self.reads.whole_args |= is_args(name);
                Ok(())
            }
            Expr::Struct(_) => Err("when may not build messages".into()),
            Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }
}

fn within(depth: usize) -> Result<(), String> {
    match depth > MAX_DEPTH {
        true => Err(format!("when is nested deeper than {MAX_DEPTH} levels")),
        false => Ok(()),
    }
}

fn is_args(name: &str) -> bool {
    name.trim_start_matches('.') == "args"
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
