//! The Postgres adapter's stops: one row per scope (an agent id or `*`), and the wake's read of
//! an action with its agent's stops. Stop checks under way at once share a statement (`gather`),
//! each made after its caller asked (the stop check's linearization point, SC-EDGE-02).

use super::{malformed, reads::gathered, unavailable, PostgresStore};
use crate::domain::{Action, State};
use crate::store::{Stop, Stops, Store, StoreResult};
use async_trait::async_trait;

#[async_trait]
impl Stops for PostgresStore {
    async fn put_stop(&self, stop: &Stop) -> StoreResult<()> {
        let client = self.client().await?;
        let body = serde_json::to_vec(stop).map_err(malformed)?;
        client
            .execute(
                "INSERT INTO stops (tenant, scope, body) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant, scope) DO UPDATE SET body = excluded.body",
                &[&stop.tenant, &stop.scope(), &body],
            )
            .await
            .map_err(unavailable)
            .map(drop)
    }

    async fn lift_stop(&self, tenant: &str, scope: &str) -> StoreResult<bool> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM stops WHERE tenant = $1 AND scope = $2",
                &[&tenant, &scope],
            )
            .await
            .map_err(unavailable)
            .map(|n| n > 0)
    }

    /// Through the shared reads (`gather`), each made after its caller asked.
    async fn stops_for(&self, tenant: &str, agent_id: &str) -> StoreResult<Vec<Stop>> {
        let bodies = gathered(
            self.stops
                .call((tenant.to_owned(), agent_id.to_owned()))
                .await,
        )?;
        bodies
            .iter()
            .map(|body| serde_json::from_slice(body).map_err(malformed))
            .collect()
    }
}

#[async_trait]
impl Store for PostgresStore {
    /// An action and its agent's stops in one shared read (`gather`); stops only for an
    /// `approved` one, as the port says.
    async fn load_with_stops(
        &self,
        tenant: &str,
        id: &str,
    ) -> StoreResult<(Option<Action>, Vec<Stop>)> {
        let call = (tenant.to_owned(), id.to_owned());
        let bodies = gathered(self.with_stops.call(call).await)?;
        let Some((first, stops)) = bodies.split_first() else {
            return Ok((None, Vec::new()));
        };
        let action = Action::from_stored(first).map_err(malformed)?;
        let stops = match action.state() {
            State::Approved => stops
                .iter()
                .map(|body| serde_json::from_slice(body).map_err(malformed))
                .collect::<StoreResult<_>>()?,
            _ => Vec::new(),
        };
        Ok((Some(action), stops))
    }
}
