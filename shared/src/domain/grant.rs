//! Scoped grants (SC-GR-01 … SC-GR-08): an approver who countersigns one call may also grant
//! the same agent further calls of the same tool, under the same policy rule, for a bounded
//! time and count, pinned to argument values and/or a CEL condition. A grant only narrows: it
//! turns the `require_approval` of the rule it was granted under into `allow`, and nothing
//! else — a call another rule decides (a deny, a quorum of others, other approver groups) is
//! decided as if the grant did not exist.
//!
//! Pure: the terms asked for are judged here ([`grant`]), a call is matched here ([`Grant::admits`]),
//! a use and a revocation are the next version of the record ([`Grant::spend`],
//! [`Grant::revoke`]), which the store commits with one conditional write on the version. The
//! record is tamper-evident: its digest covers its terms and is checked when it loads, and its
//! uses and revocation are counted against them.

pub use super::granted::{Asked, GrantRef, GrantedBy, Terms};
use super::{
    actor::Person, call::Call, condition::Bound, condition::Condition, countersign::Decider,
    policy::Gate, quorum::Signoff, Decision,
};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Map;
use std::sync::Arc;
use utoipa::ToSchema;

pub use super::granted::FORMAT;
/// How long a grant lasts unless the approver says.
pub const DEFAULT_TTL: SignedDuration = SignedDuration::from_hours(1);
/// The longest a grant may last: 30 days.
pub const MAX_TTL: SignedDuration = SignedDuration::from_hours(24 * 30);
/// How many calls a grant allows unless the approver says.
pub const DEFAULT_USES: u32 = 1;
/// The most calls one grant may allow.
pub const MAX_USES: u32 = 1000;
/// The most argument fields one grant may pin.
pub const MAX_PINS: usize = 16;

/// What an approver asks for with an approve: each term optional (the defaults above).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ask {
    pub ttl: Option<SignedDuration>,
    pub uses: Option<u32>,
    /// Argument fields whose values later calls must repeat exactly.
    pub pin: Vec<String>,
    /// A CEL condition over the later call (the policy's own engine).
    pub when: Option<String>,
}

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

/// Why a grant asked for with an approve is refused: nothing is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A term outside its bounds: the term (`grant.ttl`, `grant.uses`, `grant.pin`) and why.
    Bounds {
        param: &'static str,
        message: String,
    },
    /// A pinned field the approved call does not carry.
    NoSuchArg(String),
    /// The condition does not compile: the compiler's words.
    Condition(String),
    /// The policy does not ask a person for this call now: there is nothing to grant.
    NotAsked,
    /// The approver is in none of the groups the rule names.
    NotInGroups(Vec<String>),
    /// The rule needs several approvers and does not say `grantable = true`.
    Quorum(u32),
    /// An earlier approval of the quorum (this approver's) asked no grant, or another one: a
    /// grant under a rule of several approvers needs each of them to ask it alike.
    QuorumDisagrees(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Bounds { param, message } => write!(f, "{param}: {message}"),
            Refusal::NoSuchArg(field) => {
                write!(f, "grant.pin: the call has no argument {field:?} to pin")
            }
            Refusal::Condition(m) => write!(f, "grant.when: {m}"),
            Refusal::NotAsked => f.write_str(
                "the policy does not ask a person for this call: there is nothing to grant",
            ),
            Refusal::NotInGroups(g) => write!(
                f,
                "only an approver in {} may grant under this rule",
                g.join(", ")
            ),
            Refusal::Quorum(n) => write!(
                f,
                "this rule needs {n} approvers and is not grantable (the rule may say grantable = true)"
            ),
            Refusal::QuorumDisagrees(approver) => write!(
                f,
                "a grant under a rule of several approvers needs each of them to ask for it with the same terms, and {approver} approved this call without this grant; approve without one, or each approver asks the same grant"
            ),
        }
    }
}

/// What a grant asked for with an approve is judged on.
#[derive(Debug, Clone, Copy)]
pub struct Granting<'a> {
    /// The call being approved.
    pub call: &'a Call,
    /// The policy's answer for that call now, as the engine read it.
    pub gate: &'a Gate,
    pub approver: Decider<'a>,
    /// The approvals of a quorum given before this one that still count (the lapsed ones
    /// dropped); empty for a rule of one approval.
    pub earlier: &'a [Signoff],
    pub now: Timestamp,
}

/// A grant asked for with an approve, judged in this order: its bounds (ttl, uses, pins), its
/// pins against the call, its condition compiles; then the rule — it must ask a person for
/// this call, the approver must be one it admits, a quorum rule must be grantable, and every
/// earlier approval counted in its quorum must have asked the same grant. What it comes to,
/// settled: each approval of a quorum records it, and the one that completes the quorum gives
/// the grant ([`grant`]).
pub fn judge(ask: &Ask, g: &Granting<'_>) -> Result<Asked, Refusal> {
    let ttl = ask.ttl.unwrap_or(DEFAULT_TTL);
    // Whole seconds: what a quorum's approvals compare and the terms record.
    if ttl < SignedDuration::from_secs(1) || ttl > MAX_TTL {
        return Err(Refusal::Bounds {
            param: "grant.ttl",
            message: "a grant lasts at least 1s and at most 30 days (720h)".into(),
        });
    }
    let uses = ask.uses.unwrap_or(DEFAULT_USES);
    if !(1..=MAX_USES).contains(&uses) {
        return Err(Refusal::Bounds {
            param: "grant.uses",
            message: format!("a grant allows 1–{MAX_USES} calls"),
        });
    }
    if ask.pin.len() > MAX_PINS {
        return Err(Refusal::Bounds {
            param: "grant.pin",
            message: format!("at most {MAX_PINS} pinned fields"),
        });
    }
    let mut pins = Map::new();
    for field in &ask.pin {
        let value = g.call.args().get(field.as_str());
        let value = value.ok_or_else(|| Refusal::NoSuchArg(field.clone()))?;
        pins.insert(field.clone(), value.clone());
    }
    if let Some(when) = &ask.when {
        Condition::compile(when).map_err(Refusal::Condition)?;
    }
    let gate = match (&g.gate.decision, &g.gate.rule) {
        (Decision::RequireApproval, Some(_)) => g.gate,
        _ => return Err(Refusal::NotAsked),
    };
    if !gate.countersigners.admits(g.approver.groups) {
        return Err(Refusal::NotInGroups(gate.countersigners.groups.clone()));
    }
    let approvals = gate.countersigners.approvals.max(1);
    if approvals > 1 && !gate.countersigners.grantable {
        return Err(Refusal::Quorum(approvals));
    }
    let asked = Asked {
        ttl_seconds: ttl.as_secs(),
        uses,
        pin: pins.keys().cloned().collect(),
        when: ask.when.clone(),
    };
    if let Some(other) = g.earlier.iter().find(|s| s.grant.as_ref() != Some(&asked)) {
        return Err(Refusal::QuorumDisagrees(other.approver.clone()));
    }
    Ok(asked)
}

/// The terms of the grant an approval gives: [`judge`]d, then [`terms`].
pub fn grant(ask: &Ask, g: &Granting<'_>) -> Result<Terms, Refusal> {
    terms(&judge(ask, g)?, g)
}

/// The terms of a grant [`judge`]d as `asked`, fixed by the approval that gives it: the
/// approver, the rule, the pinned values, the window from now.
pub fn terms(asked: &Asked, g: &Granting<'_>) -> Result<Terms, Refusal> {
    let (gate, rule) = match &g.gate.rule {
        Some(rule) => (g.gate, rule),
        None => return Err(Refusal::NotAsked),
    };
    let ttl = SignedDuration::from_secs(asked.ttl_seconds);
    let uses = asked.uses;
    let approvals = gate.countersigners.approvals.max(1);
    let pins = asked
        .pin
        .iter()
        .filter_map(|field| Some((field.clone(), g.call.args().get(field.as_str())?.clone())))
        .collect();
    let granted_at = super::time::micros(g.now);
    let groups = g
        .approver
        .groups
        .iter()
        .filter(|group| gate.countersigners.admits(std::slice::from_ref(*group)))
        .cloned()
        .collect();
    Ok(Terms {
        format: FORMAT.to_owned(),
        id: id_for(g.call.id()),
        tenant: g.call.tenant().to_owned(),
        agent_id: g.call.agent_id().to_owned(),
        tool: g.call.tool().to_owned(),
        rule: rule.index,
        rule_label: rule.label.clone(),
        approvals,
        from_action: g.call.id().to_owned(),
        granted_by: GrantedBy {
            approver: g.approver.id.to_owned(),
            person: g.approver.person.cloned(),
            groups,
        },
        granted_at,
        expires_at: granted_at.saturating_add(ttl).unwrap_or(Timestamp::MAX),
        uses,
        pins,
        when: asked.when.clone(),
    })
}

/// The id of the grant an approval of `action_id` makes: `grt_` + the action's ULID, so an
/// approve retried after its grant was stored names the same grant.
pub fn id_for(action_id: &str) -> String {
    format!(
        "grt_{}",
        action_id.strip_prefix("act_").unwrap_or(action_id)
    )
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
