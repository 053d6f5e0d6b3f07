//! Transitions of existing records. One transition is one statement: the conditional update,
//! its events, its outbox entry and (for a committed ticket) the announcement to the other
//! instances, in one round trip and one implicit transaction. The events and the entry are
//! inserted only from the updated row, so a condition that fails writes nothing; a unique key
//! that exists already fails the whole statement.
//!
//! Transitions one instance commits concurrently — a burst of claims falling due together,
//! their results — share one statement ([`Batcher`]): the same conditional update per row, so
//! each lands or not on its own condition, and each caller is answered for its own row. A
//! burst then costs a few statements and WAL flushes instead of one of each per transition,
//! and holds a few pooled connections instead of all of them. The shared statement skips the
//! rows another session holds (it never waits: two batches never deadlock, and a slot is
//! never held up); a row it did not update — skipped, or its condition failed — is sent again
//! alone, which waits for the row and re-checks its condition, and that answer is its
//! caller's. A shared statement the server refused (one row's unique key exists already)
//! wrote nothing: each row is sent alone. One whose answer was lost is answered `Unavailable`
//! to every caller, who reads its record back (engine/commit.rs), as after a lone statement.

use super::{
    batch::{Answer, Batcher},
    conflict_or_unavailable,
    listen::CHANNEL,
    outbox, unavailable, PostgresStore,
};
use crate::{
    domain::{State, Transition},
    store::{sortable_instant as instant, StoreError, StoreResult},
};
use deadpool_postgres::Pool;
use std::collections::HashSet;

/// Shared statements of transitions under way at once, per instance.
const SLOTS: usize = 2;

const COMMIT: &str = "
WITH u AS (
    UPDATE actions SET state = $1, version = $2, sweep_at = $3, body = $4
    WHERE tenant = $5 AND id = $6 AND state = $7 AND version = $8
    RETURNING tenant, id
), e AS (
    INSERT INTO events (tenant, action_id, seq, body)
    SELECT u.tenant, u.id, ev.seq, ev.body
    FROM u, unnest($9::bigint[], $10::bytea[]) AS ev(seq, body)
), o AS (
    INSERT INTO outbox (tenant, action_id, seq, rev, next_at, dead_at, body)
    SELECT u.tenant, u.id, $11, $12, $13, NULL, $14 FROM u WHERE $11::bigint IS NOT NULL
)
SELECT (SELECT count(*) FROM u),
       (SELECT count(pg_notify($15, current_schema() || ' ' || u.tenant || ' ' || u.id))
        FROM u WHERE $16)";

/// [`COMMIT`] for many rows: row `n` of the arrays is transition `n`, its events and outbox
/// entry carry its `n`. The rows are locked first, skipping those another session holds; only
/// locked rows whose condition holds are updated. Answers the `n` of each updated row.
const COMMIT_MANY: &str = "
WITH i AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[],
                         $6::text[], $7::bytea[], $8::text[], $9::bigint[], $10::bool[])
        AS i(n, tenant, id, state, version, sweep_at, body, was_state, was_version, announce)
), l AS MATERIALIZED (
    SELECT i.n FROM actions a JOIN i ON a.tenant = i.tenant AND a.id = i.id
    WHERE a.state = i.was_state AND a.version = i.was_version
    FOR UPDATE OF a SKIP LOCKED
), u AS (
    UPDATE actions a
    SET state = i.state, version = i.version, sweep_at = i.sweep_at, body = i.body
    FROM i JOIN l ON l.n = i.n
    WHERE a.tenant = i.tenant AND a.id = i.id
      AND a.state = i.was_state AND a.version = i.was_version
    RETURNING i.n, a.tenant, a.id, i.announce
), e AS (
    INSERT INTO events (tenant, action_id, seq, body)
    SELECT u.tenant, u.id, ev.seq, ev.body
    FROM u JOIN unnest($11::bigint[], $12::bigint[], $13::bytea[]) AS ev(n, seq, body)
        ON ev.n = u.n
), o AS (
    INSERT INTO outbox (tenant, action_id, seq, rev, next_at, dead_at, body)
    SELECT u.tenant, u.id, ob.seq, ob.rev, ob.next_at, NULL, ob.body
    FROM u JOIN unnest($14::bigint[], $15::bigint[], $16::bigint[], $17::text[], $18::bytea[])
        AS ob(n, seq, rev, next_at, body) ON ob.n = u.n
)
SELECT u.n FROM u,
    (SELECT count(pg_notify($19, current_schema() || ' ' || tenant || ' ' || id))
     FROM u WHERE announce) AS announced";

/// A transition as the statements take it (serialized by its caller, so the shared statement
/// only binds).
pub(super) struct Pending {
    tenant: String,
    id: String,
    state: &'static str,
    version: i64,
    sweep_at: Option<String>,
    body: Vec<u8>,
    was_state: &'static str,
    was_version: i64,
    seqs: Vec<i64>,
    events: Vec<Vec<u8>>,
    entry: Option<Entry>,
    /// A committed ticket: announced to the other instances (`listen`).
    announce: bool,
}

struct Entry {
    seq: i64,
    rev: i64,
    next_at: String,
    body: Vec<u8>,
}

impl Pending {
    fn of(t: &Transition) -> StoreResult<Pending> {
        let (was, was_version) = t.expected;
        let a = &t.action;
        let mut seqs = Vec::new();
        let mut events = Vec::new();
        for event in t.events() {
            seqs.push(event.seq as i64);
            events.push(serde_json::to_vec(event).map_err(super::malformed)?);
        }
        let entry = match t.outbox_entry() {
            Some(e) => Some(Entry {
                seq: e.seq as i64,
                rev: e.rev as i64,
                next_at: instant(e.next_at),
                body: outbox::body(&e)?,
            }),
            None => None,
        };
        Ok(Pending {
            tenant: a.tenant().to_owned(),
            id: a.id().to_owned(),
            state: a.state().as_str(),
            version: a.version() as i64,
            sweep_at: a.sweep_at().map(instant),
            body: a.to_stored(),
            was_state: was.as_str(),
            was_version: was_version as i64,
            seqs,
            events,
            entry,
            announce: a.state() == State::Approved,
        })
    }
}

pub(super) type Commits = Batcher<Pending, StoreResult<()>>;

/// The batcher of an instance's transitions, on `pool`.
pub(super) fn commits(pool: Pool) -> Commits {
    Batcher::start(SLOTS, move |calls| send(pool.clone(), calls))
}

impl PostgresStore {
    pub(super) async fn commit_change(&self, t: &Transition) -> StoreResult<()> {
        let row = Pending::of(t)?;
        let answer = self.commits.call(row).await;
        answer.unwrap_or_else(|| Err(super::abandoned("commit")))
    }
}

/// What the shared statement came to.
enum Shared {
    /// It ran: the positions of the rows it updated.
    Updated(HashSet<i64>),
    /// The server refused it: nothing was written.
    Refused,
    /// Not sent, or its answer was lost: every caller is answered `Unavailable`.
    Unanswered(String),
}

type Call = (Pending, Answer<StoreResult<()>>);

/// Send a batch in the shared statement, which never waits for a row; then each row it did
/// not update alone, each in a task of its own: those may wait for a row another session
/// holds, and must not hold up a slot (the instance's other commits) meanwhile. One row per
/// action goes in the shared statement; another transition of that action goes alone after
/// it (and meets its write).
async fn send(pool: Pool, calls: Vec<Call>) {
    let mut seen = HashSet::new();
    let (mut shared, mut alone) = (Vec::new(), Vec::new());
    for call in calls {
        if seen.insert((call.0.tenant.clone(), call.0.id.clone())) {
            shared.push(call);
        } else {
            alone.push(call);
        }
    }
    match commit_shared(&pool, &shared).await {
        Shared::Updated(updated) => {
            for (n, (row, answer)) in shared.into_iter().enumerate() {
                if updated.contains(&(n as i64)) {
                    let _ = answer.send(Ok(()));
                } else {
                    alone.push((row, answer));
                }
            }
        }
        Shared::Refused => alone.extend(shared),
        Shared::Unanswered(why) => {
            for (_, answer) in shared {
                let _ = answer.send(Err(StoreError::Unavailable(why.clone())));
            }
        }
    }
    for (row, answer) in alone {
        let pool = pool.clone();
        tokio::spawn(async move {
            let _ = answer.send(commit_alone(&pool, &row).await);
        });
    }
}

async fn commit_shared(pool: &Pool, calls: &[Call]) -> Shared {
    let client = match super::pooled(pool).await {
        Ok(client) => client,
        Err(e) => return Shared::Unanswered(super::reason(e)),
    };
    match commit_many(&client, calls).await {
        Ok(updated) => Shared::Updated(updated),
        Err(e) if e.as_db_error().is_some() => {
            tracing::debug!(error = %e, rows = calls.len(), "a shared commit was refused; sending its rows alone");
            Shared::Refused
        }
        Err(e) => Shared::Unanswered(super::reason(unavailable(e))),
    }
}

async fn commit_alone(pool: &Pool, row: &Pending) -> StoreResult<()> {
    commit_one(&super::pooled(pool).await?, row).await
}

async fn commit_one(client: &deadpool_postgres::Object, r: &Pending) -> StoreResult<()> {
    let stmt = client.prepare_cached(COMMIT).await.map_err(unavailable)?;
    let entry = r.entry.as_ref();
    let row = client
        .query_one(
            &stmt,
            &[
                &r.state,
                &r.version,
                &r.sweep_at,
                &r.body,
                &r.tenant,
                &r.id,
                &r.was_state,
                &r.was_version,
                &r.seqs,
                &r.events,
                &entry.map(|e| e.seq),
                &entry.map(|e| e.rev),
                &entry.map(|e| &e.next_at),
                &entry.map(|e| &e.body),
                &CHANNEL,
                &r.announce,
            ],
        )
        .await
        .map_err(conflict_or_unavailable)?;
    match row.get::<_, i64>(0) {
        1 => Ok(()),
        _ => Err(StoreError::Conflict),
    }
}

/// The shared statement; the positions (in `calls`) of the rows it updated.
async fn commit_many(
    client: &deadpool_postgres::Object,
    calls: &[Call],
) -> Result<HashSet<i64>, tokio_postgres::Error> {
    let rows = || calls.iter().map(|(r, _)| r);
    let n: Vec<i64> = (0..calls.len() as i64).collect();
    let col = |f: fn(&Pending) -> &str| rows().map(f).collect::<Vec<_>>();
    let (tenant, id) = (col(|r| &r.tenant), col(|r| &r.id));
    let (state, was_state) = (col(|r| r.state), col(|r| r.was_state));
    let version: Vec<i64> = rows().map(|r| r.version).collect();
    let was_version: Vec<i64> = rows().map(|r| r.was_version).collect();
    let sweep_at: Vec<Option<&str>> = rows().map(|r| r.sweep_at.as_deref()).collect();
    let body: Vec<&[u8]> = rows().map(|r| r.body.as_slice()).collect();
    let announce: Vec<bool> = rows().map(|r| r.announce).collect();
    let (mut ev_n, mut ev_seq, mut ev_body) = (Vec::new(), Vec::new(), Vec::<&[u8]>::new());
    let (mut ob_n, mut ob_seq, mut ob_rev, mut ob_at, mut ob_body) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::<&[u8]>::new(),
    );
    for (i, r) in rows().enumerate() {
        for (seq, body) in r.seqs.iter().zip(&r.events) {
            ev_n.push(i as i64);
            ev_seq.push(*seq);
            ev_body.push(body);
        }
        if let Some(e) = &r.entry {
            ob_n.push(i as i64);
            ob_seq.push(e.seq);
            ob_rev.push(e.rev);
            ob_at.push(e.next_at.as_str());
            ob_body.push(&e.body);
        }
    }
    let stmt = client.prepare_cached(COMMIT_MANY).await?;
    let updated = client
        .query(
            &stmt,
            &[
                &n,
                &tenant,
                &id,
                &state,
                &version,
                &sweep_at,
                &body,
                &was_state,
                &was_version,
                &announce,
                &ev_n,
                &ev_seq,
                &ev_body,
                &ob_n,
                &ob_seq,
                &ob_rev,
                &ob_at,
                &ob_body,
                &CHANNEL,
            ],
        )
        .await?;
    Ok(updated.iter().map(|row| row.get::<_, i64>(0)).collect())
}
