//! A store-wide invariant check (`countersign-server verify`): every action of every configured
//! tenant loads in one valid state, its audit chain verifies and ends in its state, and nothing
//! is `executing` on a lease that has lapsed. Read-only; runs over the store port, so it checks
//! an SQLite file and a DynamoDB table alike.

use crate::{
    domain::audit,
    store::{Actions, ListQuery, StoreError},
};
use jiff::Timestamp;
use serde::Serialize;
use std::collections::BTreeMap;

/// Actions read per page.
const PAGE: usize = 100;

/// What the check found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub tenants: usize,
    pub actions: usize,
    pub events: usize,
    /// Actions per state.
    pub states: BTreeMap<String, usize>,
    /// Actions taken out of service because their record does not load (SC-EDGE-08).
    pub quarantined: usize,
    pub violations: Vec<Violation>,
}

/// One broken invariant, named by the record it is about.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub tenant: String,
    pub action_id: String,
    pub rule: Rule,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The record does not load (or was quarantined for it): not in one valid state.
    Unreadable,
    /// The audit chain does not verify or does not end in the record's state.
    AuditChain,
    /// `executing` on a lease that lapsed: the sweep has not recovered it.
    ExpiredLease,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Check every action of `tenants` at `now`. Only a store that cannot be read fails the check;
/// anything wrong with a record is a [`Violation`].
pub async fn check(
    store: &dyn Actions,
    tenants: &[String],
    now: Timestamp,
) -> Result<Report, StoreError> {
    let mut report = Report {
        tenants: tenants.len(),
        ..Report::default()
    };
    for tenant in tenants {
        check_tenant(store, tenant, now, &mut report).await?;
    }
    Ok(report)
}

async fn check_tenant(
    store: &dyn Actions,
    tenant: &str,
    now: Timestamp,
    report: &mut Report,
) -> Result<(), StoreError> {
    let violation = |action_id: &str, rule, detail: String| Violation {
        tenant: tenant.to_owned(),
        action_id: action_id.to_owned(),
        rule,
        detail,
    };
    for q in store.quarantined(tenant).await? {
        report.quarantined += 1;
        report.violations.push(violation(
            &q.action_id,
            Rule::Unreadable,
            format!("quarantined: {}", q.reason),
        ));
    }
    let mut before = None;
    loop {
        let page = store
            .list(
                tenant,
                &ListQuery {
                    limit: PAGE,
                    before: before.take(),
                    ..ListQuery::default()
                },
            )
            .await?;
        for bad in &page.unreadable {
            report.violations.push(violation(
                &bad.action_id,
                Rule::Unreadable,
                bad.reason.clone(),
            ));
        }
        for action in &page.actions {
            report.actions += 1;
            *report
                .states
                .entry(action.state().as_str().to_owned())
                .or_default() += 1;
            match store.events(tenant, action.id()).await {
                Ok(events) => {
                    report.events += events.len();
                    if let Err(e) = audit::verify(action, &events) {
                        report.violations.push(violation(
                            action.id(),
                            Rule::AuditChain,
                            e.to_string(),
                        ));
                    }
                }
                Err(StoreError::Malformed(m)) => report.violations.push(violation(
                    action.id(),
                    Rule::AuditChain,
                    format!("events do not load: {m}"),
                )),
                Err(e) => return Err(e),
            }
            if let Some(lease) = action.lease().filter(|l| l.until < now) {
                report.violations.push(violation(
                    action.id(),
                    Rule::ExpiredLease,
                    format!("executing on a lease that lapsed at {}", lease.until),
                ));
            }
        }
        match page.next {
            Some(next) => before = Some(next),
            None => return Ok(()),
        }
    }
}
