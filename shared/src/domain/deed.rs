//! Deeds (SC-SEC-07): a sealed action's proof of what happened, signed with the tenant's
//! Ed25519 key so anyone holding the public key verifies it offline.
//!
//! A deed file is the canonical JSON (keys sorted, no white space) of
//! `{"deed": {…}, "signature": {"alg": "Ed25519", "kid", "value": hex}}`; the signature covers
//! the canonical bytes of `deed`. Verification requires the file to be exactly that canonical
//! form, so any changed byte fails: a changed value breaks the signature, a changed spelling
//! of the same value breaks the form.

use super::{
    action::{Action, Actor, Decision, Outcome, Person, RunRef, Signoff, State},
    actor::Channel,
    audit::{self, ChainError, Event},
    canonical,
    granted::Terms as GrantTerms,
    window::Window,
};
use ed25519_dalek::{
    pkcs8::{DecodePrivateKey, DecodePublicKey},
    Signature, Signer, SigningKey, Verifier, VerifyingKey,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The deed format of a deed that names no person. v2: the chain binds the whole call and the
/// outcome (`audit::CHAIN_FORMAT`), and the countersignature carries the context shown.
pub const FORMAT: &str = "countersign.deed.v2";
/// The deed format of a deed that names a person (SC-ID-08): v2 with the person a verified
/// token named on the countersignature, on each approver of a quorum and on the events' actors.
/// A deed names v3 only when it holds a person, so a verifier that knows only v2 refuses it as
/// a format it does not know rather than as a broken chain, and deeds of key approvers are the
/// same bytes they always were.
pub const FORMAT_PERSON: &str = "countersign.deed.v3";
/// The deed format of a deed that names a channel (SC-CH-08): v3 (a person where one decided)
/// with the channel each person's decision came through on the events' actors and on the
/// countersignature. Named only when a channel is, for the same reason as v3: a verifier that
/// knows v3 at most refuses it as an unknown format, not as a broken chain, and deeds written
/// before channels were recorded keep their format and bytes.
pub const FORMAT_CHANNEL: &str = "countersign.deed.v4";
/// The deed format of a deed whose trail names a grant (SC-GR-08): v3 or v4 with the grant's terms —
/// who granted, the rule, the pins, the condition, the window, the count — which one of its
/// events names by id and digest. Only such deeds name v5, so every other deed is the same
/// bytes as before and a verifier that knows only v2 to v4 refuses a v5 deed as a format it does
/// not know.
pub const FORMAT_GRANT: &str = "countersign.deed.v5";
pub const ALG: &str = "Ed25519";

/// What a deed proves: the call, its countersignature, its schedule, how it ended, and its
/// whole audit chain with the head the record held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Deed {
    pub format: String,
    /// Names the tenant key that signed it.
    pub kid: String,
    pub tenant: String,
    pub action_id: String,
    pub call: Call,
    pub decision: Decision,
    pub approval: Option<Countersignature>,
    pub schedule: Option<Window>,
    pub state: State,
    pub outcome: Option<Outcome>,
    /// The record's version: one audit event per version.
    pub version: u64,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub created_at: Timestamp,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub sealed_at: Timestamp,
    pub events: Vec<Event>,
    pub chain_head: String,
    /// The grant the trail names (v4): the one that allowed this call, or the one its approval
    /// granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<GrantTerms>,
}

// The call as deeds of format v2 hold it (the action's id, tenant and window are the deed's own
// members); built from the action's `domain::Call`.
/// The exact call the agent submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub agent_id: String,
    pub tool: String,
    pub args: Value,
    pub args_digest: String,
    pub action_kind: Option<String>,
    pub run: Option<RunRef>,
}

impl From<&super::call::Call> for Call {
    fn from(call: &super::call::Call) -> Call {
        Call {
            agent_id: call.agent_id().to_owned(),
            tool: call.tool().to_owned(),
            args: call.args().clone(),
            args_digest: call.args_digest().to_owned(),
            action_kind: call.action_kind().map(str::to_owned),
            run: call.run().cloned(),
        }
    }
}

/// The approval as countersigned: the context the approver saw, its digest, and who.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Countersignature {
    /// What the approver was shown; verification holds it to the call and the schedule.
    #[schema(value_type = super::context::ApprovalContext)]
    pub context: Value,
    pub context_digest: String,
    pub approver: Option<String>,
    /// The person who gave the approval that committed the ticket, when a verified token named
    /// one (format v3, SC-ID-08).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Person>,
    /// The channel that approval came through (format v4, SC-CH-08): the channel on the actor
    /// of the chain's last countersigning event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed_opt")]
    pub decided_at: Option<Timestamp>,
    /// A quorum's approvers in order, the last one included (SC-POL-04); absent for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<Signoff>,
}

/// The deed file: the deed and its signature over the deed's canonical bytes.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Signed {
    #[schema(value_type = Deed)]
    deed: Value,
    signature: SignatureBlock,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignatureBlock {
    alg: String,
    kid: String,
    value: String,
}

/// A tenant's deed key: its id and the private half.
#[derive(Clone)]
pub struct DeedKey {
    pub kid: String,
    key: SigningKey,
}

impl std::fmt::Debug for DeedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeedKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl PartialEq for DeedKey {
    fn eq(&self, other: &Self) -> bool {
        self.kid == other.kid && self.key.verifying_key() == other.key.verifying_key()
    }
}

impl DeedKey {
    /// From a PKCS#8 PEM private key (`openssl genpkey -algorithm ed25519`).
    pub fn from_pem(kid: &str, pem: &str) -> Result<DeedKey, String> {
        let key = SigningKey::from_pkcs8_pem(pem.trim())
            .map_err(|e| format!("not an Ed25519 PKCS#8 PEM private key: {e}"))?;
        Ok(DeedKey {
            kid: kid.to_owned(),
            key,
        })
    }

    pub fn from_seed(kid: &str, seed: &[u8; 32]) -> DeedKey {
        DeedKey {
            kid: kid.to_owned(),
            key: SigningKey::from_bytes(seed),
        }
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }
}

/// A public key from an SPKI PEM (`openssl pkey -pubout`).
pub fn public_key_from_pem(pem: &str) -> Result<VerifyingKey, String> {
    VerifyingKey::from_public_key_pem(pem.trim())
        .map_err(|e| format!("not an Ed25519 public key PEM: {e}"))
}

/// Why a deed does not verify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeedError {
    #[error("not a deed document: {0}")]
    Shape(String),
    #[error("the file is not in canonical form (it was changed or reformatted)")]
    NotCanonical,
    #[error("unsupported {0}")]
    Unsupported(String),
    #[error("the signature does not verify with this key")]
    Signature,
    #[error("the deed's audit chain does not verify: {0}")]
    Chain(#[from] ChainError),
    #[error("the deed names {0} otherwise than its audit chain does")]
    Approver(String),
    #[error("{0}")]
    Key(String),
}

/// Verify a deed file with a public key PEM: what a command-line check runs.
pub fn verify_with_pem(public_pem: &str, file: &[u8]) -> Result<Deed, DeedError> {
    let key = public_key_from_pem(public_pem).map_err(DeedError::Key)?;
    Deed::verify(file, &key)
}

impl Deed {
    /// The deed of a sealed action whose chain was verified against its record.
    pub fn of(action: &Action, events: &[Event], kid: &str) -> Option<Deed> {
        let mut deed = Deed {
            format: FORMAT.to_owned(),
            kid: kid.to_owned(),
            tenant: action.tenant().to_owned(),
            action_id: action.id().to_owned(),
            call: Call::from(action.call()),
            decision: action.decision,
            approval: action.approval.as_ref().map(|a| Countersignature {
                context: a.context.clone(),
                context_digest: a.context_digest.clone(),
                approver: a.approver.clone(),
                person: a.person.clone(),
                // The record keeps the approver and the person; the channel is the chain's.
                channel: a.approver.as_ref().and_then(|_| {
                    countersigning(events)
                        .last()
                        .and_then(|actor| actor.channel)
                }),
                decided_at: a.decided_at,
                approvers: a.quorum.signed.clone(),
            }),
            schedule: action.call().schedule(),
            state: action.state(),
            outcome: action.outcome().cloned(),
            version: action.version,
            created_at: action.created_at,
            sealed_at: action.sealed_at()?,
            events: events.to_vec(),
            chain_head: action.chain_head.clone(),
            grant: action.grant().cloned(),
        };
        if deed.grant.is_some() {
            FORMAT_GRANT.clone_into(&mut deed.format);
        } else if deed.names_a_channel() {
            FORMAT_CHANNEL.clone_into(&mut deed.format);
        } else if deed.names_a_person() {
            FORMAT_PERSON.clone_into(&mut deed.format);
        }
        Some(deed)
    }

    /// Who approved, for people reading a verification (SC-ID-08): the key, or the person's
    /// agent id with the person a token named.
    pub fn approved_by(&self) -> Option<String> {
        let approval = self.approval.as_ref()?;
        let id = approval.approver.as_deref()?;
        let who = match &approval.person {
            Some(person) => format!("{id} — {person}"),
            None => id.to_owned(),
        };
        Some(match approval.channel {
            Some(channel) => format!("{who}, through {}", channel.as_str()),
            None => who,
        })
    }

    /// Whether a channel is named anywhere in the deed: on an event's actor (and so on its
    /// countersignature).
    fn names_a_channel(&self) -> bool {
        self.events.iter().any(|e| e.actor.channel.is_some())
            || self.approval.as_ref().is_some_and(|a| a.channel.is_some())
    }

    /// Whether a person is named anywhere in the deed: on its countersignature, a quorum's
    /// approver, or an event's actor.
    fn names_a_person(&self) -> bool {
        let approval = self.approval.as_ref();
        approval
            .is_some_and(|a| a.person.is_some() || a.approvers.iter().any(|s| s.person.is_some()))
            || self.events.iter().any(|e| e.actor.person.is_some())
    }

    /// A v3 or v4 deed's approvers are its chain's (SC-ID-08, SC-CH-08): the countersignature
    /// names the actor of the approve event — the same id, person and channel — and each approver of a quorum is the
    /// actor of one of its countersigning events.
    fn names_its_approvers(&self) -> Result<(), DeedError> {
        let Some(approval) = &self.approval else {
            return Ok(());
        };
        let signing = countersigning(&self.events);
        let is = |actor: &Actor, id: &str, person: &Option<Person>| {
            actor.id.as_deref() == Some(id) && actor.person == *person
        };
        if let Some(approver) = &approval.approver {
            if !signing.last().is_some_and(|actor| {
                is(actor, approver, &approval.person) && actor.channel == approval.channel
            }) {
                return Err(DeedError::Approver(format!("the approver {approver:?}")));
            }
        }
        for s in &approval.approvers {
            if !signing
                .iter()
                .any(|actor| is(actor, &s.approver, &s.person))
            {
                return Err(DeedError::Approver(format!(
                    "the approver {:?}",
                    s.approver
                )));
            }
        }
        Ok(())
    }

    /// The deed file: canonical JSON, signed.
    pub fn sign(&self, key: &DeedKey) -> Vec<u8> {
        let deed = serde_json::to_value(self).expect("a deed serializes");
        let signature = key.key.sign(&canonical::to_canonical(&deed));
        canonical::to_canonical(&Signed {
            deed,
            signature: SignatureBlock {
                alg: ALG.to_owned(),
                kid: key.kid.clone(),
                value: hex::encode(signature.to_bytes()),
            },
        })
    }

    /// Verify a deed file with the tenant's public key, offline: its form, its signature, then
    /// its own audit chain (the deed is self-contained).
    pub fn verify(file: &[u8], key: &VerifyingKey) -> Result<Deed, DeedError> {
        let value: Value =
            serde_json::from_slice(file).map_err(|e| DeedError::Shape(e.to_string()))?;
        if canonical::to_canonical(&value) != file {
            return Err(DeedError::NotCanonical);
        }
        let signed: Signed =
            serde_json::from_value(value).map_err(|e| DeedError::Shape(e.to_string()))?;
        let block = &signed.signature;
        if block.alg != ALG {
            return Err(DeedError::Unsupported(format!("algorithm {:?}", block.alg)));
        }
        let bytes: [u8; 64] = hex::decode(&block.value)
            .ok()
            .filter(|b| hex::encode(b) == block.value)
            .and_then(|b| b.try_into().ok())
            .ok_or(DeedError::Signature)?;
        key.verify(
            &canonical::to_canonical(&signed.deed),
            &Signature::from_bytes(&bytes),
        )
        .map_err(|_| DeedError::Signature)?;
        let deed: Deed =
            serde_json::from_value(signed.deed).map_err(|e| DeedError::Shape(e.to_string()))?;
        match deed.format.as_str() {
            FORMAT if deed.names_a_person() => {
                return Err(DeedError::Shape(format!("a {FORMAT} deed names no person")))
            }
            FORMAT | FORMAT_PERSON if deed.names_a_channel() => {
                return Err(DeedError::Shape(format!(
                    "a {} deed names no channel",
                    deed.format
                )))
            }
            FORMAT | FORMAT_PERSON | FORMAT_CHANNEL if deed.grant.is_some() => {
                return Err(DeedError::Shape(format!(
                    "a {} deed holds no grant",
                    deed.format
                )))
            }
            FORMAT_GRANT if deed.grant.is_none() => {
                return Err(DeedError::Shape(format!(
                    "a {FORMAT_GRANT} deed holds a grant"
                )))
            }
            FORMAT | FORMAT_PERSON | FORMAT_CHANNEL | FORMAT_GRANT => {}
            other => return Err(DeedError::Unsupported(format!("format {other:?}"))),
        }
        if deed.kid != block.kid {
            return Err(DeedError::Shape(
                "the deed and its signature name other keys".into(),
            ));
        }
        deed.chain().verify(&deed.events)?;
        if deed.format != FORMAT {
            deed.names_its_approvers()?;
        }
        Ok(deed)
    }

    fn chain(&self) -> audit::Chain<'_> {
        audit::Chain {
            origin: audit::Origin {
                tenant: &self.tenant,
                action_id: &self.action_id,
                agent_id: &self.call.agent_id,
                tool: &self.call.tool,
                args_digest: &self.call.args_digest,
                action_kind: self.call.action_kind.as_deref(),
                schedule: self.schedule.as_ref(),
                decision: self.decision,
                run: self.call.run.as_ref(),
            },
            args: &self.call.args,
            approval: self
                .approval
                .as_ref()
                .map(|a| (&a.context, a.context_digest.as_str())),
            outcome: self.outcome.as_ref(),
            grant: self.grant.as_ref(),
            version: self.version,
            head: &self.chain_head,
            state: self.state,
        }
    }
}

/// The actors of a chain's countersigning events, in order.
fn countersigning(events: &[Event]) -> Vec<&Actor> {
    events
        .iter()
        .filter(|e| audit::countersigns(e.from, e.to))
        .map(|e| &e.actor)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        action::Actor,
        seal::SealReason,
        transition::{Creation, Transition},
    };
    use serde_json::json;

    type Edit = fn(&mut Deed);

    /// Each `(name, edit, error)`: the deed edited and signed again with the tenant's own key
    /// fails verification with that error (the chain or the shape, not the signature).
    fn refused_when_edited<'a>(
        deed: &Deed,
        key: &DeedKey,
        cases: impl IntoIterator<Item = (&'a str, Edit, DeedError)>,
    ) {
        for (name, edit, expected) in cases {
            let mut forged = deed.clone();
            edit(&mut forged);
            assert_eq!(
                Deed::verify(&forged.sign(key), &key.verifying_key()),
                Err(expected),
                "{name}"
            );
        }
    }

    use crate::domain::fixtures::{at, pending};

    /// A denied action with its chain.
    fn denied() -> (Action, Vec<Event>) {
        let action = pending(
            "act_01J0000000000000000000000A",
            json!({"to": "ops@example.com", "n": 1.5, "é": "ü"}),
        );
        let created = Creation::new(action, Actor::agent("agent-1"), Some("approval"), at(0));
        let sealed = Transition::seal(
            &created.action,
            Actor::user("approver-1"),
            &SealReason::Denied("not today".into()),
            at(5),
        );
        (
            sealed.action.clone(),
            vec![created.event.clone(), sealed.event.clone()],
        )
    }

    fn signed() -> (Vec<u8>, DeedKey) {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = denied();
        audit::verify(&action, &events).unwrap();
        (
            Deed::of(&action, &events, "acme-1").unwrap().sign(&key),
            key,
        )
    }

    #[test]
    fn sc_sec_07_deed_round_trip() {
        let (file, key) = signed();
        let deed = Deed::verify(&file, &key.verifying_key()).unwrap();
        let (action, events) = denied();
        assert_eq!(deed, Deed::of(&action, &events, "acme-1").unwrap());
        assert_eq!(deed.kid, "acme-1");
        assert_eq!(deed.chain_head, action.chain_head);
    }

    #[test]
    fn sc_sec_07_a_one_byte_change_anywhere_fails() {
        let (file, key) = signed();
        let public = key.verifying_key();
        for i in 0..file.len() {
            for flip in [0x01u8, 0x20] {
                let mut changed = file.clone();
                changed[i] ^= flip;
                assert!(
                    Deed::verify(&changed, &public).is_err(),
                    "byte {i} ^ {flip:#x} still verifies: {:?}",
                    String::from_utf8_lossy(&changed)
                );
            }
        }
        // Reformatting (a trailing newline, pretty-printing) is a change too.
        let mut newline = file.clone();
        newline.push(b'\n');
        assert_eq!(
            Deed::verify(&newline, &public),
            Err(DeedError::NotCanonical)
        );
    }

    #[test]
    fn sc_sec_07_wrong_key_fails() {
        let (file, _) = signed();
        let other = DeedKey::from_seed("acme-1", &[8; 32]);
        assert_eq!(
            Deed::verify(&file, &other.verifying_key()),
            Err(DeedError::Signature)
        );
    }

    /// A deed re-signed by its own key after its chain was edited still fails: the deed is
    /// checked as a whole, not only its signature.
    #[test]
    fn sc_sec_07_a_signed_deed_with_a_broken_chain_fails() {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = denied();
        let mut deed = Deed::of(&action, &events, "acme-1").unwrap();
        deed.call.args = json!({"to": "attacker@example.com"});
        deed.call.args_digest = canonical::digest(&deed.call.args);
        assert_eq!(
            Deed::verify(&deed.sign(&key), &key.verifying_key()),
            Err(DeedError::Chain(ChainError::Hash { seq: 1 }))
        );
    }

    /// A deed re-signed by its own key after its call, schedule, outcome or shown context was
    /// edited fails offline (before chain v2 the tool, agent, window and outcome were unbound).
    #[test]
    fn sc_sec_07_a_resigned_deed_with_another_call_or_outcome_fails() {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = denied();
        let deed = Deed::of(&action, &events, "acme-1").unwrap();
        let cases: Vec<(&str, Edit, ChainError)> = vec![
            (
                "tool",
                |d| d.call.tool = "mail.other".into(),
                ChainError::Hash { seq: 1 },
            ),
            (
                "agent",
                |d| d.call.agent_id = "agent-2".into(),
                ChainError::Hash { seq: 1 },
            ),
            (
                "schedule",
                |d| {
                    d.schedule = Some(Window {
                        not_before: at(10),
                        not_after: at(900),
                    })
                },
                ChainError::Hash { seq: 1 },
            ),
            (
                "outcome",
                |d| d.outcome = Some(SealReason::Cancelled.outcome()),
                ChainError::Outcome { seq: 2 },
            ),
            (
                "shown context",
                |d| {
                    let approval = d.approval.as_mut().unwrap();
                    approval.context["agent_id"] = json!("agent-2");
                    approval.context_digest = canonical::digest(&approval.context);
                },
                ChainError::Context { field: "agent_id" },
            ),
        ];
        let cases = cases
            .into_iter()
            .map(|(n, e, c)| (n, e, DeedError::Chain(c)));
        refused_when_edited(&deed, &key, cases);
    }

    fn person(subject: &str, name: &str) -> Person {
        Person {
            issuer: "https://login.example.com/realms/acme".into(),
            subject: subject.into(),
            email: Some(format!("{subject}@example.com")),
            name: Some(name.into()),
        }
    }

    /// A quorum of two people (Ada, then Bob) approved, the tool ran: the action and its chain.
    fn approved_by_people() -> (Action, Vec<Event>) {
        use crate::domain::{quorum::Signer, transition::TicketTerms};
        let mut action = pending(
            "act_01J0000000000000000000000P",
            json!({"to": "ops@example.com"}),
        );
        action.approval.as_mut().unwrap().quorum.required = 2;
        let created = Creation::new(
            action,
            Actor::agent("agent-1"),
            Some("approval_required"),
            at(0),
        );
        let (ada, bob) = (person("ada", "Ada Lovelace"), person("bob", "Bob Kahn"));
        let signer = |id, person| Signer {
            id,
            person: Some(person),
            channel: None,
        };
        let one = Transition::sign(&created.action, signer("ada", &ada), &[], at(1)).unwrap();
        let terms = TicketTerms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: "sha256:f".into(),
            due_at: at(3),
            deadline: at(60),
        };
        let two = Transition::approve(&one.action, signer("bob", &bob), terms, at(2));
        let claimed = Transition::claim(&two.action, "worker-1", at(30), at(3)).unwrap();
        let done = Transition::finish(&claimed.action, Ok(json!({"sent": true})), at(4));
        let events = [
            &created.event,
            &one.event,
            &two.event,
            &claimed.event,
            &done.event,
        ];
        (done.action.clone(), events.into_iter().cloned().collect())
    }

    /// SC-ID-08: a deed of people's approvals is format v3 and names them — the one whose
    /// approval committed the ticket, and each approver of the quorum — and verifies offline.
    /// A deed of keys stays v2, the bytes it always was (`tests/formats.rs` holds main's).
    #[test]
    fn sc_id_08_a_deed_names_the_people_who_approved() {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = approved_by_people();
        audit::verify(&action, &events).unwrap();
        let deed = Deed::of(&action, &events, "acme-1").unwrap();
        assert_eq!(deed.format, FORMAT_PERSON);
        let verified = Deed::verify(&deed.sign(&key), &key.verifying_key()).unwrap();
        let approval = verified.approval.as_ref().unwrap();
        assert_eq!(approval.approver.as_deref(), Some("bob"));
        assert_eq!(approval.person, Some(person("bob", "Bob Kahn")));
        let people: Vec<_> = approval
            .approvers
            .iter()
            .map(|s| s.person.clone())
            .collect();
        assert_eq!(
            people,
            [
                Some(person("ada", "Ada Lovelace")),
                Some(person("bob", "Bob Kahn"))
            ]
        );
        let (keys, _) = denied();
        assert_eq!(
            Deed::of(&keys, &denied().1, "acme-1").unwrap().format,
            FORMAT
        );
    }

    /// SC-ID-08: a deed re-signed by its own key with another person, anywhere it names one, or
    /// a v3 deed passed off as v2, fails offline.
    #[test]
    fn sc_id_08_a_changed_person_fails() {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = approved_by_people();
        let deed = Deed::of(&action, &events, "acme-1").unwrap();
        let approver = || DeedError::Approver("the approver \"bob\"".into());
        let cases: Vec<(&str, Edit, DeedError)> = vec![
            (
                "the countersignature's person",
                |d| d.approval.as_mut().unwrap().person = Some(person("eve", "Eve")),
                approver(),
            ),
            (
                "the countersignature's name shown",
                |d| d.approval.as_mut().unwrap().person.as_mut().unwrap().name = Some("Eve".into()),
                approver(),
            ),
            (
                "no person on the countersignature",
                |d| d.approval.as_mut().unwrap().person = None,
                approver(),
            ),
            (
                "a quorum's approver",
                |d| d.approval.as_mut().unwrap().approvers[0].person = Some(person("eve", "Eve")),
                DeedError::Approver("the approver \"ada\"".into()),
            ),
            (
                "an event's actor",
                |d| d.events[1].actor.person = Some(person("eve", "Eve")),
                DeedError::Chain(ChainError::Hash { seq: 2 }),
            ),
            (
                "the format",
                |d| d.format = FORMAT.into(),
                DeedError::Shape(format!("a {FORMAT} deed names no person")),
            ),
        ];
        refused_when_edited(&deed, &key, cases);
    }

    /// A key's quorum of two: fin-1 on the page, fin-2 in Slack, whose approval committed.
    fn approved_through_channels() -> (Action, Vec<Event>) {
        use crate::domain::{quorum::Signer, transition::TicketTerms};
        let mut action = pending(
            "act_01J0000000000000000000000C",
            json!({"to": "ops@example.com"}),
        );
        action.approval.as_mut().unwrap().quorum.required = 2;
        let created = Creation::new(action, Actor::agent("agent-1"), Some("approval"), at(0));
        let via = |id, channel| Signer {
            id,
            person: None,
            channel: Some(channel),
        };
        let one = Transition::sign(&created.action, via("fin-1", Channel::Page), &[], at(1));
        let one = one.unwrap();
        let terms = TicketTerms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: "sha256:f".into(),
            due_at: at(3),
            deadline: at(60),
        };
        let two = Transition::approve(&one.action, via("fin-2", Channel::Slack), terms, at(2));
        let cancelled = Transition::seal(
            &two.action,
            Actor::user_via("fin-1", Some(Channel::Cli)),
            &SealReason::Cancelled,
            at(3),
        );
        let events = [&created.event, &one.event, &two.event, &cancelled.event];
        (
            cancelled.action.clone(),
            events.into_iter().cloned().collect(),
        )
    }

    /// SC-CH-08: a deed of decisions made through channels is format v4: its events name each
    /// channel, its countersignature the one the committing approval came through, and it
    /// verifies offline; a deed without a channel keeps its format (v2 here).
    #[test]
    fn sc_ch_08_a_deed_names_the_channels() {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = approved_through_channels();
        audit::verify(&action, &events).unwrap();
        let deed = Deed::of(&action, &events, "acme-1").unwrap();
        assert_eq!(deed.format, FORMAT_CHANNEL);
        let verified = Deed::verify(&deed.sign(&key), &key.verifying_key()).unwrap();
        let approval = verified.approval.as_ref().unwrap();
        assert_eq!(approval.channel, Some(Channel::Slack));
        assert_eq!(
            verified.approved_by().as_deref(),
            Some("fin-2, through slack")
        );
        let channels: Vec<_> = verified.events.iter().map(|e| e.actor.channel).collect();
        assert_eq!(
            channels,
            [
                None,
                Some(Channel::Page),
                Some(Channel::Slack),
                Some(Channel::Cli)
            ]
        );
        let (keys, events) = denied();
        assert_eq!(Deed::of(&keys, &events, "acme-1").unwrap().format, FORMAT);
    }

    /// SC-CH-08: a deed re-signed by its own key with another channel, anywhere it names one,
    /// or a v4 deed passed off as v3 or v2, fails offline.
    #[test]
    fn sc_ch_08_a_changed_channel_fails() {
        let key = DeedKey::from_seed("acme-1", &[7; 32]);
        let (action, events) = approved_through_channels();
        let deed = Deed::of(&action, &events, "acme-1").unwrap();
        let approver = || DeedError::Approver("the approver \"fin-2\"".into());
        let cases: Vec<(&str, Edit, DeedError)> = vec![
            (
                "the countersignature's channel",
                |d| d.approval.as_mut().unwrap().channel = Some(Channel::Page),
                approver(),
            ),
            (
                "no channel on the countersignature",
                |d| d.approval.as_mut().unwrap().channel = None,
                approver(),
            ),
            (
                "an event's channel",
                |d| d.events[3].actor.channel = Some(Channel::Api),
                DeedError::Chain(ChainError::Hash { seq: 4 }),
            ),
            (
                "the format v3",
                |d| d.format = FORMAT_PERSON.into(),
                DeedError::Shape(format!("a {FORMAT_PERSON} deed names no channel")),
            ),
            (
                "the format v2",
                |d| d.format = FORMAT.into(),
                DeedError::Shape(format!("a {FORMAT} deed names no channel")),
            ),
        ];
        refused_when_edited(&deed, &key, cases);
    }

    #[test]
    fn sc_sec_07_keys_load_from_pem() {
        let private = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAPMcH0raIkxYyLt09QFKwHyNuoId7ncXzmxgYqosXJT\n-----END PRIVATE KEY-----\n";
        let public = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAeF6rXwcJYnBbHjTfCXBgcEdggyflqrQn674TbOiwdhE=\n-----END PUBLIC KEY-----\n";
        let key = DeedKey::from_pem("k", private).unwrap();
        assert_eq!(key.verifying_key(), public_key_from_pem(public).unwrap());
        assert!(DeedKey::from_pem("k", public).is_err());
        assert!(public_key_from_pem("nonsense").is_err());
    }
}
