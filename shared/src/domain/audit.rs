//! Audit events: one per transition, hash-chained per action so tampering shows. The chain
//! starts from a hash of the whole committed call (SC-SEC-06: tenant, id, agent, tool, args
//! digest, kind, window, decision, run ids), so it cannot be moved to another action or kept
//! after the call is edited; the sealing event binds a digest of the outcome, so a result cannot
//! be rewritten either. [`verify`] holds a chain, and the approval context, to its record.

use super::{
    action::{Action, Actor, Decision, Outcome, RunRef, State},
    call::Call,
    canonical,
    granted::{GrantRef, Terms as GrantTerms},
    policy::ShadowVerdict,
    state::may_move,
    window::Window,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The chain format this code writes and verifies; the genesis names it, so a chain of another
/// format never verifies as this one (chains written before v2 hashed less and do not verify).
pub const CHAIN_FORMAT: &str = "countersign.audit.v2";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Event {
    /// Equals the action's version after this transition: one event per version.
    pub seq: u64,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub at: Timestamp,
    pub actor: Actor,
    pub from: Option<State>,
    pub to: State,
    pub reason: Option<String>,
    /// On the approve event: the `context_digest` the approver countersigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_digest: Option<String>,
    /// On the sealing event: the digest of the outcome the action sealed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_digest: Option<String>,
    /// On the event that put a grant on the record (SC-GR-08): the first event of a call a
    /// grant allowed, or the approve that granted one. Absent otherwise, so every other event
    /// hashes as it always did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantRef>,
    /// On the first event: what the policy's rules in shadow would have decided (SC-GR-21).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadow: Vec<ShadowVerdict>,
    /// sha256(previous hash ‖ canonical event without its hash), hex.
    pub hash: String,
}

/// An event before it is chained: everything the hash covers.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub seq: u64,
    pub at: Timestamp,
    pub actor: Actor,
    pub from: Option<State>,
    pub to: State,
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadow: Vec<ShadowVerdict>,
}

/// The committed call the genesis binds: every member of an action that no transition changes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Origin<'a> {
    pub tenant: &'a str,
    pub action_id: &'a str,
    pub agent_id: &'a str,
    pub tool: &'a str,
    pub args_digest: &'a str,
    pub action_kind: Option<&'a str>,
    #[serde(serialize_with = "window_as_hashed")]
    pub schedule: Option<&'a Window>,
    pub decision: Decision,
    pub run: Option<&'a RunRef>,
}

impl<'a> Origin<'a> {
    /// The genesis of `action`: its call and its decision, in the chain's hashed form.
    pub fn of(action: &'a Action) -> Self {
        Self::of_call(&action.call, action.decision)
    }

    pub fn of_call(call: &'a Call, decision: Decision) -> Self {
        Origin {
            tenant: call.tenant(),
            action_id: call.id(),
            agent_id: call.agent_id(),
            tool: call.tool(),
            args_digest: call.args_digest(),
            action_kind: call.action_kind(),
            schedule: call.schedule_ref(),
            decision,
            run: call.run(),
        }
    }
}

/// The window as the genesis has always hashed it (jiff's own RFC 3339 text, not the written
/// form of `domain::time`): a format change must never move a chain.
fn window_as_hashed<S: serde::Serializer>(
    window: &Option<&Window>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Hashed {
        not_before: Timestamp,
        not_after: Timestamp,
    }
    window
        .map(|w| Hashed {
            not_before: w.not_before,
            not_after: w.not_after,
        })
        .serialize(s)
}

/// The hash before the first event: binds the chain to its tenant, action and whole call.
pub fn genesis(origin: &Origin<'_>) -> String {
    canonical::sha256_hex(&canonical::to_canonical(
        &json!({"chain": CHAIN_FORMAT, "origin": origin}),
    ))
}

/// What the sealing event of `action` carries: the digest of its outcome (`None` until sealed).
pub fn sealed_outcome(action: &Action) -> Option<String> {
    action
        .state()
        .is_sealed()
        .then(|| canonical::digest(&action.outcome()))
}

fn link(previous_hash: &str, entry: &Entry) -> String {
    let mut bytes = previous_hash.as_bytes().to_vec();
    bytes.extend(canonical::to_canonical(entry));
    canonical::sha256_hex(&bytes)
}

impl Entry {
    /// Chain this entry onto `previous_hash`.
    pub fn chain(self, previous_hash: &str) -> Event {
        let hash = link(previous_hash, &self);
        Event {
            seq: self.seq,
            at: self.at,
            actor: self.actor,
            from: self.from,
            to: self.to,
            reason: self.reason,
            context_digest: self.context_digest,
            outcome_digest: self.outcome_digest,
            grant: self.grant,
            shadow: self.shadow,
            hash,
        }
    }
}

impl Event {
    fn entry(&self) -> Entry {
        Entry {
            seq: self.seq,
            at: self.at,
            actor: self.actor.clone(),
            from: self.from,
            to: self.to,
            reason: self.reason.clone(),
            context_digest: self.context_digest.clone(),
            outcome_digest: self.outcome_digest.clone(),
            grant: self.grant.clone(),
            shadow: self.shadow.clone(),
        }
    }
}

/// Why a chain does not belong to its record. Checked in this order; the first failure wins.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("context_digest does not match the approval context")]
    ContextDigest,
    #[error("args_digest does not match the args")]
    ArgsDigest,
    #[error("event {position} has seq {seq}")]
    Sequence { position: u64, seq: u64 },
    #[error("event {seq} starts from {from:?}, the chain is at {at:?}")]
    Continuity {
        seq: u64,
        from: Option<State>,
        at: Option<State>,
    },
    #[error("event {seq} moves from {from:?} to {to}, which no action may")]
    Move {
        seq: u64,
        from: Option<State>,
        to: State,
    },
    #[error("event {seq} does not hash onto the chain")]
    Hash { seq: u64 },
    #[error("the approve event {seq} does not carry the approval's context_digest")]
    Approval { seq: u64 },
    #[error("the sealing event {seq} does not carry the digest of the record's outcome")]
    Outcome { seq: u64 },
    #[error("{events} events for version {version}")]
    Count { events: u64, version: u64 },
    #[error("the chain ends in another head than the record's")]
    Head,
    #[error("the chain ends in {chain:?}, the record is {record}")]
    State { chain: Option<State>, record: State },
    #[error("the approval context shows another {field} than the record's")]
    Context { field: &'static str },
    #[error("event {seq} names another grant than the record holds")]
    Grant { seq: u64 },
    #[error("the record holds a grant no event names")]
    GrantUnnamed,
}

/// Verify `events` as the whole audit of `action` (SC-SEC-06): see [`Chain::verify`]. Pure:
/// the engine runs it when serving events and deeds, operators from a store-wide check.
pub fn verify(action: &Action, events: &[Event]) -> Result<(), ChainError> {
    Chain {
        origin: Origin::of(action),
        args: action.call.args(),
        approval: action
            .approval
            .as_ref()
            .map(|a| (&a.context, a.context_digest.as_str())),
        outcome: action.outcome(),
        grant: action.grant.as_ref(),
        version: action.version,
        head: &action.chain_head,
        state: action.state(),
    }
    .verify(events)
}

/// What a chain must end in, whoever holds it: a stored record or a deed.
pub struct Chain<'a> {
    pub origin: Origin<'a>,
    pub args: &'a Value,
    /// The approval context and its digest, which the approve event must carry.
    pub approval: Option<(&'a Value, &'a str)>,
    /// The outcome the sealing event's digest must match.
    pub outcome: Option<&'a Outcome>,
    /// The grant the record holds, which one event names by id and digest (SC-GR-08).
    pub grant: Option<&'a GrantTerms>,
    pub version: u64,
    pub head: &'a str,
    pub state: State,
}

impl Chain<'_> {
    /// The approval context still matches its digest and the args their digest; the chain
    /// starts from the call's genesis, every event follows its state by a legal move
    /// ([`may_move`]) and hashes onto the previous one, the approve event carries the approval's digest and the sealing event the
    /// outcome's; the chain ends at the stored head, version and state; and the approval
    /// context shows the record's own call (what the approver saw is what ran).
    pub fn verify(&self, events: &[Event]) -> Result<(), ChainError> {
        let context_digest = self.approval.map(|(_, digest)| digest);
        if let Some((context, digest)) = self.approval {
            if canonical::digest(context) != digest {
                return Err(ChainError::ContextDigest);
            }
        }
        if canonical::digest(self.args) != self.origin.args_digest {
            return Err(ChainError::ArgsDigest);
        }
        let sealed_outcome = canonical::digest(&self.outcome);
        let mut previous = genesis(&self.origin);
        let mut state = None;
        let grant = self.grant.map(|t| GrantRef {
            id: t.id.clone(),
            digest: t.digest(),
        });
        let mut grant_named = false;
        for (position, e) in (1u64..).zip(events) {
            if e.seq != position {
                return Err(ChainError::Sequence {
                    position,
                    seq: e.seq,
                });
            }
            if e.from != state {
                return Err(ChainError::Continuity {
                    seq: e.seq,
                    from: e.from,
                    at: state,
                });
            }
            if !may_move(e.from, e.to) {
                return Err(ChainError::Move {
                    seq: e.seq,
                    from: e.from,
                    to: e.to,
                });
            }
            if link(&previous, &e.entry()) != e.hash {
                return Err(ChainError::Hash { seq: e.seq });
            }
            let countersigned = countersigns(e.from, e.to);
            if countersigned && e.context_digest.as_deref() != context_digest {
                return Err(ChainError::Approval { seq: e.seq });
            }
            if e.to.is_sealed() && e.outcome_digest.as_ref() != Some(&sealed_outcome) {
                return Err(ChainError::Outcome { seq: e.seq });
            }
            if let Some(named) = &e.grant {
                if grant.as_ref() != Some(named) || grant_named {
                    return Err(ChainError::Grant { seq: e.seq });
                }
                grant_named = true;
            }
            previous.clone_from(&e.hash);
            state = Some(e.to);
        }
        if events.len() as u64 != self.version {
            return Err(ChainError::Count {
                events: events.len() as u64,
                version: self.version,
            });
        }
        if previous != self.head {
            return Err(ChainError::Head);
        }
        if state != Some(self.state) {
            return Err(ChainError::State {
                chain: state,
                record: self.state,
            });
        }
        if grant.is_some() && !grant_named {
            return Err(ChainError::GrantUnnamed);
        }
        match self.approval {
            Some((context, _)) => shows_the_call(context, &self.origin),
            None => Ok(()),
        }
    }
}

/// The approval context names the record's own tool, agent, kind, args and window: a context
/// built for one call never countersigns another (every field intake puts in it).
fn shows_the_call(context: &Value, call: &Origin<'_>) -> Result<(), ChainError> {
    let shown = |field: &str| context.get(field).unwrap_or(&Value::Null);
    let differs = |field: &'static str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(ChainError::Context { field })
        }
    };
    differs("tool", shown("tool") == &json!(call.tool))?;
    differs("agent_id", shown("agent_id") == &json!(call.agent_id))?;
    differs(
        "action_kind",
        shown("action_kind") == &json!(call.action_kind),
    )?;
    differs("args", canonical::digest(shown("args")) == call.args_digest)?;
    let instant = |end: &str| {
        context
            .get("schedule")
            .and_then(|s| s.get(end))
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok())
    };
    let window = match context.get("schedule") {
        None | Some(Value::Null) => None,
        Some(_) => Some((instant("not_before"), instant("not_after"))),
    };
    let record = call
        .schedule
        .map(|w| (Some(w.not_before), Some(w.not_after)));
    differs("schedule", window == record)
}

/// Whether a transition is the countersignature: `pending_approval` → `approved`, or straight
/// to `executing` when the approving request runs the due ticket itself (SC-EDGE-07). Its event
/// names the approved context digest (SC-SEC-06).
/// One approval of a quorum that needs more (`pending_approval` → `pending_approval`, SC-POL-04)
/// names it too: every approval is bound to the same digest.
pub fn countersigns(from: Option<State>, to: State) -> bool {
    from == Some(State::PendingApproval)
        && matches!(
            to,
            State::Approved | State::Executing | State::PendingApproval
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::transition::{Creation, TicketTerms, Transition};
    use serde_json::json;

    use crate::domain::fixtures::{at, pending};

    /// A countersigned action claimed by a worker, with its chain, as the engine commits them.
    fn claimed(id: &str) -> (Action, Vec<Event>) {
        let pending = pending(id, json!({"to": "ops@example.com"}));
        let terms = TicketTerms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: "sha256:tool".into(),
            due_at: at(1),
            deadline: at(600),
        };
        let mut events = vec![];
        let c = Creation::new(pending, Actor::agent("agent-1"), Some("approval"), at(0));
        events.push(c.event.clone());
        let mut t = Transition::approve(&c.action, "approver-1", terms, at(1));
        events.push(t.event.clone());
        t = Transition::claim(&t.action, "wrk", at(60), at(2)).unwrap();
        events.push(t.event.clone());
        (t.action.clone(), events)
    }

    /// A countersigned, run and succeeded action with its chain.
    fn succeeded(id: &str) -> (Action, Vec<Event>) {
        let (claimed, mut events) = claimed(id);
        let t = Transition::finish(&claimed, Ok(json!({"sent": true})), at(3));
        events.push(t.event.clone());
        (t.action.clone(), events)
    }

    #[test]
    fn sc_sec_06_the_approve_event_carries_the_countersigned_digest() {
        let (action, events) = succeeded("act_A");
        let digest = &action.approval.as_ref().unwrap().context_digest;
        assert_eq!(events[1].context_digest.as_ref(), Some(digest));
        assert!(events.iter().filter(|e| e.context_digest.is_some()).count() == 1);
        assert_eq!(verify(&action, &events), Ok(()));
    }

    /// SC-ID-07: the person on an event is part of its hashed link — another person, another
    /// name shown, or none fails verification — and an event without one hashes as events did
    /// before people were recorded (no `person` member at all).
    #[test]
    fn sc_id_07_the_person_is_hashed_into_the_chain() {
        use crate::domain::{action::Person, quorum::Signer};
        let ada = Person {
            issuer: "https://login.example.com".into(),
            subject: "ada".into(),
            email: Some("ada@example.com".into()),
            name: Some("Ada Lovelace".into()),
        };
        let c = Creation::new(
            pending("act_P", json!({"to": "ops@example.com"})),
            Actor::agent("agent-1"),
            Some("approval"),
            at(0),
        );
        let terms = TicketTerms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: "sha256:tool".into(),
            due_at: at(1),
            deadline: at(600),
        };
        let by_ada = Signer {
            id: "ada",
            person: Some(&ada),
            channel: None,
        };
        let t = Transition::approve(&c.action, by_ada, terms, at(1));
        let events = vec![c.event.clone(), t.event.clone()];
        assert_eq!(verify(&t.action, &events), Ok(()));
        assert_eq!(events[1].actor.person.as_ref(), Some(&ada));
        let keyed = serde_json::to_value(&events[0]).unwrap();
        assert!(keyed["actor"].get("person").is_none(), "{keyed}");
        let edits: [fn(&mut Person); 3] = [
            |p| p.subject = "eve".into(),
            |p| p.name = Some("Eve".into()),
            |p| p.email = None,
        ];
        for edit in edits {
            let mut changed = events.clone();
            edit(changed[1].actor.person.as_mut().unwrap());
            assert_eq!(
                verify(&t.action, &changed),
                Err(ChainError::Hash { seq: 2 })
            );
        }
        let mut removed = events.clone();
        removed[1].actor.person = None;
        assert_eq!(
            verify(&t.action, &removed),
            Err(ChainError::Hash { seq: 2 })
        );
    }

    type Tamper = Box<dyn Fn(&mut Action, &mut Vec<Event>)>;

    /// Each tampering of a stored chain or its record, and the check that catches it.
    #[test]
    fn sc_sec_06_tampered_chains_fail_verification() {
        let (action, events) = succeeded("act_A");
        let (other, other_events) = succeeded("act_B");
        let moved_events: Vec<Event> = other_events.clone();
        let cases: Vec<(&str, Tamper, ChainError)> = vec![
            (
                "moved: another action's whole chain and head",
                Box::new(move |a, e| {
                    *e = moved_events.clone();
                    a.chain_head = other.chain_head.clone();
                }),
                ChainError::Hash { seq: 1 },
            ),
            (
                "moved: the record renamed to another id",
                Box::new(|a, _| a.call.id = "act_C".into()),
                ChainError::Hash { seq: 1 },
            ),
            (
                "moved: to another tenant",
                Box::new(|a, _| a.call.tenant = "globex".into()),
                ChainError::Hash { seq: 1 },
            ),
            (
                "cut: the last event dropped",
                Box::new(|_, e| {
                    e.pop();
                }),
                ChainError::Count {
                    events: 3,
                    version: 4,
                },
            ),
            (
                "cut: the tail dropped and the record rolled back to its head",
                Box::new(|a, e| {
                    e.pop();
                    a.chain_head = e[2].hash.clone();
                    a.version = 3;
                }),
                ChainError::State {
                    chain: Some(State::Executing),
                    record: State::Succeeded,
                },
            ),
            (
                "cut: the first event dropped",
                Box::new(|_, e| {
                    e.remove(0);
                }),
                ChainError::Sequence {
                    position: 1,
                    seq: 2,
                },
            ),
            (
                "edited args, digest left",
                Box::new(|a, _| a.call.args = json!({"to": "attacker@example.com"})),
                ChainError::ArgsDigest,
            ),
            (
                "edited args, digest recomputed",
                Box::new(|a, _| {
                    a.call.args = json!({"to": "attacker@example.com"});
                    a.call.args_digest = canonical::digest(&a.call.args);
                }),
                ChainError::Hash { seq: 1 },
            ),
            (
                "edited args and context, both digests recomputed",
                Box::new(|a, _| {
                    a.call.args = json!({"to": "attacker@example.com"});
                    a.call.args_digest = canonical::digest(&a.call.args);
                    let approval = a.approval.as_mut().unwrap();
                    approval.context["args"] = a.call.args.clone();
                    approval.context_digest = canonical::digest(&approval.context);
                }),
                ChainError::Hash { seq: 1 },
            ),
            (
                "edited approval context, digest left",
                Box::new(|a, _| a.approval.as_mut().unwrap().context["tool"] = json!("x")),
                ChainError::ContextDigest,
            ),
            (
                "edited event reason",
                Box::new(|_, e| e[2].reason = Some("forged".into())),
                ChainError::Hash { seq: 3 },
            ),
            (
                "approve event without its digest, rehashed",
                Box::new(|a, e| {
                    e[1].context_digest = None;
                    rehash(a, e, 1);
                }),
                ChainError::Approval { seq: 2 },
            ),
            (
                "record head replaced",
                Box::new(|a, _| a.chain_head = "00".repeat(32)),
                ChainError::Head,
            ),
            (
                "record version bumped",
                Box::new(|a, _| a.version = 5),
                ChainError::Count {
                    events: 4,
                    version: 5,
                },
            ),
            (
                "an event's from rewritten",
                Box::new(|_, e| e[3].from = Some(State::Approved)),
                ChainError::Continuity {
                    seq: 4,
                    from: Some(State::Approved),
                    at: Some(State::Executing),
                },
            ),
        ];
        for (name, tamper, expected) in cases {
            let (mut a, mut e) = (action.clone(), events.clone());
            tamper(&mut a, &mut e);
            assert_eq!(verify(&a, &e), Err(expected), "{name}");
        }
        assert_eq!(verify(&action, &events), Ok(()));
    }

    /// The chain binds what a deed signs (issue 14, defect 7; before it the genesis held only
    /// tenant, id and args digest, and no event the outcome): each member of the call and the
    /// outcome, edited in the record alone, fails; so does an approval context that shows
    /// another call, even with its digest and the whole chain recomputed onto it.
    #[test]
    fn sc_sec_06_the_chain_binds_the_whole_call_and_the_outcome() {
        use crate::domain::{
            action::{RunRef, Standing},
            window::Window,
        };
        let (action, events) = succeeded("act_A");
        let hash_1 = ChainError::Hash { seq: 1 };
        let cases: Vec<(&str, Tamper, ChainError)> = vec![
            (
                "tool",
                Box::new(|a, _| a.call.tool = "mail.other".into()),
                hash_1.clone(),
            ),
            (
                "agent",
                Box::new(|a, _| a.call.agent_id = "agent-2".into()),
                hash_1.clone(),
            ),
            (
                "kind",
                Box::new(|a, _| a.call.action_kind = Some("email".into())),
                hash_1.clone(),
            ),
            (
                "window",
                Box::new(|a, _| {
                    a.call.schedule = Some(Window {
                        not_before: at(10),
                        not_after: at(900),
                    })
                }),
                hash_1.clone(),
            ),
            (
                "decision",
                Box::new(|a, _| a.decision = Decision::Allow),
                hash_1.clone(),
            ),
            (
                "run ids",
                Box::new(|a, _| {
                    a.call.run = Some(RunRef {
                        run_id: Some("run-9".into()),
                        ..RunRef::default()
                    })
                }),
                hash_1,
            ),
            (
                "outcome result",
                Box::new(|a, _| {
                    if let Standing::Sealed { outcome, .. } = &mut a.standing {
                        outcome.result = Some(json!({"sent": false}));
                    }
                }),
                ChainError::Outcome { seq: 4 },
            ),
            (
                "outcome emptied",
                Box::new(|a, _| {
                    if let Standing::Sealed { outcome, .. } = &mut a.standing {
                        *outcome = Outcome::default();
                    }
                }),
                ChainError::Outcome { seq: 4 },
            ),
            (
                "the sealing event's outcome digest dropped, rehashed",
                Box::new(|a, e| {
                    e[3].outcome_digest = None;
                    rehash(a, e, 3);
                }),
                ChainError::Outcome { seq: 4 },
            ),
            (
                "context shows another tool, digests and chain recomputed",
                Box::new(|a, e| {
                    let approval = a.approval.as_mut().unwrap();
                    approval.context["tool"] = json!("mail.other");
                    approval.context_digest = canonical::digest(&approval.context);
                    e[1].context_digest = Some(approval.context_digest.clone());
                    rehash(a, e, 1);
                }),
                ChainError::Context { field: "tool" },
            ),
            (
                "context shows a window the call does not have, recomputed",
                Box::new(|a, e| {
                    let approval = a.approval.as_mut().unwrap();
                    approval.context["schedule"] =
                        json!({"not_before": at(10), "not_after": at(900)});
                    approval.context_digest = canonical::digest(&approval.context);
                    e[1].context_digest = Some(approval.context_digest.clone());
                    rehash(a, e, 1);
                }),
                ChainError::Context { field: "schedule" },
            ),
        ];
        for (name, tamper, expected) in cases {
            let (mut a, mut e) = (action.clone(), events.clone());
            tamper(&mut a, &mut e);
            assert_eq!(verify(&a, &e), Err(expected), "{name}");
        }
        assert_eq!(verify(&action, &events), Ok(()));
    }

    /// Every event of a trail must be a legal move (`state::MOVES`). This trail is hand-made —
    /// no transition builds it: an action created `pending_approval` whose second event seals
    /// it `succeeded` with a result, no countersignature and no run in between — and hashed
    /// correctly onto its genesis, head, version, state and outcome. Main's verifier (before
    /// issue 29) accepted it, since it checked only that each event starts where the last one
    /// ended; this one refuses the move.
    #[test]
    fn sc_sec_06_a_trail_with_an_illegal_move_fails_verification() {
        use crate::domain::{action::Standing, Terminal};
        let created = Creation::new(
            pending("act_A", json!({"to": "ops@example.com"})),
            Actor::agent("agent-1"),
            Some("approval_required"),
            at(0),
        );
        let mut forged = created.action.clone();
        forged.standing = Standing::Sealed {
            end: Terminal::Succeeded,
            outcome: Outcome {
                result: Some(json!({"sent": true})),
                ..Outcome::default()
            },
            at: at(1),
        };
        forged.version = 2;
        let event = Entry {
            seq: 2,
            at: at(1),
            actor: Actor::system(),
            from: Some(State::PendingApproval),
            to: State::Succeeded,
            reason: Some("tool_succeeded".into()),
            context_digest: None,
            outcome_digest: sealed_outcome(&forged),
            grant: None,
            shadow: Vec::new(),
        }
        .chain(&created.action.chain_head);
        forged.chain_head = event.hash.clone();
        let events = [created.event.clone(), event];
        assert_eq!(
            verify(&forged, &events),
            Err(ChainError::Move {
                seq: 2,
                from: Some(State::PendingApproval),
                to: State::Succeeded,
            })
        );
        // The same trail through the legal moves verifies.
        let (action, events) = succeeded("act_A");
        assert_eq!(verify(&action, &events), Ok(()));
    }

    /// An unknown outcome's error is part of what its sealing event binds (the chaos run caught
    /// the sweep adding it to the record after the event was hashed; the seal builds it now).
    #[test]
    fn sc_sec_06_an_unknown_outcome_is_sealed_with_its_error() {
        let (claimed, mut events) = claimed("act_A");
        let reason = crate::domain::SealReason::OutcomeUnknown;
        let sealed = Transition::seal(&claimed, Actor::system(), &reason, at(61));
        events.push(sealed.event.clone());
        let error = sealed.action.outcome().and_then(|o| o.error.clone());
        assert_eq!(error.unwrap()["kind"], "outcome_unknown");
        assert_eq!(verify(&sealed.action, &events), Ok(()));
    }

    /// Recompute the chain from `from` (an attacker who can hash but not re-sign).
    fn rehash(action: &mut Action, events: &mut [Event], from: usize) {
        let mut previous = events[from - 1].hash.clone();
        for e in &mut events[from..] {
            *e = e.entry().chain(&previous);
            previous = e.hash.clone();
        }
        action.chain_head = previous;
    }
}
