//! Intake's decision as a pure function (SPEC §4 Intake): stop, capability, then policy — in
//! that order, each over facts the engine read just before. What it answers is what the first
//! commit of the action will be, and [`first_form`] builds that commit; nothing here reads a
//! store or a clock.

use super::{
    action::{Actor, Approval, Lease, Outcome, Person, Quorum, Standing, Terminal},
    call::Call,
    context::{approval_context, ContextInput},
    granted::Terms as GrantTerms,
    policy::Gate,
    ticket::{span, Terms, Ticket},
    transition::Creation,
    window::Window,
    Action, Decision, SealReason,
};
use jiff::{tz::TimeZone, SignedDuration, Timestamp};
use serde_json::Value;

/// What intake knows when it decides.
#[derive(Debug, Clone)]
pub struct IntakeFacts<'a> {
    /// A stop of the tenant or of this agent stands (read just now).
    pub stopped: bool,
    /// The call's `action_kind`, if any, is one the tenant declared.
    pub kind_declared: bool,
    /// The policy rule the call matched.
    pub gate: &'a Gate,
    /// The tool called, and whether it is in the tenant's catalog.
    pub tool: &'a str,
    pub in_catalog: bool,
    pub window: Option<Window>,
    pub now: Timestamp,
    /// An allowed call whose window opens within this runs at once (SC-INT-05).
    pub allow_now_within: SignedDuration,
    /// The latest start of a ticket without a window.
    pub run_deadline: SignedDuration,
    /// How long a pending approval without a window waits (SC-APP-04).
    pub approval_ttl: SignedDuration,
}

/// The action's first committed form, as the gate decided it.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Sealed `denied` at once with this reason (SC-INT-03/04/05); the agent is answered 403.
    Refused(SealReason),
    /// Sealed `succeeded` with the policy's result; no tool runs (SC-INT-08).
    SetResult(Option<Value>),
    /// A ticket committed by policy (`allow` or `schedule`, SC-INT-09): due at `due_at`, its
    /// last start `deadline`; `reason` names the rule kind in the first audit event.
    Ticket {
        due_at: Timestamp,
        deadline: Timestamp,
        reason: &'static str,
    },
    /// Waits for a person's countersignature until `expires_at` (SC-APP-04).
    Approval { expires_at: Timestamp },
    /// The request cannot be decided as given: a validation error for `param`.
    Invalid {
        param: &'static str,
        message: String,
    },
}

/// The decision, in the contract's order: a stop, an undeclared kind, then the policy's rule.
pub fn admit(f: &IntakeFacts<'_>) -> Admission {
    if f.stopped {
        return Admission::Refused(SealReason::Stopped);
    }
    if !f.kind_declared {
        return Admission::Refused(SealReason::CapabilityBound);
    }
    let runs_a_tool = matches!(
        f.gate.decision,
        Decision::Allow | Decision::Schedule | Decision::RequireApproval
    );
    if runs_a_tool && !f.in_catalog {
        return Admission::Invalid {
            param: "tool",
            message: format!("tool {:?} is not in the tenant's catalog", f.tool),
        };
    }
    let later = |d: SignedDuration| f.now.saturating_add(d).unwrap_or(Timestamp::MAX);
    match f.gate.decision {
        Decision::Deny => Admission::Refused(match &f.gate.failed {
            Some(failed) => SealReason::ConditionFailed(failed.clone()),
            None => SealReason::PolicyDenied,
        }),
        Decision::SetResult => Admission::SetResult(f.gate.result.clone()),
        Decision::Allow => match f.window {
            Some(w) if w.not_before > later(f.allow_now_within) => {
                Admission::Refused(SealReason::ScheduleNeedsApproval)
            }
            // Runs now, even if the window opens within the minute; the window stays recorded.
            window => {
                let (due_at, deadline) = span(window, true, f.now, f.run_deadline);
                Admission::Ticket { due_at, deadline, reason: "policy_allow" }
            }
        },
        Decision::Schedule => match f.window {
            Some(w) => {
                let (due_at, deadline) = span(Some(w), false, f.now, f.run_deadline);
                Admission::Ticket { due_at, deadline, reason: "policy_schedule" }
            }
            None => Admission::Invalid {
                param: "schedule",
                message: "this tool runs unattended only inside a window: give schedule {not_before, not_after}".into(),
            },
        },
        // A scheduled approval lapses with its window, others after the TTL.
        Decision::RequireApproval => Admission::Approval {
            expires_at: f.window.map_or_else(|| later(f.approval_ttl), |w| w.not_after),
        },
    }
}

/// A call the policy holds for a person, allowed by a grant the engine used for it
/// (SC-GR-02): a ticket as an approval would commit it — due at the window's start, or now —
/// named `grant_allow` in its first event. Asked only of an [`Admission::Approval`].
pub fn granted(f: &IntakeFacts<'_>) -> Admission {
    let (due_at, deadline) = span(f.window, false, f.now, f.run_deadline);
    Admission::Ticket {
        due_at,
        deadline,
        reason: "grant_allow",
    }
}

/// What the first form needs besides the call and its admission: what the engine read or made.
pub struct Making<'a> {
    pub gate: &'a Gate,
    /// The tool's catalog fingerprint, if the tool is in the catalog.
    pub catalog_fingerprint: Option<String>,
    /// `cor_` + a ULID, for a ticket committed at intake.
    pub correlation_id: String,
    /// A claim taken at once on a ticket due now, run by the request (SC-EDGE-07).
    pub lease: Option<Lease>,
    /// The tenant's time zone, for the window's sentence in the approval context (SC-INT-06).
    pub time_zone: &'a TimeZone,
    pub time_zone_name: &'a str,
    /// The person whose agent submits, when a verified token named one (SC-ID-07).
    pub person: Option<&'a Person>,
    /// The grant that allowed the call, its use already committed (SC-GR-02): the action is
    /// `allow`ed, holds the grant's terms, and its first event names it.
    pub grant: Option<&'a GrantTerms>,
    pub now: Timestamp,
}

/// The first commit of an action: its call in the form `admission` decided, with the reason of
/// its first event. A ticket committed by policy is the system's decision (SC-INT-09); the rest
/// is the agent's. `Err` for an admission that makes no action (`Invalid`, or a ticket for a
/// tool not in the catalog, which [`admit`] never answers).
pub fn first_form(call: Call, admission: Admission, m: Making<'_>) -> Result<Creation, String> {
    let sealed = |end, outcome| Standing::Sealed {
        end,
        outcome,
        at: m.now,
    };
    let (decision, standing, approval, reason) = match admission {
        Admission::Refused(reason) => (
            Decision::Deny,
            sealed(reason.state(), reason.outcome()),
            None,
            reason.to_string(),
        ),
        Admission::SetResult(result) => {
            let outcome = Outcome {
                result,
                ..SealReason::SetResult.outcome()
            };
            let standing = sealed(Terminal::Succeeded, outcome);
            (
                m.gate.decision,
                standing,
                None,
                SealReason::SetResult.to_string(),
            )
        }
        Admission::Ticket {
            due_at,
            deadline,
            reason,
        } => {
            let Some(catalog_fingerprint) = m.catalog_fingerprint else {
                return Err(format!(
                    "a ticket for {:?}, which is not in the catalog",
                    call.tool()
                ));
            };
            let terms = Terms {
                correlation_id: m.correlation_id,
                catalog_fingerprint,
                due_at,
                deadline,
            };
            let ticket = Ticket::commit(&call, &terms);
            let standing = match m.lease {
                Some(lease) => Standing::Executing { ticket, lease },
                None => Standing::Approved { ticket },
            };
            // A grant turns the rule's `require_approval` into `allow`, and only that.
            let decision = match m.grant {
                Some(_) => Decision::Allow,
                None => m.gate.decision,
            };
            (decision, standing, None, reason.to_owned())
        }
        Admission::Approval { expires_at } => {
            let approval = asked(&call, expires_at, &m);
            let standing = Standing::PendingApproval { approvals: vec![] };
            let reason = "approval_required".to_owned();
            (m.gate.decision, standing, Some(approval), reason)
        }
        Admission::Invalid { param, message } => return Err(format!("{param}: {message}")),
    };
    let actor = match &standing {
        Standing::Approved { .. } | Standing::Executing { .. } => Actor::system(),
        _ => Actor {
            person: m.person.cloned(),
            ..Actor::agent(call.agent_id())
        },
    };
    let mut first = Action::first(call, decision, standing, approval, m.now);
    if decision != Decision::Deny {
        first.grant = m.grant.cloned();
    }
    let shadow = m.gate.shadow.clone();
    Ok(Creation::noting(first, actor, Some(&reason), m.now, shadow))
}

/// The countersignature asked for: the context the approver is shown, and its digest.
fn asked(call: &Call, expires_at: Timestamp, m: &Making<'_>) -> Approval {
    let quorum = Quorum {
        required: m.gate.countersigners.approvals.max(1),
        groups: m.gate.countersigners.groups.clone(),
        signed: Vec::new(),
    };
    let (context, context_digest) = approval_context(&ContextInput {
        call,
        time_zone: m.time_zone,
        time_zone_name: m.time_zone_name,
        rule: m.gate.rule.as_ref(),
        quorum: &quorum,
    });
    Approval {
        context,
        context_digest,
        expires_at,
        approver: None,
        person: None,
        decided_at: None,
        quorum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::State;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn gate(decision: Decision) -> Gate {
        Gate {
            decision,
            result: (decision == Decision::SetResult).then(|| serde_json::json!({"shadow": true})),
            rule: None,
            failed: None,
            countersigners: Default::default(),
            shadow: Vec::new(),
        }
    }

    /// Every branch of the order: stop before kind before catalog before the policy's rule.
    #[test]
    fn sc_int_05_admission_follows_the_contract_order() {
        use Decision::*;
        let w = |nb, na| {
            Some(Window {
                not_before: at(nb),
                not_after: at(na),
            })
        };
        let ticket = |due, deadline, reason| Admission::Ticket {
            due_at: at(due),
            deadline: at(deadline),
            reason,
        };
        let invalid = |param: &'static str| move |a: &Admission| matches!(a, Admission::Invalid { param: p, .. } if *p == param);
        #[rustfmt::skip]
        let table: Vec<(bool, bool, Decision, bool, Option<Window>, Admission)> = vec![
            // stopped, kind ok, decision, in catalog, window → admission
            (true,  true,  Allow, true, None, Admission::Refused(SealReason::Stopped)),
            (true,  false, Allow, true, None, Admission::Refused(SealReason::Stopped)),
            (false, false, Allow, true, None, Admission::Refused(SealReason::CapabilityBound)),
            (false, true,  Deny,  false, None, Admission::Refused(SealReason::PolicyDenied)),
            (false, true,  SetResult, false, None, Admission::SetResult(Some(serde_json::json!({"shadow": true})))),
            (false, true,  Allow, true, None, ticket(0, 60, "policy_allow")),
            (false, true,  Allow, true, w(30, 600), ticket(0, 600, "policy_allow")),
            (false, true,  Allow, true, w(61, 600), Admission::Refused(SealReason::ScheduleNeedsApproval)),
            (false, true,  Schedule, true, w(300, 900), ticket(300, 900, "policy_schedule")),
            (false, true,  Schedule, true, w(-10, 900), ticket(0, 900, "policy_schedule")),
            (false, true,  RequireApproval, true, None, Admission::Approval { expires_at: at(3600) }),
            (false, true,  RequireApproval, true, w(300, 900), Admission::Approval { expires_at: at(900) }),
        ];
        for (i, (stopped, kind_declared, decision, in_catalog, window, expected)) in
            table.into_iter().enumerate()
        {
            let g = gate(decision);
            let facts = IntakeFacts {
                stopped,
                kind_declared,
                gate: &g,
                tool: "mail.send",
                in_catalog,
                window,
                now: at(0),
                allow_now_within: SignedDuration::from_secs(60),
                run_deadline: SignedDuration::from_secs(60),
                approval_ttl: SignedDuration::from_hours(1),
            };
            assert_eq!(admit(&facts), expected, "row {i}");
        }
        let g = gate(Schedule);
        let base = IntakeFacts {
            stopped: false,
            kind_declared: true,
            gate: &g,
            tool: "mail.send",
            in_catalog: true,
            window: None,
            now: at(0),
            allow_now_within: SignedDuration::from_secs(60),
            run_deadline: SignedDuration::from_secs(60),
            approval_ttl: SignedDuration::from_hours(1),
        };
        assert!(
            invalid("schedule")(&admit(&base)),
            "schedule without a window"
        );
        let g = gate(Allow);
        let missing = IntakeFacts {
            gate: &g,
            in_catalog: false,
            ..base
        };
        assert!(
            invalid("tool")(&admit(&missing)),
            "a tool to run must be in the catalog"
        );
    }

    /// The first commit of each admission, as intake writes it: the state, the decision, who
    /// made it (the system for a ticket committed by policy, SC-INT-09), the first event's
    /// reason, and an approval context only for what waits for one.
    #[test]
    fn sc_int_09_the_first_form_of_each_admission() {
        use crate::domain::ActorKind;
        let lease = Lease {
            owner: "wrk_1/1".into(),
            epoch: 1,
            until: at(30),
        };
        let ticket = Admission::Ticket {
            due_at: at(0),
            deadline: at(60),
            reason: "policy_allow",
        };
        /// gate, admission, lease → state, decision, actor, reason, approval asked
        type Row = (
            Decision,
            Admission,
            Option<Lease>,
            State,
            Decision,
            ActorKind,
            &'static str,
            bool,
        );
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            (Decision::Allow, Admission::Refused(SealReason::Stopped), None, State::Denied, Decision::Deny, ActorKind::Agent, "stopped", false),
            (Decision::SetResult, Admission::SetResult(None), None, State::Succeeded, Decision::SetResult, ActorKind::Agent, "set_result", false),
            (Decision::Allow, ticket.clone(), None, State::Approved, Decision::Allow, ActorKind::System, "policy_allow", false),
            (Decision::Allow, ticket, Some(lease), State::Executing, Decision::Allow, ActorKind::System, "policy_allow", false),
            (Decision::RequireApproval, Admission::Approval { expires_at: at(3600) }, None, State::PendingApproval, Decision::RequireApproval, ActorKind::Agent, "approval_required", true),
        ];
        let tz = TimeZone::UTC;
        for (i, (decision, admission, lease, state, recorded, actor, reason, asked)) in
            table.into_iter().enumerate()
        {
            let g = gate(decision);
            let making = Making {
                gate: &g,
                catalog_fingerprint: Some("sha256:fp".into()),
                correlation_id: "cor_1".into(),
                lease,
                time_zone: &tz,
                time_zone_name: "UTC",
                person: None,
                grant: None,
                now: at(0),
            };
            let call = Call::for_test("act_1", "mail.send", serde_json::json!({"to": "x"}));
            let first = first_form(call, admission, making).unwrap();
            let a = &first.action;
            assert_eq!(a.state(), state, "row {i}");
            assert_eq!(a.decision(), recorded, "row {i}");
            assert_eq!(a.actor().kind, actor, "row {i}");
            assert_eq!(first.event.reason.as_deref(), Some(reason), "row {i}");
            assert_eq!(a.approval().is_some(), asked, "row {i}");
            assert_eq!(a.version(), 1, "row {i}");
            if let Some(ticket) = a.ticket() {
                assert_eq!(
                    ticket.correlation_id(),
                    "cor_1",
                    "row {i}: the id passed in"
                );
            }
        }
        // No action for a request that cannot be decided, nor a ticket outside the catalog.
        let g = gate(Decision::Allow);
        let making = |fingerprint: Option<String>| Making {
            gate: &g,
            catalog_fingerprint: fingerprint,
            correlation_id: "cor_1".into(),
            lease: None,
            time_zone: &tz,
            time_zone_name: "UTC",
            person: None,
            grant: None,
            now: at(0),
        };
        let call = || Call::for_test("act_1", "mail.send", serde_json::json!({}));
        let invalid = Admission::Invalid {
            param: "tool",
            message: "not in the catalog".into(),
        };
        assert!(first_form(call(), invalid, making(None)).is_err());
        let ticket = Admission::Ticket {
            due_at: at(0),
            deadline: at(60),
            reason: "policy_allow",
        };
        assert!(first_form(call(), ticket, making(None)).is_err());
    }
}
