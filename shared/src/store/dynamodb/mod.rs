//! DynamoDB adapter: one table (`infra/table.json`), tenant in every key. A transition is one
//! `TransactWriteItems` of the action put, conditional on (state, version), and its audit event
//! put, conditional on absence: both land or neither does. A failed condition is the typed
//! [`StoreError::Conflict`]; everything else is `Unavailable`. The item design is in
//! `docs/dynamodb.md`.
//!
//! - [`keys`]: partition and sort keys, tenant first;
//! - [`item`]: records ⇄ item maps;
//! - [`writes`]: conditions as values, the transactions;
//! - [`meter`]: consumed capacity (one place) and error mapping;
//! - here: the port, and its reads.

mod item;
mod keys;
mod meter;
mod writes;

use super::{
    IdempotencyRecord, ListPage, ListQuery, Quarantined, Stop, Store, StoreResult, SweepRef,
    Unreadable,
};
use crate::domain::{Action, Event, Transition};
use async_trait::async_trait;
use aws_sdk_dynamodb::{
    types::{KeysAndAttributes, ReturnValue},
    Client,
};
use item::{action_of, event_of, get_s, s, unreadable, Item};
use jiff::{SignedDuration, Timestamp};
use keys::{
    action_pk, idempotency_pk, idempotency_sk, instant, parse_action_pk, quarantine_pk, stop_sk,
    stops_pk, sweep_pk, tenant_pk, ACTION_SK, SWEEP_SHARDS,
};
use meter::{malformed, meter, unavailable, Units, CAPACITY};
use std::collections::HashMap;

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// Sealed actions (and their events) expire this long after sealing; `None` keeps them.
    retention: Option<SignedDuration>,
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
            retention: None,
        }
    }

    /// Expire sealed actions via the table's TTL attribute `expires_at`.
    pub fn with_retention(mut self, retention: Option<SignedDuration>) -> Self {
        self.retention = retention;
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

#[async_trait]
impl Store for DynamoStore {
    async fn create(&self, t: &Transition, idem: Option<&IdempotencyRecord>) -> StoreResult<()> {
        self.create_action(t, idem).await
    }

    async fn commit(&self, t: &Transition) -> StoreResult<()> {
        self.commit_transition(t).await
    }

    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(action_pk(tenant, action_id)))
            .key("sk", s(ACTION_SK))
            .consistent_read(true)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("GetItem", e))?;
        meter("GetItem(action)", Units::Read, out.consumed_capacity());
        out.item().map(action_of).transpose()
    }

    async fn events(&self, tenant: &str, action_id: &str) -> StoreResult<Vec<Event>> {
        let mut events = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :event)")
                .expression_attribute_values(":pk", s(action_pk(tenant, action_id)))
                .expression_attribute_values(":event", s("EVENT#"))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(CAPACITY)
                .send()
                .await
                .map_err(|e| unavailable("Query(events)", e))?;
            meter("Query(events)", Units::Read, out.consumed_capacity());
            for item in out.items() {
                events.push(event_of(item)?);
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(events);
            }
        }
    }

    /// Newest first from the `by_tenant` index (eventually consistent: a just-committed action
    /// may show a moment later). Filters apply after the read, so pages are read until full.
    async fn list(&self, tenant: &str, q: &ListQuery) -> StoreResult<ListPage> {
        let mut page = ListPage::default();
        let (mut start, mut read, mut last) = (None, 0, None);
        while read < q.limit {
            let wanted = q.limit - read;
            let mut req = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("by_tenant")
                .expression_attribute_values(":tpk", s(tenant_pk(tenant)))
                .scan_index_forward(false)
                .limit(wanted.min(1000) as i32)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(CAPACITY);
            req = match &q.before {
                Some(before) => req
                    .key_condition_expression("tenant_pk = :tpk AND action_id < :before")
                    .expression_attribute_values(":before", s(before)),
                None => req.key_condition_expression("tenant_pk = :tpk"),
            };
            let out = req
                .send()
                .await
                .map_err(|e| unavailable("Query(by_tenant)", e))?;
            meter("Query(by_tenant)", Units::Read, out.consumed_capacity());
            for item in out.items() {
                match action_of(item) {
                    Ok(action) => {
                        last = Some(action.id.clone());
                        page.actions.push(action);
                    }
                    Err(e) => {
                        let bad = unreadable(tenant, item, e);
                        last = Some(bad.action_id.clone());
                        page.unreadable.push(bad);
                    }
                }
                read += 1;
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        if read == q.limit {
            page.next = last;
        }
        Ok(page)
    }

    async fn idempotency(
        &self,
        tenant: &str,
        agent_id: &str,
        key: &str,
        now: Timestamp,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(idempotency_pk(tenant, agent_id)))
            .key("sk", s(idempotency_sk(key)))
            .consistent_read(true)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("GetItem(idempotency)", e))?;
        meter("GetItem(idempotency)", Units::Read, out.consumed_capacity());
        let Some(item) = out.item() else {
            return Ok(None);
        };
        let record = IdempotencyRecord::try_from(item)?;
        // TTL deletes lazily (up to days later): a lapsed record is ignored here.
        Ok((record.expires_at > now).then_some(record))
    }

    async fn put_stop(&self, stop: &Stop) -> StoreResult<()> {
        let out = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(Item::from(stop)))
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("PutItem(stop)", e))?;
        meter("PutItem(stop)", Units::Write, out.consumed_capacity());
        Ok(())
    }

    async fn lift_stop(&self, tenant: &str, scope: &str) -> StoreResult<bool> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(stops_pk(tenant)))
            .key("sk", s(stop_sk(scope)))
            .return_values(ReturnValue::AllOld)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("DeleteItem(stop)", e))?;
        meter("DeleteItem(stop)", Units::Write, out.consumed_capacity());
        Ok(out.attributes().is_some_and(|a| !a.is_empty()))
    }

    async fn stops_for(&self, tenant: &str, agent_id: &str) -> StoreResult<Vec<Stop>> {
        let key = |scope: &str| {
            Item::from([
                ("pk".into(), s(stops_pk(tenant))),
                ("sk".into(), s(stop_sk(scope))),
            ])
        };
        let mut keys = KeysAndAttributes::builder()
            .keys(key("*"))
            .consistent_read(true);
        if agent_id != "*" {
            keys = keys.keys(key(agent_id));
        }
        let mut request = Some(HashMap::from([(
            self.table.clone(),
            keys.build().map_err(malformed)?,
        )]));
        let mut stops = Vec::new();
        while let Some(items) = request.take() {
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(items))
                .return_consumed_capacity(CAPACITY)
                .send()
                .await
                .map_err(|e| unavailable("BatchGetItem(stops)", e))?;
            meter("BatchGetItem(stops)", Units::Read, out.consumed_capacity());
            for item in out
                .responses()
                .and_then(|r| r.get(&self.table))
                .into_iter()
                .flatten()
            {
                stops.push(Stop::try_from(item)?);
            }
            request = out.unprocessed_keys().filter(|u| !u.is_empty()).cloned();
        }
        stops.sort_by(|a, b| a.scope().cmp(b.scope()));
        Ok(stops)
    }

    /// Every shard of the sparse `sweep` index, merged earliest first.
    async fn sweep_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<SweepRef>> {
        let mut due = Vec::new();
        for shard in 0..SWEEP_SHARDS {
            let mut start = None;
            let mut from_shard = 0;
            loop {
                let out = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name("sweep")
                    .key_condition_expression("sweep_pk = :spk AND sweep_at <= :until")
                    .expression_attribute_values(":spk", s(sweep_pk(shard)))
                    .expression_attribute_values(":until", s(instant(until)))
                    .limit(limit.clamp(1, 1000) as i32)
                    .set_exclusive_start_key(start)
                    .return_consumed_capacity(CAPACITY)
                    .send()
                    .await
                    .map_err(|e| unavailable("Query(sweep)", e))?;
                meter("Query(sweep)", Units::Read, out.consumed_capacity());
                for item in out.items() {
                    // One bad entry must not stop the sweep (SC-EDGE-08): a bad key names
                    // nothing to load; a bad instant is due now, and its load quarantines it.
                    let Some((tenant, action_id)) =
                        get_s(item, "pk").ok().and_then(parse_action_pk)
                    else {
                        tracing::error!(item = ?item.get("pk"), "sweep entry with a bad key; skipped");
                        continue;
                    };
                    let sweep_at = get_s(item, "sweep_at")
                        .ok()
                        .and_then(|at| at.parse().ok())
                        .unwrap_or(until);
                    due.push(SweepRef {
                        tenant,
                        action_id,
                        sweep_at,
                    });
                    from_shard += 1;
                }
                start = out.last_evaluated_key().cloned();
                if start.is_none() || from_shard >= limit {
                    break;
                }
            }
        }
        due.sort_by(|a, b| {
            a.sweep_at
                .cmp(&b.sweep_at)
                .then_with(|| a.action_id.cmp(&b.action_id))
        });
        due.truncate(limit);
        Ok(due)
    }
    async fn quarantine(&self, bad: &Unreadable, at: Timestamp) -> StoreResult<()> {
        self.quarantine_action(bad, at).await
    }

    async fn quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(quarantine_pk(tenant)))
                .set_exclusive_start_key(start)
                .return_consumed_capacity(CAPACITY)
                .send()
                .await
                .map_err(|e| unavailable("Query(quarantine)", e))?;
            meter("Query(quarantine)", Units::Read, out.consumed_capacity());
            for item in out.items() {
                found.push(Quarantined::try_from(item)?);
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        found.sort_by(|a, b| {
            (a.quarantined_at, &a.action_id).cmp(&(b.quarantined_at, &b.action_id))
        });
        Ok(found)
    }
}
