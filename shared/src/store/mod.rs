//! The storage ports: the action store ([`Actions`]), the stops ([`Stops`]), the notification
//! outbox ([`Outbox`]) and the scoped grants ([`Grants`]), and [`Store`], the four on one
//! handle. Every transition
//! is one conditional write on (state, version) with its audit event appended atomically; a
//! lost race is the typed [`StoreError::Conflict`]. Each adapter implements every port in its
//! own module: `sqlite`, `postgres`, `dynamodb`.

#[cfg(feature = "aws")]
pub mod dynamodb;
mod grant_memo;
pub use grant_memo::GrantMemo;
#[cfg(feature = "embedded")]
pub mod postgres;
#[cfg(feature = "embedded")]
pub mod sqlite;

use crate::domain::{
    grant::Grant, notice::OutboxEntry, Action, Creation, Event, State, Transition,
};
use async_trait::async_trait;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record was not in the expected state/version (or already exists): someone else won.
    #[error("conditional write lost: the record changed")]
    Conflict,
    /// A stored record failed its checks on load; nothing acts on it.
    #[error("{0}")]
    Malformed(String),
    /// The backend failed; the caller may retry.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Opening an existing store (`verify`): there is none where it was looked for.
    #[error("no countersign store here: {0}")]
    Absent(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Timestamps as fixed-width UTC text (nanoseconds), so text order is time order: the form of
/// `sweep_at` and expiries in every adapter.
pub fn sortable_instant(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

/// The idempotency record of an intake (scope: tenant + agent + key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    pub tenant: String,
    pub agent_id: String,
    pub key: String,
    pub payload_digest: String,
    pub action_id: String,
    pub expires_at: Timestamp,
}

/// A committed stop. `agent_id: None` stops the whole tenant (`*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Stop {
    pub tenant: String,
    pub agent_id: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub stopped_at: Timestamp,
    pub stopped_by: String,
    /// The channel the stop came through (SC-CH-08); absent on stops written before channels
    /// were recorded, which read as they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<crate::domain::actor::Channel>,
}

impl Stop {
    pub fn scope(&self) -> &str {
        self.agent_id.as_deref().unwrap_or("*")
    }
}

/// One bounded read of a tenant's actions, newest first. An adapter that keeps an index for
/// the filter ([`Actions::indexes`]) reads only matching actions, at most `answers` of them; any
/// other reads at most `limit` of the tenant's history and leaves the filter to the engine, so a
/// read never grows with a filter that matches little (SC-SEC-05).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// The most records an unindexed read may return.
    pub limit: usize,
    /// The most matching records an indexed read may return.
    pub answers: usize,
    /// Return actions older than this id (ids are ULIDs: time-ordered).
    pub before: Option<String>,
    pub state: Option<State>,
    pub agent_id: Option<String>,
}

/// What one bounded read found.
#[derive(Debug, Clone, Default)]
pub struct ListPage {
    pub actions: Vec<Action>,
    /// Records read that do not load (SC-EDGE-08), in no particular place: they count toward
    /// the read's limit and its `next`, and never fail the page.
    pub unreadable: Vec<Unreadable>,
    /// The id of the last record read when the read stopped at its limit (more may follow);
    /// `None` when the tenant's history ended.
    pub next: Option<String>,
}

/// A stored action that does not load (SC-EDGE-08): its key and why. Readers that meet one
/// return it beside the readable records instead of failing the whole read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub tenant: String,
    pub action_id: String,
    pub reason: String,
}

/// An unreadable action taken out of service: kept in the store for inspection, out of lists
/// and the sweep, listed for the tenant's admins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Quarantined {
    pub action_id: String,
    pub reason: String,
    #[schema(value_type = String, format = DateTime)]
    #[serde(with = "crate::domain::time::fixed")]
    pub quarantined_at: Timestamp,
}

/// An action the sweep must look at: its `sweep_at` has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRef {
    pub tenant: String,
    pub action_id: String,
    pub sweep_at: Timestamp,
}

/// The action store: records and their audit events, idempotency keys, the sweep's index and
/// quarantine. Every transition is one conditional write on (state, version) with its audit
/// event (and its outbox entry) appended atomically.
#[async_trait]
pub trait Actions: Send + Sync + 'static {
    /// Commit a new action and, atomically, its idempotency record.
    /// `Conflict` if the id or the idempotency key exists already.
    async fn create(
        &self,
        t: &Creation,
        idempotency: Option<&IdempotencyRecord>,
    ) -> StoreResult<()>;
    /// Commit a transition iff the record is still at `t.expected` (state, version).
    async fn commit(&self, t: &Transition) -> StoreResult<()>;
    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>>;
    async fn events(&self, tenant: &str, action_id: &str) -> StoreResult<Vec<Event>>;
    /// Actions older than `query.before`, newest first (see [`ListQuery`]); quarantined ones
    /// are left out, unreadable ones reported in [`ListPage::unreadable`].
    async fn list(&self, tenant: &str, query: &ListQuery) -> StoreResult<ListPage>;
    /// Whether [`Actions::list`] reads only the actions of this filter, through an index.
    fn indexes(&self, _state: Option<State>, _agent_id: Option<&str>) -> bool {
        false
    }
    /// A live (unexpired at `now`) idempotency record.
    async fn idempotency(
        &self,
        tenant: &str,
        agent_id: &str,
        key: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>>;
    /// Actions whose `sweep_at ≤ until`, earliest first (due tickets, expired leases, lapsed
    /// approvals; with a far `until`, every waiting ticket, for rediscovery). An executing
    /// action may come before its lease ends, and a scheduled approval from its window's start
    /// (see [`Actions::defer_sweep`]); nothing else early.
    async fn sweep_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<SweepRef>>;
    /// The sweep looked at `action` (still at its state and version) before its `sweep_at`
    /// had come: an adapter may list an executing action from its due time rather than its
    /// lease's end, which saves an index write in every claim, and a scheduled approval from
    /// its window's start rather than its expiry, which saves one in every timely approve.
    /// Look at it again at `sweep_at`. Not a transition (no event, no version change); a lost
    /// race changes nothing.
    async fn defer_sweep(&self, _action: &Action) -> StoreResult<()> {
        Ok(())
    }
    /// Take an unreadable action out of service (SC-EDGE-08): record why, and drop it from the
    /// sweep and from lists. The record itself stays for inspection. Idempotent.
    async fn quarantine(&self, bad: &Unreadable, at: Timestamp) -> StoreResult<()>;
    /// The tenant's quarantined actions, oldest first.
    async fn quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>>;
}

/// The stops (SC-STOP-01): an agent's or a whole tenant's, put, lifted, and read by every
/// intake and every claim.
#[async_trait]
pub trait Stops: Send + Sync + 'static {
    async fn put_stop(&self, stop: &Stop) -> StoreResult<()>;
    /// `scope` is an agent id or `*`; true if a stop was lifted.
    async fn lift_stop(&self, tenant: &str, scope: &str) -> StoreResult<bool>;
    /// The stops that apply to this agent: its own and the tenant-wide one.
    async fn stops_for(&self, tenant: &str, agent_id: &str) -> StoreResult<Vec<Stop>>;
}

/// The notification outbox (SC-NOT-01/02): [`Actions::create`] and [`Actions::commit`] write an
/// entry for every event that notifies ([`OutboxEntry::for_event`]) in the same conditional
/// write; the notifier reads and settles it through this port alone.
#[async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// Live (not dead) entries whose `next_at ≤ until`, earliest first.
    async fn outbox_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<OutboxEntry>>;
    /// One entry of a tenant, dead or alive.
    async fn outbox_entry(
        &self,
        tenant: &str,
        action_id: &str,
        seq: u64,
    ) -> StoreResult<Option<OutboxEntry>>;
    /// A tenant's dead letters, oldest first.
    async fn outbox_dead(&self, tenant: &str, limit: usize) -> StoreResult<Vec<OutboxEntry>>;
    /// Replace `was` by `next` (`None`: delivered, remove it) iff it is still at `was.rev`;
    /// `Conflict` otherwise (a redelivery or another worker changed it).
    async fn outbox_settle(&self, was: &OutboxEntry, next: Option<&OutboxEntry>)
        -> StoreResult<()>;
    /// What `entry` tells of: its action as it is now and the event it announces; `None` when
    /// either is gone (retention). An action that does not load is `Malformed`.
    async fn outbox_subject(&self, entry: &OutboxEntry) -> StoreResult<Option<(Action, Event)>>;
    /// What a channel keeps about an action from one notice to the next (SC-CH-03) — Slack:
    /// the channel and `ts` of the message it posted, which later notices update. `None`
    /// until kept.
    async fn channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
    ) -> StoreResult<Option<String>>;
    /// Keep `note` for the action's `channel`, replacing any. Not a transition: the action's
    /// record, version and events stay as they are.
    async fn keep_channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
        note: &str,
    ) -> StoreResult<()>;
}

/// A grant read for intake or a list: a damaged one — its stored record fails its own checks
/// (digest, counts, version) — allows nothing and takes nothing down. It is left out, logged
/// with its key and counted with the quarantined records (their alarm); by id the store still
/// answers `Malformed`, naming the damage (SC-GR-05). Only a record's own damage is skipped:
/// a store that cannot answer fails the read as ever.
#[cfg(any(feature = "embedded", feature = "aws"))]
pub(crate) fn undamaged(tenant: &str, key: &str, read: StoreResult<Grant>) -> Option<Grant> {
    match read {
        Ok(grant) => Some(grant),
        Err(e) => {
            tracing::error!(tenant, grant = key, error = %e,
                "a stored grant fails its checks: it allows nothing and is left out");
            crate::telemetry::quarantined();
            None
        }
    }
}

/// The scoped grants (SC-GR-…): put once when an approval grants one, then changed only by one
/// conditional write per use or revocation — the stored grant must still be at the version
/// before `next`'s, so a race for its last use, or a revocation racing a use, has one winner
/// (the loser gets [`StoreError::Conflict`], reads again and is judged on what won).
#[async_trait]
pub trait Grants: Send + Sync + 'static {
    /// Store a new grant (version 1). `Conflict` if a grant of that id exists.
    async fn put_grant(&self, grant: &Grant) -> StoreResult<()>;
    /// Replace the stored grant by `next` iff it is at `next.version() - 1`; `Conflict`
    /// otherwise (or when there is none).
    async fn update_grant(&self, next: &Grant) -> StoreResult<()>;
    async fn grant(&self, tenant: &str, id: &str) -> StoreResult<Option<Grant>>;
    /// The tenant's grants, newest first, at most `limit` ([`undamaged`] ones).
    async fn grants(&self, tenant: &str, limit: usize) -> StoreResult<Vec<Grant>>;
    /// The grants of `agent_id` for `tool` that may still allow a call at `now` (not revoked,
    /// a use left, unexpired): what intake matches a call against. An adapter may return more
    /// (the domain judges each), never fewer — but never a damaged one ([`undamaged`]).
    async fn grants_for(
        &self,
        tenant: &str,
        agent_id: &str,
        tool: &str,
        now: Timestamp,
    ) -> StoreResult<Vec<Grant>>;
}

/// [`Outbox::outbox_subject`] read through the action store: its action, then its events (the
/// adapters whose records are rows; DynamoDB reads both in one request).
pub async fn subject_of(
    actions: &impl Actions,
    entry: &OutboxEntry,
) -> StoreResult<Option<(Action, Event)>> {
    let action = actions.load(&entry.tenant, &entry.action_id).await?;
    let events = actions.events(&entry.tenant, &entry.action_id).await?;
    Ok(action.zip(events.into_iter().find(|e| e.seq == entry.seq)))
}

/// One handle on a whole store, for the engine: its use cases cross the ports (an intake reads
/// the stops and writes the action, a wake reads both at once, the sweep hands the outbox to
/// the notifier), so it holds one `Arc<dyn Store>` and each adapter is wired once. The one read
/// that needs two ports lives here.
#[async_trait]
pub trait Store: Actions + Stops + Outbox + Grants {
    /// An action and the stops of its agent, both read after the call (a wake's facts, SC-RES-03):
    /// in one statement where the adapter can (Postgres: a burst of wakes claims sooner), else
    /// one read after the other. Stops are read only for an `approved` action.
    async fn load_with_stops(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<(Option<Action>, Vec<Stop>)> {
        let action = self.load(tenant, action_id).await?;
        let stops = match &action {
            Some(a) if a.state() == State::Approved => {
                self.stops_for(tenant, a.call().agent_id()).await?
            }
            _ => Vec::new(),
        };
        Ok((action, stops))
    }
}
