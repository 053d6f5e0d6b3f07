//! Reads one instance makes at once — the loads and stop checks of a burst of wakes — share
//! one statement each ([`Batcher`]). Each read is still made after its caller asked (a call is
//! queued before the statement that answers it is sent), so it sees every write answered
//! before the caller asked: the stop check's linearization point (SC-EDGE-02) is unchanged.

use super::{
    batch::{Answer, Batcher},
    pooled, unavailable,
};
use crate::store::{StoreError, StoreResult};
use deadpool_postgres::Pool;

/// Shared reads of one kind under way at once, per instance.
const SLOTS: usize = 2;

/// Records by key: row `n` (from 1) of the arrays is call `n`.
pub(super) const ACTIONS: &str = "
SELECT i.n, a.body FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(tenant, id, n)
JOIN actions a ON a.tenant = i.tenant AND a.id = i.id";

/// The stops of each (tenant, agent): the tenant's own and the agent's.
pub(super) const STOPS: &str = "
SELECT i.n, s.body FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(tenant, agent, n)
JOIN stops s ON s.tenant = i.tenant AND s.scope IN ('*', i.agent)";

/// Records by key, each followed by its agent's stops (an action's row first: `kind` 0).
pub(super) const WITH_STOPS: &str = "
WITH i AS (
    SELECT * FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(tenant, id, n)
), a AS (
    SELECT i.n, a.tenant, a.agent_id, a.body FROM i JOIN actions a ON a.tenant = i.tenant AND a.id = i.id
)
SELECT n, body FROM (
    SELECT n, 0 AS kind, body FROM a
    UNION ALL
    SELECT a.n, 1, s.body FROM a JOIN stops s ON s.tenant = a.tenant AND s.scope IN ('*', a.agent_id)
) r ORDER BY n, kind";

/// A read by two keys; its answer is the bodies of the rows found.
pub(super) type Reads = Batcher<(String, String), StoreResult<Vec<Vec<u8>>>>;

/// The batcher of one kind of read (`sql`: [`ACTIONS`] or [`STOPS`]) on `pool`.
pub(super) fn reads(pool: Pool, sql: &'static str) -> Reads {
    Batcher::start(SLOTS, move |calls| gather(pool.clone(), sql, calls))
}

type Call = ((String, String), Answer<StoreResult<Vec<Vec<u8>>>>);

async fn gather(pool: Pool, sql: &'static str, calls: Vec<Call>) {
    let (first, second): (Vec<&str>, Vec<&str>) = calls
        .iter()
        .map(|((a, b), _)| (a.as_str(), b.as_str()))
        .unzip();
    let read = async {
        let client = pooled(&pool).await?;
        let stmt = client.prepare_cached(sql).await.map_err(unavailable)?;
        client
            .query(&stmt, &[&first, &second])
            .await
            .map_err(unavailable)
    };
    match read.await {
        Ok(rows) => {
            let mut found = vec![Vec::new(); calls.len()];
            for row in rows {
                let n: i64 = row.get(0);
                if let Some(bodies) = found.get_mut((n - 1) as usize) {
                    bodies.push(row.get::<_, Vec<u8>>(1));
                }
            }
            for ((_, answer), bodies) in calls.into_iter().zip(found) {
                let _ = answer.send(Ok(bodies));
            }
        }
        Err(e) => {
            let why = super::reason(e);
            for (_, answer) in calls {
                let _ = answer.send(Err(StoreError::Unavailable(why.clone())));
            }
        }
    }
}
