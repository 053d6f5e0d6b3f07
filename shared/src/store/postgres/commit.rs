//! A transition of an existing record as one statement: the conditional update, its events,
//! its outbox entry and (for a committed ticket) the announcement to the other instances, in
//! one round trip and one implicit transaction. The events and the entry are inserted only
//! from the updated row, so a condition that fails writes nothing; a unique key that exists
//! already fails the whole statement. Under a burst of wakes (many instances, one database)
//! every round trip waits for a pooled connection: one instead of five keeps claims fast.

use super::{conflict_or_unavailable, listen::CHANNEL, outbox, unavailable, PostgresStore};
use crate::{
    domain::{State, Transition},
    store::{sortable_instant as instant, StoreError, StoreResult},
};

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

impl PostgresStore {
    pub(super) async fn commit_change(&self, t: &Transition) -> StoreResult<()> {
        let (state, version) = t.expected;
        let a = &t.action;
        let mut seqs = Vec::new();
        let mut bodies = Vec::new();
        for event in t.events() {
            seqs.push(event.seq as i64);
            bodies.push(serde_json::to_vec(event).map_err(super::malformed)?);
        }
        let entry = t.outbox_entry();
        let entry_body = entry.as_ref().map(outbox::body).transpose()?;
        let announce = a.state() == State::Approved;
        let client = self.client().await?;
        let stmt = client.prepare_cached(COMMIT).await.map_err(unavailable)?;
        let row = client
            .query_one(
                &stmt,
                &[
                    &a.state().as_str(),
                    &(a.version as i64),
                    &a.sweep_at().map(instant),
                    &a.to_stored(),
                    &a.tenant,
                    &a.id,
                    &state.as_str(),
                    &(version as i64),
                    &seqs,
                    &bodies,
                    &entry.as_ref().map(|e| e.seq as i64),
                    &entry.as_ref().map(|e| e.rev as i64),
                    &entry.as_ref().map(|e| instant(e.next_at)),
                    &entry_body,
                    &CHANNEL,
                    &announce,
                ],
            )
            .await
            .map_err(conflict_or_unavailable)?;
        match row.get::<_, i64>(0) {
            1 => Ok(()),
            _ => Err(StoreError::Conflict),
        }
    }
}
