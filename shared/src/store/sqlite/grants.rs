//! The scoped grants in SQLite: one row per grant, its body the grant's JSON; a use or a
//! revocation is `UPDATE … WHERE version = ?` through the writer thread like every write.

use super::{conflict_or_unavailable, instant, malformed, unavailable, SqliteStore};
use crate::domain::grant::Grant;
use crate::store::{undamaged, Grants, StoreError, StoreResult};
use async_trait::async_trait;
use jiff::Timestamp;
use rusqlite::{params, OptionalExtension};

/// A grant's row values: body, live, expiry.
fn encoded(g: &Grant) -> (Vec<u8>, bool, String) {
    let live = g.revoked().is_none() && g.uses_left() > 0;
    let body = serde_json::to_vec(g).expect("a grant serializes");
    (body, live, instant(g.terms().expires_at))
}

fn decoded(body: &[u8]) -> StoreResult<Grant> {
    serde_json::from_slice(body).map_err(malformed)
}

fn id_and_body(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, Vec<u8>)> {
    Ok((r.get(0)?, r.get(1)?))
}

/// The grants of rows read for intake or a list: a failed read fails them all, a damaged
/// grant is left out ([`undamaged`]).
fn kept(
    tenant: &str,
    rows: impl Iterator<Item = rusqlite::Result<(String, Vec<u8>)>>,
) -> StoreResult<Vec<Grant>> {
    let mut grants = Vec::new();
    for row in rows {
        let (id, body) = row.map_err(unavailable)?;
        grants.extend(undamaged(tenant, &id, decoded(&body)));
    }
    Ok(grants)
}

#[async_trait]
impl Grants for SqliteStore {
    async fn put_grant(&self, grant: &Grant) -> StoreResult<()> {
        let g = grant.clone();
        let (body, live, expires_at) = encoded(&g);
        self.write(move |tx| {
            let t = g.terms();
            tx.execute(
                "INSERT INTO grants (tenant, id, agent_id, tool, version, live, expires_at, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    t.tenant,
                    t.id,
                    t.agent_id,
                    t.tool,
                    g.version() as i64,
                    live,
                    expires_at,
                    body
                ],
            )
            .map_err(conflict_or_unavailable)
        })
        .await
        .map(drop)
    }

    async fn update_grant(&self, next: &Grant) -> StoreResult<()> {
        let g = next.clone();
        let (body, live, _) = encoded(&g);
        self.write(move |tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE grants SET version = ?1, live = ?2, body = ?3
                     WHERE tenant = ?4 AND id = ?5 AND version = ?6",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        g.version() as i64,
                        live,
                        body,
                        g.tenant(),
                        g.id(),
                        g.version() as i64 - 1
                    ])
                })
                .map_err(unavailable)?;
            match changed {
                1 => Ok(1),
                _ => Err(StoreError::Conflict),
            }
        })
        .await
        .map(drop)
    }

    async fn grant(&self, tenant: &str, id: &str) -> StoreResult<Option<Grant>> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.with(move |conn| {
            conn.prepare_cached("SELECT body FROM grants WHERE tenant = ?1 AND id = ?2")
                .and_then(|mut s| {
                    s.query_row(params![tenant, id], |r| r.get::<_, Vec<u8>>(0))
                        .optional()
                })
                .map_err(unavailable)?
                .map(|body| decoded(&body))
                .transpose()
        })
        .await
    }

    async fn grants(&self, tenant: &str, limit: usize) -> StoreResult<Vec<Grant>> {
        let tenant = tenant.to_owned();
        self.with(move |conn| {
            let mut s = conn
                .prepare_cached(
                    "SELECT id, body FROM grants WHERE tenant = ?1 ORDER BY id DESC LIMIT ?2",
                )
                .map_err(unavailable)?;
            let rows = s
                .query_map(params![tenant, limit as i64], id_and_body)
                .map_err(unavailable)?;
            kept(&tenant, rows)
        })
        .await
    }

    async fn grants_for(
        &self,
        tenant: &str,
        agent_id: &str,
        tool: &str,
        now: Timestamp,
    ) -> StoreResult<Vec<Grant>> {
        let (tenant, agent_id, tool) = (tenant.to_owned(), agent_id.to_owned(), tool.to_owned());
        let memo = self.grant_memo.clone();
        self.with(move |conn| {
            // Ids and versions from the index; a body read (by key) only where the memo misses.
            // Two statements, two snapshots: a body written in between is of a later version,
            // which the memo answers as decoded and does not remember under this one.
            let found: Vec<(String, i64)> = conn
                .prepare_cached(
                    "SELECT id, version FROM grants WHERE tenant = ?1 AND agent_id = ?2
                     AND tool = ?3 AND live = 1 AND expires_at > ?4",
                )
                .and_then(|mut s| {
                    s.query_map(params![tenant, agent_id, tool, instant(now)], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?
                    .collect()
                })
                .map_err(unavailable)?;
            let mut body = conn
                .prepare_cached("SELECT body FROM grants WHERE tenant = ?1 AND id = ?2")
                .map_err(unavailable)?;
            let mut live = Vec::with_capacity(found.len());
            for (id, version) in found {
                let version = version as u64;
                let read = match memo.remembered(&tenant, &id, version) {
                    Some(g) => Ok(g),
                    None => {
                        let stored = body
                            .query_row(params![tenant, id], |r| r.get::<_, Vec<u8>>(0))
                            .map_err(unavailable)?;
                        memo.keep(&tenant, &id, version, decoded(&stored))
                    }
                };
                live.extend(undamaged(&tenant, &id, read));
            }
            Ok(live)
        })
        .await
    }
}
