//! Item encoding: `From`/`TryFrom` between the records and DynamoDB item maps live here only.
//!
//! An action is two items (see `docs/dynamodb.md`): the **call item**, written once at submission
//! (the call, its window and the approval context: everything no transition changes, with the
//! large values), and the **state item**, the one every transition updates (state, version, the
//! audit events, ticket terms, lease, outcome). Attribute names are short because every
//! transition pays for every byte of the state item. Values a transition derives (the actor,
//! `updated_at`, `sealed_at` and chain head equal the last event's) are stored only when they
//! differ, and fields this adapter does not know yet are kept in `x` rather than dropped.
//!
//! Over 500 lines on purpose: each record's encoding sits beside its decoding, so a changed
//! attribute is changed both ways in one reading (the round-trip tests are in `item_tests.rs`).

use super::asked::{self, Asked, Own};
use super::keys::{call_sk, epoch_seconds, nanos, state_sk, sweep_pk, sweep_shard, tenant_pk};
use crate::domain::{
    actor::Channel, Action, Actor, ActorKind, Decision, Event, RunRef, State, Window,
};
use crate::store::{StoreError, StoreResult};
use aws_sdk_dynamodb::{primitives::Blob, types::AttributeValue};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

pub(super) type Item = HashMap<String, AttributeValue>;

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn malformed(what: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(format!("stored item: {what}"))
}

pub(super) fn get_s<'a>(item: &'a Item, name: &str) -> StoreResult<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(malformed(format!("{name} is missing or not a string"))),
    }
}

fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> StoreResult<T> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| malformed(format!("{name}: {v}"))),
        _ => Err(malformed(format!("{name} is missing or not a number"))),
    }
}

fn get_json(item: &Item, name: &str) -> StoreResult<Option<Value>> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::S(v)) => serde_json::from_str(v)
            .map(Some)
            .map_err(|e| malformed(format!("{name}: {e}"))),
        Some(_) => Err(malformed(format!("{name} is not a string"))),
    }
}

pub(super) fn get_instant(item: &Item, name: &str) -> StoreResult<Timestamp> {
    let ns: i128 = get_n(item, name)?;
    Timestamp::from_nanosecond(ns).map_err(|e| malformed(format!("{name}: {e}")))
}

fn opt_instant(item: &Item, name: &str) -> StoreResult<Option<Timestamp>> {
    item.contains_key(name)
        .then(|| get_instant(item, name))
        .transpose()
}

fn to_json(v: &impl Serialize) -> Value {
    serde_json::to_value(v).expect("a record serializes")
}

pub(super) fn json_text(v: &impl Serialize) -> AttributeValue {
    s(serde_json::to_string(v).expect("a record serializes"))
}

// ---------- compact values ----------

fn state_code(state: State) -> &'static str {
    match state {
        State::PendingApproval => "p",
        State::Approved => "a",
        State::Executing => "e",
        State::Succeeded => "s",
        State::Failed => "f",
        State::Cancelled => "c",
        State::Denied => "d",
    }
}

pub(super) fn state_value(state: State) -> AttributeValue {
    s(state_code(state))
}

fn state_of(code: &str) -> StoreResult<State> {
    State::ALL
        .into_iter()
        .find(|st| state_code(*st) == code)
        .ok_or_else(|| malformed(format!("state code {code}")))
}

/// `s`, `a:<id>`, `u:<id>` (an id may follow any kind); a channel follows the kind:
/// `u@slack:<id>`.
fn actor_code(actor: &Actor) -> String {
    let kind = match actor.kind {
        ActorKind::Agent => "a",
        ActorKind::User => "u",
        ActorKind::System => "s",
    };
    let kind = match actor.channel {
        Some(channel) => format!("{kind}@{}", channel.as_str()),
        None => kind.to_owned(),
    };
    match &actor.id {
        Some(id) => format!("{kind}:{id}"),
        None => kind,
    }
}

fn actor_of(code: &str) -> StoreResult<Actor> {
    let (kind, id) = match code.split_once(':') {
        Some((kind, id)) => (kind, Some(id.to_owned())),
        None => (code, None),
    };
    let (kind, channel) = match kind.split_once('@') {
        Some((kind, channel)) => (
            kind,
            Some(Channel::parse(channel).ok_or_else(|| malformed(format!("actor {code}")))?),
        ),
        None => (kind, None),
    };
    let kind = match kind {
        "a" => ActorKind::Agent,
        "u" => ActorKind::User,
        "s" => ActorKind::System,
        _ => return Err(malformed(format!("actor {code}"))),
    };
    Ok(Actor {
        kind,
        id,
        person: None,
        channel,
    })
}

/// The actor coded in `code`, with the person a token named in `person` (JSON, SC-ID-07).
fn actor_in(item: &Item, code: &str, person: &str) -> StoreResult<Actor> {
    let person = get_json(item, person)?
        .map(|p| serde_json::from_value(p).map_err(|e| malformed(format!("person: {e}"))))
        .transpose()?;
    Ok(Actor {
        person,
        ..actor_of(get_s(item, code)?)?
    })
}

/// A sha256 in hex as its 32 bytes (half the size); anything else as text.
fn hash_value(hex_text: &str) -> AttributeValue {
    let is_lower_hex = hex_text.len() == 64
        && hex_text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    match hex::decode(hex_text) {
        Ok(bytes) if is_lower_hex => AttributeValue::B(Blob::new(bytes)),
        _ => s(hex_text),
    }
}

fn hash_of(v: &AttributeValue) -> StoreResult<String> {
    match v {
        AttributeValue::B(b) => Ok(hex::encode(b.as_ref())),
        AttributeValue::S(t) => Ok(t.clone()),
        _ => Err(malformed("hash is neither bytes nor text")),
    }
}

/// `sha256:<hex>` digests as their 32 bytes.
fn digest_value(digest: &str) -> AttributeValue {
    match digest.strip_prefix("sha256:").map(hash_value) {
        Some(AttributeValue::B(b)) => AttributeValue::B(b),
        _ => s(digest),
    }
}

fn digest_of(v: &AttributeValue) -> StoreResult<String> {
    match v {
        AttributeValue::B(b) => Ok(format!("sha256:{}", hex::encode(b.as_ref()))),
        AttributeValue::S(t) => Ok(t.clone()),
        _ => Err(malformed("digest is neither bytes nor text")),
    }
}

/// The members of `value` (an object) other than `known`: kept, not dropped.
fn leftovers(value: Value, known: &[&str]) -> Option<Map<String, Value>> {
    let Value::Object(mut map) = value else {
        return None;
    };
    for k in known {
        map.remove(*k);
    }
    (!map.is_empty()).then_some(map)
}

// ---------- the call item: written once ----------

/// The call item's body (`c`).
#[derive(Serialize, Deserialize)]
struct Call {
    #[serde(rename = "g")]
    agent_id: String,
    #[serde(rename = "t")]
    tool: String,
    #[serde(rename = "a")]
    args: Value,
    #[serde(rename = "d")]
    args_digest: String,
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    action_kind: Option<String>,
    #[serde(rename = "r", default, skip_serializing_if = "Option::is_none")]
    run: Option<RunRef>,
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    schedule: Option<Window>,
    #[serde(rename = "D")]
    decision: Decision,
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    asked: Option<Asked>,
    #[serde(rename = "c")]
    created_at: Timestamp,
}

/// The approval's members the call item holds; the rest (approver, decision time) change
/// with the approval and live in the state item.
const ASKED_FIELDS: [&str; 3] = ["context", "context_digest", "expires_at"];

pub(super) fn call_item(a: &Action) -> Item {
    let c = a.call();
    let asked = a.approval().map(|ap| {
        let own = Own {
            args: c.args(),
            tool: c.tool(),
            agent_id: c.agent_id(),
            action_kind: c.action_kind(),
            schedule: c.schedule_ref(),
        };
        asked::elide(ap.context.clone(), &ap.context_digest, ap.expires_at, &own)
    });
    let call = Call {
        agent_id: c.agent_id().to_owned(),
        tool: c.tool().to_owned(),
        args: c.args().clone(),
        args_digest: c.args_digest().to_owned(),
        action_kind: c.action_kind().map(str::to_owned),
        run: c.run().cloned(),
        schedule: c.schedule(),
        decision: a.decision(),
        asked,
        created_at: a.created_at(),
    };
    Item::from([
        ("pk".into(), s(tenant_pk(a.tenant()))),
        ("sk".into(), s(call_sk(a.id()))),
        ("c".into(), json_text(&call)),
    ])
}

/// A digest of the call item's body, kept in the state item (`cd`): a commit whose record
/// changed the call (no transition does) is noticed and the call item rewritten, so the store
/// keeps what it was given.
pub(super) fn call_digest(a: &Action) -> AttributeValue {
    use sha2::{Digest, Sha256};
    let AttributeValue::S(body) = &call_item(a)["c"] else {
        unreachable!("the call body is text")
    };
    AttributeValue::B(Blob::new(Sha256::digest(body.as_bytes()).to_vec()))
}

// ---------- the state item: every transition ----------

/// The sweep index entry of an action (sparse: none once sealed): the shard, the sort key
/// `sa` and the instant `at` (a projected attribute) the sweep filters on.
///
/// `at` is `Action::sweep_at` — the approval's expiry, the ticket's due time — with two
/// exceptions, both so that the common lifecycle moves no index entry after submission:
/// - while executing, `at` stays at the due time instead of moving to the lease's end, so a
///   claim writes no index entry;
/// - while a scheduled action waits for its approval, `at` is already the window's start
///   when that comes before the approval's expiry: that is the due time its ticket will have
///   when approved in time, so the approve writes no index entry either.
///
/// The sweep may thus meet an action before its `sweep_at` (a lease still held, an approval
/// not yet lapsed); it leaves it and defers it (`Store::defer_sweep`), which only happens when
/// a sweep runs during a tool call or while an approval is late. `sa` is a lower bound of every
/// `at` the action will have — the window's `not_before`, else the ticket's due time — so
/// transitions leave the key alone and move only `at`: one index write, not a delete and a put.
pub(super) fn sweep_entry(a: &Action) -> Option<(String, Timestamp, Timestamp)> {
    let exact = a.sweep_at()?;
    let due = a.ticket().map(|t| t.due_at());
    let at = match (a.state(), due, a.call().schedule()) {
        (State::Executing, Some(due), _) => due.min(exact),
        (State::PendingApproval, _, Some(w)) => w.not_before.min(exact),
        _ => exact,
    };
    let bound = [Some(at), a.call().schedule().map(|w| w.not_before), due]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(at);
    Some((sweep_pk(sweep_shard(a.id())), bound, at))
}

/// Top-level members of the action's record that this encoding places; any other is kept in
/// the state item's `x`.
const ACTION_FIELDS: [&str; 21] = [
    "id",
    "tenant",
    "agent_id",
    "tool",
    "args",
    "args_digest",
    "action_kind",
    "run",
    "schedule",
    "decision",
    "state",
    "approval",
    "outcome",
    "actor",
    "version",
    "created_at",
    "updated_at",
    "sealed_at",
    "ticket",
    "lease",
    "chain_head",
];

const EVENT_FIELDS: [&str; 8] = [
    "seq",
    "at",
    "actor",
    "from",
    "to",
    "reason",
    "context_digest",
    "hash",
];

/// One audit event inside the state item's list `e`, stored at `position` (its seq, unless
/// `q` says otherwise: the store keeps what it is given; verification judges it).
pub(super) fn event_value(e: &Event, position: u64) -> AttributeValue {
    let mut m = HashMap::from([
        ("t".to_owned(), nanos(e.at)),
        ("a".to_owned(), s(actor_code(&e.actor))),
        ("o".to_owned(), state_value(e.to)),
        ("h".to_owned(), hash_value(&e.hash)),
    ]);
    if let Some(from) = e.from {
        m.insert("f".into(), state_value(from));
    }
    if let Some(reason) = &e.reason {
        m.insert("r".into(), s(reason));
    }
    if let Some(digest) = &e.context_digest {
        m.insert("d".into(), digest_value(digest));
    }
    if let Some(person) = &e.actor.person {
        m.insert("p".into(), json_text(person));
    }
    if e.seq != position {
        m.insert("q".into(), n(e.seq));
    }
    if let Some(rest) = leftovers(to_json(e), &EVENT_FIELDS) {
        m.insert("x".into(), json_text(&rest));
    }
    AttributeValue::M(m)
}

fn event_of(position: u64, v: &AttributeValue) -> StoreResult<Event> {
    let AttributeValue::M(m) = v else {
        return Err(malformed("event is not a map"));
    };
    let mut obj = leftover_map(m.get("x"))?;
    let seq = match m.get("q") {
        Some(_) => get_n(m, "q")?,
        None => position,
    };
    obj.insert("seq".into(), json!(seq));
    obj.insert("at".into(), to_json(&get_instant(m, "t")?));
    obj.insert("actor".into(), to_json(&actor_in(m, "a", "p")?));
    let from = m
        .get("f")
        .map(|_| get_s(m, "f").and_then(state_of))
        .transpose()?;
    obj.insert("from".into(), to_json(&from));
    obj.insert("to".into(), to_json(&state_of(get_s(m, "o")?)?));
    let reason = m.get("r").map(|_| get_s(m, "r")).transpose()?;
    obj.insert("reason".into(), to_json(&reason));
    if let Some(d) = m.get("d") {
        obj.insert("context_digest".into(), json!(digest_of(d)?));
    }
    let hash = m.get("h").ok_or_else(|| malformed("event without hash"))?;
    obj.insert("hash".into(), json!(hash_of(hash)?));
    serde_json::from_value(Value::Object(obj)).map_err(|e| malformed(format!("event: {e}")))
}

fn leftover_map(v: Option<&AttributeValue>) -> StoreResult<Map<String, Value>> {
    match v {
        None => Ok(Map::new()),
        Some(AttributeValue::S(text)) => match serde_json::from_str(text) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(malformed("x is not a JSON object")),
        },
        Some(_) => Err(malformed("x is not a string")),
    }
}

/// The state item's attributes after a transition to `a` whose audit event is `last`: what
/// to set, and which optional attributes to remove. (Keys, `e` and `v` handled by the caller.)
pub(super) struct StateAttributes {
    pub set: Vec<(&'static str, AttributeValue)>,
    pub remove: Vec<&'static str>,
}

pub(super) fn state_attributes(
    a: &Action,
    last: &Event,
    expires: Option<Timestamp>,
) -> StateAttributes {
    let mut set = vec![
        ("s", state_value(a.state())),
        ("v", n(a.version())),
        ("cd", call_digest(a)),
    ];
    let mut remove = Vec::new();
    let mut optional = |name: &'static str, value: Option<AttributeValue>| match value {
        Some(v) => set.push((name, v)),
        None => remove.push(name),
    };
    optional("t", a.ticket().map(|t| ticket_value(a, t)));
    optional("l", a.lease().map(json_text));
    optional(
        "ap",
        a.approval()
            .as_ref()
            .and_then(|ap| leftovers(to_json(ap), &ASKED_FIELDS))
            .map(|m| json_text(&m)),
    );
    optional("o", a.outcome().map(json_text));
    // Derived from the last event unless they differ.
    let own_actor = (*a.actor() != last.actor).then(|| a.actor());
    optional("ac", own_actor.map(|actor| s(actor_code(actor))));
    optional(
        "acp",
        own_actor
            .and_then(|actor| actor.person.as_ref())
            .map(json_text),
    );
    optional(
        "up",
        (a.updated_at() != last.at).then(|| nanos(a.updated_at())),
    );
    let sealed_default = a.state().is_sealed().then_some(last.at);
    optional(
        "sl",
        (a.sealed_at() != sealed_default)
            .then_some(a.sealed_at())
            .flatten()
            .map(nanos),
    );
    optional(
        "hd",
        (a.chain_head() != last.hash).then(|| s(a.chain_head())),
    );
    optional(
        "x",
        leftovers(to_json(a), &ACTION_FIELDS).map(|m| json_text(&m)),
    );
    let entry = sweep_entry(a);
    optional("sp", entry.as_ref().map(|(shard, _, _)| s(shard)));
    optional("sa", entry.as_ref().map(|(_, bound, _)| nanos(*bound)));
    optional("at", entry.as_ref().map(|(_, _, at)| nanos(*at)));
    optional("ttl", expires.map(epoch_seconds));
    // The sparse `waiting` index (waiting.rs): only actions that wait for a person.
    let waiting = a.state() == State::PendingApproval;
    optional("wp", waiting.then(|| s(tenant_pk(a.tenant()))));
    optional("wg", waiting.then(|| s(a.call().agent_id())));
    StateAttributes { set, remove }
}

/// The state item of a new action (version 1, its first event).
pub(super) fn state_item(a: &Action, first: &Event, expires: Option<Timestamp>) -> Item {
    let mut item = Item::from([
        ("pk".into(), s(tenant_pk(a.tenant()))),
        ("sk".into(), s(state_sk(a.id()))),
        ("e".into(), AttributeValue::L(vec![event_value(first, 1)])),
    ]);
    let attributes = state_attributes(a, first, expires);
    item.extend(attributes.set.into_iter().map(|(k, v)| (k.to_owned(), v)));
    item
}

/// The ticket's own terms; the rest of the closed ticket (action, tenant, tool, args, call
/// id) is the action's and is rebuilt from it on load — and checked there again.
fn ticket_value(a: &Action, t: &crate::domain::Ticket) -> AttributeValue {
    let mut m = HashMap::from([
        ("c".to_owned(), s(t.correlation_id())),
        ("f".to_owned(), digest_value(t.catalog_fingerprint())),
        ("d".to_owned(), nanos(t.due_at())),
        ("x".to_owned(), nanos(t.deadline())),
    ]);
    if t.call_id() != a.id() {
        m.insert("i".into(), s(t.call_id()));
    }
    let reason = to_json(&t.reason());
    if reason != json!("scheduled_action") {
        m.insert("r".into(), json_text(&reason));
    }
    AttributeValue::M(m)
}

fn ticket_json(id: &str, tenant: &str, call: &Call, v: &AttributeValue) -> StoreResult<Value> {
    let AttributeValue::M(m) = v else {
        return Err(malformed("ticket is not a map"));
    };
    let reason = match m.get("r") {
        Some(_) => get_json(m, "r")?.unwrap_or(Value::Null),
        None => json!("scheduled_action"),
    };
    let call_id = match m.get("i") {
        Some(_) => get_s(m, "i")?.to_owned(),
        None => id.to_owned(),
    };
    Ok(json!({
        "correlation_id": get_s(m, "c")?,
        "action_id": id,
        "tenant": tenant,
        "catalog_fingerprint": digest_of(m.get("f").ok_or_else(|| malformed("ticket without fingerprint"))?)?,
        "due_at": get_instant(m, "d")?,
        "deadline": get_instant(m, "x")?,
        "target": {"reason": reason, "call_id": call_id, "tool": call.tool, "args": call.args},
    }))
}

/// The audit events of a state item, in order.
pub(super) fn events_of(state: &Item) -> StoreResult<Vec<Event>> {
    let Some(AttributeValue::L(list)) = state.get("e") else {
        return Err(malformed("state item without events"));
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| event_of(i as u64 + 1, v))
        .collect()
}

/// The action from its two items. The record is checked by `Action::from_stored` (fails
/// closed); whether its events chain to it is `audit::verify`'s to judge.
pub(super) fn action_of(tenant: &str, id: &str, call: &Item, state: &Item) -> StoreResult<Action> {
    let call: Call = serde_json::from_str(get_s(call, "c")?)
        .map_err(|e| malformed(format!("call item: {e}")))?;
    let events = events_of(state)?;
    let last = events.last().ok_or_else(|| malformed("no events"))?;
    let version: u64 = get_n(state, "v")?;
    let st = state_of(get_s(state, "s")?)?;
    let mut record = leftover_map(state.get("x"))?;
    let approval = match &call.asked {
        None => Value::Null,
        Some(asked) => {
            let own = Own {
                args: &call.args,
                tool: &call.tool,
                agent_id: &call.agent_id,
                action_kind: call.action_kind.as_deref(),
                schedule: call.schedule.as_ref(),
            };
            let context = asked::restore(asked, &own)?;
            let mut ap = get_json(state, "ap")?.unwrap_or_else(|| json!({}));
            let ap_map = ap
                .as_object_mut()
                .ok_or_else(|| malformed("ap is not an object"))?;
            ap_map.insert("context".into(), context);
            ap_map.insert("context_digest".into(), json!(asked.context_digest));
            ap_map.insert("expires_at".into(), to_json(&asked.expires_at));
            ap
        }
    };
    let actor = match state.get("ac") {
        Some(_) => actor_in(state, "ac", "acp")?,
        None => last.actor.clone(),
    };
    let sealed_at = match opt_instant(state, "sl")? {
        Some(t) => Some(t),
        None => st.is_sealed().then_some(last.at),
    };
    let chain_head = match state.get("hd") {
        Some(_) => get_s(state, "hd")?.to_owned(),
        None => last.hash.clone(),
    };
    let ticket = match state.get("t") {
        Some(t) => ticket_json(id, tenant, &call, t)?,
        None => Value::Null,
    };
    let fields = [
        ("id", json!(id)),
        ("tenant", json!(tenant)),
        ("agent_id", json!(call.agent_id)),
        ("tool", json!(call.tool)),
        ("args", call.args.clone()),
        ("args_digest", json!(call.args_digest)),
        ("action_kind", to_json(&call.action_kind)),
        ("run", to_json(&call.run)),
        ("schedule", to_json(&call.schedule)),
        ("decision", to_json(&call.decision)),
        ("state", to_json(&st)),
        ("approval", approval),
        ("outcome", get_json(state, "o")?.unwrap_or(Value::Null)),
        ("actor", to_json(&actor)),
        ("version", json!(version)),
        ("created_at", to_json(&call.created_at)),
        (
            "updated_at",
            to_json(&opt_instant(state, "up")?.unwrap_or(last.at)),
        ),
        ("sealed_at", to_json(&sealed_at)),
        ("ticket", ticket),
        ("lease", get_json(state, "l")?.unwrap_or(Value::Null)),
        ("chain_head", json!(chain_head)),
    ];
    record.extend(fields.into_iter().map(|(k, v)| (k.to_owned(), v)));
    let bytes = serde_json::to_vec(&record).expect("JSON serializes");
    Action::from_stored(&bytes).map_err(|e| StoreError::Malformed(e.to_string()))
}

#[cfg(test)]
#[path = "item_tests.rs"]
mod tests;
