//! A call's facts as CEL variables for the conditions of one gate, read where they lie: the
//! interpreter asks a [`VariableResolver`] for a name when an expression first uses it, and a
//! condition that selects fields of `args` (`args.amount`, `has(args.to)`) sees an `args` whose
//! fields are converted one by one as selected. Only a condition that reads `args` whole
//! (`size(args)`, `args[k]`) converts it all, once per gate. Converting the call was most of
//! what a condition cost per submit (BENCHMARKS.md, "Policy conditions").

use super::CallFacts;
use cel::common::traits::Indexer;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey as Key, CelNull, CelString, CelUInt,
    Type, MAP_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::ExecutionError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The facts of one gate's call, shared by its conditions: what one converts of `args` whole
/// is kept for the next.
pub struct Bound<'a> {
    call: CallFacts<'a>,
    whole_args: OnceLock<Box<dyn Val + 'a>>,
}

impl<'a> Bound<'a> {
    pub fn new(call: &CallFacts<'a>) -> Bound<'a> {
        Bound {
            call: *call,
            whole_args: OnceLock::new(),
        }
    }

    /// The variables as one expression that reads `args` as `reads` says sees them.
    pub(super) fn view<'b>(&'b self, reads: &'b Reads) -> View<'b, 'a> {
        View { bound: self, reads }
    }

    fn whole_args(&self) -> &(dyn Val + 'a) {
        self.whole_args
            .get_or_init(|| val_of(self.call.args))
            .as_ref()
    }
}

/// One expression's variables: the resolver the interpreter asks, name by name.
pub(super) struct View<'b, 'a> {
    bound: &'b Bound<'a>,
    reads: &'b Reads,
}

impl VariableResolver for View<'_, '_> {
    fn resolve<'r>(&'r self, variable: &str) -> Option<CowVal<'r, 'r>> {
        let variable = variable.trim_start_matches('.');
        if let Some((root, path)) = variable.split_once('.') {
            return self.selected(root, path);
        }
        let call = &self.bound.call;
        let string = |s: &'r str| CowVal::owned(CelString::from(s));
        Some(match variable {
            "tool" => string(call.tool),
            "agent_id" => string(call.agent_id),
            "action_kind" => call
                .action_kind
                .map_or_else(|| CowVal::owned(CelNull), string),
            "schedule" => match call.schedule {
                None => CowVal::owned(CelNull),
                Some(w) => {
                    let at = |name, t: jiff::Timestamp| {
                        let at: Box<dyn Val> = Box::new(CelInt::from(t.as_second()));
                        (Key::String(CelString::from(name)), at)
                    };
                    CowVal::owned(CelMap::from(HashMap::from([
                        at("not_before", w.not_before),
                        at("not_after", w.not_after),
                    ])))
                }
            },
            "now" => CowVal::owned(CelInt::from(call.now.as_second())),
            "args" => match (self.reads.whole_args, call.args) {
                (false, Value::Object(fields)) => CowVal::owned(Fields(fields)),
                // Read whole, or not an object (intake refuses one; the fuzzer does not).
                _ => CowVal::Borrowed(self.bound.whole_args()),
            },
            _ => return None,
        })
    }
}

impl<'r> View<'r, '_> {
    /// A chain of selects (`args.amount`, `args.a.b`, `schedule.not_before`) reaches the
    /// resolver first as one qualified name, the longest: CEL lets a variable of that name win.
    /// Answered here when every field is there, the interpreter skips looking the name up as a
    /// type, then the shorter names, then selecting field by field. Where a field is missing
    /// (or a value is not a map) nothing is answered, and the interpreter's own selects report
    /// what they would have. Only a name that ends at a variable's field is answered, so what
    /// an expression sees is what the whole variables would give (`sc_pol_01_a_gate_converts_…`).
    fn selected(&self, root: &str, path: &str) -> Option<CowVal<'r, 'r>> {
        let call = &self.bound.call;
        match root {
            "args" => {
                let mut value = call.args;
                for field in path.split('.') {
                    value = value.as_object()?.get(field)?;
                }
                Some(CowVal::Owned(val_of(value)))
            }
            "schedule" => {
                let window = call.schedule?;
                let at = match path {
                    "not_before" => window.not_before,
                    "not_after" => window.not_after,
                    _ => return None,
                };
                Some(CowVal::owned(CelInt::from(at.as_second())))
            }
            _ => None,
        }
    }
}

/// `args` for an expression that only selects its fields: a map whose values are converted as
/// they are selected. Nothing else can reach it ([`Reads`] sends any other use of `args` the
/// whole conversion), and what a select or `has` answers is what the whole map would.
#[derive(Debug, Clone, Copy)]
struct Fields<'a>(&'a serde_json::Map<String, Value>);

impl Val for Fields<'_> {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(*self)
    }
}

impl Indexer for Fields<'_> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let key = idx
            .downcast_ref::<CelString>()
            .ok_or_else(|| ExecutionError::UnexpectedType {
                got: idx.get_type().name().to_owned(),
                want: "string".into(),
            })?
            .inner();
        let value = self
            .0
            .get(key)
            .ok_or_else(|| ExecutionError::NoSuchKey(Arc::new(key.to_owned())))?;
        Ok(CowVal::Owned(val_of(value)))
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// How an expression reads `args`, found once when it compiles (the walk of `Shape`): only
/// through selects of its fields (`args.f`, `has(args.f)`), or whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Reads {
    pub(super) whole_args: bool,
}

/// Every variable a condition may name (the resolver answers nothing else).
pub(super) const VARIABLES: [&str; 6] =
    ["tool", "args", "agent_id", "action_kind", "schedule", "now"];

/// JSON as CEL, borrowing its strings: integers that fit are `int` (so `args.amount > 1000`
/// compares as written), larger ones `uint`, the rest `double`.
fn val_of(v: &Value) -> Box<dyn Val + '_> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            Box::new(CelList::from(items.iter().map(val_of).collect::<Vec<_>>()))
        }
        Value::Object(fields) => Box::new(CelMap::from(
            fields
                .iter()
                .map(|(k, v)| (Key::String(CelString::from(k.as_str())), val_of(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}
