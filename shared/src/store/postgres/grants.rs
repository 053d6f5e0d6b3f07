//! The scoped grants in Postgres: one row per grant (migration 5), its body the grant's JSON;
//! a use or a revocation is `UPDATE … WHERE version = $n`, one statement.

use super::{conflict_or_unavailable, malformed, unavailable, PostgresStore};
use crate::domain::grant::Grant;
use crate::store::{sortable_instant, undamaged, Grants, StoreError, StoreResult};
use async_trait::async_trait;
use jiff::Timestamp;

fn live(g: &Grant) -> bool {
    g.revoked().is_none() && g.uses_left() > 0
}

fn body(g: &Grant) -> Vec<u8> {
    serde_json::to_vec(g).expect("a grant serializes")
}

fn decoded(row: &tokio_postgres::Row) -> StoreResult<Grant> {
    serde_json::from_slice(row.get::<_, &[u8]>("body")).map_err(malformed)
}

/// The grants of rows read for intake or a list, a damaged one left out ([`undamaged`]).
fn kept(tenant: &str, rows: Vec<tokio_postgres::Row>) -> Vec<Grant> {
    rows.iter()
        .filter_map(|r| undamaged(tenant, r.get("id"), decoded(r)))
        .collect()
}

#[async_trait]
impl Grants for PostgresStore {
    async fn put_grant(&self, g: &Grant) -> StoreResult<()> {
        let client = self.client().await?;
        let t = g.terms();
        client
            .execute(
                "INSERT INTO grants (tenant, id, agent_id, tool, version, live, expires_at, body)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &t.tenant,
                    &t.id,
                    &t.agent_id,
                    &t.tool,
                    &(g.version() as i64),
                    &live(g),
                    &sortable_instant(t.expires_at),
                    &body(g),
                ],
            )
            .await
            .map_err(conflict_or_unavailable)
            .map(drop)
    }

    async fn update_grant(&self, next: &Grant) -> StoreResult<()> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE grants SET version = $1, live = $2, body = $3
                 WHERE tenant = $4 AND id = $5 AND version = $6",
                &[
                    &(next.version() as i64),
                    &live(next),
                    &body(next),
                    &next.tenant(),
                    &next.id(),
                    &(next.version() as i64 - 1),
                ],
            )
            .await
            .map_err(unavailable)?;
        match changed {
            1 => Ok(()),
            _ => Err(StoreError::Conflict),
        }
    }

    async fn grant(&self, tenant: &str, id: &str) -> StoreResult<Option<Grant>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT body FROM grants WHERE tenant = $1 AND id = $2",
                &[&tenant, &id],
            )
            .await
            .map_err(unavailable)?;
        rows.first().map(decoded).transpose()
    }

    async fn grants(&self, tenant: &str, limit: usize) -> StoreResult<Vec<Grant>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, body FROM grants WHERE tenant = $1 ORDER BY id DESC LIMIT $2",
                &[&tenant, &(limit as i64)],
            )
            .await
            .map_err(unavailable)?;
        Ok(kept(tenant, rows))
    }

    async fn grants_for(
        &self,
        tenant: &str,
        agent_id: &str,
        tool: &str,
        now: Timestamp,
    ) -> StoreResult<Vec<Grant>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, version, body FROM grants WHERE tenant = $1 AND agent_id = $2
                 AND tool = $3 AND live AND expires_at > $4",
                &[&tenant, &agent_id, &tool, &sortable_instant(now)],
            )
            .await
            .map_err(unavailable)?;
        let remembered = |r: &tokio_postgres::Row| {
            let (id, version) = (r.get("id"), r.get::<_, i64>("version") as u64);
            let read = self.grant_memo.grant(tenant, id, version, || decoded(r));
            undamaged(tenant, id, read)
        };
        Ok(rows.iter().filter_map(remembered).collect())
    }
}
