//! Scoped grants (SC-GR-01 … SC-GR-08): an approver who countersigns one call may also grant
//! the same agent further calls of the same tool, under the same policy rule, for a bounded
//! time and count, pinned to argument values and/or a CEL condition. A grant only narrows: it
//! turns the `require_approval` of the rule it was granted under into `allow`, and nothing
//! else — a call another rule decides (a deny, a quorum of others, other approver groups) is
//! decided as if the grant did not exist.
//!
//! Pure: the terms asked for are judged in `granting` ([`grant`]), a call is matched here ([`Grant::admits`]),
//! a use and a revocation are the next version of the record ([`Grant::spend`],
//! [`Grant::revoke`]), which the store commits with one conditional write on the version. The
//! record is tamper-evident: its digest covers its terms and is checked when it loads, and its
//! uses and revocation are counted against them.

pub use super::granted::{Asked, GrantRef, GrantedBy, Terms};
pub use super::granting::{
    grant, id_for, judge, terms, Ask, Granting, Refusal, DEFAULT_TTL, DEFAULT_USES, MAX_PINS,
    MAX_TTL, MAX_USES,
};
use super::{
    actor::Person, call::Call, condition::Bound, condition::Condition, policy::Gate, Decision,
};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use utoipa::ToSchema;

pub use super::granted::FORMAT;
/// A revocation: by whom, when, and how many uses came before it (every use the record counts:
/// none can follow a revocation). Each use is named by its own action's audit trail, whose
/// first event carries the grant's [`GrantRef`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Revoked {
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<Person>,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub at: Timestamp,
    pub after_uses: u32,
}

/// A grant record: its terms and their digest, what is left of it, and its version (every
/// use and the revocation is one conditional write on it). Loads only when consistent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Stored")]
pub struct Grant {
    fixed: Arc<Fixed>,
    uses_left: u32,
    revoked: Option<Revoked>,
    version: u64,
}

/// What never changes in a grant's life, shared by its versions and clones: its terms, their
/// digest, and its condition — compiled at its first evaluation, then kept, so a grant a store
/// remembers (`store::GrantMemo`) is not compiled again for every call it is matched against.
#[derive(Debug, PartialEq)]
struct Fixed {
    terms: Terms,
    digest: String,
    /// An error where the source is not a condition: it never allows.
    when: Option<Result<Condition, String>>,
}

impl Fixed {
    fn of(terms: Terms, digest: String) -> Fixed {
        Fixed {
            when: terms.when.as_deref().map(Condition::deferred),
            terms,
            digest,
        }
    }
}

/// The stored form: the record's JSON, as every store keeps it.
#[derive(Serialize)]
struct Shown<'a> {
    terms: &'a Terms,
    digest: &'a str,
    uses_left: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked: &'a Option<Revoked>,
    version: u64,
}

impl Serialize for Grant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Shown {
            terms: &self.fixed.terms,
            digest: &self.fixed.digest,
            uses_left: self.uses_left,
            revoked: &self.revoked,
            version: self.version,
        }
        .serialize(s)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    terms: Terms,
    digest: String,
    uses_left: u32,
    #[serde(default)]
    revoked: Option<Revoked>,
    version: u64,
}

impl TryFrom<Stored> for Grant {
    type Error = String;

    /// The checks of a stored grant (tamper evidence): its digest covers its terms, what is
    /// left is at most its count, no use follows a revocation, and one write per use or
    /// revocation made its version.
    fn try_from(s: Stored) -> Result<Self, String> {
        if s.terms.format != FORMAT {
            return Err(format!("grant format {:?} is not known", s.terms.format));
        }
        if s.terms.digest() != s.digest {
            return Err(format!(
                "grant {}: its terms do not match its digest",
                s.terms.id
            ));
        }
        let Some(spent) = s.terms.uses.checked_sub(s.uses_left) else {
            return Err(format!("grant {}: uses do not add up", s.terms.id));
        };
        if let Some(r) = &s.revoked {
            if r.after_uses != spent {
                return Err(format!("grant {}: a use after its revocation", s.terms.id));
            }
        }
        let writes = 1 + u64::from(spent) + u64::from(s.revoked.is_some());
        if s.version != writes {
            return Err(format!(
                "grant {}: version {} for {writes} writes",
                s.terms.id, s.version
            ));
        }
        Ok(Grant {
            fixed: Arc::new(Fixed::of(s.terms, s.digest)),
            uses_left: s.uses_left,
            revoked: s.revoked,
            version: s.version,
        })
    }
}

/// `grt_` + a ULID: anything else names no grant (and never reaches the store).
pub fn is_grant_id(id: &str) -> bool {
    id.strip_prefix("grt_")
        .is_some_and(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Why a grant does not allow a call (its first failing check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// The policy does not ask a person for it (it allows, denies, schedules or answers).
    NotAsked,
    /// Another tenant, agent or tool.
    Caller,
    /// Another rule decides it, or the rule asks more of it than when granted.
    Rule,
    /// The rule's approver groups no longer admit the one who granted.
    Groups,
    Revoked,
    Expired,
    UsedUp,
    /// This pinned field differs (or is missing).
    Pin(String),
    /// The condition does not hold, or cannot be evaluated (which never allows).
    Condition,
}

impl Grant {
    /// A new grant: version 1, every use left.
    pub fn new(terms: Terms) -> Grant {
        let (digest, uses_left) = (terms.digest(), terms.uses);
        Grant {
            fixed: Arc::new(Fixed::of(terms, digest)),
            uses_left,
            revoked: None,
            version: 1,
        }
    }

    pub fn id(&self) -> &str {
        &self.fixed.terms.id
    }
    pub fn tenant(&self) -> &str {
        &self.fixed.terms.tenant
    }
    pub fn terms(&self) -> &Terms {
        &self.fixed.terms
    }
    pub fn digest(&self) -> &str {
        &self.fixed.digest
    }
    pub fn uses_left(&self) -> u32 {
        self.uses_left
    }
    /// Calls it allowed so far.
    pub fn spent(&self) -> u32 {
        self.fixed.terms.uses - self.uses_left
    }
    pub fn revoked(&self) -> Option<&Revoked> {
        self.revoked.as_ref()
    }
    pub fn version(&self) -> u64 {
        self.version
    }

    /// How an audit event names it.
    pub fn reference(&self) -> GrantRef {
        GrantRef {
            id: self.fixed.terms.id.clone(),
            digest: self.fixed.digest.clone(),
        }
    }

    /// Whether it may still allow a call at `now`: not revoked, not expired, a use left.
    pub fn live(&self, now: Timestamp) -> Result<(), Miss> {
        if self.revoked.is_some() {
            return Err(Miss::Revoked);
        }
        if now >= self.fixed.terms.expires_at {
            return Err(Miss::Expired);
        }
        if self.uses_left == 0 {
            return Err(Miss::UsedUp);
        }
        Ok(())
    }

    /// Whether this grant allows `call`, which the policy answered with `gate`, at `now`. Only
    /// narrows: a call the policy does not hold for a person, or holds under another rule, or
    /// from approvers the granter is not among, is never this grant's.
    pub fn admits(&self, call: &Call, gate: &Gate, now: Timestamp) -> Result<(), Miss> {
        let t = &self.fixed.terms;
        if gate.decision != Decision::RequireApproval {
            return Err(Miss::NotAsked);
        }
        if (call.tenant(), call.agent_id(), call.tool())
            != (t.tenant.as_str(), t.agent_id.as_str(), t.tool.as_str())
        {
            return Err(Miss::Caller);
        }
        let same_rule = gate
            .rule
            .as_ref()
            .is_some_and(|r| r.index == t.rule && r.label == t.rule_label);
        if !same_rule || gate.countersigners.approvals.max(1) > t.approvals {
            return Err(Miss::Rule);
        }
        if !gate.countersigners.admits(&t.granted_by.groups) {
            return Err(Miss::Groups);
        }
        self.live(now)?;
        for (field, value) in &t.pins {
            if call.args().get(field) != Some(value) {
                return Err(Miss::Pin(field.clone()));
            }
        }
        if let Some(when) = &self.fixed.when {
            let holds = (when.as_ref().map_err(String::clone))
                .and_then(|c| c.holds(&Bound::new(&call.facts(now))));
            if holds != Ok(true) {
                return Err(Miss::Condition);
            }
        }
        Ok(())
    }

    /// The next version after one use at `now` (what the store's conditional write commits),
    /// or why it cannot be used.
    pub fn spend(&self, now: Timestamp) -> Result<Grant, Miss> {
        self.live(now)?;
        let mut next = self.clone();
        next.uses_left -= 1;
        next.version += 1;
        Ok(next)
    }

    /// The next version after a revocation by `by`, or `None`: revoked already. A revoked
    /// grant allows nothing more; its uses stand.
    pub fn revoke(&self, by: &str, person: Option<&Person>, now: Timestamp) -> Option<Grant> {
        if self.revoked.is_some() {
            return None;
        }
        let mut next = self.clone();
        next.revoked = Some(Revoked {
            by: by.to_owned(),
            person: person.cloned(),
            at: super::time::micros(now),
            after_uses: self.spent(),
        });
        next.version += 1;
        Some(next)
    }
}

/// The first of `grants` that allows `call` (the oldest first: ids are time-ordered).
pub fn first_admitting<'g>(
    grants: &'g [Grant],
    call: &Call,
    gate: &Gate,
    now: Timestamp,
) -> Option<&'g Grant> {
    let mut sorted: Vec<&Grant> = grants.iter().collect();
    sorted.sort_by(|a, b| a.id().cmp(b.id()));
    sorted
        .into_iter()
        .find(|g| g.admits(call, gate, now).is_ok())
}

#[cfg(test)]
mod tests;
