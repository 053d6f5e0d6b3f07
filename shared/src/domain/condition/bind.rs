//! Binding a call's facts as CEL variables for the conditions of one gate — only as far as
//! they read them: converting `args` is most of what a condition costs per submit.

use super::{env, CallFacts};
use cel::common::ast::Expr;
use cel::objects::{Key, Map};
use cel::{Context, IdedExpr, Value as Cel};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A call's facts as CEL variables, converted once per gate and only as far as the conditions
/// it asks read them: a variable on its first use, of `args` only the top-level fields named
/// (`args.amount`, `has(args.to)`) unless a condition reads `args` whole (`size(args)`,
/// `args[k]`). What an expression sees of a variable it reads is the same either way.
pub struct Bound<'a> {
    call: CallFacts<'a>,
    pub(super) context: Context<'static, 'static>,
    done: Reads,
}

impl<'a> Bound<'a> {
    pub fn new(call: &CallFacts<'a>) -> Bound<'a> {
        Bound {
            call: *call,
            context: Context::with_env(Arc::clone(env())),
            done: Reads::default(),
        }
    }

    /// Add what `reads` names and is not bound yet.
    pub(super) fn bind(&mut self, reads: &Reads) {
        let call = self.call;
        for (bit, name) in NAMES {
            if reads.names & bit == 0 || self.done.names & bit != 0 {
                continue;
            }
            let value = match bit {
                TOOL => Cel::from(call.tool.to_owned()),
                AGENT_ID => Cel::from(call.agent_id.to_owned()),
                ACTION_KIND => call
                    .action_kind
                    .map_or(Cel::Null, |k| Cel::from(k.to_owned())),
                SCHEDULE => call.schedule.map_or(Cel::Null, |w| {
                    let map: HashMap<Key, Cel> = HashMap::from([
                        (Key::from("not_before"), Cel::Int(w.not_before.as_second())),
                        (Key::from("not_after"), Cel::Int(w.not_after.as_second())),
                    ]);
                    Cel::Map(Map::from(map))
                }),
                _ => Cel::Int(call.now.as_second()),
            };
            self.context.add_variable_from_value(name, value);
            self.done.names |= bit;
        }
        let args = match (&self.done.args, &reads.args) {
            (_, ArgsRead::Nothing) | (ArgsRead::Whole, _) => return,
            (ArgsRead::Fields(have), ArgsRead::Fields(want))
                if want.iter().all(|f| have.contains(f)) =>
            {
                return
            }
            (ArgsRead::Fields(have), ArgsRead::Fields(want)) => {
                let mut union = have.clone();
                union.extend(want.iter().cloned());
                ArgsRead::Fields(union)
            }
            (_, want) => want.clone(),
        };
        let value = match (&args, call.args) {
            (ArgsRead::Fields(fields), Value::Object(all)) => {
                let map: HashMap<Key, Cel> = fields
                    .iter()
                    .filter_map(|f| all.get(f).map(|v| (Key::from(f.clone()), cel_of(v))))
                    .collect();
                Cel::Map(Map::from(map))
            }
            // Not an object (intake refuses one; the fuzzer does not): as it is, whole.
            (_, whole) => cel_of(whole),
        };
        self.context.add_variable_from_value("args", value);
        self.done.args = args;
    }
}

pub(super) const TOOL: u8 = 1;
pub(super) const AGENT_ID: u8 = 2;
pub(super) const ACTION_KIND: u8 = 4;
pub(super) const SCHEDULE: u8 = 8;
pub(super) const NOW: u8 = 16;
/// The variables besides `args`, each with its bit in [`Reads::names`].
const NAMES: [(u8, &str); 5] = [
    (TOOL, "tool"),
    (AGENT_ID, "agent_id"),
    (ACTION_KIND, "action_kind"),
    (SCHEDULE, "schedule"),
    (NOW, "now"),
];

/// What an expression reads of the call, found once when it compiles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Reads {
    pub(super) names: u8,
    pub(super) args: ArgsRead,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum ArgsRead {
    #[default]
    Nothing,
    /// Only these top-level fields, each through a select (`args.f`, `has(args.f)`).
    Fields(std::collections::BTreeSet<String>),
    Whole,
}

impl Reads {
    /// Every identifier the tree names (a comprehension's own variable too, which can only
    /// make it bind more than it needs, never less).
    pub(super) fn walk(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Select(s) => match &s.operand.expr {
                Expr::Ident(name) if name.trim_start_matches('.') == "args" => {
                    match &mut self.args {
                        ArgsRead::Whole => {}
                        ArgsRead::Fields(fields) => {
                            fields.insert(s.field.clone());
                        }
                        ArgsRead::Nothing => {
                            self.args = ArgsRead::Fields([s.field.clone()].into());
                        }
                    }
                }
                _ => self.walk(&s.operand),
            },
            Expr::Ident(name) => match name.trim_start_matches('.') {
                "args" => self.args = ArgsRead::Whole,
                name => {
                    for (bit, known) in NAMES {
                        if name == known {
                            self.names |= bit;
                        }
                    }
                }
            },
            Expr::Call(call) => {
                call.target.iter().for_each(|t| self.walk(t));
                call.args.iter().for_each(|a| self.walk(a));
            }
            Expr::Comprehension(c) => {
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    self.walk(part);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(|x| self.walk(x)),
            Expr::Map(map) => map.entries.iter().for_each(|entry| match &entry.expr {
                cel::common::ast::EntryExpr::MapEntry(m) => {
                    self.walk(&m.key);
                    self.walk(&m.value);
                }
                cel::common::ast::EntryExpr::StructField(f) => self.walk(&f.value),
            }),
            Expr::Struct(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

/// JSON as CEL: integers that fit are `int` (so `args.amount > 1000` compares as written),
/// larger ones `uint`, the rest `double`.
fn cel_of(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::from(s.clone()),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(cel_of).collect())),
        Value::Object(fields) => {
            let map: HashMap<Key, Cel> = fields
                .iter()
                .map(|(k, v)| (Key::from(k.clone()), cel_of(v)))
                .collect();
            Cel::Map(Map::from(map))
        }
    }
}
