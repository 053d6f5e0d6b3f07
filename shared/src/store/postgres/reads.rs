//! The Postgres adapter's reads: one statement each, on a pooled connection. READ COMMITTED:
//! a read sees every write answered before it was asked (the stop check's linearization
//! point, SC-EDGE-02).

use super::{malformed, unavailable, PostgresStore};
use crate::domain::{Action, Event};
use crate::store::{
    sortable_instant as instant, IdempotencyRecord, ListPage, ListQuery, Quarantined, StoreResult,
    SweepRef, Unreadable,
};
use jiff::Timestamp;
use tokio_postgres::{types::ToSql, Row};

/// A shared read's answer; `None`: abandoned (the runtime is shutting down).
pub(super) fn gathered(answer: Option<StoreResult<Vec<Vec<u8>>>>) -> StoreResult<Vec<Vec<u8>>> {
    answer.unwrap_or_else(|| Err(super::abandoned("read")))
}

impl PostgresStore {
    /// Run one cached statement and take its rows.
    pub(super) async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Vec<Row>> {
        let client = self.client().await?;
        let stmt = client.prepare_cached(sql).await.map_err(unavailable)?;
        client.query(&stmt, params).await.map_err(unavailable)
    }

    /// Through the shared reads (`gather`): a burst of wakes loads in a few statements.
    pub(super) async fn load_action(&self, tenant: &str, id: &str) -> StoreResult<Option<Action>> {
        let bodies = gathered(self.loads.call((tenant.to_owned(), id.to_owned())).await)?;
        bodies
            .first()
            .map(|body| Action::from_stored(body).map_err(malformed))
            .transpose()
    }

    pub(super) async fn read_events(&self, tenant: &str, id: &str) -> StoreResult<Vec<Event>> {
        self.rows(
            "SELECT body FROM events WHERE tenant = $1 AND action_id = $2 ORDER BY seq",
            &[&tenant, &id],
        )
        .await?
        .iter()
        .map(|row| serde_json::from_slice(row.get(0)).map_err(malformed))
        .collect()
    }

    /// One bounded read, newest first: with a state (and an agent) through `actions_state`
    /// (`actions_agent_state`), reading only matching rows up to `answers`; otherwise the
    /// tenant's history up to `limit`, left for the engine to filter (SC-SEC-05).
    pub(super) async fn read_list(&self, tenant: &str, q: &ListQuery) -> StoreResult<ListPage> {
        // No cursor: above every id, so the index range starts at the newest match.
        let before = q.before.clone().unwrap_or_else(|| char::MAX.to_string());
        let state = q.state.map(|s| s.as_str());
        let (filter, limit) = match (state, &q.agent_id) {
            (None, _) => ("", q.limit),
            (Some(_), None) => ("AND state = $4", q.answers),
            (Some(_), Some(_)) => ("AND state = $4 AND agent_id = $5", q.answers),
        };
        let sql = format!(
            "SELECT id, body FROM actions a
             WHERE tenant = $1 AND id < $2 {filter}
               AND NOT EXISTS (SELECT 1 FROM quarantine q
                               WHERE q.tenant = a.tenant AND q.action_id = a.id)
             ORDER BY id DESC LIMIT $3"
        );
        let limit_param = limit as i64;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&tenant, &before, &limit_param];
        if let Some(state) = &state {
            params.push(state);
            if let Some(agent) = &q.agent_id {
                params.push(agent);
            }
        }
        let rows = self.rows(&sql, &params).await?;
        let mut page = ListPage::default();
        for (read, row) in rows.iter().enumerate() {
            let id: String = row.get(0);
            match Action::from_stored(row.get(1)) {
                Ok(action) => page.actions.push(action),
                Err(e) => page.unreadable.push(Unreadable {
                    tenant: tenant.to_owned(),
                    action_id: id.clone(),
                    reason: e.to_string(),
                }),
            }
            if read + 1 == limit {
                page.next = Some(id);
            }
        }
        Ok(page)
    }

    pub(super) async fn read_idempotency(
        &self,
        tenant: &str,
        agent_id: &str,
        key: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let rows = self
            .rows(
                "SELECT payload_digest, action_id, expires_at FROM idempotency
                 WHERE tenant = $1 AND agent_id = $2 AND key = $3 AND expires_at > $4",
                &[&tenant, &agent_id, &key, &instant(now)],
            )
            .await?;
        rows.first()
            .map(|row| {
                Ok(IdempotencyRecord {
                    tenant: tenant.to_owned(),
                    agent_id: agent_id.to_owned(),
                    key: key.to_owned(),
                    payload_digest: row.get(0),
                    action_id: row.get(1),
                    expires_at: row.get::<_, &str>(2).parse().map_err(malformed)?,
                })
            })
            .transpose()
    }

    pub(super) async fn read_due(
        &self,
        until: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<SweepRef>> {
        let rows = self
            .rows(
                "SELECT tenant, id, sweep_at FROM actions
                 WHERE sweep_at IS NOT NULL AND sweep_at <= $1 ORDER BY sweep_at LIMIT $2",
                &[&instant(until), &(limit as i64)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|row| SweepRef {
                tenant: row.get(0),
                action_id: row.get(1),
                // One bad row must not stop the sweep (SC-EDGE-08); its load quarantines it.
                sweep_at: row.get::<_, &str>(2).parse().unwrap_or(until),
            })
            .collect())
    }

    pub(super) async fn read_quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>> {
        self.rows(
            "SELECT action_id, reason, at FROM quarantine WHERE tenant = $1
             ORDER BY at, action_id",
            &[&tenant],
        )
        .await?
        .iter()
        .map(|row| {
            Ok(Quarantined {
                action_id: row.get(0),
                reason: row.get(1),
                quarantined_at: row.get::<_, &str>(2).parse().map_err(malformed)?,
            })
        })
        .collect()
    }
}
