//! Decision insights (SC-GR-22): where the countersignatures go, per tool and rule — how many
//! calls asked a person, how many were approved, denied, left to expire or withdrawn, and how
//! long people took to decide. A pure tally over action records as they stand: the engine reads
//! them, bounded, and feeds them here; nothing here reads a store or a clock.

use super::{
    action::{Action, ActorKind, State},
    Decision,
};
use jiff::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// One tool and rule's figures over the range.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct Row {
    pub tool: String,
    /// The rule that asked for the countersignature (its `name`, else its glob), as the
    /// approval context names it; null for a record that names none.
    pub rule: Option<String>,
    /// Calls that asked a person (`require_approval`).
    pub requests: u64,
    pub approved: u64,
    /// Denied by an approver.
    pub denied: u64,
    /// Nobody decided in time (SC-APP-04).
    pub expired: u64,
    /// Sealed before anyone decided: cancelled, stopped, the tool left the catalog.
    pub withdrawn: u64,
    /// Still waiting.
    pub pending: u64,
    /// approved ÷ (approved + denied): of the calls people decided, the share they approved;
    /// null before any was decided.
    pub approval_rate: Option<f64>,
    /// Seconds from the call to the decision (approved or denied), median and 90th percentile
    /// (nearest rank); null before any was decided.
    pub median_seconds_to_decide: Option<f64>,
    pub p90_seconds_to_decide: Option<f64>,
    /// Calls of this tool a scoped grant of this rule allowed instead of a person (SC-GR-02):
    /// not among `requests` — nobody was asked.
    pub grant_uses: u64,
}

/// How a call that asked a person stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    Pending,
    /// Decided by people after this many seconds.
    Approved(f64),
    Denied(f64),
    Expired,
    Withdrawn,
}

/// What became of `action`'s countersignature; `None` for a call that never asked a person.
pub fn fate(action: &Action) -> Option<Fate> {
    let approval = action.approval()?;
    if action.decision() != Decision::RequireApproval {
        return None;
    }
    let after = |t: Timestamp| t.duration_since(action.created_at()).as_secs_f64().max(0.0);
    if let Some(at) = approval.decided_at {
        return Some(Fate::Approved(after(at)));
    }
    Some(match (action.state(), action.sealed_at()) {
        (State::PendingApproval, _) => Fate::Pending,
        (State::Denied, Some(at)) if action.actor().kind == ActorKind::User => {
            Fate::Denied(after(at))
        }
        _ if action.reason() == Some("approval_expired") => Fate::Expired,
        _ => Fate::Withdrawn,
    })
}

/// The tally of one range, row by row.
#[derive(Debug, Default)]
pub struct Tally {
    rows: BTreeMap<(String, Option<String>), (Row, Vec<f64>)>,
}

impl Tally {
    /// Count `action` (one the range holds) if it asked a person, or a grant answered for one.
    pub fn add(&mut self, action: &Action) {
        let tool = action.call().tool();
        if let (None, Some(grant)) = (action.approval(), action.grant()) {
            self.row(tool, Some(grant.rule_label.clone())).0.grant_uses += 1;
            return;
        }
        let Some(fate) = fate(action) else {
            return;
        };
        let rule = action
            .approval()
            .and_then(|a| a.context.pointer("/policy/label"))
            .and_then(|l| l.as_str())
            .map(str::to_owned);
        let (row, times) = self.row(tool, rule);
        row.requests += 1;
        match fate {
            Fate::Pending => row.pending += 1,
            Fate::Approved(secs) => {
                row.approved += 1;
                times.push(secs);
            }
            Fate::Denied(secs) => {
                row.denied += 1;
                times.push(secs);
            }
            Fate::Expired => row.expired += 1,
            Fate::Withdrawn => row.withdrawn += 1,
        }
    }

    fn row(&mut self, tool: &str, rule: Option<String>) -> &mut (Row, Vec<f64>) {
        self.rows
            .entry((tool.to_owned(), rule.clone()))
            .or_insert_with(|| {
                let row = Row {
                    tool: tool.to_owned(),
                    rule,
                    ..Row::default()
                };
                (row, Vec::new())
            })
    }

    /// The rows, by tool then rule, with their rates and times.
    pub fn rows(self) -> Vec<Row> {
        self.rows
            .into_values()
            .map(|(mut row, mut times)| {
                let decided = row.approved + row.denied;
                row.approval_rate = (decided > 0).then(|| row.approved as f64 / decided as f64);
                times.sort_by(f64::total_cmp);
                row.median_seconds_to_decide = rank(&times, 50);
                row.p90_seconds_to_decide = rank(&times, 90);
                row
            })
            .collect()
    }
}

/// The `percent`th percentile of sorted `values` by nearest rank.
fn rank(values: &[f64], percent: usize) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let at = (percent * values.len()).div_ceil(100).max(1);
    values.get(at - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{
        fixtures::{at, pending},
        transition::{Creation, TicketTerms, Transition},
        Actor, SealReason,
    };
    use serde_json::json;

    fn asked(n: u32) -> Action {
        let a = pending(
            &format!("act_01J00000000000000000000{n:03}"),
            json!({"n": n}),
        );
        Creation::new(a, Actor::agent("agent-1"), Some("approval_required"), at(0))
            .action
            .clone()
    }

    fn approved(a: &Action, secs: i64) -> Action {
        let terms = TicketTerms {
            correlation_id: "cor_0".into(),
            catalog_fingerprint: "sha256:tool".into(),
            due_at: at(secs),
            deadline: at(secs + 600),
        };
        Transition::approve(a, "fin-1", terms, at(secs))
            .action
            .clone()
    }

    fn sealed(a: &Action, actor: Actor, reason: SealReason, secs: i64) -> Action {
        Transition::seal(a, actor, &reason, at(secs)).action.clone()
    }

    /// SC-GR-22: each call that asked a person counts once by what became of it; the rate is of
    /// the decided; the times are from the call to the decision, by nearest rank.
    #[test]
    fn sc_gr_22_a_tally_of_what_people_decided_and_how_fast() {
        let mut tally = Tally::default();
        let denied = |n, secs| {
            let reason = SealReason::Denied("no".into());
            sealed(&asked(n), Actor::decider("fin-1", None, None), reason, secs)
        };
        let records = [
            approved(&asked(1), 10),
            approved(&asked(2), 20),
            approved(&asked(3), 30),
            denied(4, 100),
            sealed(
                &asked(5),
                Actor::system(),
                SealReason::ApprovalExpired,
                3600,
            ),
            sealed(&asked(6), Actor::agent("agent-1"), SealReason::Cancelled, 5),
            asked(7),
        ];
        for a in &records {
            tally.add(a);
        }
        let rows = tally.rows();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (
                r.tool.as_str(),
                r.requests,
                r.approved,
                r.denied,
                r.expired,
                r.withdrawn,
                r.pending
            ),
            ("mail.send", 7, 3, 1, 1, 1, 1)
        );
        assert_eq!(r.approval_rate, Some(0.75));
        assert_eq!(r.median_seconds_to_decide, Some(20.0));
        assert_eq!(r.p90_seconds_to_decide, Some(100.0));
        assert_eq!(r.grant_uses, 0);
        // A call decided by policy asked nobody: not counted.
        assert_eq!(fate(&approved(&asked(8), 1)), Some(Fate::Approved(1.0)));
        let mut by_policy = asked(9);
        by_policy.decision = Decision::Allow;
        assert_eq!(fate(&by_policy), None);
        assert_eq!(rank(&[], 50), None);
        assert_eq!(rank(&[1.0, 2.0, 3.0, 4.0], 50), Some(2.0));
        assert_eq!(rank(&[1.0, 2.0, 3.0, 4.0], 90), Some(4.0));
    }

    /// SC-GR-22 with SC-GR-02: a call a grant allowed counts as a grant use on the grant's rule
    /// row, not as a request — nobody was asked; the approval that granted counts as approved.
    #[test]
    fn sc_gr_22_a_granted_call_is_a_grant_use_not_a_request() {
        let terms: super::super::granted::Terms = serde_json::from_value(json!({
            "format": "countersign.grant.v1", "id": "grt_01", "tenant": "acme",
            "agent_id": "agent-1", "tool": "mail.send", "rule": 0, "rule_label": "mail",
            "approvals": 1, "from_action": "act_01", "granted_by": {"approver": "fin-1"},
            "granted_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-01T01:00:00Z",
            "uses": 3, "pins": {},
        }))
        .expect("terms");
        let mut granted = asked(1);
        granted.decision = Decision::Allow;
        granted.approval = None;
        granted.grant = Some(terms);
        let mut tally = Tally::default();
        tally.add(&granted);
        tally.add(&granted);
        tally.add(&approved(&asked(2), 10));
        let rows = tally.rows();
        let uses: Vec<_> = rows
            .iter()
            .map(|r| (r.rule.as_deref(), r.requests, r.grant_uses))
            .collect();
        assert!(uses.contains(&(Some("mail"), 0, 2)), "{uses:?}");
        assert_eq!(rows.iter().map(|r| r.requests).sum::<u64>(), 1);
    }
}
