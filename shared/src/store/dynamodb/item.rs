//! Item encoding: `From`/`TryFrom` between the records and DynamoDB item maps live here only.

use super::keys::{
    action_pk, epoch_seconds, event_sk, idempotency_pk, idempotency_sk, instant, parse_action_pk,
    stop_sk, stops_pk, sweep_pk, sweep_shard, tenant_pk, ACTION_SK,
};
use crate::domain::{Action, Event, Transition};
use crate::store::{IdempotencyRecord, Quarantined, Stop, StoreError, StoreResult, Unreadable};
use aws_sdk_dynamodb::types::AttributeValue;
use jiff::Timestamp;
use std::collections::HashMap;

pub(super) type Item = HashMap<String, AttributeValue>;

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(super) fn get_s<'a>(item: &'a Item, name: &str) -> StoreResult<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(StoreError::Malformed(format!(
            "item attribute {name} is missing or not a string"
        ))),
    }
}

/// The action item; `expires` is the TTL under a retention, once sealed.
pub(super) fn action_item(a: &Action, expires: Option<Timestamp>) -> Item {
    let body = String::from_utf8(a.to_stored()).expect("JSON is UTF-8");
    let mut item = Item::from([
        ("pk".into(), s(action_pk(&a.tenant, &a.id))),
        ("sk".into(), s(ACTION_SK)),
        ("tenant".into(), s(&a.tenant)),
        ("action_id".into(), s(&a.id)),
        ("agent_id".into(), s(&a.agent_id)),
        ("state".into(), s(a.state.as_str())),
        ("version".into(), n(a.version)),
        ("body".into(), s(body)),
        ("tenant_pk".into(), s(tenant_pk(&a.tenant))),
    ]);
    if let Some(at) = a.sweep_at() {
        item.insert("sweep_pk".into(), s(sweep_pk(sweep_shard(&a.id))));
        item.insert("sweep_at".into(), s(instant(at)));
    }
    if let Some(expires) = expires {
        item.insert("expires_at".into(), epoch_seconds(expires));
    }
    item
}

pub(super) fn event_item(t: &Transition, expires: Option<Timestamp>) -> Item {
    let a = &t.action;
    let body = serde_json::to_string(&t.event).expect("an event serializes");
    let mut item = Item::from([
        ("pk".into(), s(action_pk(&a.tenant, &a.id))),
        ("sk".into(), s(event_sk(t.event.seq))),
        ("tenant".into(), s(&a.tenant)),
        ("action_id".into(), s(&a.id)),
        ("seq".into(), n(t.event.seq)),
        ("body".into(), s(body)),
    ]);
    if let Some(expires) = expires {
        item.insert("expires_at".into(), epoch_seconds(expires));
    }
    item
}

/// Load an action item; the body is the record, checked by `Action::from_stored` (fails
/// closed), and must agree with the item's keys.
pub(super) fn action_of(item: &Item) -> StoreResult<Action> {
    let action = Action::from_stored(get_s(item, "body")?.as_bytes())
        .map_err(|e| StoreError::Malformed(e.to_string()))?;
    if get_s(item, "pk")? != action_pk(&action.tenant, &action.id) {
        return Err(StoreError::Malformed(
            "action body does not match its key".into(),
        ));
    }
    Ok(action)
}

/// An action item that does not load, named by its key (the body may be anything).
pub(super) fn unreadable(tenant: &str, item: &Item, e: StoreError) -> Unreadable {
    let action_id = get_s(item, "pk")
        .ok()
        .and_then(parse_action_pk)
        .map(|(_, id)| id)
        .or_else(|| get_s(item, "action_id").ok().map(str::to_owned))
        .unwrap_or_default();
    Unreadable {
        tenant: tenant.to_owned(),
        action_id,
        reason: e.to_string(),
    }
}

impl TryFrom<&Item> for Quarantined {
    type Error = StoreError;

    fn try_from(item: &Item) -> StoreResult<Self> {
        Ok(Quarantined {
            action_id: get_s(item, "sk")?.to_owned(),
            reason: get_s(item, "reason")?.to_owned(),
            quarantined_at: get_s(item, "quarantined_at")?
                .parse()
                .map_err(|e| StoreError::Malformed(format!("quarantined_at: {e}")))?,
        })
    }
}

pub(super) fn event_of(item: &Item) -> StoreResult<Event> {
    serde_json::from_str(get_s(item, "body")?).map_err(|e| StoreError::Malformed(e.to_string()))
}

impl From<&IdempotencyRecord> for Item {
    fn from(r: &IdempotencyRecord) -> Item {
        Item::from([
            ("pk".into(), s(idempotency_pk(&r.tenant, &r.agent_id))),
            ("sk".into(), s(idempotency_sk(&r.key))),
            ("tenant".into(), s(&r.tenant)),
            ("agent_id".into(), s(&r.agent_id)),
            ("idempotency_key".into(), s(&r.key)),
            ("payload_digest".into(), s(&r.payload_digest)),
            ("record_action_id".into(), s(&r.action_id)),
            ("expires".into(), s(instant(r.expires_at))),
            ("expires_at".into(), epoch_seconds(r.expires_at)),
        ])
    }
}

impl TryFrom<&Item> for IdempotencyRecord {
    type Error = StoreError;

    fn try_from(item: &Item) -> StoreResult<Self> {
        Ok(IdempotencyRecord {
            tenant: get_s(item, "tenant")?.to_owned(),
            agent_id: get_s(item, "agent_id")?.to_owned(),
            key: get_s(item, "idempotency_key")?.to_owned(),
            payload_digest: get_s(item, "payload_digest")?.to_owned(),
            action_id: get_s(item, "record_action_id")?.to_owned(),
            expires_at: get_s(item, "expires")?
                .parse()
                .map_err(|e| StoreError::Malformed(format!("expires: {e}")))?,
        })
    }
}

impl From<&Stop> for Item {
    fn from(stop: &Stop) -> Item {
        Item::from([
            ("pk".into(), s(stops_pk(&stop.tenant))),
            ("sk".into(), s(stop_sk(stop.scope()))),
            ("tenant".into(), s(&stop.tenant)),
            (
                "body".into(),
                s(serde_json::to_string(stop).expect("a stop serializes")),
            ),
        ])
    }
}

impl TryFrom<&Item> for Stop {
    type Error = StoreError;

    fn try_from(item: &Item) -> StoreResult<Self> {
        serde_json::from_str(get_s(item, "body")?).map_err(|e| StoreError::Malformed(e.to_string()))
    }
}
