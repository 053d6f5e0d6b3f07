//! Recovery (SPEC §4 Recovery): the sweep rediscovers what a lost wake or a dead worker left
//! behind, through the same checks as a wake; on start every waiting ticket is re-armed.

use super::{quarantine::Loaded, wake_with, Engine};
use crate::{
    config::Recovery,
    domain::{
        resume::{check_recovery, RecoveryFacts, RecoveryVerdict, Verdict},
        Action, Actor, SealReason, Stage, State,
    },
    Error,
};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

/// Due items one sweep pass looks at; the rest come in the next pass.
const SWEEP_BATCH: usize = 500;
/// Time kept free before a sweep's deadline for the result commit and the answer.
const SWEEP_SLACK: SignedDuration = SignedDuration::from_secs(5);

#[derive(Debug, Clone, Default, Serialize)]
pub struct SweepReport {
    pub due: usize,
    pub resumed: usize,
    pub recovered: usize,
    pub expired: usize,
    /// Left for the next pass: their tool run would not fit before the deadline.
    pub deferred: usize,
    /// Items whose handling failed (logged); the next pass retries them.
    pub failed: usize,
    /// Records that did not load: quarantined and out of the sweep (SC-EDGE-08).
    pub quarantined: usize,
}

enum Swept {
    Expired,
    Resumed,
    Recovered,
    Deferred,
    Quarantined,
    Nothing,
}

impl Engine {
    /// One pass over everything due (SC-REC-01/02, SC-APP-04).
    pub async fn sweep(&self) -> Result<SweepReport, Error> {
        self.sweep_until(None).await
    }

    /// As [`Engine::sweep`], but no tool run starts unless its whole claim budget fits before
    /// `stop_by` (a Lambda's deadline): a function killed mid-run would leave an expired lease,
    /// and a `fail` tool would end `outcome_unknown`. What does not fit waits for the next pass.
    /// One item's failure is logged and counted; it does not stop the pass.
    pub async fn sweep_until(&self, stop_by: Option<Timestamp>) -> Result<SweepReport, Error> {
        let now = self.clock.now();
        let mut report = SweepReport::default();
        let due = self.store.sweep_due(now, SWEEP_BATCH).await?;
        report.due = due.len();
        for r in due {
            match self.sweep_one(&r.tenant, &r.action_id, stop_by).await {
                Ok(Swept::Expired) => report.expired += 1,
                Ok(Swept::Resumed) => report.resumed += 1,
                Ok(Swept::Recovered) => report.recovered += 1,
                Ok(Swept::Deferred) => report.deferred += 1,
                Ok(Swept::Quarantined) => report.quarantined += 1,
                Ok(Swept::Nothing) => {}
                Err(e) => {
                    report.failed += 1;
                    tracing::error!(tenant = %r.tenant, action_id = %r.action_id, error = %e, "sweep item failed; the next pass retries");
                }
            }
        }
        crate::telemetry::swept(report.resumed, report.recovered, report.expired);
        if report.due > 0 {
            tracing::info!(?report, "sweep");
        }
        Ok(report)
    }

    async fn sweep_one(
        &self,
        tenant: &str,
        action_id: &str,
        stop_by: Option<Timestamp>,
    ) -> Result<Swept, Error> {
        let action = match self.load_or_quarantine(tenant, action_id).await? {
            Loaded::Found(action) => *action,
            Loaded::Missing => return Ok(Swept::Nothing),
            Loaded::Quarantined => return Ok(Swept::Quarantined),
        };
        match &action.stage {
            // Listed before its approval lapses (an adapter may index a scheduled approval
            // from its window's start, where its ticket will be due: Store::defer_sweep).
            Stage::PendingApproval { .. }
                if action.sweep_at().is_some_and(|at| at > self.clock.now()) =>
            {
                self.defer(&action).await;
                Ok(Swept::Nothing)
            }
            Stage::PendingApproval { .. } => {
                self.seal(&action, Actor::system(), &SealReason::ApprovalExpired)
                    .await?;
                Ok(Swept::Expired)
            }
            // SC-REC-01: a due ticket whose wake was lost goes through the same checks.
            Stage::Approved { ticket } => {
                let wake = wake_with(&action, ticket);
                let verdict = self.judge(&wake).await?;
                // Only a run is deferred; sealing verdicts apply at once.
                if matches!(&verdict, Verdict::Claim(a) if !self.fits(a, stop_by)) {
                    return Ok(Swept::Deferred);
                }
                self.apply(&wake, verdict).await?;
                Ok(Swept::Resumed)
            }
            Stage::Executing { .. } => match self.recovery_verdict(&action).await? {
                RecoveryVerdict::Leave => {
                    // Listed before its lease ends (Store::defer_sweep): look again when it does.
                    self.defer(&action).await;
                    Ok(Swept::Nothing)
                }
                RecoveryVerdict::Rerun if !self.fits(&action, stop_by) => Ok(Swept::Deferred),
                RecoveryVerdict::Rerun => {
                    tracing::warn!(tenant = %action.tenant, action_id = %action.id, "expired lease: re-running a retry tool");
                    self.perform(action).await?;
                    Ok(Swept::Recovered)
                }
                RecoveryVerdict::SealUnknown => {
                    tracing::warn!(tenant = %action.tenant, action_id = %action.id, "expired lease: outcome unknown");
                    self.seal(&action, Actor::system(), &SealReason::OutcomeUnknown)
                        .await?;
                    Ok(Swept::Recovered)
                }
            },
            Stage::Sealed { .. } => Ok(Swept::Nothing),
        }
    }

    /// Look at `action` again at its `sweep_at`. Best effort: if the write fails, the next
    /// pass meets it early once more and leaves it again.
    async fn defer(&self, action: &Action) {
        if let Err(e) = self.store.defer_sweep(action).await {
            tracing::warn!(tenant = %action.tenant, action_id = %action.id, error = %e, "could not defer the sweep of an action not yet due");
        }
    }

    /// SC-REC-02: the recovery checks over fresh facts.
    async fn recovery_verdict(&self, action: &Action) -> Result<RecoveryVerdict, Error> {
        let retry_policy = self
            .tool_named(&action.tenant, &action.tool)
            .is_some_and(|t| t.recovery == Recovery::Retry);
        let stopped = self.stopped(&action.tenant, &action.agent_id).await?;
        let fingerprint = self.fingerprint_of(action);
        Ok(check_recovery(&RecoveryFacts {
            action,
            retry_policy,
            stopped,
            current_fingerprint: fingerprint.as_deref(),
            now: self.clock.now(),
        }))
    }

    /// Whether a run of this action's tool, every attempt timing out, ends before `stop_by`.
    fn fits(&self, action: &Action, stop_by: Option<Timestamp>) -> bool {
        let Some(stop_by) = stop_by else { return true };
        let budget = self
            .tool_of(action)
            .map_or(SignedDuration::ZERO, |t| t.claim_budget());
        self.clock
            .now()
            .saturating_add(budget + SWEEP_SLACK)
            .expect("in range")
            <= stop_by
    }

    /// On start: re-arm every committed waiting ticket (a restart loses nothing).
    pub async fn rediscover(&self) -> Result<usize, Error> {
        self.rediscover_until(Timestamp::MAX).await
    }

    /// Arm a ticket another instance committed (it announced it), if it still waits: every
    /// instance sharing the store then wakes it on time, and its claim decides which runs it.
    pub async fn arm_committed(&self, tenant: &str, action_id: &str) -> Result<bool, Error> {
        match self.load_or_quarantine(tenant, action_id).await? {
            Loaded::Found(action) if action.state() == State::Approved => {
                self.arm(&action).await;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Re-arm every committed waiting ticket due by `until` (the due-index poll of instances
    /// sharing a store: what an announcement missed).
    pub async fn rediscover_until(&self, until: Timestamp) -> Result<usize, Error> {
        let waiting = self.store.sweep_due(until, 100_000).await?;
        let (mut armed, mut quarantined) = (0, 0);
        for r in waiting {
            match self.load_or_quarantine(&r.tenant, &r.action_id).await? {
                Loaded::Found(action) if action.state() == State::Approved => {
                    self.arm(&action).await;
                    armed += 1;
                }
                Loaded::Quarantined => quarantined += 1,
                _ => {}
            }
        }
        if until == Timestamp::MAX {
            tracing::info!(armed, quarantined, "rediscovered waiting tickets");
        } else {
            tracing::debug!(armed, quarantined, %until, "re-armed the tickets due soon");
        }
        Ok(armed)
    }
}
