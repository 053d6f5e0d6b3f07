//! Recovery (SPEC §4 Recovery): the sweep rediscovers what a lost wake or a dead worker left
//! behind, through the same checks as a wake; on start every waiting ticket is re-armed.

use super::{
    handle::{wake_with, Engine},
    quarantine::Loaded,
};
use crate::{
    config::Recovery,
    domain::{
        resume::{check_recovery, RecoveryFacts, RecoveryVerdict, Verdict},
        Action, Actor, SealReason, Standing, State,
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

/// Which timer a rediscovered ticket gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arm {
    /// At its due instant: this process is the one to wake it.
    Own,
    /// A stand-in after a grace (`Waker::arm_backup`): another instance armed its own.
    Backup,
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
        match &action.standing() {
            // Listed before its approval lapses (an adapter may index a scheduled approval
            // from its window's start, where its ticket will be due: Store::defer_sweep).
            Standing::PendingApproval { .. }
                if action.sweep_at().is_some_and(|at| at > self.clock.now()) =>
            {
                self.defer(&action).await;
                Ok(Swept::Nothing)
            }
            Standing::PendingApproval { .. } => {
                self.seal(&action, Actor::system(), &SealReason::ApprovalExpired)
                    .await?;
                Ok(Swept::Expired)
            }
            // SC-REC-01: a due ticket whose wake was lost goes through the same checks.
            Standing::Approved { ticket } => {
                let wake = wake_with(&action, ticket);
                let verdict = self.judge(&wake).await?;
                // Only a run is deferred; sealing verdicts apply at once.
                if matches!(&verdict, Verdict::Claim(a) if !self.fits(a, stop_by)) {
                    return Ok(Swept::Deferred);
                }
                self.apply(&wake, verdict).await?;
                Ok(Swept::Resumed)
            }
            Standing::Executing { .. } => match self.recovery_verdict(&action).await? {
                RecoveryVerdict::Leave => {
                    // Listed before its lease ends (Store::defer_sweep): look again when it does.
                    self.defer(&action).await;
                    Ok(Swept::Nothing)
                }
                RecoveryVerdict::Rerun if !self.fits(&action, stop_by) => Ok(Swept::Deferred),
                RecoveryVerdict::Rerun => {
                    tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), "expired lease: re-running a retry tool");
                    self.perform(action).await?;
                    Ok(Swept::Recovered)
                }
                RecoveryVerdict::SealUnknown => {
                    tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), "expired lease: outcome unknown");
                    self.seal(&action, Actor::system(), &SealReason::OutcomeUnknown)
                        .await?;
                    Ok(Swept::Recovered)
                }
            },
            Standing::Sealed { .. } => Ok(Swept::Nothing),
        }
    }

    /// Look at `action` again at its `sweep_at`. Best effort: if the write fails, the next
    /// pass meets it early once more and leaves it again.
    async fn defer(&self, action: &Action) {
        if let Err(e) = self.store.defer_sweep(action).await {
            tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), error = %e, "could not defer the sweep of an action not yet due");
        }
    }

    /// SC-REC-02: the recovery checks over fresh facts.
    async fn recovery_verdict(&self, action: &Action) -> Result<RecoveryVerdict, Error> {
        let retry_policy = self
            .tool_named(action.tenant(), action.call().tool())
            .is_some_and(|t| t.recovery == Recovery::Retry);
        let stopped = self
            .stopped(action.tenant(), action.call().agent_id())
            .await?;
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
        self.rediscover_due(Timestamp::MAX, Arm::Own).await
    }

    /// Arm a stand-in for a ticket another instance committed (it announced it) and armed
    /// itself, if it still waits and no timer here holds it: the committing instance claims
    /// it on time, this one only if that one is down (SC-REC-02; a stand-in costs one read).
    pub async fn arm_committed(&self, tenant: &str, action_id: &str) -> Result<bool, Error> {
        if self.waker.holds(tenant, action_id) {
            return Ok(false);
        }
        match self.load_or_quarantine(tenant, action_id).await? {
            Loaded::Found(action) if action.state() == State::Approved => {
                self.arm_backup(&action).await;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Arm a stand-in for every committed waiting ticket due by `until` that no timer here
    /// holds (the due-index poll of instances sharing a store: what an announcement missed,
    /// and the tickets of an instance that died before its timers fired).
    pub async fn rediscover_until(&self, until: Timestamp) -> Result<usize, Error> {
        self.rediscover_due(until, Arm::Backup).await
    }

    async fn rediscover_due(&self, until: Timestamp, how: Arm) -> Result<usize, Error> {
        let waiting = self.store.sweep_due(until, 100_000).await?;
        let (mut armed, mut quarantined) = (0, 0);
        let now = self.clock.now();
        for r in waiting {
            // A stand-in only for what is still ahead and held by no timer here: what is due
            // already is the sweep's (SC-REC-01), and may be resuming on a timer that fired.
            if how == Arm::Backup && (r.sweep_at < now || self.waker.holds(&r.tenant, &r.action_id))
            {
                continue;
            }
            match self.load_or_quarantine(&r.tenant, &r.action_id).await? {
                Loaded::Found(action) if action.state() == State::Approved => {
                    match how {
                        Arm::Own => self.arm(&action).await,
                        Arm::Backup => self.arm_backup(&action).await,
                    }
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
