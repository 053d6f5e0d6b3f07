//! [`FaultyStore`] on each port: writes through its faults, reads through its read faults,
//! everything else passed to the store it wraps.

use super::{FaultyStore, Write};
use async_trait::async_trait;
use countersign::{
    domain::{grant::Grant, notice::OutboxEntry, Action, Creation, Event, State, Transition},
    store::{
        Actions, Grants, IdempotencyRecord, ListPage, ListQuery, Outbox, Quarantined, Stop, Stops,
        Store, StoreResult, SweepRef, Unreadable,
    },
};
use jiff::Timestamp;

#[async_trait]
impl Actions for FaultyStore {
    async fn create(
        &self,
        t: &Creation,
        idempotency: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        self.write(
            Write::Create,
            Some(t.into()),
            self.inner.create(t, idempotency),
        )
        .await
    }
    async fn commit(&self, t: &Transition) -> StoreResult<()> {
        self.write(Write::Commit, Some(t.into()), self.inner.commit(t))
            .await
    }
    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>> {
        self.read_allowed()?;
        let delay = *self.read_delay.lock().expect("read delay lock");
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        self.inner.load(tenant, action_id).await
    }
    async fn events(&self, tenant: &str, action_id: &str) -> StoreResult<Vec<Event>> {
        self.inner.events(tenant, action_id).await
    }
    async fn list(&self, tenant: &str, query: &ListQuery) -> StoreResult<ListPage> {
        self.read_allowed()?;
        let page = self.inner.list(tenant, query).await?;
        self.list_sizes
            .lock()
            .expect("list sizes lock")
            .push(page.actions.len() + page.unreadable.len());
        Ok(page)
    }
    fn indexes(&self, state: Option<State>, agent_id: Option<&str>) -> bool {
        self.inner.indexes(state, agent_id)
    }
    async fn idempotency(
        &self,
        tenant: &str,
        agent_id: &str,
        key: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        self.inner.idempotency(tenant, agent_id, key, now).await
    }
    async fn sweep_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<SweepRef>> {
        self.inner.sweep_due(until, limit).await
    }
    async fn quarantine(&self, bad: &Unreadable, at: Timestamp) -> StoreResult<()> {
        self.inner.quarantine(bad, at).await
    }
    async fn quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>> {
        self.inner.quarantined(tenant).await
    }
    async fn defer_sweep(&self, action: &Action) -> StoreResult<()> {
        self.inner.defer_sweep(action).await
    }
}

#[async_trait]
impl Stops for FaultyStore {
    async fn put_stop(&self, stop: &Stop) -> StoreResult<()> {
        self.write(Write::PutStop, None, self.inner.put_stop(stop))
            .await
    }
    async fn lift_stop(&self, tenant: &str, scope: &str) -> StoreResult<bool> {
        self.write(Write::LiftStop, None, self.inner.lift_stop(tenant, scope))
            .await
    }
    async fn stops_for(&self, tenant: &str, agent_id: &str) -> StoreResult<Vec<Stop>> {
        self.inner.stops_for(tenant, agent_id).await
    }
}

#[async_trait]
impl Outbox for FaultyStore {
    async fn outbox_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.outbox_due(until, limit).await
    }
    async fn outbox_entry(
        &self,
        tenant: &str,
        action_id: &str,
        seq: u64,
    ) -> StoreResult<Option<OutboxEntry>> {
        self.inner.outbox_entry(tenant, action_id, seq).await
    }
    async fn outbox_dead(&self, tenant: &str, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        self.inner.outbox_dead(tenant, limit).await
    }
    async fn outbox_settle(
        &self,
        was: &OutboxEntry,
        next: Option<&OutboxEntry>,
    ) -> StoreResult<()> {
        self.inner.outbox_settle(was, next).await
    }
    async fn outbox_subject(&self, entry: &OutboxEntry) -> StoreResult<Option<(Action, Event)>> {
        self.inner.outbox_subject(entry).await
    }
    async fn channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
    ) -> StoreResult<Option<String>> {
        self.inner.channel_note(tenant, action_id, channel).await
    }
    async fn keep_channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
        note: &str,
    ) -> StoreResult<()> {
        self.inner
            .keep_channel_note(tenant, action_id, channel, note)
            .await
    }
}

/// Grants pass through: their races are the store's own (SC-GR-06).
#[async_trait]
impl Grants for FaultyStore {
    async fn put_grant(&self, grant: &Grant) -> StoreResult<()> {
        self.inner.put_grant(grant).await
    }
    async fn update_grant(&self, next: &Grant) -> StoreResult<()> {
        self.inner.update_grant(next).await
    }
    async fn grant(&self, tenant: &str, id: &str) -> StoreResult<Option<Grant>> {
        self.inner.grant(tenant, id).await
    }
    async fn grants(&self, tenant: &str, limit: usize) -> StoreResult<Vec<Grant>> {
        self.inner.grants(tenant, limit).await
    }
    async fn grants_for(
        &self,
        tenant: &str,
        agent_id: &str,
        tool: &str,
        now: Timestamp,
    ) -> StoreResult<Vec<Grant>> {
        self.inner.grants_for(tenant, agent_id, tool, now).await
    }
}

/// Loads and stop reads one after the other, through the faults above.
impl Store for FaultyStore {}
