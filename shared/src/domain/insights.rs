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
    /// Calls of this tool allowed by a scoped grant instead of a person.
    // Wired by the grants' event kind (issue 33, scoped grants); 0 until then.
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
    /// Count `action` (one the range holds) if it asked a person.
    pub fn add(&mut self, action: &Action) {
        let Some(fate) = fate(action) else {
            return;
        };
        let rule = action
            .approval()
            .and_then(|a| a.context.pointer("/policy/label"))
            .and_then(|l| l.as_str())
            .map(str::to_owned);
        let tool = action.call().tool().to_owned();
        let (row, times) = self
            .rows
            .entry((tool.clone(), rule.clone()))
            .or_insert_with(|| {
                let row = Row {
                    tool,
                    rule,
                    ..Row::default()
                };
                (row, Vec::new())
            });
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
}
