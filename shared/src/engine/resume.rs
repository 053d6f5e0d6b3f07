//! Resume (SPEC §4 Resume) and recovery (§4 Recovery): wake → ordered checks → claim → run once
//! → commit the result under the lease. The sweep rediscovers what a lost wake or a dead
//! worker left behind.

use super::{quarantine::Loaded, wake_of, Committed, Engine};
use crate::{
    config::{Recovery, ToolEntry},
    domain::{
        resume::{
            check, check_recovery, Facts, RecoveryFacts, RecoveryVerdict, Rejection, Verdict, Wake,
        },
        Action, Actor, SealReason, State, Transition,
    },
    tools::{Call, ToolAnswer},
    Error,
};
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::{json, Value};

/// Slack added to a lease beyond the attempts' worst case.
const LEASE_MARGIN: SignedDuration = SignedDuration::from_secs(30);
/// Due items one sweep pass looks at; the rest come in the next pass.
const SWEEP_BATCH: usize = 500;
/// Time kept free before a sweep's deadline for the result commit and the answer.
const SWEEP_SLACK: SignedDuration = SignedDuration::from_secs(5);

/// What a wake did. Serialized as the resume function's answer.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ResumeOutcome {
    /// Nothing changed (SC-RES-01/02).
    Rejected { reason: Rejection },
    /// Too early: re-armed for `until` (SC-RES-05).
    Waiting { until: Timestamp },
    /// Sealed without running the tool (stop, catalog change, missed window, lost race).
    Sealed { state: State, reason: SealReason },
    /// The tool ran; the result committed.
    Ran { state: State },
    /// Another contender changed the record first; this is what it is now.
    Lost { state: State },
}

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
    /// Handle one wake. The payload only finds the ticket; the committed record decides.
    pub async fn resume(&self, wake: &Wake) -> Result<ResumeOutcome, Error> {
        let (action, verdict) = self.judge(wake).await?;
        self.apply(wake, action, verdict).await
    }

    /// Gather the facts for the ordered checks (fresh: the clock is read here) and run them.
    async fn judge(&self, wake: &Wake) -> Result<(Option<Action>, Verdict), Error> {
        let action = match self.store.load(&wake.tenant, &wake.action_id).await {
            Ok(a) => a,
            Err(crate::store::StoreError::Malformed(m)) => {
                tracing::error!(tenant = %wake.tenant, action_id = %wake.action_id, error = %m, "refusing a malformed record");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let (stopped, fingerprint) = match &action {
            Some(a) => (
                self.stopped(&a.tenant, &a.agent_id).await?,
                self.fingerprint_of(a),
            ),
            None => (false, None),
        };
        let verdict = check(
            wake,
            &Facts {
                action: action.as_ref(),
                stopped,
                current_fingerprint: fingerprint.as_deref(),
                now: self.clock.now(),
            },
        );
        tracing::info!(tenant = %wake.tenant, action_id = %wake.action_id, verdict = ?verdict, "wake");
        Ok((action, verdict))
    }

    async fn apply(
        &self,
        wake: &Wake,
        action: Option<Action>,
        verdict: Verdict,
    ) -> Result<ResumeOutcome, Error> {
        match (verdict, action) {
            (Verdict::Reject(reason), _) => Ok(ResumeOutcome::Rejected { reason }),
            (Verdict::Seal(reason), Some(action)) => {
                let sealed = self.seal(&action, Actor::system(), reason.clone()).await?;
                Ok(match sealed.state {
                    s if s == reason.state() => ResumeOutcome::Sealed { state: s, reason },
                    s => ResumeOutcome::Lost { state: s },
                })
            }
            (Verdict::Wait(until), Some(action)) => {
                let deadline = action.ticket.as_ref().map_or(until, |t| t.deadline());
                // The wake that came early has fired: re-arm strictly later (SC-EDGE-09).
                self.waker
                    .rearm(wake, until, deadline)
                    .await
                    .map_err(|e| Error::Unavailable(e.to_string()))?;
                Ok(ResumeOutcome::Waiting { until })
            }
            (Verdict::Claim, Some(action)) => {
                let (after, ran) = self.perform(action).await?;
                Ok(outcome_of(&after, ran))
            }
            (_, None) => Ok(ResumeOutcome::Rejected {
                reason: Rejection::NoWaitingTicket,
            }),
        }
    }

    /// The fingerprint of the action's tool in the catalog now; `None` if it left the catalog.
    fn fingerprint_of(&self, action: &Action) -> Option<String> {
        self.config
            .tenant(&action.tenant)
            .and_then(|t| t.tool(&action.tool))
            .map(|t| t.fingerprint())
    }

    /// After a ticket commits (approval or intake): due now → perform it here, through the
    /// same checks as a wake; later → arm the wake. Arming a due ticket too would only race
    /// this caller for the claim. Never an error: the ticket is committed, so a failure here
    /// answers with the committed action (the sweep performs it, SC-REC-01) rather than inviting
    /// the caller to submit the same call again.
    pub(super) async fn dispatch(&self, action: Action) -> Action {
        let due = action
            .ticket
            .as_ref()
            .is_some_and(|t| t.due_at() <= self.clock.now());
        if !due {
            self.arm(&action).await;
            return action;
        }
        let wake = wake_of(&action).expect("an approved action has a wake");
        let performed = match self.resume(&wake).await {
            Ok(_) => self.load(&action.tenant, &action.id).await,
            Err(e) => Err(e),
        };
        performed.unwrap_or_else(|e| {
            tracing::error!(tenant = %action.tenant, action_id = %action.id, error = %e, "committed, not yet performed; the sweep will");
            action
        })
    }

    /// Claim (`approved`/expired `executing` → `executing`), run the committed call, commit the
    /// result conditional on still holding the claim. Returns the record as it ends up, and
    /// whether this call ran the tool (false when another contender won the claim).
    async fn perform(&self, action: Action) -> Result<(Action, bool), Error> {
        let tenant = self.tenant(&action.tenant)?;
        let ticket = action
            .ticket
            .clone()
            .ok_or_else(|| Error::Internal("perform without a ticket".into()))?;
        let Some(tool) = tenant.tool(ticket.pending_tool()) else {
            let sealed = self
                .seal(&action, Actor::system(), SealReason::CatalogChanged)
                .await?;
            return Ok((sealed, false));
        };
        let now = self.clock.now();
        // Last guard before the claim (§1.4): time may have passed since the checks ran.
        if now > ticket.deadline() {
            let sealed = match action.state {
                State::Executing => self.seal_unknown(&action).await?,
                _ => {
                    self.seal(&action, Actor::system(), SealReason::ScheduleMissed)
                        .await?
                }
            };
            return Ok((sealed, false));
        }
        let attempts = tool.attempts_per_claim();
        let lease_until = now
            .saturating_add(tool.claim_budget() + LEASE_MARGIN)
            .expect("in range");
        let claim = Transition::claim(&action, &self.worker_id, lease_until, now);
        let claimed = match self.commit_or_reload(&claim).await? {
            Committed::Won(a) => a,
            Committed::Lost(current) => return Ok((current, false)),
        };
        let lease = claimed.lease.clone().expect("a claim holds a lease");
        tracing::info!(tenant = %claimed.tenant, action_id = %claimed.id, tool = %tool.name, epoch = lease.epoch, "claimed; running the tool");

        let (tool_name, args) = ticket.tool_call();
        debug_assert_eq!(tool_name, tool.name);
        let mut attempt = 0;
        let answer = loop {
            attempt += 1;
            let call = Call {
                action_id: &claimed.id,
                tool,
                args,
                // Counts every attempt of this action across claims: 1, 2, 3 in the first
                // claim of a retry tool, 4, 5, 6 after a recovery re-claim.
                attempt: (lease.epoch - 1) * attempts + attempt,
            };
            let answer = self.tools.run(&call).await;
            let retry_left = attempt < attempts && self.clock.now() < ticket.deadline();
            match answer {
                ToolAnswer::Retryable(e) if retry_left => {
                    tracing::warn!(tenant = %claimed.tenant, action_id = %claimed.id, attempt, error = %e, "retryable tool failure; retrying");
                    let pause = ToolEntry::backoff(attempt).unsigned_abs();
                    tokio::time::sleep(pause).await;
                }
                other => break other,
            }
        };
        let result: Result<Value, Value> = match answer {
            ToolAnswer::Succeeded(v) => Ok(v),
            ToolAnswer::Failed(e) | ToolAnswer::Retryable(e) => Err(e),
        };
        // Fenced by version: if the lease was superseded, this commit is refused.
        let finish = Transition::finish(&claimed, result, self.clock.now());
        match self.commit_or_reload(&finish).await? {
            Committed::Won(done) => {
                tracing::info!(tenant = %done.tenant, action_id = %done.id, state = %done.state, "result committed");
                Ok((done, true))
            }
            Committed::Lost(current) => {
                tracing::warn!(tenant = %current.tenant, action_id = %current.id, state = %current.state, "lease superseded; result not committed");
                Ok((current, false))
            }
        }
    }

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
        match action.state {
            State::PendingApproval => {
                self.seal(&action, Actor::system(), SealReason::ApprovalExpired)
                    .await?;
                Ok(Swept::Expired)
            }
            // SC-REC-01: a due ticket whose wake was lost goes through the same checks.
            State::Approved => {
                let wake = wake_of(&action).expect("an approved action has a wake");
                let (action, verdict) = self.judge(&wake).await?;
                // Only a run is deferred; sealing verdicts apply at once.
                if verdict == Verdict::Claim
                    && !action.as_ref().is_some_and(|a| self.fits(a, stop_by))
                {
                    return Ok(Swept::Deferred);
                }
                self.apply(&wake, action, verdict).await?;
                Ok(Swept::Resumed)
            }
            State::Executing => match self.recovery_verdict(&action).await? {
                RecoveryVerdict::Leave => Ok(Swept::Nothing),
                RecoveryVerdict::Rerun if !self.fits(&action, stop_by) => Ok(Swept::Deferred),
                RecoveryVerdict::Rerun => {
                    tracing::warn!(tenant = %action.tenant, action_id = %action.id, "expired lease: re-running a retry tool");
                    self.perform(action).await?;
                    Ok(Swept::Recovered)
                }
                RecoveryVerdict::SealUnknown => {
                    tracing::warn!(tenant = %action.tenant, action_id = %action.id, "expired lease: outcome unknown");
                    self.seal_unknown(&action).await?;
                    Ok(Swept::Recovered)
                }
            },
            _ => Ok(Swept::Nothing),
        }
    }

    /// SC-REC-02: the recovery checks over fresh facts.
    async fn recovery_verdict(&self, action: &Action) -> Result<RecoveryVerdict, Error> {
        let retry_policy = self
            .config
            .tenant(&action.tenant)
            .and_then(|t| t.tool(&action.tool))
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
            .config
            .tenant(&action.tenant)
            .and_then(|t| t.tool(&action.tool))
            .map_or(SignedDuration::ZERO, |t| t.claim_budget());
        self.clock
            .now()
            .saturating_add(budget + SWEEP_SLACK)
            .expect("in range")
            <= stop_by
    }

    /// Seal an executing action whose result never committed: `failed`, `outcome_unknown`.
    async fn seal_unknown(&self, action: &Action) -> Result<Action, Error> {
        let mut t = Transition::seal(
            action,
            Actor::system(),
            &SealReason::OutcomeUnknown,
            self.clock.now(),
        );
        if let Some(o) = t.action.outcome.as_mut() {
            o.error = Some(json!({
                "kind": "outcome_unknown",
                "message": "the worker's lease expired before a result committed; reconcile with the tool (its Idempotency-Key is the action id)",
            }));
        }
        match self.commit_or_reload(&t).await? {
            Committed::Won(a) | Committed::Lost(a) => Ok(a),
        }
    }

    /// On start: re-arm every committed waiting ticket (a restart loses nothing).
    pub async fn rediscover(&self) -> Result<usize, Error> {
        let waiting = self.store.sweep_due(Timestamp::MAX, 100_000).await?;
        let (mut armed, mut quarantined) = (0, 0);
        for r in waiting {
            match self.load_or_quarantine(&r.tenant, &r.action_id).await? {
                Loaded::Found(action) if action.state == State::Approved => {
                    self.arm(&action).await;
                    armed += 1;
                }
                Loaded::Quarantined => quarantined += 1,
                _ => {}
            }
        }
        tracing::info!(armed, quarantined, "rediscovered waiting tickets");
        Ok(armed)
    }
}

fn outcome_of(action: &Action, ran: bool) -> ResumeOutcome {
    match action.state {
        state if ran => ResumeOutcome::Ran { state },
        state => ResumeOutcome::Lost { state },
    }
}
