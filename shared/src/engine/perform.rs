//! Performing a committed ticket (SPEC SC-RES-07): claim → run the attempts → commit the result
//! under the lease. Read top to bottom, each step is one function below.
//!
//! Deadlines (SC-EDGE-01): the window is checked immediately before every attempt — after the
//! claim committed, after every backoff — with a fresh clock read; a late attempt never starts.
//!
//! Stops (SC-EDGE-02), the design with the fewest writes: the claim carries no stop condition;
//! instead the worker reads the stops of (tenant, agent) — a strongly consistent read on both
//! stores — after its claim committed and immediately before every attempt. The linearization
//! point is the stop record's write against that read: a stop answered before the read is seen
//! and no attempt starts (a claim with no attempt yet is sealed `denied`, `stopped`); a stop
//! written after the read came after that attempt started, which the rule permits. A
//! `ConditionCheck` on the stop inside the claim would turn every claim into a transaction (twice
//! the write capacity on DynamoDB) and still not cover retries and recovery re-runs, which start
//! long after their claim; the read covers all three for one read per attempt and no write.
//!
//! Leases (SC-REC-02, SC-RES-07): an attempt starts only if it ends, timing out at worst,
//! before this worker's lease does. A worker held up past that yields and commits nothing: from
//! the lease's end, recovery may claim the action again, and two runs must never overlap.
//!
//! Store faults (SC-EDGE-04, SC-EDGE-10): the claim and the result commit go through the one
//! write path (`commit.rs`), re-sent on a transient store error while the lease holds.

use super::{commit::Committed, handle::Engine};
use crate::{
    config::ToolEntry,
    domain::{
        action::Held,
        resume::{check_attempt, AttemptFacts, AttemptVerdict},
        Action, SealReason, Transition,
    },
    tools::{Call, ToolAnswer},
    Error,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

/// Slack added to a lease beyond the attempts' worst case.
pub(super) const LEASE_MARGIN: SignedDuration = SignedDuration::from_secs(30);
/// How long a claim write is retried on transient store errors before the worker gives up
/// (the ticket stays committed; the wake's retry or the sweep performs it).
const CLAIM_RETRY_FOR: SignedDuration = SignedDuration::from_secs(5);

/// How a perform ended, with the record as it now stands.
#[derive(Debug)]
pub(super) enum Performed {
    /// The tool ran and its result committed.
    Ran(Action),
    /// Sealed without a tool run (catalog gone, stop or closed window before the first attempt).
    Sealed(Action, SealReason),
    /// Another contender changed the record first.
    Lost(Action),
    /// Not claimed: the process is shutting down; the ticket stays committed.
    Deferred(Action),
    /// Claimed, but the lease would end before the next attempt could: nothing committed;
    /// recovery takes the action over once the lease lapses.
    Yielded(Action),
}

impl Performed {
    pub(super) fn into_action(self) -> Action {
        match self {
            Performed::Ran(a)
            | Performed::Sealed(a, _)
            | Performed::Lost(a)
            | Performed::Deferred(a)
            | Performed::Yielded(a) => a,
        }
    }
}

/// What the attempts of one claim came to.
enum Attempts {
    /// The last attempt's answer (a retryable one when no further attempt could start).
    Answered(ToolAnswer),
    /// No attempt started: the claim is sealed with this reason.
    NotStarted(SealReason),
    /// The lease would end before the next attempt's timeout: leave it to recovery.
    Yielded,
}

impl Engine {
    /// Claim an `approved` (or expired `executing`) action, run it, commit the result.
    pub(super) async fn perform(&self, action: Action) -> Result<Performed, Error> {
        let Some(_running) = self.runs.enter() else {
            return Ok(Performed::Deferred(action));
        };
        let Some(tool) = self.tool_of(&action) else {
            // A lapsed claim's attempts may have reached the tool that has since left.
            let reason = match action.lease() {
                Some(_) => SealReason::OutcomeUnknown,
                None => SealReason::CatalogChanged,
            };
            return self.sealed_unrun(&action, reason).await;
        };
        let claimed = match self.claim(&action, tool).await? {
            Committed::Landed(claimed) => claimed,
            Committed::LostTo(current) => return Ok(Performed::Lost(current)),
        };
        self.run_claimed(&claimed, tool).await
    }

    /// Run the attempts of a claim this worker holds and commit what came of them. An inline
    /// run enters here with the action it committed already claimed (SC-EDGE-07).
    pub(super) async fn run_claimed(
        &self,
        claimed: &Action,
        tool: &ToolEntry,
    ) -> Result<Performed, Error> {
        let Some(held) = claimed.held() else {
            return Err(Error::Internal(format!("{} is not claimed", claimed.id())));
        };
        match self.run_attempts(claimed, held, tool).await? {
            Attempts::Answered(answer) => self.commit_result(claimed, held, answer).await,
            Attempts::NotStarted(reason) => self.sealed_unrun(claimed, reason).await,
            Attempts::Yielded => Ok(Performed::Yielded(claimed.clone())),
        }
    }

    /// The claim: `approved` (or expired `executing`) → `executing` under a new lease.
    async fn claim(&self, action: &Action, tool: &ToolEntry) -> Result<Committed, Error> {
        let now = self.clock.now();
        let Some(t) =
            Transition::claim(action, &self.claim_owner(), self.lease_end(tool, now), now)
        else {
            return Err(Error::Internal(format!(
                "{} has no ticket to claim",
                action.id()
            )));
        };
        let give_up = super::commit::later(now, CLAIM_RETRY_FOR);
        let committed = self.commit(&t, give_up).await?;
        if let Committed::Landed(c) = &committed {
            let epoch = c.lease().map(|l| l.epoch);
            tracing::info!(tenant = %c.tenant(), action_id = %c.id(), tool = %tool.name, epoch, "claimed");
        }
        Ok(committed)
    }

    /// Every attempt the claim allows, each only after [`check_attempt`] passed just before it.
    async fn run_attempts(
        &self,
        claimed: &Action,
        Held { ticket, lease }: Held<'_>,
        tool: &ToolEntry,
    ) -> Result<Attempts, Error> {
        let epoch = lease.epoch;
        let attempts = tool.attempts_per_claim();
        let (_, args) = ticket.tool_call();
        let mut last: Option<ToolAnswer> = None;
        let mut attempt = 0;
        while attempt < attempts {
            let facts = AttemptFacts {
                ticket,
                stopped: self
                    .stopped(claimed.tenant(), claimed.call().agent_id())
                    .await?,
                lease_until: lease.until,
                attempt_takes: tool.timeout(),
                now: self.clock.now(),
            };
            match check_attempt(&facts) {
                AttemptVerdict::Start => {}
                AttemptVerdict::LeaseRunsOut => {
                    tracing::warn!(tenant = %claimed.tenant(), action_id = %claimed.id(), attempt, lease_until = %lease.until, "the lease would end before this attempt could; yielding to recovery");
                    return Ok(Attempts::Yielded);
                }
                AttemptVerdict::Early(until) => {
                    let gap = until.duration_since(self.clock.now()).unsigned_abs();
                    tokio::time::sleep(gap).await;
                    continue;
                }
                AttemptVerdict::Halt(reason) => {
                    tracing::warn!(tenant = %claimed.tenant(), action_id = %claimed.id(), attempt, %reason, "attempt not started");
                    return Ok(match last {
                        Some(answer) => Attempts::Answered(answer),
                        None => Attempts::NotStarted(reason),
                    });
                }
            }
            attempt += 1;
            let call = Call {
                action_id: claimed.id(),
                tool,
                args,
                // Counts every attempt of this action across claims: 1, 2, 3 in the first
                // claim of a retry tool, 4, 5, 6 after a recovery re-claim.
                attempt: (epoch - 1) * attempts + attempt,
                at: facts.now,
                not_after: ticket.deadline(),
            };
            let sent = std::time::Instant::now();
            let answer = self.tools.run(&call).await;
            crate::telemetry::tool_attempt(sent.elapsed().as_secs_f64(), answer.kind());
            match answer {
                ToolAnswer::Retryable(e) if attempt < attempts => {
                    tracing::warn!(tenant = %claimed.tenant(), action_id = %claimed.id(), attempt, error = %e, "retryable tool failure; retrying");
                    last = Some(ToolAnswer::Retryable(e));
                    tokio::time::sleep(ToolEntry::backoff(attempt).unsigned_abs()).await;
                }
                answer => return Ok(Attempts::Answered(answer)),
            }
        }
        // Unreachable in practice: every tool makes at least one attempt per claim, and the
        // loop answers from inside once it has. Leaving it to recovery is the safe answer.
        Ok(match last {
            Some(answer) => Attempts::Answered(answer),
            None => Attempts::Yielded,
        })
    }

    /// `executing → succeeded | failed`, conditional on still holding the claim.
    async fn commit_result(
        &self,
        claimed: &Action,
        held: Held<'_>,
        answer: ToolAnswer,
    ) -> Result<Performed, Error> {
        let result: Result<Value, Value> = match answer {
            ToolAnswer::Succeeded(v) => Ok(v),
            ToolAnswer::Failed(e) | ToolAnswer::Retryable(e) => Err(e),
        };
        let t = Transition::finish(claimed, result, self.clock.now());
        match self.commit(&t, held.lease.until).await? {
            Committed::Landed(done) => {
                tracing::info!(tenant = %done.tenant(), action_id = %done.id(), state = %done.state(), "result committed");
                Ok(Performed::Ran(done))
            }
            Committed::LostTo(current) => {
                tracing::warn!(tenant = %current.tenant(), action_id = %current.id(), state = %current.state(), "lease superseded; result not committed");
                Ok(Performed::Lost(current))
            }
        }
    }

    /// Seal an action that did not run (from `approved`, or a claim with no attempt started).
    pub(super) async fn sealed_unrun(
        &self,
        action: &Action,
        reason: SealReason,
    ) -> Result<Performed, Error> {
        Ok(match self.seal_unrun(action, reason).await? {
            (Committed::Landed(sealed), reason) => Performed::Sealed(sealed, reason),
            (Committed::LostTo(current), _) => Performed::Lost(current),
        })
    }

    /// The end of a lease taken at `now`: every attempt timing out, plus a margin.
    pub(super) fn lease_end(&self, tool: &ToolEntry, now: Timestamp) -> Timestamp {
        now.saturating_add(tool.claim_budget() + LEASE_MARGIN)
            .expect("in range")
    }
}
