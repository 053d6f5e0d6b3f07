//! Audit events: one per transition, hash-chained per action so tampering shows.

use super::{
    action::{Actor, State},
    canonical,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The hash before the first event.
pub const GENESIS: &str = "";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Equals the action's version after this transition: one event per version.
    pub seq: u64,
    pub at: Timestamp,
    pub actor: Actor,
    pub from: Option<State>,
    pub to: State,
    pub reason: Option<String>,
    /// sha256(previous hash ‖ canonical event without its hash), hex.
    pub hash: String,
}

#[derive(Serialize)]
struct Unhashed<'a> {
    seq: u64,
    at: Timestamp,
    actor: &'a Actor,
    from: Option<State>,
    to: State,
    reason: Option<&'a str>,
}

impl Event {
    pub fn chained(
        previous_hash: &str,
        seq: u64,
        at: Timestamp,
        actor: Actor,
        from: Option<State>,
        to: State,
        reason: Option<String>,
    ) -> Event {
        let hash = Self::hash_of(previous_hash, seq, at, &actor, from, to, reason.as_deref());
        Event {
            seq,
            at,
            actor,
            from,
            to,
            reason,
            hash,
        }
    }

    fn hash_of(
        previous_hash: &str,
        seq: u64,
        at: Timestamp,
        actor: &Actor,
        from: Option<State>,
        to: State,
        reason: Option<&str>,
    ) -> String {
        let mut bytes = previous_hash.as_bytes().to_vec();
        bytes.extend(canonical::to_canonical(&Unhashed {
            seq,
            at,
            actor,
            from,
            to,
            reason,
        }));
        canonical::sha256_hex(&bytes)
    }

    /// Check a whole chain: each hash recomputes and each event follows the previous one.
    pub fn verify_chain(events: &[Event]) -> Result<(), String> {
        let mut previous = GENESIS.to_owned();
        let mut state = None;
        for (i, e) in events.iter().enumerate() {
            if e.seq != i as u64 + 1 {
                return Err(format!("event {} has seq {}", i + 1, e.seq));
            }
            if e.from != state {
                return Err(format!(
                    "event {} starts from {:?}, chain is at {:?}",
                    e.seq, e.from, state
                ));
            }
            let expect = Self::hash_of(
                &previous,
                e.seq,
                e.at,
                &e.actor,
                e.from,
                e.to,
                e.reason.as_deref(),
            );
            if expect != e.hash {
                return Err(format!("event {} hash does not match", e.seq));
            }
            previous = e.hash.clone();
            state = Some(e.to);
        }
        Ok(())
    }
}
