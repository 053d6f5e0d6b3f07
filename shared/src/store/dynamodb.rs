//! DynamoDB adapter: one table (`infra/table.json`), tenant in every key. A transition is one
//! `TransactWriteItems` of the action put, conditional on (state, version), and its audit event
//! put, conditional on absence: both land or neither does. A failed condition is the typed
//! [`StoreError::Conflict`]; everything else is `Unavailable`. The item design is in
//! `docs/dynamodb.md`.

use super::{IdempotencyRecord, ListQuery, Stop, Store, StoreError, StoreResult, SweepRef};
use crate::domain::{Action, Event, Transition};
use async_trait::async_trait;
use aws_sdk_dynamodb::{
    error::{DisplayErrorContext, SdkError},
    operation::transact_write_items::TransactWriteItemsError,
    types::{
        AttributeValue, ConsumedCapacity, KeysAndAttributes, Put, ReturnConsumedCapacity,
        ReturnValue, TransactWriteItem,
    },
    Client,
};
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

/// Shards of the sparse `sweep` index: writes spread over them, the sweep queries them all.
const SWEEP_SHARDS: u32 = 4;
/// Re-sends of a transaction that DynamoDB cancelled for a concurrent transaction on the same
/// item (`TransactionConflict`): the conditions make a re-send safe.
const TRANSACTION_CONFLICT_RETRIES: u32 = 4;

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

// ---------- keys ----------

/// Key parts are escaped so that no value can forge a `#` separator.
fn part(s: &str) -> String {
    s.replace('%', "%25").replace('#', "%23")
}

fn unpart(s: &str) -> String {
    s.replace("%23", "#").replace("%25", "%")
}

fn tenant_pk(tenant: &str) -> String {
    format!("TENANT#{}", part(tenant))
}

fn action_pk(tenant: &str, action_id: &str) -> String {
    format!("TENANT#{}#ACTION#{}", part(tenant), part(action_id))
}

const ACTION_SK: &str = "ACTION";

fn event_sk(seq: u64) -> String {
    format!("EVENT#{seq:020}")
}

fn idempotency_pk(tenant: &str, agent_id: &str) -> String {
    format!("TENANT#{}#AGENT#{}#IDEM", part(tenant), part(agent_id))
}

fn idempotency_sk(key: &str) -> String {
    format!("KEY#{key}")
}

fn stops_pk(tenant: &str) -> String {
    format!("TENANT#{}#STOPS", part(tenant))
}

fn stop_sk(scope: &str) -> String {
    format!("STOP#{}", part(scope))
}

/// (tenant, action id) back from an action's `pk`.
fn parse_action_pk(pk: &str) -> Option<(String, String)> {
    let rest = pk.strip_prefix("TENANT#")?;
    let (tenant, id) = rest.split_once("#ACTION#")?;
    Some((unpart(tenant), unpart(id)))
}

/// FNV-1a: stable across builds and platforms, unlike `DefaultHasher`.
fn sweep_shard(action_id: &str) -> u32 {
    let hash = action_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    hash % SWEEP_SHARDS
}

fn sweep_pk(shard: u32) -> String {
    format!("SWEEP#{shard}")
}

use super::sortable_instant as instant;

/// TTL attribute value: epoch seconds, rounded up so nothing expires early.
fn epoch_seconds(t: Timestamp) -> AttributeValue {
    let s = t.as_second() + i64::from(t.subsec_nanosecond() > 0);
    AttributeValue::N(s.to_string())
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn get_s<'a>(item: &'a Item, name: &str) -> StoreResult<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(StoreError::Malformed(format!(
            "item attribute {name} is missing or not a string"
        ))),
    }
}

// ---------- items (From/TryFrom between records and item maps live here only) ----------

impl DynamoStore {
    fn expiry_of(&self, a: &Action) -> Option<Timestamp> {
        let (retention, sealed_at) = (self.retention?, a.sealed_at?);
        sealed_at.checked_add(retention).ok()
    }

    fn action_item(&self, a: &Action) -> Item {
        let body = String::from_utf8(a.to_stored()).expect("JSON is UTF-8");
        let mut item = Item::from([
            ("pk".into(), s(action_pk(&a.tenant, &a.id))),
            ("sk".into(), s(ACTION_SK)),
            ("tenant".into(), s(&a.tenant)),
            ("action_id".into(), s(&a.id)),
            ("agent_id".into(), s(&a.agent_id)),
            ("state".into(), s(a.state.as_str())),
            ("version".into(), n(a.version)),
            ("body".into(), s(body)),
            ("tenant_pk".into(), s(tenant_pk(&a.tenant))),
        ]);
        if let Some(at) = a.sweep_at() {
            item.insert("sweep_pk".into(), s(sweep_pk(sweep_shard(&a.id))));
            item.insert("sweep_at".into(), s(instant(at)));
        }
        if let Some(expires) = self.expiry_of(a) {
            item.insert("expires_at".into(), epoch_seconds(expires));
        }
        item
    }

    fn event_item(&self, t: &Transition) -> Item {
        let a = &t.action;
        let body = serde_json::to_string(&t.event).expect("an event serializes");
        let mut item = Item::from([
            ("pk".into(), s(action_pk(&a.tenant, &a.id))),
            ("sk".into(), s(event_sk(t.event.seq))),
            ("tenant".into(), s(&a.tenant)),
            ("action_id".into(), s(&a.id)),
            ("seq".into(), n(t.event.seq)),
            ("body".into(), s(body)),
        ]);
        if let Some(expires) = self.expiry_of(a) {
            item.insert("expires_at".into(), epoch_seconds(expires));
        }
        item
    }
}

/// Load an action item; the body is the record, checked by `Action::from_stored` (fails
/// closed), and must agree with the item's keys.
fn action_of(item: &Item) -> StoreResult<Action> {
    let action = Action::from_stored(get_s(item, "body")?.as_bytes())
        .map_err(|e| StoreError::Malformed(e.to_string()))?;
    if get_s(item, "pk")? != action_pk(&action.tenant, &action.id) {
        return Err(StoreError::Malformed(
            "action body does not match its key".into(),
        ));
    }
    Ok(action)
}

fn event_of(item: &Item) -> StoreResult<Event> {
    serde_json::from_str(get_s(item, "body")?).map_err(|e| StoreError::Malformed(e.to_string()))
}

fn idempotency_item(r: &IdempotencyRecord) -> Item {
    Item::from([
        ("pk".into(), s(idempotency_pk(&r.tenant, &r.agent_id))),
        ("sk".into(), s(idempotency_sk(&r.key))),
        ("tenant".into(), s(&r.tenant)),
        ("agent_id".into(), s(&r.agent_id)),
        ("idempotency_key".into(), s(&r.key)),
        ("payload_digest".into(), s(&r.payload_digest)),
        ("record_action_id".into(), s(&r.action_id)),
        ("expires".into(), s(instant(r.expires_at))),
        ("expires_at".into(), epoch_seconds(r.expires_at)),
    ])
}

impl TryFrom<&Item> for IdempotencyRecord {
    type Error = StoreError;

    fn try_from(item: &Item) -> StoreResult<Self> {
        Ok(IdempotencyRecord {
            tenant: get_s(item, "tenant")?.to_owned(),
            agent_id: get_s(item, "agent_id")?.to_owned(),
            key: get_s(item, "idempotency_key")?.to_owned(),
            payload_digest: get_s(item, "payload_digest")?.to_owned(),
            action_id: get_s(item, "record_action_id")?.to_owned(),
            expires_at: get_s(item, "expires")?
                .parse()
                .map_err(|e| StoreError::Malformed(format!("expires: {e}")))?,
        })
    }
}

fn stop_item(stop: &Stop) -> Item {
    Item::from([
        ("pk".into(), s(stops_pk(&stop.tenant))),
        ("sk".into(), s(stop_sk(stop.scope()))),
        ("tenant".into(), s(&stop.tenant)),
        (
            "body".into(),
            s(serde_json::to_string(stop).expect("a stop serializes")),
        ),
    ])
}

fn stop_of(item: &Item) -> StoreResult<Stop> {
    serde_json::from_str(get_s(item, "body")?).map_err(|e| StoreError::Malformed(e.to_string()))
}

// ---------- cost and errors ----------

/// The product's cost, per request (ReturnConsumedCapacity TOTAL).
fn spent(op: &'static str, consumed: Option<&ConsumedCapacity>) {
    spent_all(op, consumed.into_iter());
}

fn spent_all<'a>(op: &'static str, consumed: impl Iterator<Item = &'a ConsumedCapacity>) {
    let units: f64 = consumed.filter_map(|c| c.capacity_units()).sum();
    tracing::info!(op, capacity_units = units, "dynamodb consumed capacity");
}

fn unavailable<E, R>(op: &str, e: SdkError<E, R>) -> StoreError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    StoreError::Unavailable(format!("{op}: {}", DisplayErrorContext(e)))
}

fn malformed(e: impl std::fmt::Display) -> StoreError {
    StoreError::Malformed(e.to_string())
}

impl DynamoStore {
    fn put(
        &self,
        item: Item,
        condition: &str,
        values: &[(&str, AttributeValue)],
    ) -> StoreResult<TransactWriteItem> {
        let mut put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition);
        if condition.contains("#state") {
            put = put.expression_attribute_names("#state", "state");
        }
        if condition.contains("#version") {
            put = put.expression_attribute_names("#version", "version");
        }
        if condition.contains("#expires") {
            put = put.expression_attribute_names("#expires", "expires");
        }
        for (name, value) in values {
            put = put.expression_attribute_values(*name, value.clone());
        }
        Ok(TransactWriteItem::builder()
            .put(put.build().map_err(malformed)?)
            .build())
    }

    /// One transaction: every condition holds and every write lands, or nothing does.
    async fn transact(&self, op: &'static str, items: Vec<TransactWriteItem>) -> StoreResult<()> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let e = match sent {
                Ok(out) => {
                    spent_all(op, out.consumed_capacity().iter());
                    return Ok(());
                }
                Err(e) => e,
            };
            let codes: Vec<String> = match e.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(c)) => c
                    .cancellation_reasons()
                    .iter()
                    .filter_map(|r| r.code().map(str::to_owned))
                    .collect(),
                _ => return Err(unavailable(op, e)),
            };
            if codes.iter().any(|c| c == "ConditionalCheckFailed") {
                tracing::debug!(op, ?codes, "conditional write lost");
                return Err(StoreError::Conflict);
            }
            if codes.iter().any(|c| c == "TransactionConflict")
                && attempt <= TRANSACTION_CONFLICT_RETRIES
            {
                tracing::debug!(op, attempt, "transaction conflict; re-sending");
                tokio::time::sleep(std::time::Duration::from_millis(10 * u64::from(attempt))).await;
                continue;
            }
            return Err(unavailable(op, e));
        }
    }

    /// Best effort after a sealing commit with retention: the earlier events expire with the
    /// action (the sealing event already carries `expires_at`). A failure leaves events that
    /// no read can reach once the action is gone; it is logged.
    async fn expire_earlier_events(&self, a: &Action, upto_seq: u64) {
        let Some(expires) = self.expiry_of(a) else {
            return;
        };
        for seq in 1..upto_seq {
            let updated = self
                .client
                .update_item()
                .table_name(&self.table)
                .key("pk", s(action_pk(&a.tenant, &a.id)))
                .key("sk", s(event_sk(seq)))
                .update_expression("SET expires_at = :e")
                .condition_expression("attribute_exists(pk)")
                .expression_attribute_values(":e", epoch_seconds(expires))
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            match updated {
                Ok(out) => spent("UpdateItem(event expiry)", out.consumed_capacity()),
                Err(e) => {
                    tracing::warn!(tenant = %a.tenant, action_id = %a.id, seq, error = %DisplayErrorContext(e), "could not set the retention of an event");
                }
            }
        }
    }
}

// ---------- the port ----------

#[async_trait]
impl Store for DynamoStore {
    async fn create(&self, t: &Transition, idem: Option<&IdempotencyRecord>) -> StoreResult<()> {
        let mut items = vec![
            self.put(self.action_item(&t.action), "attribute_not_exists(pk)", &[])?,
            self.put(self.event_item(t), "attribute_not_exists(pk)", &[])?,
        ];
        if let Some(r) = idem {
            // A lapsed record of the same key may linger until TTL removes it: replace only that.
            items.push(self.put(
                idempotency_item(r),
                "attribute_not_exists(pk) OR #expires <= :now",
                &[(":now", s(instant(t.action.created_at)))],
            )?);
        }
        self.transact("TransactWriteItems(create)", items).await
    }

    async fn commit(&self, t: &Transition) -> StoreResult<()> {
        let Some((state, version)) = t.expected else {
            return Err(StoreError::Malformed(
                "commit needs an expected state".into(),
            ));
        };
        let items = vec![
            self.put(
                self.action_item(&t.action),
                "#state = :expected_state AND #version = :expected_version",
                &[
                    (":expected_state", s(state.as_str())),
                    (":expected_version", n(version)),
                ],
            )?,
            self.put(self.event_item(t), "attribute_not_exists(pk)", &[])?,
        ];
        self.transact("TransactWriteItems(commit)", items).await?;
        if t.action.state.is_sealed() {
            self.expire_earlier_events(&t.action, t.event.seq).await;
        }
        Ok(())
    }

    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(action_pk(tenant, action_id)))
            .key("sk", s(ACTION_SK))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| unavailable("GetItem", e))?;
        spent("GetItem(action)", out.consumed_capacity());
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
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
                .map_err(|e| unavailable("Query(events)", e))?;
            spent("Query(events)", out.consumed_capacity());
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
    async fn list(&self, tenant: &str, q: &ListQuery) -> StoreResult<Vec<Action>> {
        let mut found = Vec::new();
        let mut start = None;
        let filtered = q.state.is_some() || q.agent_id.is_some();
        while found.len() < q.limit {
            let wanted = q.limit - found.len();
            let page = if filtered { wanted.max(25) } else { wanted };
            let mut req = self
                .client
                .query()
                .table_name(&self.table)
                .index_name("by_tenant")
                .expression_attribute_values(":tpk", s(tenant_pk(tenant)))
                .scan_index_forward(false)
                .limit(page.min(1000) as i32)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            req = match &q.before {
                Some(before) => req
                    .key_condition_expression("tenant_pk = :tpk AND action_id < :before")
                    .expression_attribute_values(":before", s(before)),
                None => req.key_condition_expression("tenant_pk = :tpk"),
            };
            let mut filters = Vec::new();
            if let Some(state) = q.state {
                filters.push("#state = :state");
                req = req
                    .expression_attribute_names("#state", "state")
                    .expression_attribute_values(":state", s(state.as_str()));
            }
            if let Some(agent) = &q.agent_id {
                filters.push("agent_id = :agent");
                req = req.expression_attribute_values(":agent", s(agent));
            }
            if !filters.is_empty() {
                req = req.filter_expression(filters.join(" AND "));
            }
            let out = req
                .send()
                .await
                .map_err(|e| unavailable("Query(by_tenant)", e))?;
            spent("Query(by_tenant)", out.consumed_capacity());
            for item in out.items() {
                if found.len() < q.limit {
                    found.push(action_of(item)?);
                }
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        Ok(found)
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
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| unavailable("GetItem(idempotency)", e))?;
        spent("GetItem(idempotency)", out.consumed_capacity());
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
            .set_item(Some(stop_item(stop)))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| unavailable("PutItem(stop)", e))?;
        spent("PutItem(stop)", out.consumed_capacity());
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
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| unavailable("DeleteItem(stop)", e))?;
        spent("DeleteItem(stop)", out.consumed_capacity());
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
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await
                .map_err(|e| unavailable("BatchGetItem(stops)", e))?;
            spent_all("BatchGetItem(stops)", out.consumed_capacity().iter());
            for item in out
                .responses()
                .and_then(|r| r.get(&self.table))
                .into_iter()
                .flatten()
            {
                stops.push(stop_of(item)?);
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
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await
                    .map_err(|e| unavailable("Query(sweep)", e))?;
                spent("Query(sweep)", out.consumed_capacity());
                for item in out.items() {
                    let (tenant, action_id) = parse_action_pk(get_s(item, "pk")?)
                        .ok_or_else(|| malformed("sweep entry with a bad pk"))?;
                    let sweep_at = get_s(item, "sweep_at")?.parse().map_err(malformed)?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts_cannot_forge_separators() {
        assert_ne!(idempotency_pk("t", "a#b"), idempotency_pk("t", "a") + "#b");
        assert_eq!(
            parse_action_pk(&action_pk("acme", "act_#1%")),
            Some(("acme".into(), "act_#1%".into()))
        );
        assert!(event_sk(2) < event_sk(10));
    }

    #[test]
    fn shards_are_stable() {
        assert_eq!(sweep_shard("act_01"), sweep_shard("act_01"));
        assert!(sweep_shard("act_01ARZ3NDEKTSV4RRFFQ69G5FAV") < SWEEP_SHARDS);
    }

    #[test]
    fn ttl_rounds_up() {
        let t: Timestamp = "2026-01-01T00:00:00.5Z".parse().unwrap();
        assert_eq!(
            epoch_seconds(t),
            AttributeValue::N((t.as_second() + 1).to_string())
        );
    }
}
