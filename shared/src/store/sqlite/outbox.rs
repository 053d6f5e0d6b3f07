//! The notification outbox in SQLite: one row per notifying event, inserted in the
//! transition's own transaction ([`insert`]), settled by the delivery worker.

use super::{instant, malformed, unavailable, SqliteStore};
use crate::{
    domain::{notice::OutboxEntry, Action, Change, Event},
    store::{subject_of, Outbox, StoreError, StoreResult},
};
use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{params, Connection, OptionalExtension};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS outbox (
    tenant    TEXT NOT NULL,
    action_id TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    rev       INTEGER NOT NULL,
    next_at   TEXT NOT NULL,    -- fixed-width UTC: sorts as text
    dead_at   TEXT,
    body      BLOB NOT NULL,    -- the OutboxEntry as JSON
    PRIMARY KEY (tenant, action_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (next_at) WHERE dead_at IS NULL;
CREATE INDEX IF NOT EXISTS outbox_dead ON outbox (tenant, dead_at) WHERE dead_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS channel_notes (
    tenant    TEXT NOT NULL,
    action_id TEXT NOT NULL,
    channel   TEXT NOT NULL,
    note      TEXT NOT NULL,    -- e.g. a Slack message's channel and ts
    PRIMARY KEY (tenant, action_id, channel)
) WITHOUT ROWID;
";

/// Inside the transition's transaction: the notice lands with the transition or not at all.
pub(super) fn insert(tx: &Connection, t: &Change) -> StoreResult<()> {
    let Some(entry) = t.outbox_entry() else {
        return Ok(());
    };
    tx.execute(
        "INSERT INTO outbox (tenant, action_id, seq, rev, next_at, dead_at, body)
         VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)",
        params![
            entry.tenant,
            entry.action_id,
            entry.seq as i64,
            entry.rev as i64,
            instant(entry.next_at),
            body(&entry)
        ],
    )
    .map_err(super::conflict_or_unavailable)?;
    Ok(())
}

fn body(entry: &OutboxEntry) -> Vec<u8> {
    serde_json::to_vec(entry).expect("an outbox entry serializes")
}

fn entries(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> StoreResult<Vec<OutboxEntry>> {
    let mut stmt = conn.prepare(sql).map_err(unavailable)?;
    let rows = stmt
        .query_map(args, |row| row.get::<_, Vec<u8>>(0))
        .map_err(unavailable)?;
    rows.map(|r| serde_json::from_slice(&r.map_err(unavailable)?).map_err(malformed))
        .collect()
}

#[async_trait]
impl Outbox for SqliteStore {
    async fn outbox_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        self.with(move |conn| {
            entries(
                conn,
                "SELECT body FROM outbox WHERE dead_at IS NULL AND next_at <= ?1
                 ORDER BY next_at LIMIT ?2",
                params![instant(until), limit as i64],
            )
        })
        .await
    }

    async fn outbox_entry(
        &self,
        tenant: &str,
        action_id: &str,
        seq: u64,
    ) -> StoreResult<Option<OutboxEntry>> {
        let (tenant, action_id) = (tenant.to_owned(), action_id.to_owned());
        self.with(move |conn| {
            conn.query_row(
                "SELECT body FROM outbox WHERE tenant = ?1 AND action_id = ?2 AND seq = ?3",
                params![tenant, action_id, seq as i64],
                |row| row.get::<_, Vec<u8>>(0),
            )
            .optional()
            .map_err(unavailable)?
            .map(|b| serde_json::from_slice(&b).map_err(malformed))
            .transpose()
        })
        .await
    }

    async fn outbox_dead(&self, tenant: &str, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        let tenant = tenant.to_owned();
        self.with(move |conn| {
            entries(
                conn,
                "SELECT body FROM outbox WHERE tenant = ?1 AND dead_at IS NOT NULL
                 ORDER BY dead_at LIMIT ?2",
                params![tenant, limit as i64],
            )
        })
        .await
    }

    async fn outbox_settle(
        &self,
        was: &OutboxEntry,
        next: Option<&OutboxEntry>,
    ) -> StoreResult<()> {
        let (was, next) = (was.clone(), next.cloned());
        self.write(move |conn| {
            let key = params![was.tenant, was.action_id, was.seq as i64, was.rev as i64];
            let changed = match next {
                None => conn.execute(
                    "DELETE FROM outbox
                     WHERE tenant = ?1 AND action_id = ?2 AND seq = ?3 AND rev = ?4",
                    key,
                ),
                Some(n) => conn.execute(
                    "UPDATE outbox SET rev = ?5, next_at = ?6, dead_at = ?7, body = ?8
                     WHERE tenant = ?1 AND action_id = ?2 AND seq = ?3 AND rev = ?4",
                    params![
                        was.tenant,
                        was.action_id,
                        was.seq as i64,
                        was.rev as i64,
                        n.rev as i64,
                        instant(n.next_at),
                        n.dead_at.map(instant),
                        body(&n)
                    ],
                ),
            }
            .map_err(unavailable)?;
            if changed == 1 {
                Ok(changed)
            } else {
                Err(StoreError::Conflict)
            }
        })
        .await
        .map(drop)
    }

    async fn outbox_subject(&self, entry: &OutboxEntry) -> StoreResult<Option<(Action, Event)>> {
        subject_of(self, entry).await
    }

    async fn channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
    ) -> StoreResult<Option<String>> {
        let key = (tenant.to_owned(), action_id.to_owned(), channel.to_owned());
        self.with(move |conn| {
            conn.query_row(
                "SELECT note FROM channel_notes WHERE tenant = ?1 AND action_id = ?2 AND channel = ?3",
                params![key.0, key.1, key.2],
                |row| row.get::<_, String>(0),
            )
            .optional()
            .map_err(unavailable)
        })
        .await
    }

    async fn keep_channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
        note: &str,
    ) -> StoreResult<()> {
        let row = (
            tenant.to_owned(),
            action_id.to_owned(),
            channel.to_owned(),
            note.to_owned(),
        );
        self.write(move |conn| {
            conn.execute(
                // Only beside an action that exists: no note outlives, or precedes, its action.
                "INSERT INTO channel_notes (tenant, action_id, channel, note)
                 SELECT ?1, ?2, ?3, ?4 WHERE EXISTS
                   (SELECT 1 FROM actions WHERE tenant = ?1 AND id = ?2)
                 ON CONFLICT (tenant, action_id, channel) DO UPDATE SET note = excluded.note",
                params![row.0, row.1, row.2, row.3],
            )
            .map_err(unavailable)
        })
        .await
        .map(drop)
    }
}
