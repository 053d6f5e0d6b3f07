//! Keys: tenant first in every partition key, parts escaped so no value forges a separator.

use crate::store::sortable_instant;
use aws_sdk_dynamodb::types::AttributeValue;
use jiff::Timestamp;

/// Shards of the sparse `sweep` index: writes spread over them, the sweep queries them all.
pub(super) const SWEEP_SHARDS: u32 = 4;

pub(super) const ACTION_SK: &str = "ACTION";

/// Key parts are escaped so that no value can forge a `#` separator.
fn part(s: &str) -> String {
    s.replace('%', "%25").replace('#', "%23")
}

fn unpart(s: &str) -> String {
    s.replace("%23", "#").replace("%25", "%")
}

pub(super) fn tenant_pk(tenant: &str) -> String {
    format!("TENANT#{}", part(tenant))
}

pub(super) fn action_pk(tenant: &str, action_id: &str) -> String {
    format!("TENANT#{}#ACTION#{}", part(tenant), part(action_id))
}

pub(super) fn event_sk(seq: u64) -> String {
    format!("EVENT#{seq:020}")
}

pub(super) fn idempotency_pk(tenant: &str, agent_id: &str) -> String {
    format!("TENANT#{}#AGENT#{}#IDEM", part(tenant), part(agent_id))
}

pub(super) fn idempotency_sk(key: &str) -> String {
    format!("KEY#{key}")
}

pub(super) fn stops_pk(tenant: &str) -> String {
    format!("TENANT#{}#STOPS", part(tenant))
}

pub(super) fn stop_sk(scope: &str) -> String {
    format!("STOP#{}", part(scope))
}

/// The tenant's quarantined actions (SC-EDGE-08): one item per action, `sk` = its id.
pub(super) fn quarantine_pk(tenant: &str) -> String {
    format!("TENANT#{}#QUARANTINE", part(tenant))
}

/// (tenant, action id) back from an action's `pk`.
pub(super) fn parse_action_pk(pk: &str) -> Option<(String, String)> {
    let rest = pk.strip_prefix("TENANT#")?;
    let (tenant, id) = rest.split_once("#ACTION#")?;
    Some((unpart(tenant), unpart(id)))
}

/// FNV-1a: stable across builds and platforms, unlike `DefaultHasher`.
pub(super) fn sweep_shard(action_id: &str) -> u32 {
    let hash = action_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    hash % SWEEP_SHARDS
}

pub(super) fn sweep_pk(shard: u32) -> String {
    format!("SWEEP#{shard}")
}

/// An instant as sortable text (`sweep_at`, expiries).
pub(super) fn instant(t: Timestamp) -> String {
    sortable_instant(t)
}

/// TTL attribute value: epoch seconds, rounded up so nothing expires early.
pub(super) fn epoch_seconds(t: Timestamp) -> AttributeValue {
    let s = t.as_second() + i64::from(t.subsec_nanosecond() > 0);
    AttributeValue::N(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_cannot_forge_separators() {
        assert_ne!(idempotency_pk("t", "a#b"), idempotency_pk("t", "a") + "#b");
        assert_eq!(
            parse_action_pk(&action_pk("acme", "act_#1%")),
            Some(("acme".into(), "act_#1%".into()))
        );
        assert!(event_sk(2) < event_sk(10));
    }

    #[test]
    fn shards_are_stable() {
        assert_eq!(sweep_shard("act_01"), sweep_shard("act_01"));
        assert!(sweep_shard("act_01ARZ3NDEKTSV4RRFFQ69G5FAV") < SWEEP_SHARDS);
    }

    #[test]
    fn ttl_rounds_up() {
        let t: Timestamp = "2026-01-01T00:00:00.5Z".parse().unwrap();
        assert_eq!(
            epoch_seconds(t),
            AttributeValue::N((t.as_second() + 1).to_string())
        );
    }
}
