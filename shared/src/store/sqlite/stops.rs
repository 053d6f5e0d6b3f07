//! The stops in SQLite: one row per scope (an agent id or `*`), written through the writer
//! thread like every write, read on a reader thread.

use super::{malformed, unavailable, SqliteStore};
use crate::store::{Stop, Stops, StoreResult};
use async_trait::async_trait;
use rusqlite::params;

#[async_trait]
impl Stops for SqliteStore {
    async fn put_stop(&self, stop: &Stop) -> StoreResult<()> {
        let stop = stop.clone();
        self.write(move |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO stops (tenant, scope, body) VALUES (?1, ?2, ?3)",
                params![
                    stop.tenant,
                    stop.scope(),
                    serde_json::to_vec(&stop).expect("a stop serializes")
                ],
            )
            .map_err(unavailable)
        })
        .await
        .map(drop)
    }

    async fn lift_stop(&self, tenant: &str, scope: &str) -> StoreResult<bool> {
        let (tenant, scope) = (tenant.to_owned(), scope.to_owned());
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM stops WHERE tenant = ?1 AND scope = ?2",
                params![tenant, scope],
            )
            .map_err(unavailable)
        })
        .await
        .map(|n| n > 0)
    }

    async fn stops_for(&self, tenant: &str, agent_id: &str) -> StoreResult<Vec<Stop>> {
        let (tenant, agent_id) = (tenant.to_owned(), agent_id.to_owned());
        self.with(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT body FROM stops WHERE tenant = ?1 AND scope IN ('*', ?2)")
                .map_err(unavailable)?;
            let rows = stmt
                .query_map(params![tenant, agent_id], |row| row.get::<_, Vec<u8>>(0))
                .map_err(unavailable)?;
            rows.map(|r| serde_json::from_slice(&r.map_err(unavailable)?).map_err(malformed))
                .collect()
        })
        .await
    }
}
