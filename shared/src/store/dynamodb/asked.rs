//! The approval context as the call item keeps it (`p`): without the members that repeat the
//! call's own values, which are put back on load.
//!
//! Why: the call item is written once, at 1 WRU per KB. With 300-byte arguments the context's
//! copies of the tool, agent, kind and window ends were what took the item past 1 KB (1,033
//! bytes: 2 WRU per submission instead of 1). The context's digest is over its canonical form,
//! so member order does not matter, and a member is elided only when it is exactly the call's.

use crate::domain::Window;
use crate::store::{StoreError, StoreResult};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// What the approver was shown, as stored.
#[derive(Serialize, Deserialize)]
pub(super) struct Asked {
    #[serde(rename = "x")]
    pub context: Value,
    #[serde(rename = "h")]
    pub context_digest: String,
    #[serde(rename = "e")]
    pub expires_at: Timestamp,
    /// The context's `args` were the call's (items written before `m` existed use only this).
    #[serde(rename = "a", default, skip_serializing_if = "std::ops::Not::not")]
    pub args_elided: bool,
    /// Which of [`MEMBERS`] were elided, one bit each.
    #[serde(rename = "m", default, skip_serializing_if = "is_zero")]
    pub elided: u8,
}

fn is_zero(bits: &u8) -> bool {
    *bits == 0
}

/// The call's own values the context may repeat: where in the context, and the call's value.
pub(super) struct Own<'a> {
    pub args: &'a Value,
    pub tool: &'a str,
    pub agent_id: &'a str,
    pub action_kind: Option<&'a str>,
    pub schedule: Option<&'a Window>,
}

/// The elidable members by bit: a path in the context (one or two levels deep).
const MEMBERS: [&[&str]; 5] = [
    &["tool"],
    &["agent_id"],
    &["action_kind"],
    &["schedule", "not_before"],
    &["schedule", "not_after"],
];

impl Own<'_> {
    /// The call's value at member `bit`, as the context would hold it; `None`: the call has none.
    fn value(&self, bit: usize) -> Option<Value> {
        match bit {
            0 => Some(json!(self.tool)),
            1 => Some(json!(self.agent_id)),
            2 => Some(json!(self.action_kind)),
            3 => self.schedule.map(|w| json!(w)["not_before"].take()),
            _ => self.schedule.map(|w| json!(w)["not_after"].take()),
        }
    }
}

fn parent<'v>(
    context: &'v mut Value,
    path: &[&str],
) -> Option<&'v mut serde_json::Map<String, Value>> {
    let mut at = context.as_object_mut()?;
    for name in &path[..path.len() - 1] {
        at = at.get_mut(*name)?.as_object_mut()?;
    }
    Some(at)
}

/// The context as stored: every member equal to the call's own taken out.
pub(super) fn elide(
    mut context: Value,
    context_digest: &str,
    expires_at: Timestamp,
    own: &Own,
) -> Asked {
    let args_elided = context.get("args") == Some(own.args);
    if args_elided {
        context.as_object_mut().map(|c| c.remove("args"));
    }
    let mut elided = 0u8;
    for (bit, path) in MEMBERS.iter().enumerate() {
        let (Some(value), Some(at)) = (own.value(bit), parent(&mut context, path)) else {
            continue;
        };
        let name = path[path.len() - 1];
        if at.get(name) == Some(&value) {
            at.remove(name);
            elided |= 1 << bit;
        }
    }
    Asked {
        context,
        context_digest: context_digest.to_owned(),
        expires_at,
        args_elided,
        elided,
    }
}

/// The context as shown: every elided member put back from the call.
pub(super) fn restore(asked: &Asked, own: &Own) -> StoreResult<Value> {
    let malformed = |what: &str| StoreError::Malformed(format!("approval context: {what}"));
    let mut context = asked.context.clone();
    if asked.args_elided {
        let c = context
            .as_object_mut()
            .ok_or_else(|| malformed("not an object"))?;
        c.insert("args".into(), own.args.clone());
    }
    for (bit, path) in MEMBERS.iter().enumerate() {
        if asked.elided & (1 << bit) == 0 {
            continue;
        }
        let value = own
            .value(bit)
            .ok_or_else(|| malformed("an elided member the call does not have"))?;
        let at = parent(&mut context, path)
            .ok_or_else(|| malformed("an elided member's parent is missing"))?;
        at.insert(path[path.len() - 1].to_owned(), value);
    }
    if asked.elided >> MEMBERS.len() != 0 {
        return Err(malformed("elided members this adapter does not know"));
    }
    Ok(context)
}
