//! Resume (SPEC §4 Resume): a wake → the ordered checks over fresh facts → a verdict that
//! carries the record → seal, re-arm or perform (claim → run the attempts → commit the result,
//! in `perform.rs`). And what a request does with a ticket it just committed (SC-EDGE-07).

use super::{perform::Performed, runs::Running, Engine};
use crate::{
    config::ToolEntry,
    domain::{
        resume::{check, Facts, Rejection, Verdict, Wake},
        Action, Lease, SealReason, State,
    },
    Error,
};
use jiff::Timestamp;
use serde::Serialize;

/// What a wake did. Serialized as the resume function's answer.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ResumeOutcome {
    /// Nothing changed (SC-RES-01/02).
    Rejected { reason: Rejection },
    /// Too early: re-armed for `until` (SC-RES-05).
    Waiting { until: Timestamp },
    /// Sealed without running the tool (stop, catalog change, missed window).
    Sealed { state: State, reason: SealReason },
    /// The tool ran; the result committed.
    Ran { state: State },
    /// Another contender changed the record first; this is what it is now.
    Lost { state: State },
    /// Not claimed: this process is shutting down; the ticket stays committed (SC-EDGE-05).
    Deferred,
    /// Claimed, but this worker's lease would have ended before its next attempt could
    /// (it was held up past it): nothing committed; recovery takes over once the lease lapses.
    Yielded,
}

impl From<Performed> for ResumeOutcome {
    fn from(p: Performed) -> Self {
        match p {
            Performed::Ran(a) => ResumeOutcome::Ran { state: a.state },
            Performed::Sealed(a, reason) => ResumeOutcome::Sealed {
                state: a.state,
                reason,
            },
            Performed::Lost(a) => ResumeOutcome::Lost { state: a.state },
            Performed::Deferred(_) => ResumeOutcome::Deferred,
            Performed::Yielded(_) => ResumeOutcome::Yielded,
        }
    }
}

impl Engine {
    /// Handle one wake. The payload only finds the ticket; the committed record decides.
    pub async fn resume(&self, wake: &Wake) -> Result<ResumeOutcome, Error> {
        let verdict = self.judge(wake).await?;
        self.apply(wake, verdict).await
    }

    /// Gather the facts for the ordered checks (fresh: the clock is read here) and run them.
    pub(super) async fn judge(&self, wake: &Wake) -> Result<Verdict, Error> {
        let action = match self.store.load(&wake.tenant, &wake.action_id).await {
            Ok(a) => a,
            Err(crate::store::StoreError::Malformed(m)) => {
                tracing::error!(tenant = %wake.tenant, action_id = %wake.action_id, error = %m, "refusing a malformed record");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let stopped = match &action {
            Some(a) => self.stopped(&a.tenant, &a.agent_id).await?,
            None => false,
        };
        let fingerprint = action.as_ref().and_then(|a| self.fingerprint_of(a));
        let facts = Facts {
            action,
            stopped,
            current_fingerprint: fingerprint.as_deref(),
            now: self.clock.now(),
        };
        let verdict = check(wake, facts);
        tracing::info!(tenant = %wake.tenant, action_id = %wake.action_id, verdict = %verdict.name(), "wake");
        Ok(verdict)
    }

    pub(super) async fn apply(
        &self,
        wake: &Wake,
        verdict: Verdict,
    ) -> Result<ResumeOutcome, Error> {
        match verdict {
            Verdict::Reject(reason) => Ok(ResumeOutcome::Rejected { reason }),
            Verdict::Seal(action, reason) => Ok(self.seal_unrun(&action, reason).await?.into()),
            Verdict::Wait(action, until) => {
                let deadline = action.ticket.as_ref().map_or(until, |t| t.deadline());
                // The wake that came early has fired: re-arm strictly later (SC-EDGE-09).
                self.waker
                    .rearm(wake, until, deadline)
                    .await
                    .map_err(|e| Error::Unavailable(e.to_string()))?;
                Ok(ResumeOutcome::Waiting { until })
            }
            Verdict::Claim(action) => Ok(self.perform(action).await?.into()),
        }
    }

    /// The fingerprint of the action's tool in the catalog now; `None` if it left the catalog.
    pub(super) fn fingerprint_of(&self, action: &Action) -> Option<String> {
        self.config
            .tenant(&action.tenant)
            .and_then(|t| t.tool(&action.tool))
            .map(|t| t.fingerprint())
    }

    /// Whether a ticket being committed runs inside this request (SC-EDGE-07): only when it is
    /// due now and its tool's whole claim budget fits the request budget (API Gateway ends an
    /// integration at 29–30 s), and the process is not shutting down. Then it is committed
    /// already claimed under the returned lease (one write: no sweep can take it in between);
    /// otherwise its wake runs it.
    pub(super) fn inline_claim(
        &self,
        tool: &ToolEntry,
        due_at: Timestamp,
        now: Timestamp,
    ) -> Option<(Running<'_>, Lease)> {
        let fits = tool.claim_budget() <= self.config.limits.request_budget;
        if due_at > now || !fits {
            return None;
        }
        let running = self.runs.enter()?;
        let lease = Lease {
            owner: self.claim_owner(),
            epoch: 1,
            until: self.lease_end(tool, now),
        };
        Some((running, lease))
    }

    /// After a request committed a ticket it does not run itself: arm the wake (a due one
    /// fires at once). Never an error: the ticket is committed, so the caller is answered with
    /// it (the sweep performs it if the wake is lost, SC-REC-01) rather than invited to submit
    /// the same call again.
    pub(super) async fn hand_to_wake(&self, action: Action) -> Action {
        self.arm(&action).await;
        action
    }

    /// Run an action this request committed already claimed (one write: no sweep can take it
    /// in between) and answer with the record as it ends up. A failure is logged, not returned:
    /// the claim is committed, and recovery settles it when the lease lapses.
    pub(super) async fn run_inline(&self, claimed: Action) -> Action {
        let Some(tool) = self.tool_of(&claimed) else {
            return claimed;
        };
        match self.run_claimed(&claimed, tool).await {
            Ok(performed) => performed.into_action(),
            Err(e) => {
                tracing::error!(tenant = %claimed.tenant, action_id = %claimed.id, error = %e, "inline run failed; recovery settles the claim");
                claimed
            }
        }
    }
}
