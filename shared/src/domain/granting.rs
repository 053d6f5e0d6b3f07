//! Granting: what an approver asks for with an approve, judged before anything is written
//! (SC-GR-01, SC-GR-03) — its bounds, its pins against the call, its condition, the rule that
//! holds the call now, the approver's groups and, under a quorum, the earlier approvals' asks
//! — and the terms of the grant it gives. Pure; the record those terms start is `grant`'s.

use super::{
    call::Call,
    condition::Condition,
    countersign::Decider,
    granted::{Asked, GrantedBy, Terms, FORMAT},
    policy::Gate,
    quorum::Signoff,
    Decision,
};
use jiff::{SignedDuration, Timestamp};

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
    if let Some(field) = ask
        .pin
        .iter()
        .find(|f| g.call.args().get(f.as_str()).is_none())
    {
        return Err(Refusal::NoSuchArg(field.clone()));
    }
    // Sorted and once each: how approvals of a quorum compare what they asked.
    let mut pin = ask.pin.clone();
    pin.sort();
    pin.dedup();
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
        pin,
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
