//! A condition compiled, when the config loads, into a plan that answers the common case
//! without the `cel` interpreter: names and functions resolved once, values borrowed from the
//! call's JSON, nothing allocated per node. The interpreter walks the tree each submit, looks
//! every name up by string and every function by a hashed name, and boxes each value it makes:
//! that was most of what ten conditions still cost per lifecycle (BENCHMARKS.md, issue 18).
//!
//! The plan is a shortcut, not a second CEL. It answers only where its answer is the
//! interpreter's: anything it does not model — an error of any kind (a missing field, a type
//! mismatch, an overflow), numbers of two kinds compared, two lists or maps compared, a
//! function or form outside the few below — makes it give up, and the interpreter evaluates
//! the condition from the start, so what a rule decides and every error's text stay the
//! interpreter's. An expression with a form outside the plan gets no plan at all.
//! `sc_pol_01_a_plan_answers_as_the_interpreter_does` holds the two to one another.

use super::CallFacts;
use super::Window;
use cel::common::ast::{operators as op, Expr, LiteralValue};
use cel::IdedExpr;
use serde_json::{Map, Value};
use std::cmp::Ordering;

/// A compiled condition.
#[derive(Debug)]
pub(super) struct Plan(Node);

impl Plan {
    /// The plan of `expr`, if every part of it is one the plan models.
    pub(super) fn of(expr: &IdedExpr) -> Option<Plan> {
        Node::of(expr, None).map(Plan)
    }

    /// The condition's answer, or `None` where the interpreter must give it.
    pub(super) fn holds(&self, call: &CallFacts<'_>) -> Option<bool> {
        let mut scope = Scope {
            call,
            accu: None,
            item: None,
        };
        match self.0.eval(&mut scope)? {
            V::Bool(b) => Some(b),
            _ => None,
        }
    }
}

#[derive(Debug)]
enum Node {
    Lit(Lit),
    /// A list written of literals (`['EUR', 'USD']`).
    Lits(Vec<Lit>),
    Var(Var),
    /// A comprehension's accumulator or element (nested comprehensions are refused).
    Local(Slot),
    Select(Box<Node>, String),
    Has(Box<Node>, String),
    Not(Box<Node>),
    Neg(Box<Node>),
    And(Box<[Node; 2]>),
    Or(Box<[Node; 2]>),
    Cond(Box<[Node; 3]>),
    Binary(Bin, Box<[Node; 2]>),
    Size(Box<Node>),
    Text(TextFn, Box<[Node; 2]>),
    NotStrictlyFalse(Box<Node>),
    Fold(Box<Fold>),
}

#[derive(Debug)]
struct Fold {
    range: Node,
    init: Node,
    cond: Node,
    step: Node,
    result: Node,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Accu,
    Item,
}

#[derive(Debug, Clone, Copy)]
enum Var {
    Tool,
    AgentId,
    ActionKind,
    Schedule,
    Now,
    Args,
}

#[derive(Debug, Clone, Copy)]
enum Bin {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    In,
    Index,
}

#[derive(Debug, Clone, Copy)]
enum TextFn {
    StartsWith,
    EndsWith,
    Contains,
}

#[derive(Debug)]
enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    Str(String),
}

/// The names a comprehension binds: its accumulator and its element.
#[derive(Clone, Copy)]
struct Names<'e> {
    accu: &'e str,
    item: &'e str,
}

impl Node {
    fn of(e: &IdedExpr, names: Option<Names<'_>>) -> Option<Node> {
        let of = |e: &IdedExpr| Node::of(e, names).map(Box::new);
        let pair =
            |a: &IdedExpr, b: &IdedExpr| Some(Box::new([Node::of(a, names)?, Node::of(b, names)?]));
        Some(match &e.expr {
            Expr::Literal(l) => Node::Lit(Lit::of(l)?),
            Expr::List(list) if list.optional_indices.is_empty() => Node::Lits(
                list.elements
                    .iter()
                    .map(|x| match &x.expr {
                        Expr::Literal(l) => Lit::of(l),
                        _ => None,
                    })
                    .collect::<Option<_>>()?,
            ),
            Expr::Ident(name) => Node::ident(name, names)?,
            Expr::Select(s) if s.test => Node::Has(of(&s.operand)?, s.field.clone()),
            Expr::Select(s) => Node::Select(of(&s.operand)?, s.field.clone()),
            Expr::Call(call) => {
                let name = call.func_name.as_str();
                match (call.target.as_deref(), call.args.as_slice()) {
                    (None, [a]) => match name {
                        op::LOGICAL_NOT => Node::Not(of(a)?),
                        op::NEGATE => Node::Neg(of(a)?),
                        op::NOT_STRICTLY_FALSE => Node::NotStrictlyFalse(of(a)?),
                        "size" => Node::Size(of(a)?),
                        _ => return None,
                    },
                    (None, [a, b]) => match name {
                        op::LOGICAL_AND => Node::And(pair(a, b)?),
                        op::LOGICAL_OR => Node::Or(pair(a, b)?),
                        _ => Node::Binary(Bin::of(name)?, pair(a, b)?),
                    },
                    (None, [c, a, b]) if name == op::CONDITIONAL => Node::Cond(Box::new([
                        Node::of(c, names)?,
                        Node::of(a, names)?,
                        Node::of(b, names)?,
                    ])),
                    (Some(t), []) if name == "size" => Node::Size(of(t)?),
                    (Some(t), [a]) => {
                        let f = match name {
                            "startsWith" => TextFn::StartsWith,
                            "endsWith" => TextFn::EndsWith,
                            "contains" => TextFn::Contains,
                            _ => return None,
                        };
                        Node::Text(f, pair(t, a)?)
                    }
                    _ => return None,
                }
            }
            Expr::Comprehension(c) if names.is_none() && c.iter_var2.is_none() => {
                let inner = Some(Names {
                    accu: &c.accu_var,
                    item: &c.iter_var,
                });
                Node::Fold(Box::new(Fold {
                    range: Node::of(&c.iter_range, None)?,
                    init: Node::of(&c.accu_init, None)?,
                    cond: Node::of(&c.loop_cond, inner)?,
                    step: Node::of(&c.loop_step, inner)?,
                    result: Node::of(&c.result, inner)?,
                }))
            }
            _ => return None,
        })
    }

    /// A name, as the interpreter resolves it: a comprehension's own variables first, then
    /// the call's. Anything else (a type's name, a name with a leading dot) is left to it.
    fn ident(name: &str, names: Option<Names<'_>>) -> Option<Node> {
        if let Some(n) = names {
            if name == n.accu {
                return Some(Node::Local(Slot::Accu));
            }
            if name == n.item {
                return Some(Node::Local(Slot::Item));
            }
        }
        Some(Node::Var(match name {
            "tool" => Var::Tool,
            "agent_id" => Var::AgentId,
            "action_kind" => Var::ActionKind,
            "schedule" => Var::Schedule,
            "now" => Var::Now,
            "args" => Var::Args,
            _ => return None,
        }))
    }
}

impl Bin {
    fn of(name: &str) -> Option<Bin> {
        Some(match name {
            op::EQUALS => Bin::Eq,
            op::NOT_EQUALS => Bin::Ne,
            op::LESS => Bin::Lt,
            op::LESS_EQUALS => Bin::Le,
            op::GREATER => Bin::Gt,
            op::GREATER_EQUALS => Bin::Ge,
            op::ADD => Bin::Add,
            op::SUBSTRACT => Bin::Sub,
            op::MULTIPLY => Bin::Mul,
            op::DIVIDE => Bin::Div,
            op::MODULO => Bin::Rem,
            op::IN => Bin::In,
            op::INDEX => Bin::Index,
            _ => return None,
        })
    }
}

impl Lit {
    fn of(l: &LiteralValue) -> Option<Lit> {
        Some(match l {
            LiteralValue::Null => Lit::Null,
            LiteralValue::Boolean(b) => Lit::Bool(*b.inner()),
            LiteralValue::Int(i) => Lit::Int(*i.inner()),
            LiteralValue::UInt(u) => Lit::UInt(*u.inner()),
            LiteralValue::Double(d) => Lit::Double(*d.inner()),
            LiteralValue::String(s) => Lit::Str(s.inner().to_owned()),
            LiteralValue::Bytes(_) => return None,
        })
    }

    fn v(&self) -> V<'_> {
        match self {
            Lit::Null => V::Null,
            Lit::Bool(b) => V::Bool(*b),
            Lit::Int(i) => V::Int(*i),
            Lit::UInt(u) => V::UInt(*u),
            Lit::Double(d) => V::Double(*d),
            Lit::Str(s) => V::Str(s),
        }
    }
}

/// A value while a plan runs: everything borrowed, from the plan or the call.
#[derive(Debug, Clone, Copy)]
enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Double(f64),
    Str(&'a str),
    Array(&'a [Value]),
    Object(&'a Map<String, Value>),
    Lits(&'a [Lit]),
    /// `schedule`: a map of `not_before` and `not_after`, in Unix seconds.
    Window(Window),
}

impl<'a> V<'a> {
    /// JSON as the interpreter sees it (`bind::val_of`): integers that fit are `int`, larger
    /// ones `uint`, the rest `double`.
    fn of(v: &'a Value) -> V<'a> {
        match v {
            Value::Null => V::Null,
            Value::Bool(b) => V::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => V::Int(i),
                (None, Some(u)) => V::UInt(u),
                _ => V::Double(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => V::Str(s),
            Value::Array(items) => V::Array(items),
            Value::Object(fields) => V::Object(fields),
        }
    }

    fn is_composite(self) -> bool {
        matches!(self, V::Array(_) | V::Object(_) | V::Lits(_) | V::Window(_))
    }

    fn bool(self) -> Option<bool> {
        match self {
            V::Bool(b) => Some(b),
            _ => None,
        }
    }
}

struct Scope<'s, 'a> {
    call: &'s CallFacts<'a>,
    accu: Option<V<'s>>,
    item: Option<V<'s>>,
}

impl Node {
    fn eval<'s>(&'s self, scope: &mut Scope<'s, '_>) -> Option<V<'s>> {
        Some(match self {
            Node::Lit(l) => l.v(),
            Node::Lits(items) => V::Lits(items),
            Node::Var(var) => var.v(scope.call),
            Node::Local(Slot::Accu) => scope.accu?,
            Node::Local(Slot::Item) => scope.item?,
            Node::Select(operand, field) => select(operand.eval(scope)?, field)?,
            Node::Has(operand, field) => V::Bool(match operand.eval(scope)? {
                V::Object(fields) => fields.contains_key(field),
                V::Window(_) => matches!(field.as_str(), "not_before" | "not_after"),
                _ => return None,
            }),
            Node::Not(a) => V::Bool(!a.eval(scope)?.bool()?),
            Node::Neg(a) => match a.eval(scope)? {
                V::Int(i) => V::Int(i.checked_neg()?),
                V::Double(d) => V::Double(-d),
                _ => return None,
            },
            Node::And(ab) => {
                let [a, b] = &**ab;
                match a.eval(scope)?.bool()? {
                    false => V::Bool(false),
                    true => V::Bool(b.eval(scope)?.bool()?),
                }
            }
            Node::Or(ab) => {
                let [a, b] = &**ab;
                match a.eval(scope)?.bool()? {
                    true => V::Bool(true),
                    false => V::Bool(b.eval(scope)?.bool()?),
                }
            }
            Node::Cond(cab) => {
                let [c, a, b] = &**cab;
                match c.eval(scope)?.bool()? {
                    true => a.eval(scope)?,
                    false => b.eval(scope)?,
                }
            }
            Node::Binary(bin, ab) => {
                let [a, b] = &**ab;
                let (a, b) = (a.eval(scope)?, b.eval(scope)?);
                binary(*bin, a, b)?
            }
            Node::Size(a) => V::Int(match a.eval(scope)? {
                V::Str(s) => i64::try_from(s.chars().count()).ok()?,
                V::Array(items) => i64::try_from(items.len()).ok()?,
                V::Object(fields) => i64::try_from(fields.len()).ok()?,
                V::Lits(items) => i64::try_from(items.len()).ok()?,
                V::Window(_) => 2,
                _ => return None,
            }),
            Node::Text(f, ab) => {
                let [a, b] = &**ab;
                let (V::Str(s), V::Str(x)) = (a.eval(scope)?, b.eval(scope)?) else {
                    return None;
                };
                V::Bool(match f {
                    TextFn::StartsWith => s.starts_with(x),
                    TextFn::EndsWith => s.ends_with(x),
                    TextFn::Contains => s.contains(x),
                })
            }
            // An error would make it true; the plan gives errors up instead.
            Node::NotStrictlyFalse(a) => V::Bool(a.eval(scope)?.bool()?),
            Node::Fold(fold) => fold.eval(scope)?,
        })
    }
}

impl Fold {
    /// As the interpreter runs a comprehension: the condition checked before each element,
    /// the step's value the next accumulator, the result read with the last of them bound.
    fn eval<'s>(&'s self, scope: &mut Scope<'s, '_>) -> Option<V<'s>> {
        let init = self.init.eval(scope)?;
        let range = self.range.eval(scope)?;
        let mut inner = Scope {
            call: scope.call,
            accu: Some(init),
            item: None,
        };
        let visit = |item: V<'s>, inner: &mut Scope<'s, '_>| -> Option<bool> {
            if !self.cond.eval(inner)?.bool()? {
                return Some(false);
            }
            inner.item = Some(item);
            inner.accu = Some(self.step.eval(inner)?);
            Some(true)
        };
        match range {
            V::Array(items) => {
                for item in items {
                    if !visit(V::of(item), &mut inner)? {
                        break;
                    }
                }
            }
            V::Lits(items) => {
                for item in items {
                    if !visit(item.v(), &mut inner)? {
                        break;
                    }
                }
            }
            // A map's elements are its keys; which order they come in cannot change an
            // answer the plan gives, as it gives up on the first error.
            V::Object(fields) => {
                for key in fields.keys() {
                    if !visit(V::Str(key), &mut inner)? {
                        break;
                    }
                }
            }
            _ => return None,
        }
        self.result.eval(&mut inner)
    }
}

impl Var {
    fn v<'s>(self, call: &'s CallFacts<'_>) -> V<'s> {
        match self {
            Var::Tool => V::Str(call.tool),
            Var::AgentId => V::Str(call.agent_id),
            Var::ActionKind => call.action_kind.map_or(V::Null, V::Str),
            Var::Schedule => call.schedule.map_or(V::Null, V::Window),
            Var::Now => V::Int(call.now.as_second()),
            Var::Args => V::of(call.args),
        }
    }
}

fn select<'s>(operand: V<'s>, field: &str) -> Option<V<'s>> {
    match operand {
        V::Object(fields) => fields.get(field).map(V::of),
        V::Window(w) => match field {
            "not_before" => Some(V::Int(w.not_before.as_second())),
            "not_after" => Some(V::Int(w.not_after.as_second())),
            _ => None,
        },
        _ => None,
    }
}

fn binary<'s>(bin: Bin, a: V<'s>, b: V<'s>) -> Option<V<'s>> {
    Some(match bin {
        Bin::Eq => V::Bool(equal(a, b)?),
        Bin::Ne => V::Bool(!equal(a, b)?),
        Bin::Lt => V::Bool(compare(a, b)? == Ordering::Less),
        Bin::Le => V::Bool(compare(a, b)? != Ordering::Greater),
        Bin::Gt => V::Bool(compare(a, b)? == Ordering::Greater),
        Bin::Ge => V::Bool(compare(a, b)? != Ordering::Less),
        Bin::Add | Bin::Sub | Bin::Mul | Bin::Div | Bin::Rem => arithmetic(bin, a, b)?,
        Bin::In => V::Bool(contains(b, a)?),
        Bin::Index => match (a, b) {
            (V::Array(items), V::Int(i)) => V::of(items.get(usize::try_from(i).ok()?)?),
            (V::Lits(items), V::Int(i)) => items.get(usize::try_from(i).ok()?)?.v(),
            (V::Object(fields), V::Str(key)) => V::of(fields.get(key)?),
            _ => return None,
        },
    })
}

/// CEL's `==` as the interpreter has it, where the plan is sure of it: values of one kind
/// compare as themselves, a scalar never equals a value of another kind or a list or map.
/// Numbers of two kinds (`1 == 1.0`) and two lists or maps are left to the interpreter.
fn equal(a: V<'_>, b: V<'_>) -> Option<bool> {
    Some(match (a, b) {
        (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Int(x), V::Int(y)) => x == y,
        (V::UInt(x), V::UInt(y)) => x == y,
        (V::Double(x), V::Double(y)) => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        (x, y) if x.is_composite() && y.is_composite() => return None,
        (x, y) if is_number(x) && is_number(y) => return None,
        _ => false,
    })
}

fn is_number(v: V<'_>) -> bool {
    matches!(v, V::Int(_) | V::UInt(_) | V::Double(_))
}

/// `<` and the rest, for two values of one ordered kind; a NaN is left to the interpreter.
fn compare(a: V<'_>, b: V<'_>) -> Option<Ordering> {
    match (a, b) {
        (V::Int(x), V::Int(y)) => Some(x.cmp(&y)),
        (V::UInt(x), V::UInt(y)) => Some(x.cmp(&y)),
        (V::Double(x), V::Double(y)) => x.partial_cmp(&y),
        (V::Str(x), V::Str(y)) => Some(x.cmp(y)),
        (V::Bool(x), V::Bool(y)) => Some(x.cmp(&y)),
        _ => None,
    }
}

/// Integer arithmetic checked (an overflow or a division by zero is the interpreter's error
/// to report); of doubles, only `+` and `-`.
fn arithmetic<'s>(bin: Bin, a: V<'s>, b: V<'s>) -> Option<V<'s>> {
    Some(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(match bin {
            Bin::Add => x.checked_add(y)?,
            Bin::Sub => x.checked_sub(y)?,
            Bin::Mul => x.checked_mul(y)?,
            Bin::Div => x.checked_div(y)?,
            Bin::Rem => x.checked_rem(y)?,
            _ => return None,
        }),
        (V::Double(x), V::Double(y)) => V::Double(match bin {
            Bin::Add => x + y,
            Bin::Sub => x - y,
            _ => return None,
        }),
        _ => return None,
    })
}

/// `needle in haystack` over a list, each element compared as `==` would; over a map's keys
/// only for a string.
fn contains(haystack: V<'_>, needle: V<'_>) -> Option<bool> {
    match haystack {
        V::Array(items) => any_equal(items.iter().map(V::of), needle),
        V::Lits(items) => any_equal(items.iter().map(Lit::v), needle),
        V::Object(fields) => match needle {
            V::Str(key) => Some(fields.contains_key(key)),
            _ => None,
        },
        _ => None,
    }
}

/// As the interpreter's list: the first equal element answers; one the plan is unsure of
/// before it gives the question up.
fn any_equal<'a>(items: impl Iterator<Item = V<'a>>, needle: V<'_>) -> Option<bool> {
    for item in items {
        if equal(item, needle)? {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{facts, holds_bound_plainly};
    use super::super::{evaluate, Bound, CallFacts, Condition, Window};
    use super::Plan;
    use serde_json::{json, Value};

    #[derive(Clone, Copy)]
    enum Kind {
        Bool,
        Number,
        Text,
        Any,
    }

    /// Expressions over the call, spelled by the kind they should answer; one leaf in eight
    /// is of any kind, so many evaluate on values of the wrong kind too, and a few use forms
    /// the plan does not model (those get no plan). `item` is a comprehension's variable.
    fn spell(
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
        let sub = |next: &mut dyn FnMut(usize) -> usize, kind| spell(next, kind, depth - 1, item);
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
                    let body = spell(next, Kind::Bool, depth - 1, Some(var));
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

    /// Wherever the plan answers, the interpreter answers the same, with the variables read
    /// where they lie and bound the plain way; wherever it does not, `holds` is the
    /// interpreter's answer or error. The counts are asserted so that the corpus reaches both
    /// sides: answers of both values, questions given up, expressions with no plan.
    #[test]
    fn sc_pol_01_a_plan_answers_as_the_interpreter_does() {
        let mut state = 0x5eed_u64;
        let mut next = move |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % n as u64) as usize
        };
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
        let (mut answered, mut yes, mut gave_up, mut unplanned) = (0, 0, 0, 0);
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
        let spelled = (0..3_000).map(|round| spell(&mut next, Kind::Bool, 1 + round % 4, None));
        for when in written.map(String::from).into_iter().chain(spelled) {
            let Ok(c) = Condition::compile(&when) else {
                assert!(!written.contains(&when.as_str()), "{when}");
                continue;
            };
            let compiled = c.compiled().unwrap();
            let Some(plan) = &compiled.plan else {
                assert!(!written.contains(&when.as_str()), "{when}");
                unplanned += 1;
                continue;
            };
            for call in &situations {
                let bound = Bound::new(call);
                let interpreted = evaluate(&compiled.expr, &bound.view(&compiled.reads));
                match (c.holds(&bound), &interpreted) {
                    // An error that prints a map prints it in its hash order, run by run.
                    (Err(a), Err(b)) if a.contains("Map(") && b.contains("Map(") => {}
                    (held, _) => assert_eq!(held, interpreted, "{when} over {:?}", call.args),
                }
                match plan.holds(call) {
                    Some(answer) => {
                        answered += 1;
                        yes += usize::from(answer);
                        assert_eq!(interpreted, Ok(answer), "{when} over {:?}", call.args);
                        let plainly = holds_bound_plainly(&c, call);
                        assert_eq!(plainly, Ok(answer), "{when} over {:?}", call.args);
                    }
                    None => gave_up += 1,
                }
            }
        }
        assert!(
            answered > 5_000 && yes > 1_000 && answered - yes > 1_000,
            "{answered} {yes}"
        );
        assert!(gave_up > 5_000 && unplanned > 50, "{gave_up} {unplanned}");
    }

    /// The ten conditions of the gate's benchmark, and the forms the README shows, all get a
    /// plan; and where the plan gives up, the interpreter's error is the one reported.
    #[test]
    fn sc_pol_01_realistic_conditions_are_planned() {
        let ten = include_str!("../../../../tests/bench/ten-conditions.txt");
        for when in ten.lines().filter(|l| !l.trim().is_empty()) {
            let c = Condition::compile(when).unwrap();
            assert!(c.compiled().unwrap().plan.is_some(), "{when}");
        }
        for when in [
            "args.currency in ['EUR', 'USD']",
            "!(args.to.endsWith('@acme.example'))",
        ] {
            assert!(
                Plan::of(&Condition::compile(when).unwrap().compiled().unwrap().expr).is_some()
            );
        }
        let args = json!({"amount": 1.5, "to": 1});
        let c = Condition::compile("args.amount > 1").unwrap();
        let bound = Bound::new(&facts(&args));
        assert_eq!(
            c.compiled()
                .unwrap()
                .plan
                .as_ref()
                .unwrap()
                .holds(&facts(&args)),
            None
        );
        assert_eq!(c.holds(&bound), Ok(true));
        let c = Condition::compile("args.to.endsWith('x')").unwrap();
        let error = c.holds_interpreted(&bound);
        assert!(error.is_err());
        assert_eq!(c.holds(&bound), error);
    }
}
