//! Who countersigns and how many must (SC-POL-03, SC-POL-04): the terms an approval is asked
//! with, and each approval of a quorum.

use super::{
    actor::{Actor, Channel, Person},
    granted::Asked,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The countersigners an approval needs, and once committed every one who signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Quorum {
    /// Distinct approvals before the ticket commits.
    pub required: u32,
    /// Approver groups that may decide; empty: any approver of the tenant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Every approval, in order, once the last one committed the ticket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signed: Vec<Signoff>,
}

impl Default for Quorum {
    fn default() -> Self {
        Quorum {
            required: 1,
            groups: Vec::new(),
            signed: Vec::new(),
        }
    }
}

impl Quorum {
    pub(super) fn is_single(&self) -> bool {
        *self == Quorum::default()
    }

    /// Who signed a committed quorum, in order.
    pub fn approvers(&self) -> Vec<&str> {
        self.signed.iter().map(|s| s.approver.as_str()).collect()
    }

    /// A pending quorum's approvals are distinct and fewer than it needs (the last one commits
    /// the ticket instead).
    pub(super) fn holds_pending(&self, approvals: &[Signoff]) -> bool {
        let mut names: Vec<&str> = approvals.iter().map(|s| s.approver.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.len() == approvals.len() && (approvals.len() as u64) < u64::from(self.required)
    }

    /// Whether an approver in `groups` may decide this approval.
    pub fn admits(&self, groups: &[String]) -> bool {
        in_groups(&self.groups, groups)
    }
}

/// The one rule of who may decide: an approver in `groups` may, under a rule naming `named`
/// (empty: any approver of the tenant), when it is in one of them (SC-POL-03).
pub fn in_groups(named: &[String], groups: &[String]) -> bool {
    named.is_empty() || named.iter().any(|g| groups.contains(g))
}

/// One approver's approval of a quorum (SC-POL-04).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Signoff {
    pub approver: String,
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// The person a verified token named (SC-ID-06); absent for an approver key, so a record
    /// or deed written before people were recorded reads and hashes as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Person>,
    /// The grant this approval asked for with the others of a grantable quorum (SC-GR-03);
    /// absent when it asked none, so records without one read and hash as they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Asked>,
}

impl Signoff {
    /// Whether this approval is `who`'s: the same approver name, or the same person (issuer and
    /// subject) under any name. A quorum never counts one approver twice (SC-ID-06).
    pub fn by(&self, who: Signer<'_>) -> bool {
        self.approver == who.id
            || matches!((&self.person, who.person), (Some(mine), Some(theirs)) if mine.is(theirs))
    }
}

/// Who countersigns: an approver key's name, or a person's agent id (their subject) with the
/// person a verified token named; and the channel the decision came through where it is
/// recorded (`slack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signer<'a> {
    pub id: &'a str,
    pub person: Option<&'a Person>,
    pub channel: Option<Channel>,
}

impl<'a> From<&'a str> for Signer<'a> {
    /// An approver key, by its name.
    fn from(id: &'a str) -> Self {
        Signer {
            id,
            person: None,
            channel: None,
        }
    }
}

impl<'a> From<&'a String> for Signer<'a> {
    /// An approver key, by its name.
    fn from(id: &'a String) -> Self {
        Signer::from(id.as_str())
    }
}

impl Signer<'_> {
    /// The actor of this approver's audit events (SC-ID-07).
    pub fn actor(self) -> Actor {
        Actor::decider(self.id, self.person, self.channel)
    }

    pub fn signoff(self, at: Timestamp) -> Signoff {
        Signoff {
            approver: self.id.to_owned(),
            at,
            person: self.person.cloned(),
            grant: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        fixtures::{at, pending},
        transition::{Creation, TicketTerms, Transition},
        Action, Actor, State,
    };
    use serde_json::json;

    fn quorum_of(n: u32) -> Action {
        let mut a = pending("act_01J0000000000000000000000Q", json!({"amount": 60000}));
        a.approval.as_mut().unwrap().quorum.required = n;
        Creation::new(a, Actor::agent("agent-1"), Some("approval_required"), at(0))
            .action
            .clone()
    }

    #[test]
    fn sc_pol_04_each_approval_is_its_own_event_until_the_last() {
        let a = quorum_of(3);
        let one = Transition::sign(&a, "fin-1", &[], at(1)).unwrap();
        assert_eq!(one.expected, (State::PendingApproval, 1));
        assert_eq!(one.event.reason.as_deref(), Some("approval_recorded"));
        let digest = &a.approval.as_ref().unwrap().context_digest;
        assert_eq!(one.event.context_digest.as_ref(), Some(digest));
        assert!(
            Transition::sign(&one.action, "fin-1", &[], at(2)).is_none(),
            "once each"
        );
        let two = Transition::sign(&one.action, "fin-2", &[], at(2)).unwrap();
        let terms = TicketTerms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: "sha256:f".into(),
            due_at: at(3),
            deadline: at(60),
        };
        let done = Transition::approve(&two.action, "fin-3", terms, at(3));
        assert_eq!(done.action.state(), State::Approved);
        let signed = done.action.approval.as_ref().unwrap().quorum.approvers();
        assert_eq!(signed, ["fin-1", "fin-2", "fin-3"]);
        assert!(
            done.action.approvals().is_empty(),
            "the standing holds a pending quorum only"
        );
    }

    /// SC-ID-06: a person signs a quorum once — under their name, or under another name with
    /// the same issuer and subject — and two people are two; the approval and its event carry
    /// the person.
    #[test]
    fn sc_id_06_a_person_signs_a_quorum_once() {
        let person = |issuer: &str, subject: &str| Person {
            issuer: issuer.into(),
            subject: subject.into(),
            email: None,
            name: None,
        };
        let ada = person("https://login.example.com", "ada");
        let bob = person("https://login.example.com", "bob");
        let elsewhere = person("https://other.example.com", "ada");
        let by = |id, person| Signer {
            id,
            person: Some(person),
            channel: None,
        };
        let a = quorum_of(3);
        let one = Transition::sign(&a, by("ada", &ada), &[], at(1)).unwrap();
        assert_eq!(one.event.actor.person.as_ref(), Some(&ada));
        assert_eq!(one.action.approvals()[0].person.as_ref(), Some(&ada));
        assert!(
            Transition::sign(&one.action, by("ada-again", &ada), &[], at(2)).is_none(),
            "the same person under another name"
        );
        assert!(!one.action.approvals()[0].by(by("ada-elsewhere", &elsewhere)));
        let two = Transition::sign(&one.action, by("bob", &bob), &[], at(2)).unwrap();
        assert_eq!(two.action.approvals().len(), 2);
        let back = Action::from_stored(&two.action.to_stored()).unwrap();
        assert_eq!(back, two.action, "a quorum of people loads");
    }

    /// Issue 28, item 8: an approval that lands after earlier ones lapsed drops them in the
    /// same write and names them; the quorum then still needs as many as were dropped.
    #[test]
    fn sc_pol_04_an_approval_drops_the_lapsed_ones_and_names_them() {
        let a = quorum_of(3);
        let one = Transition::sign(&a, "fin-1", &[], at(1)).unwrap();
        let two = Transition::sign(&one.action, "fin-2", &[], at(2)).unwrap();
        let lapsed = ["fin-1".to_owned()];
        let three = Transition::sign(&two.action, "fin-3", &lapsed, at(3)).unwrap();
        let names: Vec<_> = three
            .action
            .approvals()
            .iter()
            .map(|s| &s.approver)
            .collect();
        assert_eq!(names, ["fin-2", "fin-3"]);
        assert_eq!(
            three.event.reason.as_deref(),
            Some("approval_recorded; lapsed: fin-1")
        );
        assert!(
            three.event.context_digest.is_some(),
            "still a countersignature"
        );
        let back = Action::from_stored(&three.action.to_stored()).unwrap();
        assert_eq!(back, three.action, "a pending quorum that loads");
    }

    #[test]
    fn sc_pol_04_stored_quorums_load_and_old_records_have_no_approvals() {
        let a = quorum_of(2);
        let signed = Transition::sign(&a, "fin-1", &[], at(1))
            .unwrap()
            .action
            .clone();
        let back = Action::from_stored(&signed.to_stored()).unwrap();
        assert_eq!(back, signed);
        // A record written before quorums: no `approvals`, no `quorum` — one approval, anyone.
        let mut old: serde_json::Value = serde_json::from_slice(&quorum_of(1).to_stored()).unwrap();
        assert!(old.get("approvals").is_none() && old["approval"].get("quorum").is_none());
        old["approval"].as_object_mut().unwrap().remove("quorum");
        let old = Action::from_stored(&serde_json::to_vec(&old).unwrap()).unwrap();
        assert!(old.approvals().is_empty());
        assert_eq!(old.approval.unwrap().quorum, Quorum::default());
        // Approvals repeated, reaching the quorum, or outside a pending record: refused.
        let mut stored: serde_json::Value = serde_json::from_slice(&signed.to_stored()).unwrap();
        let entry = stored["approvals"][0].clone();
        for bad in [
            json!([entry.clone(), entry.clone()]),
            json!([entry.clone(), {"approver": "fin-2", "at": entry["at"]}]),
        ] {
            stored["approvals"] = bad;
            assert!(Action::from_stored(&serde_json::to_vec(&stored).unwrap()).is_err());
        }
    }
}
