//! Items of the records beside actions: quarantine marks (SC-EDGE-08), idempotency records
//! and stops.

use super::item::{get_instant, get_s, json_text, malformed, s, Item};
use super::keys::{epoch_seconds, nanos};
use crate::store::{IdempotencyRecord, Quarantined, Stop, StoreError, StoreResult, Unreadable};
use jiff::Timestamp;

// ---------- quarantine (SC-EDGE-08) ----------

/// Set on a quarantined action's state item: lists leave it out.
pub(super) const QUARANTINED: &str = "qz";

/// An action that does not load, named by its key (its items may hold anything).
pub(super) fn unreadable(tenant: &str, action_id: &str, e: StoreError) -> Unreadable {
    Unreadable {
        tenant: tenant.to_owned(),
        action_id: action_id.to_owned(),
        reason: e.to_string(),
    }
}

pub(super) fn quarantine_item(bad: &Unreadable, at: Timestamp) -> Item {
    use super::keys::{quarantine_pk, quarantine_sk};
    Item::from([
        ("pk".into(), s(quarantine_pk(&bad.tenant))),
        ("sk".into(), s(quarantine_sk(&bad.action_id))),
        ("r".into(), s(&bad.reason)),
        ("w".into(), nanos(at)),
    ])
}

impl TryFrom<&Item> for Quarantined {
    type Error = StoreError;

    fn try_from(item: &Item) -> StoreResult<Self> {
        Ok(Quarantined {
            action_id: super::keys::quarantined_id(get_s(item, "sk")?),
            reason: get_s(item, "r")?.to_owned(),
            quarantined_at: get_instant(item, "w")?,
        })
    }
}

// ---------- idempotency records and stops ----------

impl From<&IdempotencyRecord> for Item {
    fn from(r: &IdempotencyRecord) -> Item {
        use super::keys::{idempotency_pk, idempotency_sk};
        Item::from([
            ("pk".into(), s(idempotency_pk(&r.tenant, &r.agent_id))),
            ("sk".into(), s(idempotency_sk(&r.key))),
            ("d".into(), s(&r.payload_digest)),
            ("a".into(), s(&r.action_id)),
            ("x".into(), nanos(r.expires_at)),
            ("ttl".into(), epoch_seconds(r.expires_at)),
        ])
    }
}

/// An idempotency record from its item; the scope (tenant, agent, key) is the caller's.
pub(super) fn idempotency_of(
    tenant: &str,
    agent_id: &str,
    key: &str,
    item: &Item,
) -> StoreResult<IdempotencyRecord> {
    Ok(IdempotencyRecord {
        tenant: tenant.to_owned(),
        agent_id: agent_id.to_owned(),
        key: key.to_owned(),
        payload_digest: get_s(item, "d")?.to_owned(),
        action_id: get_s(item, "a")?.to_owned(),
        expires_at: get_instant(item, "x")?,
    })
}

impl From<&Stop> for Item {
    fn from(stop: &Stop) -> Item {
        use super::keys::{stop_sk, stops_pk};
        Item::from([
            ("pk".into(), s(stops_pk(&stop.tenant))),
            ("sk".into(), s(stop_sk(stop.scope()))),
            ("b".into(), json_text(stop)),
        ])
    }
}

impl TryFrom<&Item> for Stop {
    type Error = StoreError;

    fn try_from(item: &Item) -> StoreResult<Self> {
        serde_json::from_str(get_s(item, "b")?).map_err(|e| malformed(format!("stop: {e}")))
    }
}
