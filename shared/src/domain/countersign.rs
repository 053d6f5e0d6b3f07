//! The countersignature's rules and the cancel's, as pure verdicts (SPEC §4 Approval, Cancel
//! and stop): who may decide an action, and what an approve, a deny or a cancel meets — checked
//! in a fixed order, each refusal typed. The engine reads the record and the config, asks here,
//! commits what it is told, and after a lost race asks again with the record that won. Nothing
//! here reads a store, a clock or the config.

use super::{
    action::{Action, Approval, Person},
    actor::Channel,
    granted::Asked,
    quorum::Signer,
    seal::SealReason,
    state::State,
    submission::MAX_ID,
    transition::{TicketTerms, Transition},
};
use jiff::{SignedDuration, Timestamp};

/// An approver as the rules see it: its name (a key's, or a person's subject), its groups, and
/// the person a verified token named.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    pub id: &'a str,
    pub groups: &'a [String],
    pub person: Option<&'a Person>,
    /// The channel the decision came through, where it is recorded (`slack`).
    pub channel: Option<Channel>,
}

impl<'a> Decider<'a> {
    /// Who signs, as the record keeps it.
    pub fn signer(self) -> Signer<'a> {
        Signer {
            id: self.id,
            person: self.person,
            channel: self.channel,
        }
    }
}

/// Why an approve, a deny or a cancel is refused. Nothing changes; the engine maps each to its
/// one API error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Objection {
    /// SC-APP-01: an approver never approves a call submitted under its own identity.
    OwnCall,
    /// SC-POL-03: the key is in none of the approver groups the action's rule names (these).
    NotInGroups(Vec<String>),
    /// The ticket was committed by policy: there is no countersignature to give.
    CommittedByPolicy,
    /// SC-APP-02: the approver saw another context than the committed one (its digest).
    ContextChanged { current_digest: String },
    /// A deny of an action already approved: cancel it instead.
    AlreadyApproved,
    /// SC-CAN-02: a worker holds the claim.
    Executing,
    /// SC-CAN-02: sealed in this state.
    Sealed(State),
}

/// What an approve comes to.
#[derive(Debug, Clone)]
pub enum Approve {
    /// Nothing to write: this approval is in the record already (a retried approve, the same
    /// approver again, SC-POL-04). Answer with the record as it stands.
    AlreadyApproved,
    /// One approval of a quorum that needs more (SC-POL-04), dropping the lapsed ones.
    Sign(Box<Transition>),
    /// The last approval: commit the ticket with these terms (SC-APP-03).
    Commit(TicketTerms),
    /// The approval can no longer be given: seal it for this reason and refuse — it expired
    /// (SC-APP-04) or its tool left the catalog.
    Seal(SealReason),
    Refused(Objection),
}

/// What an approve is judged on, read by the engine just before.
#[derive(Debug, Clone, Copy)]
pub struct ApproveFacts<'a> {
    pub action: &'a Action,
    pub approver: Decider<'a>,
    /// The digest of the context the approver was shown.
    pub context_digest: &'a str,
    /// The approvers of the record's approvals so far whose keys no longer may decide it (left
    /// the config, or the rule's groups), as this process reads the config (SC-POL-04).
    pub lapsed: &'a [String],
    /// The grant this approval asks for, judged already ([`super::grant::judge`]): recorded on
    /// its signoff when the quorum needs more (SC-GR-03).
    pub grant: Option<&'a Asked>,
    /// The tool's catalog fingerprint now; `None`: it left the catalog.
    pub catalog_fingerprint: Option<&'a str>,
    /// The ticket's correlation id, should this approval commit one: made by the engine (the
    /// domain generates nothing).
    pub correlation_id: &'a str,
    /// How long a ticket for a call without a window may wait to start (`limits.run_deadline`).
    pub run_deadline: SignedDuration,
    pub now: Timestamp,
}

/// Whether an approver in `groups` may decide `action`: in one of the groups its rule names
/// (SC-POL-03). An action without an approval has nothing to decide; its state answers.
pub fn may_decide(groups: &[String], action: &Action) -> bool {
    action.approval().is_none_or(|a| a.quorum.admits(groups))
}

/// An approve, in the contract's order: the approver's own call (SC-APP-01) and its groups
/// (SC-POL-03); what the record waits for; expiry (SC-APP-04); the digest (SC-APP-02); an
/// approval already given; the quorum with the lapsed approvals dropped (SC-POL-04); the catalog;
/// then the ticket, on the one rule for a ticket's terms ([`super::ticket::span`], SC-APP-03).
pub fn approve(f: &ApproveFacts<'_>) -> Approve {
    let (action, who, now) = (f.action, f.approver, f.now);
    if action.call().agent_id() == who.id {
        return Approve::Refused(Objection::OwnCall);
    }
    if let Err(objection) = eligible(who, action) {
        return Approve::Refused(objection);
    }
    let approval = match awaiting(action, f.context_digest) {
        Ok(Some(approval)) => approval,
        Ok(None) => return Approve::AlreadyApproved,
        Err(objection) => return Approve::Refused(objection),
    };
    if now >= approval.expires_at {
        return Approve::Seal(SealReason::ApprovalExpired);
    }
    if approval.context_digest != f.context_digest {
        return Approve::Refused(Objection::ContextChanged {
            current_digest: approval.context_digest.clone(),
        });
    }
    let given = action.approvals();
    if given.iter().any(|s| s.by(who.signer())) {
        return Approve::AlreadyApproved;
    }
    // An earlier approval counts only while its approver may still decide: the lapsed ones
    // are dropped with this one, and the quorum waits for as many more.
    let counted = given.len().saturating_sub(f.lapsed.len());
    if (counted as u64) + 1 < u64::from(approval.quorum.required) {
        let grant = f.grant.cloned();
        return match Transition::sign_asking(action, who.signer(), f.lapsed, grant, now) {
            Some(t) => Approve::Sign(Box::new(t)),
            None => Approve::AlreadyApproved,
        };
    }
    let Some(catalog_fingerprint) = f.catalog_fingerprint else {
        return Approve::Seal(SealReason::CatalogChanged);
    };
    Approve::Commit(TicketTerms::new(
        action.call(),
        f.correlation_id.to_owned(),
        catalog_fingerprint.to_owned(),
        false,
        now,
        f.run_deadline,
    ))
}

/// A deny (SC-APP-05): by an approver the rule's groups admit, of an action still waiting for
/// people — any eligible approver's deny seals it, a quorum's too (SC-POL-04). The seal it
/// commits, with the approver's words.
pub fn deny(action: &Action, who: Decider<'_>, reason: &str) -> Result<SealReason, Objection> {
    deny_seen(action, who, reason, None)
}

/// A deny of the context the approver was shown (`seen`, when it names one: a batch decision,
/// SC-GR-20): [`deny`]'s checks, then the digest, as an approve holds it (SC-APP-02) — a person
/// who decided on a page that went stale decides again.
pub fn deny_seen(
    action: &Action,
    who: Decider<'_>,
    reason: &str,
    seen: Option<&str>,
) -> Result<SealReason, Objection> {
    eligible(who, action)?;
    match (action.state(), action.approval()) {
        (State::PendingApproval, Some(a)) if seen.is_some_and(|d| d != a.context_digest) => {
            Err(Objection::ContextChanged {
                current_digest: a.context_digest.clone(),
            })
        }
        (State::PendingApproval, _) => Ok(SealReason::Denied(reason.to_owned())),
        (State::Approved, _) => Err(Objection::AlreadyApproved),
        (State::Executing, _) => Err(Objection::Executing),
        (state, _) => Err(Objection::Sealed(state)),
    }
}

/// A cancel (SC-CAN-01/02): of an action waiting for people or for its wake; never of one a
/// worker holds, nor of a sealed one. Who may cancel which action is the caller's scope
/// (SC-SEC-01), checked when the engine loads it.
pub fn cancel(action: &Action) -> Result<SealReason, Objection> {
    match action.state() {
        State::PendingApproval | State::Approved => Ok(SealReason::Cancelled),
        State::Executing => Err(Objection::Executing),
        state => Err(Objection::Sealed(state)),
    }
}

/// Whether a lift of a stop (SC-STOP-01) names a scope a stop could have — `*`, the whole
/// tenant, or an agent id: anything else names no stop and never reaches the store.
pub fn names_a_stop(scope: &str) -> bool {
    !scope.is_empty() && scope.len() <= MAX_ID
}

fn eligible(who: Decider<'_>, action: &Action) -> Result<(), Objection> {
    if may_decide(who.groups, action) {
        return Ok(());
    }
    let groups = action.approval().map(|a| a.quorum.groups.clone());
    Err(Objection::NotInGroups(groups.unwrap_or_default()))
}

/// The approval `action` waits for (`Some`), or an approve of the committed context that is
/// answered as it stands (`None`), or why there is nothing to approve.
fn awaiting<'a>(
    action: &'a Action,
    context_digest: &str,
) -> Result<Option<&'a Approval>, Objection> {
    match (action.state(), action.approval()) {
        (State::PendingApproval, Some(approval)) => Ok(Some(approval)),
        (State::Approved | State::Executing, Some(a)) if a.context_digest == context_digest => {
            Ok(None)
        }
        (State::Approved | State::Executing, None) => Err(Objection::CommittedByPolicy),
        (State::Approved | State::Executing, Some(a)) => Err(Objection::ContextChanged {
            current_digest: a.context_digest.clone(),
        }),
        (state, _) => Err(Objection::Sealed(state)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        fixtures::{at, pending},
        transition::Creation,
        window::Window,
        Actor,
    };
    use serde_json::json;

    /// What a verdict came to, comparable in a table.
    #[derive(Debug, PartialEq)]
    enum Want {
        Already,
        /// The approvers of the pending record after the signing write.
        Sign(Vec<String>),
        /// A ticket due at, with its deadline (seconds after the fixtures' base).
        Commit(i64, i64),
        Seal(SealReason),
        Refused(Objection),
    }

    fn sign(approvers: &[&str]) -> Want {
        Want::Sign(approvers.iter().map(|a| a.to_string()).collect())
    }

    fn judged(v: Approve) -> Want {
        match v {
            Approve::AlreadyApproved => Want::Already,
            Approve::Sign(t) => Want::Sign(
                t.action
                    .approvals()
                    .iter()
                    .map(|s| s.approver.clone())
                    .collect(),
            ),
            Approve::Commit(terms) => {
                assert_eq!(terms.catalog_fingerprint, "sha256:tool");
                assert_eq!(terms.correlation_id, "cor_1");
                let secs = |t: Timestamp| t.as_second() - at(0).as_second();
                Want::Commit(secs(terms.due_at), secs(terms.deadline))
            }
            Approve::Seal(reason) => Want::Seal(reason),
            Approve::Refused(objection) => Want::Refused(objection),
        }
    }

    /// A pending action as intake commits it, needing `required` approvals of `groups`.
    fn asking(required: u32, groups: &[&str]) -> Action {
        let mut a = pending("act_01J0000000000000000000000C", json!({"amount": 60000}));
        let quorum = &mut a.approval.as_mut().unwrap().quorum;
        quorum.required = required;
        quorum.groups = groups.iter().map(|g| g.to_string()).collect();
        Creation::new(a, Actor::agent("agent-1"), Some("approval_required"), at(0))
            .action
            .clone()
    }

    fn signed(a: &Action, by: &str, secs: i64) -> Action {
        Transition::sign(a, by, &[], at(secs))
            .unwrap()
            .action
            .clone()
    }

    fn terms() -> TicketTerms {
        TicketTerms {
            correlation_id: "cor_0".into(),
            catalog_fingerprint: "sha256:tool".into(),
            due_at: at(1),
            deadline: at(600),
        }
    }

    fn approved(a: &Action) -> Action {
        Transition::approve(a, "fin-9", terms(), at(1))
            .action
            .clone()
    }

    fn digest(a: &Action) -> String {
        a.approval.as_ref().unwrap().context_digest.clone()
    }

    /// How long a ticket for a call without a window may wait: one approved at the table's
    /// usual `now` (10 s) must start by 900 s, like the windows' `not_after` below.
    const RUN_DEADLINE: i64 = 890;

    /// One approve: by `who` (in `groups`), of `digest`, with `lapsed` approvers, the tool in
    /// the catalog or not, at `now`.
    struct Ask {
        who: &'static str,
        groups: Vec<String>,
        digest: Option<&'static str>,
        lapsed: Vec<String>,
        in_catalog: bool,
        now: i64,
    }

    impl Ask {
        fn by(who: &'static str) -> Self {
            Ask {
                who,
                groups: vec!["finance".into()],
                digest: None,
                lapsed: vec![],
                in_catalog: true,
                now: 10,
            }
        }
        fn of(&self, a: &Action) -> Want {
            let digest = self.digest.map_or_else(|| digest(a), str::to_owned);
            judged(approve(&ApproveFacts {
                action: a,
                approver: Decider {
                    id: self.who,
                    groups: &self.groups,
                    person: None,
                    channel: None,
                },
                context_digest: &digest,
                lapsed: &self.lapsed,
                grant: None,
                catalog_fingerprint: self.in_catalog.then_some("sha256:tool"),
                correlation_id: "cor_1",
                run_deadline: SignedDuration::from_secs(RUN_DEADLINE),
                now: at(self.now),
            }))
        }
    }

    /// SC-APP-01 before SC-POL-03 before the record's state: each row breaks one more rule than
    /// the checks after it see, so the first failing check in the contract's order decides.
    #[test]
    fn sc_app_01_sc_pol_03_who_may_approve_comes_first() {
        let single = asking(1, &["finance"]);
        let sealed = Transition::seal(&single, Actor::system(), &SealReason::Cancelled, at(2));
        let sealed = sealed.action.clone();
        let outsider = Ask {
            groups: vec!["ops".into()],
            ..Ask::by("ops-1")
        };
        let groups = Objection::NotInGroups(vec!["finance".into()]);
        #[rustfmt::skip]
        let table: Vec<(&str, Ask, &Action, Want)> = vec![
            ("own call, outside the groups, sealed", Ask { groups: vec![], ..Ask::by("agent-1") }, &sealed, Want::Refused(Objection::OwnCall)),
            ("own call, in the group", Ask::by("agent-1"), &single, Want::Refused(Objection::OwnCall)),
            ("outside the groups, sealed", outsider, &sealed, Want::Refused(groups.clone())),
            ("in a group, sealed", Ask::by("fin-1"), &sealed, Want::Refused(Objection::Sealed(State::Cancelled))),
            ("in a group, pending", Ask::by("fin-1"), &single, Want::Commit(10, 900)),
        ];
        for (name, ask, action, want) in table {
            assert_eq!(ask.of(action), want, "{name}");
        }
        // A rule that names no groups admits any approver of the tenant.
        let anyone = asking(1, &[]);
        let no_groups = Ask {
            groups: vec![],
            ..Ask::by("ops-1")
        };
        assert_eq!(no_groups.of(&anyone), Want::Commit(10, 900));
    }

    /// What the record waits for, in order: the state and approval (SC-CAN-02's sealed, a
    /// policy's ticket, a retried approve), then expiry (SC-APP-04) before the digest (SC-APP-02).
    #[test]
    fn sc_app_02_sc_app_04_what_an_approve_meets() {
        let single = asking(1, &["finance"]);
        let done = approved(&single);
        let mut by_policy = done.clone();
        by_policy.approval = None;
        let other = || Some("sha256:other");
        let changed = Objection::ContextChanged {
            current_digest: digest(&single),
        };
        #[rustfmt::skip]
        let table: Vec<(&str, Ask, &Action, Want)> = vec![
            ("approved, the same digest: answered", Ask::by("fin-2"), &done, Want::Already),
            ("approved, another digest", Ask { digest: other(), ..Ask::by("fin-2") }, &done, Want::Refused(changed.clone())),
            ("committed by policy", Ask { digest: other(), ..Ask::by("fin-2") }, &by_policy, Want::Refused(Objection::CommittedByPolicy)),
            ("expired, another digest: sealed first", Ask { digest: other(), now: 3600, ..Ask::by("fin-1") }, &single, Want::Seal(SealReason::ApprovalExpired)),
            ("a second before expiry, another digest", Ask { digest: other(), now: 3599, ..Ask::by("fin-1") }, &single, Want::Refused(changed)),
            ("a second before expiry", Ask { now: 3599, ..Ask::by("fin-1") }, &single, Want::Commit(3599, 3599 + RUN_DEADLINE)),
        ];
        for (name, ask, action, want) in table {
            assert_eq!(ask.of(action), want, "{name}");
        }
    }

    /// SC-APP-03: the last approval commits the ticket, due at `max(now, not_before)`, until the
    /// window's end or, without one, `run_deadline` after now (`ticket::span`); a tool gone from
    /// the catalog seals instead.
    #[test]
    fn sc_app_03_the_last_approval_commits_the_ticket() {
        let now = asking(1, &["finance"]);
        let mut later = now.clone();
        later.call.schedule = Some(Window {
            not_before: at(300),
            not_after: at(900),
        });
        let mut opened = later.clone();
        opened.call.schedule.as_mut().unwrap().not_before = at(5);
        #[rustfmt::skip]
        let table: Vec<(&str, Ask, &Action, Want)> = vec![
            ("no window: due now", Ask::by("fin-1"), &now, Want::Commit(10, 900)),
            ("a later window: due at its start", Ask::by("fin-1"), &later, Want::Commit(300, 900)),
            ("an open window: due now", Ask::by("fin-1"), &opened, Want::Commit(10, 900)),
            ("the tool left the catalog", Ask { in_catalog: false, ..Ask::by("fin-1") }, &now, Want::Seal(SealReason::CatalogChanged)),
        ];
        for (name, ask, action, want) in table {
            assert_eq!(ask.of(action), want, "{name}");
        }
    }

    /// SC-POL-04: each approval of a quorum is its own write until the last commits; one
    /// approver counts once; approvals whose approvers may no longer decide are dropped with
    /// the next one, which then signs instead of committing (issue 28, item 8).
    #[test]
    fn sc_pol_04_a_quorum_counts_distinct_approvers_still_eligible() {
        let three = asking(3, &["finance"]);
        let one = signed(&three, "fin-1", 1);
        let two = signed(&one, "fin-2", 2);
        let lapsed = |who: &'static str, gone: &[&str]| Ask {
            lapsed: gone.iter().map(|g| g.to_string()).collect(),
            ..Ask::by(who)
        };
        #[rustfmt::skip]
        let table: Vec<(&str, Ask, &Action, Want)> = vec![
            ("the first of three signs", Ask::by("fin-1"), &three, sign(&["fin-1"])),
            ("the same approver again: answered", Ask::by("fin-1"), &one, Want::Already),
            ("the second signs", Ask::by("fin-2"), &one, sign(&["fin-1", "fin-2"])),
            ("the third commits", Ask::by("fin-3"), &two, Want::Commit(10, 900)),
            ("the third, one lapsed: signs and drops it", lapsed("fin-3", &["fin-1"]), &two, sign(&["fin-2", "fin-3"])),
            ("the third, both lapsed", lapsed("fin-3", &["fin-1", "fin-2"]), &two, sign(&["fin-3"])),
            ("a repeat is answered before the lapsed are counted", lapsed("fin-2", &["fin-1"]), &two, Want::Already),
            ("the catalog is checked only by the last", Ask { in_catalog: false, ..Ask::by("fin-2") }, &one, sign(&["fin-1", "fin-2"])),
        ];
        for (name, ask, action, want) in table {
            assert_eq!(ask.of(action), want, "{name}");
        }
    }

    /// SC-APP-05 (with SC-POL-03): a deny by an eligible approver seals a waiting action in the
    /// approver's words; anything else is refused with why. A deny has no own-call rule.
    #[test]
    fn sc_app_05_deny() {
        let pending = asking(2, &["finance"]);
        let half = signed(&pending, "fin-1", 1);
        let done = approved(&asking(1, &["finance"]));
        let running = Transition::claim(&done, "wrk", at(60), at(2)).unwrap();
        let failed = Transition::finish(&running.action, Err(json!({})), at(3));
        let finance = ["finance".to_owned()];
        let (fin, ops) = (
            Decider {
                id: "fin-1",
                groups: &finance,
                channel: None,
                person: None,
            },
            Decider {
                id: "ops-1",
                groups: &[],
                channel: None,
                person: None,
            },
        );
        let denied = || Ok(SealReason::Denied("too risky".into()));
        #[rustfmt::skip]
        let table: Vec<(&str, Decider, &Action, Result<SealReason, Objection>)> = vec![
            ("pending", fin, &pending, denied()),
            ("a quorum half signed", fin, &half, denied()),
            ("the agent's own key, in the group", Decider { id: "agent-1", ..fin }, &pending, denied()),
            ("outside the groups", ops, &failed.action, Err(Objection::NotInGroups(finance.to_vec()))),
            ("approved", fin, &done, Err(Objection::AlreadyApproved)),
            ("executing", fin, &running.action, Err(Objection::Executing)),
            ("sealed", fin, &failed.action, Err(Objection::Sealed(State::Failed))),
        ];
        for (name, who, action, want) in table {
            assert_eq!(deny(action, who, "too risky"), want, "{name}");
        }
    }

    /// SC-GR-20: a deny that names the context it was shown is held to it like an approve
    /// (SC-APP-02), after who may deny and what the record waits for; without one it is [`deny`].
    #[test]
    fn sc_gr_20_a_deny_of_a_seen_context() {
        let pending = asking(1, &["finance"]);
        let done = approved(&pending);
        let finance = ["finance".to_owned()];
        let fin = Decider {
            id: "fin-1",
            groups: &finance,
            channel: None,
            person: None,
        };
        let ops = Decider { groups: &[], ..fin };
        let current = digest(&pending);
        let changed = Err(Objection::ContextChanged {
            current_digest: current.clone(),
        });
        let denied = Ok(SealReason::Denied("no".into()));
        type Row<'a> = (
            &'a str,
            Decider<'a>,
            &'a Action,
            Option<&'a str>,
            Result<SealReason, Objection>,
        );
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            ("the digest shown", fin, &pending, Some(&current), denied.clone()),
            ("no digest: as the single deny", fin, &pending, None, denied),
            ("a stale digest", fin, &pending, Some("sha256:old"), changed),
            ("outside the groups, stale: the groups first", ops, &pending, Some("sha256:old"), Err(Objection::NotInGroups(finance.to_vec()))),
            ("approved, stale: the state first", fin, &done, Some("sha256:old"), Err(Objection::AlreadyApproved)),
        ];
        for (name, who, action, seen, want) in table {
            assert_eq!(deny_seen(action, who, "no", seen), want, "{name}");
        }
    }

    /// SC-CAN-01/02: a cancel seals what waits for people or for its wake; it never takes an
    /// action a worker holds, and says so; a sealed action stays as it is.
    #[test]
    fn sc_can_01_sc_can_02_cancel() {
        let pending = asking(1, &[]);
        let done = approved(&pending);
        let running = Transition::claim(&done, "wrk", at(60), at(2))
            .unwrap()
            .action
            .clone();
        let cancelled = Transition::seal(&done, Actor::system(), &SealReason::Cancelled, at(2));
        #[rustfmt::skip]
        let table: Vec<(&str, &Action, Result<SealReason, Objection>)> = vec![
            ("pending", &pending, Ok(SealReason::Cancelled)),
            ("approved", &done, Ok(SealReason::Cancelled)),
            ("executing", &running, Err(Objection::Executing)),
            ("sealed", &cancelled.action, Err(Objection::Sealed(State::Cancelled))),
        ];
        for (name, action, want) in table {
            assert_eq!(cancel(action), want, "{name}");
            if let Ok(reason) = want {
                assert!(action.state().may_move_to(reason.state().into()), "{name}");
            }
        }
    }

    /// SC-STOP-01: a lift names `*` or an agent id; an empty or oversized scope names no stop.
    #[test]
    fn sc_stop_01_a_lift_names_a_scope() {
        let long = "a".repeat(MAX_ID + 1);
        let table = [
            ("*", true),
            ("agent-1", true),
            ("", false),
            (long.as_str(), false),
        ];
        for (scope, names) in table {
            assert_eq!(names_a_stop(scope), names, "{scope:?}");
        }
    }
}
