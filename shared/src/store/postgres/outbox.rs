//! The Postgres adapter's notification outbox (SC-NOT-01/02): entries written with their
//! transition, read when due, settled by a conditional replace on their revision.

use super::{conflict_or_unavailable, malformed, unavailable, PostgresStore};
use crate::{
    domain::{notice::OutboxEntry, Action, Change, Event},
    store::{sortable_instant as instant, subject_of, Outbox, StoreError, StoreResult},
};
use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use jiff::Timestamp;
use tokio_postgres::Row;

/// Inside the transition's transaction: the notice lands with the transition or not at all.
pub(super) async fn insert(tx: &impl GenericClient, t: &Change) -> StoreResult<()> {
    let Some(entry) = t.outbox_entry() else {
        return Ok(());
    };
    let stmt = tx
        .prepare_cached(
            "INSERT INTO outbox (tenant, action_id, seq, rev, next_at, dead_at, body)
             VALUES ($1, $2, $3, $4, $5, NULL, $6)",
        )
        .await
        .map_err(unavailable)?;
    tx.execute(
        &stmt,
        &[
            &entry.tenant,
            &entry.action_id,
            &(entry.seq as i64),
            &(entry.rev as i64),
            &instant(entry.next_at),
            &body(&entry)?,
        ],
    )
    .await
    .map_err(conflict_or_unavailable)
    .map(drop)
}

pub(super) fn body(entry: &OutboxEntry) -> StoreResult<Vec<u8>> {
    serde_json::to_vec(entry).map_err(malformed)
}

fn entries(rows: Vec<Row>) -> StoreResult<Vec<OutboxEntry>> {
    rows.iter()
        .map(|row| serde_json::from_slice(row.get(0)).map_err(malformed))
        .collect()
}

#[async_trait]
impl Outbox for PostgresStore {
    async fn outbox_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        entries(
            self.rows(
                "SELECT body FROM outbox WHERE dead_at IS NULL AND next_at <= $1
                 ORDER BY next_at LIMIT $2",
                &[&instant(until), &(limit as i64)],
            )
            .await?,
        )
    }

    async fn outbox_entry(
        &self,
        tenant: &str,
        action_id: &str,
        seq: u64,
    ) -> StoreResult<Option<OutboxEntry>> {
        let rows = self
            .rows(
                "SELECT body FROM outbox WHERE tenant = $1 AND action_id = $2 AND seq = $3",
                &[&tenant, &action_id, &(seq as i64)],
            )
            .await?;
        Ok(entries(rows)?.pop())
    }

    async fn outbox_dead(&self, tenant: &str, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        entries(
            self.rows(
                "SELECT body FROM outbox WHERE tenant = $1 AND dead_at IS NOT NULL
                 ORDER BY dead_at LIMIT $2",
                &[&tenant, &(limit as i64)],
            )
            .await?,
        )
    }

    async fn outbox_settle(
        &self,
        was: &OutboxEntry,
        next: Option<&OutboxEntry>,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        let key = (&was.tenant, &was.action_id, was.seq as i64, was.rev as i64);
        let changed = match next {
            None => {
                client
                    .execute(
                        "DELETE FROM outbox
                         WHERE tenant = $1 AND action_id = $2 AND seq = $3 AND rev = $4",
                        &[key.0, key.1, &key.2, &key.3],
                    )
                    .await
            }
            Some(n) => {
                client
                    .execute(
                        "UPDATE outbox SET rev = $5, next_at = $6, dead_at = $7, body = $8
                         WHERE tenant = $1 AND action_id = $2 AND seq = $3 AND rev = $4",
                        &[
                            key.0,
                            key.1,
                            &key.2,
                            &key.3,
                            &(n.rev as i64),
                            &instant(n.next_at),
                            &n.dead_at.map(instant),
                            &body(n)?,
                        ],
                    )
                    .await
            }
        }
        .map_err(unavailable)?;
        if changed == 1 {
            Ok(())
        } else {
            Err(StoreError::Conflict)
        }
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
        let rows = self
            .rows(
                "SELECT note FROM channel_notes WHERE tenant = $1 AND action_id = $2 AND channel = $3",
                &[&tenant, &action_id, &channel],
            )
            .await?;
        Ok(rows.first().map(|row| row.get(0)))
    }

    async fn keep_channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
        note: &str,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute(
                // Only beside an action that exists: no note outlives, or precedes, its action.
                "INSERT INTO channel_notes (tenant, action_id, channel, note)
                 SELECT $1, $2, $3, $4 WHERE EXISTS
                   (SELECT 1 FROM actions WHERE tenant = $1 AND id = $2)
                 ON CONFLICT (tenant, action_id, channel) DO UPDATE SET note = excluded.note",
                &[&tenant, &action_id, &channel, &note],
            )
            .await
            .map_err(unavailable)
            .map(drop)
    }
}
