//! Resume (SPEC §4 Resume): a wake → the ordered checks over fresh facts → a verdict that
//! carries the record → seal, re-arm or perform (claim → run the attempts → commit the result,
//! in `perform.rs`).

use super::{handle::Engine, perform::Performed};
use crate::{
    domain::{
        resume::{check, Facts, Rejection, Verdict, Wake},
        Action, SealReason, State,
    },
    store::StoreError,
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
            Performed::Ran(a) => ResumeOutcome::Ran { state: a.state() },
            Performed::Sealed(a, reason) => ResumeOutcome::Sealed {
                state: a.state(),
                reason,
            },
            Performed::Lost(a) => ResumeOutcome::Lost { state: a.state() },
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
        let (action, stopped) = self.waiting_facts(wake).await?;
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
            Verdict::Seal(action, reason) => Ok(self.sealed_unrun(&action, reason).await?.into()),
            Verdict::Wait(action, until) => {
                let deadline = action.ticket().map_or(until, |t| t.deadline());
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

    /// The record and whether its agent is stopped, read together (one statement on
    /// Postgres). Only a waiting ticket gets as far as the stop check: a wake that finds it
    /// taken (another instance claimed it) reads no stop. Something that does not load is
    /// read again one read after the other, whose answers stand: a malformed record is
    /// refused, a malformed stop fails the wake.
    async fn waiting_facts(&self, wake: &Wake) -> Result<(Option<Action>, bool), Error> {
        match self
            .store
            .load_with_stops(&wake.tenant, &wake.action_id)
            .await
        {
            Ok((action, stops)) => {
                let waiting = action
                    .as_ref()
                    .is_some_and(|a| a.state() == State::Approved);
                return Ok((action, waiting && !stops.is_empty()));
            }
            Err(StoreError::Malformed(_)) => {}
            Err(e) => return Err(e.into()),
        }
        let action = match self.store.load(&wake.tenant, &wake.action_id).await {
            Ok(a) => a,
            Err(StoreError::Malformed(m)) => {
                tracing::error!(tenant = %wake.tenant, action_id = %wake.action_id, error = %m, "refusing a malformed record");
                None
            }
            Err(e) => return Err(e.into()),
        };
        let stopped = match &action {
            Some(a) if a.state() == State::Approved => {
                self.stopped(a.tenant(), a.call().agent_id()).await?
            }
            _ => false,
        };
        Ok((action, stopped))
    }

    /// The fingerprint of the action's tool in the catalog now; `None` if it left the catalog.
    pub(super) fn fingerprint_of(&self, action: &Action) -> Option<String> {
        self.tool_named(action.tenant(), action.call().tool())
            .map(|t| t.fingerprint())
    }
}
