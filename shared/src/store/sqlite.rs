//! SQLite adapter (WAL). The conditional write is `UPDATE … WHERE state = ? AND version = ?`;
//! the event insert shares its transaction, so both land or neither does.
//!
//! Writes go through one writer thread with **group commit**: the writes that queue up while a
//! commit is being made durable share the next transaction and its one fsync. Each write runs
//! inside its own savepoint, so a lost condition (or any error) undoes only that write and
//! answers only its caller; each caller is answered after the shared commit, never before.
//! The caller encodes the rows (JSON bodies) before queueing, so the writer thread only runs
//! SQL, with cached statements. Checkpoints run on a thread of their own, never inside a commit.
//!
//! Reads go to a few reader threads, each with its own connection (WAL: every reader sees every
//! committed batch, never a partial one), so a burst of wakes neither queues on one connection
//! nor starts a blocking thread per read. A read runs after it was queued, so it sees every write
//! answered before it was asked (the stop check's linearization point, SC-EDGE-02).
//!
//! Its threads are in `threads`, its tables in `schema`, the stops in `stops`, the outbox in
//! `outbox`; this file is the action store's methods, one query each, kept together so every
//! statement on `actions` reads in one place.

use super::{
    Actions, IdempotencyRecord, ListPage, ListQuery, Quarantined, Store, StoreError, StoreResult,
    SweepRef, Unreadable,
};
use crate::domain::{Action, Change, Creation, Event, State, Transition};
use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use tokio::sync::oneshot;

mod grants;
mod list;
mod outbox;
mod schema;
mod stops;
mod threads;

pub use schema::SYNCHRONOUS;
use schema::{configure, open, PAGE_SIZE, SCHEMA};
use threads::{Queued, Read};
pub use threads::{CHECKPOINT_THREAD, WRITER_THREAD};

/// Reader threads of a file database, each with its own connection. Reads are short point or
/// bounded range reads; a few threads keep one slow read from holding up the wakes' reads.
const READERS: usize = 4;

#[derive(Clone)]
pub struct SqliteStore {
    /// To the reader threads (a file database: a connection each; in memory: the writer's).
    reads: mpsc::Sender<Read>,
    /// Used by the writer thread only (and to read its settings).
    writer: Arc<Mutex<Connection>>,
    writes: mpsc::Sender<Queued>,
    /// The grants intake matched, as they loaded (`grants_for`).
    grant_memo: Arc<super::GrantMemo>,
}

use super::sortable_instant as instant;

fn unavailable(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn malformed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(e.to_string())
}

fn lock(conn: &Mutex<Connection>) -> StoreResult<std::sync::MutexGuard<'_, Connection>> {
    conn.lock()
        .map_err(|_| StoreError::Unavailable("lock poisoned".into()))
}

impl SqliteStore {
    /// The store in `path`, created if missing and its tables brought up to date.
    pub fn open(path: &Path) -> StoreResult<Self> {
        let writer = open(path)?;
        // Before WAL mode and the first table fix it: pages that hold an action's row whole.
        writer
            .pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(unavailable)?;
        let writer = configure(writer)?;
        writer.execute_batch(SCHEMA).map_err(unavailable)?;
        writer.execute_batch(outbox::SCHEMA).map_err(unavailable)?;
        Self::on_file(path, writer)
    }

    /// The store in `path` as it is, for `verify`: nothing is created or migrated. A missing
    /// file, or one without countersign's tables, is [`StoreError::Absent`].
    pub fn open_existing(path: &Path) -> StoreResult<Self> {
        schema::existing(path)?;
        Self::on_file(path, configure(open(path)?)?)
    }

    /// The readers and the checkpointer beside `writer`, on the file's tables.
    fn on_file(path: &Path, writer: Connection) -> StoreResult<Self> {
        // The checkpoint thread checkpoints instead (see threads::CHECKPOINT_EVERY).
        writer
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(unavailable)?;
        let readers = (0..READERS)
            .map(|_| Ok(Arc::new(Mutex::new(configure(open(path)?)?))))
            .collect::<StoreResult<Vec<_>>>()?;
        let checkpointer = configure(open(path)?)?;
        Ok(Self::start(
            Arc::new(Mutex::new(writer)),
            readers,
            Some(checkpointer),
        ))
    }

    pub fn in_memory() -> StoreResult<Self> {
        // One in-memory database is one connection: reads and the writer share it.
        let conn = configure(Connection::open_in_memory().map_err(unavailable)?)?;
        conn.execute_batch(SCHEMA).map_err(unavailable)?;
        conn.execute_batch(outbox::SCHEMA).map_err(unavailable)?;
        let conn = Arc::new(Mutex::new(conn));
        Ok(Self::start(conn.clone(), vec![conn], None))
    }

    fn start(
        writer: Arc<Mutex<Connection>>,
        readers: Vec<Arc<Mutex<Connection>>>,
        checkpointer: Option<Connection>,
    ) -> Self {
        let (reads, writes) = threads::spawn(writer.clone(), readers, checkpointer);
        SqliteStore {
            reads,
            writer,
            writes,
            grant_memo: Arc::default(),
        }
    }

    /// The value of a `PRAGMA` on the store's writing connection (settings are per connection,
    /// so only this one tells what the store's commits do), e.g. `synchronous` → `2` (FULL).
    pub async fn pragma(&self, name: &'static str) -> StoreResult<String> {
        let conn = self.writer.clone();
        tokio::task::spawn_blocking(move || {
            lock(&conn)?
                .pragma_query_value(None, name, |row| row.get::<_, rusqlite::types::Value>(0))
                .map(|v| match v {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    other => format!("{other:?}"),
                })
                .map_err(unavailable)
        })
        .await
        .map_err(|e| StoreError::Unavailable(e.to_string()))?
    }

    /// Run a read on a reader thread (off the async threads).
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let (answer, answered) = oneshot::channel();
        let read: Read = Box::new(move |conn| {
            // A caller that gave up needs no answer.
            let _ = answer.send(f(conn));
        });
        let stopped = || StoreError::Unavailable("the SQLite readers have stopped".into());
        self.reads.send(read).map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }

    /// Queue a write for the next group commit; answered once that commit is durable.
    async fn write(
        &self,
        write: impl FnOnce(&Connection) -> StoreResult<usize> + Send + 'static,
    ) -> StoreResult<usize> {
        let (answer, answered) = oneshot::channel();
        let queued = Queued {
            write: Box::new(write),
            answer,
        };
        self.writes
            .send(queued)
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?;
        answered
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?
    }
}

/// A transition's rows, encoded by the caller: the writer thread, which every write of the
/// process queues for, only runs SQL.
struct Encoded {
    t: Change,
    body: Vec<u8>,
    /// Each event the write appends, with its number.
    events: Vec<(i64, Vec<u8>)>,
    sweep_at: Option<String>,
}

impl Encoded {
    fn of(t: &Change) -> Self {
        Encoded {
            t: t.clone(),
            body: t.action.to_stored(),
            events: t
                .events()
                .map(|e| {
                    let body = serde_json::to_vec(e).expect("an event serializes");
                    (e.seq as i64, body)
                })
                .collect(),
            sweep_at: t.action.sweep_at().map(instant),
        }
    }
}

fn insert_event(tx: &Connection, e: &Encoded) -> StoreResult<()> {
    let t = &e.t;
    let mut insert = tx
        .prepare_cached("INSERT INTO events (tenant, action_id, seq, body) VALUES (?1, ?2, ?3, ?4)")
        .map_err(unavailable)?;
    for (seq, body) in &e.events {
        insert
            .execute(params![t.action.tenant(), t.action.id(), seq, body])
            .map_err(conflict_or_unavailable)?;
    }
    outbox::insert(tx, t)
}

fn conflict_or_unavailable(e: rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::Conflict
        }
        other => unavailable(other),
    }
}

#[async_trait]
impl Actions for SqliteStore {
    async fn create(&self, t: &Creation, idem: Option<&IdempotencyRecord>) -> StoreResult<()> {
        let (e, idem) = (Encoded::of(t), idem.cloned());
        self.write(move |tx| {
            let a = &e.t.action;
            tx.prepare_cached(
                "INSERT INTO actions (tenant, id, agent_id, state, version, sweep_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![a.tenant(), a.id(), a.call().agent_id(), a.state().as_str(),
                                  a.version() as i64, e.sweep_at, e.body])
            })
            .map_err(conflict_or_unavailable)?;
            insert_event(tx, &e)?;
            if let Some(r) = idem {
                // A lapsed record of the same key may linger until purged: replace only that.
                tx.execute(
                    "DELETE FROM idempotency WHERE tenant = ?1 AND agent_id = ?2 AND key = ?3 AND expires_at <= ?4",
                    params![r.tenant, r.agent_id, r.key, instant(a.created_at())],
                )
                .map_err(unavailable)?;
                tx.execute(
                    "INSERT INTO idempotency (tenant, agent_id, key, payload_digest, action_id, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![r.tenant, r.agent_id, r.key, r.payload_digest, r.action_id, instant(r.expires_at)],
                )
                .map_err(conflict_or_unavailable)?;
            }
            Ok(1)
        })
        .await
        .map(drop)
    }

    async fn commit(&self, t: &Transition) -> StoreResult<()> {
        let (state, version) = t.expected;
        let e = Encoded::of(t);
        self.write(move |tx| {
            let a = &e.t.action;
            let changed = tx
                .prepare_cached(
                    "UPDATE actions SET state = ?1, version = ?2, sweep_at = ?3, body = ?4
                     WHERE tenant = ?5 AND id = ?6 AND state = ?7 AND version = ?8",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        a.state().as_str(),
                        a.version() as i64,
                        e.sweep_at,
                        e.body,
                        a.tenant(),
                        a.id(),
                        state.as_str(),
                        version as i64
                    ])
                })
                .map_err(unavailable)?;
            if changed != 1 {
                return Err(StoreError::Conflict);
            }
            insert_event(tx, &e)?;
            Ok(1)
        })
        .await
        .map(drop)
    }

    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>> {
        let (tenant, id) = (tenant.to_owned(), action_id.to_owned());
        self.with(move |conn| {
            let body: Option<Vec<u8>> = conn
                .prepare_cached("SELECT body FROM actions WHERE tenant = ?1 AND id = ?2")
                .and_then(|mut s| s.query_row(params![tenant, id], |row| row.get(0)))
                .optional()
                .map_err(unavailable)?;
            body.map(|b| Action::from_stored(&b).map_err(malformed))
                .transpose()
        })
        .await
    }

    async fn events(&self, tenant: &str, action_id: &str) -> StoreResult<Vec<Event>> {
        let (tenant, id) = (tenant.to_owned(), action_id.to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT body FROM events WHERE tenant = ?1 AND action_id = ?2 ORDER BY seq",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![tenant, id], |row| row.get::<_, Vec<u8>>(0))
                .map_err(unavailable)?;
            rows.map(|r| {
                let body = r.map_err(unavailable)?;
                serde_json::from_slice(&body).map_err(malformed)
            })
            .collect()
        })
        .await
    }

    async fn list(&self, tenant: &str, q: &ListQuery) -> StoreResult<ListPage> {
        let (tenant, q) = (tenant.to_owned(), q.clone());
        let indexed = self.indexes(q.state, q.agent_id.as_deref());
        self.with(move |conn| list::page(conn, &tenant, &q, indexed))
            .await
    }

    /// Every state but the two an allowed call passes through, alone or with an agent (the
    /// approver page's and the CLI's filters; `list::listed` says why).
    fn indexes(&self, state: Option<State>, _agent_id: Option<&str>) -> bool {
        state.is_some_and(list::listed)
    }

    async fn idempotency(
        &self,
        tenant: &str,
        agent_id: &str,
        key: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let (tenant, agent_id, key) = (tenant.to_owned(), agent_id.to_owned(), key.to_owned());
        self.with(move |conn| {
            conn.query_row(
                "SELECT payload_digest, action_id, expires_at FROM idempotency
                 WHERE tenant = ?1 AND agent_id = ?2 AND key = ?3 AND expires_at > ?4",
                params![tenant, agent_id, key, instant(now)],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                },
            )
            .optional()
            .map_err(unavailable)?
            .map(|(payload_digest, action_id, expires_at)| {
                Ok(IdempotencyRecord {
                    tenant,
                    agent_id,
                    key,
                    payload_digest,
                    action_id,
                    expires_at: expires_at.parse().map_err(malformed)?,
                })
            })
            .transpose()
        })
        .await
    }

    async fn sweep_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<SweepRef>> {
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT tenant, id, sweep_at FROM actions
                     WHERE sweep_at IS NOT NULL AND sweep_at <= ?1 ORDER BY sweep_at LIMIT ?2",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![instant(until), limit as i64], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .map_err(unavailable)?;
            let mut due = Vec::new();
            for r in rows {
                let (tenant, action_id, at) = r.map_err(unavailable)?;
                // One bad row must not stop the sweep (SC-EDGE-08); its load quarantines it.
                let sweep_at = at.parse().unwrap_or(until);
                due.push(SweepRef {
                    tenant,
                    action_id,
                    sweep_at,
                });
            }
            Ok(due)
        })
        .await
    }

    async fn quarantine(&self, bad: &Unreadable, at: Timestamp) -> StoreResult<()> {
        let bad = bad.clone();
        self.write(move |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO quarantine (tenant, action_id, reason, at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![bad.tenant, bad.action_id, bad.reason, instant(at)],
            )
            .map_err(unavailable)?;
            conn.execute(
                "UPDATE actions SET sweep_at = NULL WHERE tenant = ?1 AND id = ?2",
                params![bad.tenant, bad.action_id],
            )
            .map_err(unavailable)
        })
        .await
        .map(drop)
    }

    async fn quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>> {
        let tenant = tenant.to_owned();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT action_id, reason, at FROM quarantine WHERE tenant = ?1
                     ORDER BY at, action_id",
                )
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![tenant], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })
                .map_err(unavailable)?;
            rows.map(|r| {
                let (action_id, reason, at) = r.map_err(unavailable)?;
                Ok(Quarantined {
                    action_id,
                    reason,
                    quarantined_at: at.parse().map_err(malformed)?,
                })
            })
            .collect()
        })
        .await
    }
}

impl Store for SqliteStore {}
