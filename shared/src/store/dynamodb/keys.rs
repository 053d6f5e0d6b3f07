//! Keys: the tenant leads every partition key, and key parts are escaped so no value can forge
//! a separator. An action is two items in its tenant's partition, next to each other:
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | call (written once) | `T#<tenant>` | `A#<action id>` |
//! | state (every transition) | `T#<tenant>` | `A#<action id>#S` |
//! | idempotency record | `T#<tenant>#I#<agent id>` | `<key>` |
//! | stop | `T#<tenant>#STOPS` | `<agent id or *>` |
//! | quarantine record | `T#<tenant>#Q` | `<action id>` |
//! | grant | `T#<tenant>#G` | `<agent id>#<tool>#<grant id>` |

use aws_sdk_dynamodb::types::AttributeValue;
use jiff::Timestamp;

/// Shards of the sparse `sweep` index: writes spread over them, the sweep queries them all.
pub(super) const SWEEP_SHARDS: u32 = 4;

/// Key parts are escaped so that no value can forge a `#` separator.
fn part(s: &str) -> String {
    s.replace('%', "%25").replace('#', "%23")
}

fn unpart(s: &str) -> String {
    s.replace("%23", "#").replace("%25", "%")
}

/// The tenant's partition: its actions (call and state items), newest last.
pub(super) fn tenant_pk(tenant: &str) -> String {
    format!("T#{}", part(tenant))
}

/// The action's call item: what never changes after submission.
pub(super) fn call_sk(action_id: &str) -> String {
    format!("A#{}", part(action_id))
}

/// The action's state item: sorts right after its call item.
pub(super) fn state_sk(action_id: &str) -> String {
    format!("A#{}#S", part(action_id))
}

/// Every action item sorts after this (and the partition holds nothing else).
pub(super) const ACTIONS_FROM: &str = "A#";

pub(super) fn idempotency_pk(tenant: &str, agent_id: &str) -> String {
    format!("T#{}#I#{}", part(tenant), part(agent_id))
}

pub(super) fn idempotency_sk(key: &str) -> String {
    key.to_owned()
}

/// The tenant's quarantined actions (SC-EDGE-08): one item per action, `sk` = its id.
pub(super) fn quarantine_pk(tenant: &str) -> String {
    format!("T#{}#Q", part(tenant))
}

pub(super) fn stops_pk(tenant: &str) -> String {
    format!("T#{}#STOPS", part(tenant))
}

pub(super) fn stop_sk(scope: &str) -> String {
    part(scope)
}

/// The tenant's grants (SC-GR-…): one item each, sorted by agent and tool, so intake reads the
/// grants of one agent's tool with one `Query` of a key prefix.
pub(super) fn grants_pk(tenant: &str) -> String {
    format!("T#{}#G", part(tenant))
}

/// The prefix of every grant of `agent_id` for `tool`.
pub(super) fn grants_of(agent_id: &str, tool: &str) -> String {
    format!("{}#{}#", part(agent_id), part(tool))
}

pub(super) fn grant_sk(agent_id: &str, tool: &str, id: &str) -> String {
    format!("{}{}", grants_of(agent_id, tool), part(id))
}

/// (tenant, action id) back from a state item's keys.
pub(super) fn quarantine_sk(action_id: &str) -> String {
    part(action_id)
}

/// The action id of a quarantine record.
pub(super) fn quarantined_id(sk: &str) -> String {
    unpart(sk)
}

pub(super) fn parse_state_keys(pk: &str, sk: &str) -> Option<(String, String)> {
    let tenant = pk.strip_prefix("T#")?;
    let id = sk.strip_prefix("A#")?.strip_suffix("#S")?;
    if tenant.contains('#') || id.contains('#') {
        return None;
    }
    Some((unpart(tenant), unpart(id)))
}

/// The action id of a call or state item's sort key, and whether it is the state item.
pub(super) fn parse_action_sk(sk: &str) -> Option<(String, bool)> {
    let rest = sk.strip_prefix("A#")?;
    let (id, state) = match rest.strip_suffix("#S") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    (!id.contains('#')).then(|| (unpart(id), state))
}

/// FNV-1a: stable across builds and platforms, unlike `DefaultHasher`.
pub(super) fn sweep_shard(action_id: &str) -> u32 {
    let hash = action_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    hash % SWEEP_SHARDS
}

pub(super) fn sweep_pk(shard: u32) -> String {
    format!("W#{shard}")
}

/// An instant as a number: nanoseconds since the epoch (exact, and sorts as time).
pub(super) fn nanos(t: Timestamp) -> AttributeValue {
    AttributeValue::N(t.as_nanosecond().to_string())
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
        assert_ne!(tenant_pk("acme#STOPS"), stops_pk("acme"));
        assert_eq!(
            parse_state_keys(&tenant_pk("ac#me%"), &state_sk("act_#1%")),
            Some(("ac#me%".into(), "act_#1%".into()))
        );
        assert_eq!(
            parse_state_keys(&tenant_pk("acme"), &call_sk("act_1")),
            None
        );
        assert_eq!(
            parse_action_sk(&call_sk("act_1")),
            Some(("act_1".into(), false))
        );
        assert_eq!(
            parse_action_sk(&state_sk("act_1")),
            Some(("act_1".into(), true))
        );
        // A call item sorts right before its state item, and both after ACTIONS_FROM.
        assert!(ACTIONS_FROM < call_sk("act_1").as_str() && call_sk("act_1") < state_sk("act_1"));
    }

    #[test]
    fn shards_are_stable() {
        assert_eq!(sweep_shard("act_01"), sweep_shard("act_01"));
        assert!(sweep_shard("act_01ARZ3NDEKTSV4RRFFQ69G5FAV") < SWEEP_SHARDS);
    }

    #[test]
    fn ttl_rounds_up_and_instants_are_exact() {
        let t: Timestamp = "2026-01-01T00:00:00.5Z".parse().unwrap();
        assert_eq!(
            epoch_seconds(t),
            AttributeValue::N((t.as_second() + 1).to_string())
        );
        assert_eq!(nanos(t), AttributeValue::N("1767225600500000000".into()));
    }
}
