//! Postgres adapter, for deployments off AWS and for several instances sharing one store. The
//! conditional write is `UPDATE … WHERE state = $ AND version = $` (READ COMMITTED: a write
//! that waited for a concurrent one re-checks its condition against the row that won, so the
//! loser changes nothing and is answered `Conflict`); the event and the outbox entry share its
//! transaction, so all land or none does. Creation is an `INSERT` whose unique keys (the
//! action, its idempotency record) make a second writer lose the same way.
//!
//! The tables and their migrations are in `schema`, connecting (TLS, pool) in `connect`, the
//! reads in `reads`, the outbox in `outbox`; this file is the writes on `actions`.

use super::{
    Actions, IdempotencyRecord, ListPage, ListQuery, Quarantined, StoreError, StoreResult,
    SweepRef, Unreadable,
};
use crate::domain::{Action, Change, Creation, Event, State, Transition};
use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Pool};
use jiff::Timestamp;
use tokio_postgres::error::SqlState;

mod batch;
mod commit;
mod connect;
mod gather;
mod grants;
mod listen;
mod outbox;
mod reads;
mod schema;
mod stops;

pub use connect::Options;
pub use listen::Listener;
pub use schema::SchemaError;

use super::sortable_instant as instant;

type Pooled = deadpool_postgres::Object;

#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// Transitions, loads and stop checks under way at once share statements (`batch`).
    commits: commit::Commits,
    loads: gather::Reads,
    stops: gather::Reads,
    with_stops: gather::Reads,
    /// For sessions outside the pool (the listener).
    pg: tokio_postgres::Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// The grants intake matched, as they loaded (`grants_for`).
    grant_memo: std::sync::Arc<super::GrantMemo>,
}

/// A connection from `pool`, or why not.
async fn pooled(pool: &Pool) -> StoreResult<Pooled> {
    pool.get()
        .await
        .map_err(|e| StoreError::Unavailable(format!("no database connection: {}", causes(&e))))
}

/// The answer to a shared statement's caller whose call was dropped unanswered (the runtime is
/// shutting down): `what` was abandoned.
fn abandoned(what: &str) -> StoreError {
    StoreError::Unavailable(format!("the {what} was abandoned (shutting down)"))
}

/// What an `Unavailable` says, to pass on to every caller of a shared statement.
fn reason(e: StoreError) -> String {
    match e {
        StoreError::Unavailable(why) => why,
        other => other.to_string(),
    }
}

/// The server's own words when it gave them (the client's `Display` is only "db error").
fn unavailable(e: tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    })
}

/// An error and its causes, one after another (a failed connect says why only in its sources,
/// e.g. which certificate check failed).
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn malformed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(e.to_string())
}

/// A unique key that exists already: another writer was first.
fn conflict_or_unavailable(e: tokio_postgres::Error) -> StoreError {
    if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        StoreError::Conflict
    } else {
        unavailable(e)
    }
}

impl PostgresStore {
    async fn client(&self) -> StoreResult<Pooled> {
        pooled(&self.pool).await
    }

    /// The schema version the database is at (the migrations this binary applied or found).
    pub async fn schema_version(&self) -> StoreResult<i64> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT coalesce(max(version), 0) FROM countersign_schema",
                &[],
            )
            .await
            .map_err(unavailable)?;
        Ok(row.get(0))
    }

    /// Whether this store's sessions run over TLS (asked of the server about one of them).
    pub async fn encrypted(&self) -> StoreResult<bool> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
                &[],
            )
            .await
            .map_err(unavailable)?;
        Ok(row.get(0))
    }

    /// The value of a server setting for this store's connections, e.g. `synchronous_commit`.
    pub async fn setting(&self, name: &str) -> StoreResult<String> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT current_setting($1)", &[&name])
            .await
            .map_err(unavailable)?;
        Ok(row.get(0))
    }
}

/// A transition's events (an approve-and-claim has two) and outbox entry, inside its
/// transaction, and the announcement of a committed ticket to every instance (`listen`).
async fn insert_event(tx: &impl GenericClient, t: &Change) -> StoreResult<()> {
    let stmt = tx
        .prepare_cached("INSERT INTO events (tenant, action_id, seq, body) VALUES ($1, $2, $3, $4)")
        .await
        .map_err(unavailable)?;
    for event in t.events() {
        let body = serde_json::to_vec(event).map_err(malformed)?;
        tx.execute(
            &stmt,
            &[
                &t.action.tenant(),
                &t.action.id(),
                &(event.seq as i64),
                &body,
            ],
        )
        .await
        .map_err(conflict_or_unavailable)?;
    }
    if t.action.state() == State::Approved {
        listen::announce(tx, t.action.tenant(), t.action.id()).await?;
    }
    outbox::insert(tx, t).await
}

/// Retention of idempotency records: each creation that writes one removes a few that lapsed
/// (at least as many as it adds, so the table holds only live keys and a bounded backlog).
/// Rows another writer holds are skipped, never waited for.
async fn purge_lapsed(tx: &impl GenericClient, now: Timestamp) -> StoreResult<()> {
    let stmt = tx
        .prepare_cached(
            "DELETE FROM idempotency WHERE ctid = ANY(ARRAY(
                 SELECT ctid FROM idempotency WHERE expires_at <= $1
                 LIMIT 4 FOR UPDATE SKIP LOCKED))",
        )
        .await
        .map_err(unavailable)?;
    tx.execute(&stmt, &[&instant(now)])
        .await
        .map_err(unavailable)
        .map(drop)
}

#[async_trait]
impl Actions for PostgresStore {
    async fn create(&self, t: &Creation, idem: Option<&IdempotencyRecord>) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(unavailable)?;
        let a = &t.action;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO actions (tenant, id, agent_id, state, version, sweep_at, body)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .await
            .map_err(unavailable)?;
        tx.execute(
            &stmt,
            &[
                &a.tenant(),
                &a.id(),
                &a.call().agent_id(),
                &a.state().as_str(),
                &(a.version() as i64),
                &a.sweep_at().map(instant),
                &a.to_stored(),
            ],
        )
        .await
        .map_err(conflict_or_unavailable)?;
        insert_event(&tx, t).await?;
        if let Some(r) = idem {
            // A lapsed record of the same key may linger until purged: replace only that.
            tx.execute(
                "DELETE FROM idempotency
                 WHERE tenant = $1 AND agent_id = $2 AND key = $3 AND expires_at <= $4",
                &[&r.tenant, &r.agent_id, &r.key, &instant(a.created_at())],
            )
            .await
            .map_err(unavailable)?;
            tx.execute(
                "INSERT INTO idempotency
                     (tenant, agent_id, key, payload_digest, action_id, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &r.tenant,
                    &r.agent_id,
                    &r.key,
                    &r.payload_digest,
                    &r.action_id,
                    &instant(r.expires_at),
                ],
            )
            .await
            .map_err(conflict_or_unavailable)?;
            purge_lapsed(&tx, a.created_at()).await?;
        }
        tx.commit().await.map_err(unavailable)
    }

    async fn commit(&self, t: &Transition) -> StoreResult<()> {
        self.commit_change(t).await
    }

    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>> {
        self.load_action(tenant, action_id).await
    }

    async fn events(&self, tenant: &str, action_id: &str) -> StoreResult<Vec<Event>> {
        self.read_events(tenant, action_id).await
    }

    async fn list(&self, tenant: &str, q: &ListQuery) -> StoreResult<ListPage> {
        self.read_list(tenant, q).await
    }

    /// Every state, alone or with an agent (migration 2's indexes).
    fn indexes(&self, state: Option<State>, _agent_id: Option<&str>) -> bool {
        state.is_some()
    }

    async fn idempotency(
        &self,
        tenant: &str,
        agent_id: &str,
        key: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        self.read_idempotency(tenant, agent_id, key, now).await
    }

    async fn sweep_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<SweepRef>> {
        self.read_due(until, limit).await
    }

    async fn quarantine(&self, bad: &Unreadable, at: Timestamp) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(unavailable)?;
        tx.execute(
            "INSERT INTO quarantine (tenant, action_id, reason, at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (tenant, action_id) DO NOTHING",
            &[&bad.tenant, &bad.action_id, &bad.reason, &instant(at)],
        )
        .await
        .map_err(unavailable)?;
        tx.execute(
            "UPDATE actions SET sweep_at = NULL WHERE tenant = $1 AND id = $2",
            &[&bad.tenant, &bad.action_id],
        )
        .await
        .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)
    }

    async fn quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>> {
        self.read_quarantined(tenant).await
    }
}
