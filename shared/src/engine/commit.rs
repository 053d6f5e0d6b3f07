//! The one write path (SC-EDGE-04, SC-EDGE-10). Every record write of the engine — a creation,
//! an approve, an approve-and-claim, a deny, a cancel, a stop seal, an expiry, a claim, a
//! result, a recovery — goes through [`Engine::commit`] or [`Engine::create`]; the seals are
//! built on them here and nowhere else.
//!
//! A write's answer may hide what happened: an error after sending (the answer was lost), or a
//! conflict met by the SDK's own re-send of a write whose first send applied. Both are resolved
//! by reading the record back: it holds *our* write when its version, audit head and lease are
//! the ones we sent. The audit head is the token every write carries: it hashes the previous
//! head, the time, the actor and the move, and a claim's lease names a fresh owner — so a
//! contender's write shows a different head (two identical writes of one actor at one instant
//! are the same decision, and the record is then what either would have made). Anything else
//! at a newer version is a contender's: the race was lost to it.

use super::handle::Engine;
use crate::{
    domain::{notice::NoticeKind, Action, Actor, Change, Creation, SealReason, Transition},
    store::{IdempotencyRecord, StoreError, StoreResult},
    telemetry, Error,
};
use jiff::{SignedDuration, Timestamp};
use std::future::Future;

/// How long a write is re-sent on transient store errors when its caller has no lease to
/// bound it (a request, a wake, the sweep): short, so an outage answers 503 within seconds.
pub(super) const WRITE_RETRY_FOR: SignedDuration = SignedDuration::from_secs(5);
/// Pauses between re-sends: 50 ms doubling to 2 s.
const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
const LONGEST_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// How a write ended, with the record as it now stands.
#[derive(Debug)]
pub(super) enum Committed {
    /// Our write is the record (answered, or found by reading back).
    Landed(Action),
    /// Someone else's write came first; this is theirs.
    LostTo(Action),
}

impl Committed {
    /// The record as it now stands, whoever wrote it.
    pub(super) fn into_action(self) -> Action {
        match self {
            Committed::Landed(a) | Committed::LostTo(a) => a,
        }
    }
}

/// What sending one write came to.
enum Sent {
    /// Boxed: the record is large beside the empty `Taken`.
    Committed(Box<Committed>),
    /// A creation refused because its key is taken, by a write that is not ours: for intake,
    /// a concurrent request with the same Idempotency-Key.
    Taken,
}

impl Engine {
    /// Commit `t`, re-sending it on a transient store error until `give_up`.
    pub(super) async fn commit(
        &self,
        t: &Transition,
        give_up: Timestamp,
    ) -> Result<Committed, Error> {
        let t = self.subscribed(t);
        let expected = Some(t.expected.1);
        match self
            .send(&t, expected, give_up, || self.store.commit(&t))
            .await?
        {
            Sent::Committed(c) => Ok(*c),
            // A conditional update with the record still at its expected version is refused
            // only by a contender's write in flight: read once more and report it.
            Sent::Taken => Ok(Committed::LostTo(self.reload(&t.action).await?)),
        }
    }

    /// [`Engine::commit`] with the default budget of a request or a wake.
    pub(super) async fn commit_now(&self, t: &Transition) -> Result<Committed, Error> {
        let give_up = later(self.clock.now(), WRITE_RETRY_FOR);
        self.commit(t, give_up).await
    }

    /// Create a new action (with its idempotency record). `None`: the key belongs to another
    /// request's action, which answers instead.
    pub(super) async fn create(
        &self,
        c: &Creation,
        idempotency: Option<&IdempotencyRecord>,
    ) -> Result<Option<Action>, Error> {
        let c = self.subscribed_creation(c);
        let give_up = later(self.clock.now(), WRITE_RETRY_FOR);
        let send = || self.store.create(&c, idempotency);
        let sent = self.send(&c, None, give_up, send).await?;
        match sent {
            Sent::Committed(c) if matches!(*c, Committed::Landed(_)) => Ok(Some(c.into_action())),
            Sent::Committed(_) | Sent::Taken => match idempotency {
                Some(_) => Ok(None),
                None => Err(Error::Internal(format!("{} exists already", c.action.id()))),
            },
        }
    }

    /// Send a write until it is resolved: answered, found by reading back, lost to a
    /// contender, or failed past `give_up`. `expected`: the version the write expects (none
    /// for a creation).
    async fn send<F, Fut>(
        &self,
        ours: &Change,
        expected: Option<u64>,
        give_up: Timestamp,
        write: F,
    ) -> Result<Sent, Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = StoreResult<()>>,
    {
        let (tenant, id) = (&ours.action.tenant(), &ours.action.id().to_owned());
        let mut pause = FIRST_PAUSE;
        loop {
            let error = match write().await {
                Ok(()) => {
                    telemetry::landed(&ours.action);
                    return Ok(Sent::Committed(Box::new(Committed::Landed(
                        ours.action.clone(),
                    ))));
                }
                Err(e @ (StoreError::Conflict | StoreError::Unavailable(_))) => e,
                Err(e) => return Err(e.into()),
            };
            telemetry::write_error(match error {
                StoreError::Conflict => "conflict",
                _ => "unavailable",
            });
            match self.store.load(tenant, id).await {
                Ok(Some(current)) if landed(&ours.action, &current) => {
                    tracing::warn!(tenant = %tenant, action_id = %id, error = %error, "the write applied despite the error");
                    telemetry::ambiguous_resolved("ours");
                    telemetry::landed(&current);
                    return Ok(Sent::Committed(Box::new(Committed::Landed(current))));
                }
                Ok(Some(current)) if expected.is_none_or(|v| current.version() != v) => {
                    tracing::info!(tenant = %tenant, action_id = %id, state = %current.state(), "lost a race; reporting the winner");
                    telemetry::ambiguous_resolved("theirs");
                    return Ok(Sent::Committed(Box::new(Committed::LostTo(current))));
                }
                Ok(None) if expected.is_some() => {
                    return Err(Error::Internal(format!("{id} vanished")))
                }
                // A refused creation whose record is not there: the key is someone else's.
                Ok(None) if matches!(error, StoreError::Conflict) => return Ok(Sent::Taken),
                Ok(Some(_)) if matches!(error, StoreError::Conflict) => return Ok(Sent::Taken),
                // Not applied, or the read failed too: the conditional write may be re-sent.
                _ => {}
            }
            if self.clock.now() >= give_up {
                return Err(error.into());
            }
            tracing::warn!(tenant = %tenant, action_id = %id, error = %error, "store write failed; re-sending");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    async fn reload(&self, action: &Action) -> Result<Action, Error> {
        self.store
            .load(action.tenant(), action.id())
            .await?
            .ok_or_else(|| Error::Internal(format!("{} vanished", action.id())))
    }

    /// Seal `action` with `reason` unless someone else changed it first.
    pub(super) async fn seal(
        &self,
        action: &Action,
        actor: Actor,
        reason: &SealReason,
    ) -> Result<Committed, Error> {
        let t = Transition::seal(action, actor, reason, self.clock.now());
        let committed = self.commit_now(&t).await?;
        if let Committed::Landed(a) = &committed {
            tracing::info!(tenant = %a.tenant(), action_id = %a.id(), state = %a.state(), %reason, "sealed");
        }
        Ok(committed)
    }

    /// Seal an action the system will not run: from `approved`, or from a claim that started
    /// no attempt. A claim of a later epoch stands on an earlier one whose attempts may have
    /// reached the tool: it ends `outcome_unknown`, never "not run" (SC-EDGE-11).
    pub(super) async fn seal_unrun(
        &self,
        action: &Action,
        reason: SealReason,
    ) -> Result<(Committed, SealReason), Error> {
        let reason = match &action.lease() {
            Some(lease) if lease.epoch > 1 => SealReason::OutcomeUnknown,
            _ => reason,
        };
        let committed = self.seal(action, Actor::system(), &reason).await?;
        Ok((committed, reason))
    }

    /// The transition as the tenant's endpoints want it: its notice goes into the outbox only
    /// when an endpoint (or the tenant's Slack app) listens for its kind, so a tenant without
    /// endpoints pays no outbox write.
    fn subscribed<'t>(&self, t: &'t Transition) -> std::borrow::Cow<'t, Transition> {
        let listened = self.listens(t);
        if t.notify == listened {
            std::borrow::Cow::Borrowed(t)
        } else {
            let mut owned = t.clone();
            owned.notify = listened;
            std::borrow::Cow::Owned(owned)
        }
    }

    fn subscribed_creation<'c>(&self, c: &'c Creation) -> std::borrow::Cow<'c, Creation> {
        let listened = self.listens(c);
        if c.notify == listened {
            std::borrow::Cow::Borrowed(c)
        } else {
            let mut owned = c.clone();
            owned.notify = listened;
            std::borrow::Cow::Owned(owned)
        }
    }

    /// An endpoint listens for the notice's kind, or the tenant's Slack app does: it posts the
    /// request and updates that message on every later notice of an action that asked for
    /// approval (SC-CH-03).
    fn listens(&self, change: &Change) -> bool {
        NoticeKind::of(&change.event).is_some_and(|kind| {
            self.config
                .tenant(change.action.tenant())
                .is_some_and(|tenant| {
                    tenant.notify.iter().any(|e| e.wants(kind))
                        || (tenant.slack.is_some() && change.action.approval().is_some())
                        || (tenant.email.is_some() && kind == NoticeKind::ApprovalRequested)
                })
        })
    }
}

/// `d` after `now` (the end of time if that is past it).
pub(super) fn later(now: Timestamp, d: SignedDuration) -> Timestamp {
    now.saturating_add(d).unwrap_or(Timestamp::MAX)
}

/// Our write is what the record holds: same version, same audit head, same lease.
fn landed(ours: &Action, current: &Action) -> bool {
    current.version() == ours.version()
        && current.chain_head() == ours.chain_head()
        && current.lease() == ours.lease()
}
