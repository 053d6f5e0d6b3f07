//! DynamoDB adapter: one table (`infra/table.json`), tenant in every key. An action is a call
//! item written once and a small state item; a transition is one conditional `UpdateItem` of
//! the state item on (state, version) that appends its audit event inside it, so the change and
//! its record land together. A failed condition is the typed [`StoreError::Conflict`];
//! everything else is `Unavailable`. The design and the capacity of every request are in
//! `docs/dynamodb.md`.
//!
//! - `keys`: partition and sort keys, tenant first;
//! - `item`: records ⇄ item maps;
//! - `writes`: conditions as values, the commits;
//! - `meter`: consumed capacity (one place) and error mapping;
//! - `outbox`: the notification outbox, attributes of the state item;
//! - `query`: paged reads;
//! - `waiting`: the pending list, through the sparse `waiting` index;
//! - `grants`: the scoped grants, one item each;
//! - here: the action store and the stops, and their reads.

mod asked;
mod grants;
mod item;
mod keys;
mod meter;
mod outbox;
mod query;
mod records;
mod waiting;
mod writes;

use super::{
    Actions, IdempotencyRecord, ListPage, ListQuery, Quarantined, Stop, Stops, Store, StoreResult,
    SweepRef, Unreadable,
};
use crate::domain::{Action, Creation, Event, State, Transition};
use async_trait::async_trait;
use aws_sdk_dynamodb::{
    types::{AttributeValue, KeysAndAttributes, ReturnValue},
    Client,
};
use item::{action_of, events_of, get_s, s, Item};
use jiff::{SignedDuration, Timestamp};
use keys::{
    call_sk, idempotency_pk, idempotency_sk, nanos, parse_action_sk, parse_state_keys,
    quarantine_pk, state_sk, stop_sk, stops_pk, sweep_pk, tenant_pk, ACTIONS_FROM, SWEEP_SHARDS,
};
use meter::{malformed, meter, unavailable, Units, CAPACITY};
use records::{idempotency_of, unreadable, QUARANTINED};

#[derive(Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    /// Sealed actions expire this long after sealing; `None` keeps them.
    retention: Option<SignedDuration>,
    /// The grants intake matched, as they loaded (`grants_for`).
    grant_memo: std::sync::Arc<super::GrantMemo>,
}

impl DynamoStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoStore {
            client,
            table: table.into(),
            retention: None,
            grant_memo: Default::default(),
        }
    }

    /// The table as it is, for `verify`: a table that does not exist is
    /// [`StoreError::Absent`](super::StoreError::Absent), not a scan that fails.
    pub async fn existing(client: Client, table: impl Into<String>) -> StoreResult<Self> {
        let table = table.into();
        let described = client.describe_table().table_name(&table).send().await;
        match described {
            Ok(_) => Ok(Self::new(client, table)),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                Err(super::StoreError::Absent(format!("no table {table}")))
            }
            Err(e) => Err(unavailable("DescribeTable", e)),
        }
    }

    /// Expire sealed actions via the table's TTL attribute `ttl`.
    pub fn with_retention(mut self, retention: Option<SignedDuration>) -> Self {
        self.retention = retention;
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// An action's call and state items: one consistent Query returns both (1 RRU while they
    /// total ≤ 4 KB). `None`: never committed (or not there at all).
    async fn action_items(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Option<(Item, Item)>> {
        let (call_key, state_key) = (call_sk(action_id), state_sk(action_id));
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :call AND :state")
            .expression_attribute_values(":pk", s(tenant_pk(tenant)))
            .expression_attribute_values(":call", s(&call_key))
            .expression_attribute_values(":state", s(&state_key))
            .consistent_read(true)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("Query(action)", e))?;
        meter("Query(action)", Units::Read, out.consumed_capacity());
        let find = |key: &str| {
            out.items()
                .iter()
                .find(|i| matches!(i.get("sk"), Some(AttributeValue::S(k)) if k == key))
                .cloned()
        };
        match (find(&call_key), find(&state_key)) {
            (Some(call), Some(state)) => Ok(Some((call, state))),
            (None, Some(_)) => Err(malformed("state item without its call item")),
            (_, None) => Ok(None),
        }
    }
}

/// Pairs an action's two items as a descending read meets them (state item, then its call
/// item). A call item without a state item (a submission that never committed) and a
/// quarantined action are out of lists, but were read: they count against the read's bound
/// like a record, so no number of them makes one list read more (SC-SEC-05). Anything that
/// does not load is reported, never fatal (SC-EDGE-08).
#[derive(Default)]
struct Pairing {
    state: Option<(String, Item)>,
}

/// What one item completed.
enum Paired {
    /// An action, or one that does not load (boxed: the other variant is small).
    Record(Box<Result<Action, Unreadable>>),
    /// Items of this id that are no action to list, read all the same.
    Skipped(String),
}

impl Paired {
    /// Put what was read into `page`; the id read (where the next page continues).
    fn into_page(self, page: &mut ListPage) -> String {
        match self {
            Paired::Record(record) => match *record {
                Ok(action) => {
                    let id = action.id().to_owned();
                    page.actions.push(action);
                    id
                }
                Err(bad) => {
                    let id = bad.action_id.clone();
                    page.unreadable.push(bad);
                    id
                }
            },
            Paired::Skipped(id) => id,
        }
    }
}

impl Pairing {
    fn feed(&mut self, tenant: &str, item: &Item) -> Option<Paired> {
        let bad = |id: &str, why: &str| {
            let e = unreadable(tenant, id, malformed(why));
            Some(Paired::Record(Box::new(Err(e))))
        };
        let sk = get_s(item, "sk").unwrap_or_default();
        let Some((id, is_state)) = parse_action_sk(sk) else {
            return bad(sk, "an item with a foreign key among the actions");
        };
        if is_state {
            let orphan = self.state.replace((id, item.clone()));
            return orphan.and_then(|(orphan, _)| bad(&orphan, "state item without its call"));
        }
        match self.state.take() {
            Some((_, state)) if state.contains_key(QUARANTINED) => Some(Paired::Skipped(id)),
            Some((state_id, state)) if state_id == id => {
                let action = action_of(tenant, &id, item, &state);
                let record = action.map_err(|e| unreadable(tenant, &id, e));
                Some(Paired::Record(Box::new(record)))
            }
            Some((state_id, _)) => bad(&state_id, "state item without its call"),
            None => Some(Paired::Skipped(id)),
        }
    }
}

#[async_trait]
impl Actions for DynamoStore {
    async fn create(&self, t: &Creation, idem: Option<&IdempotencyRecord>) -> StoreResult<()> {
        self.create_action(t, idem).await
    }

    async fn commit(&self, t: &Transition) -> StoreResult<()> {
        self.commit_transition(t).await
    }

    async fn load(&self, tenant: &str, action_id: &str) -> StoreResult<Option<Action>> {
        self.action_items(tenant, action_id)
            .await?
            .map(|(call, state)| action_of(tenant, action_id, &call, &state))
            .transpose()
    }

    /// The events live in the state item: one consistent GetItem.
    async fn events(&self, tenant: &str, action_id: &str) -> StoreResult<Vec<Event>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(state_sk(action_id)))
            .projection_expression("#e")
            .expression_attribute_names("#e", "e")
            .consistent_read(true)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("GetItem(events)", e))?;
        meter("GetItem(events)", Units::Read, out.consumed_capacity());
        out.item().map_or(Ok(Vec::new()), events_of)
    }

    /// Newest first from the tenant's partition (eventually consistent, half the price: an
    /// action committed a moment ago may show a moment later): at most `limit` records, two
    /// items each (or one skipped call item), pages read until the limit is filled or the
    /// history ends.
    async fn list(&self, tenant: &str, q: &ListQuery) -> StoreResult<ListPage> {
        if self.indexes(q.state, q.agent_id.as_deref()) {
            return self.list_waiting(tenant, q).await;
        }
        let mut page = ListPage::default();
        let mut pairing = Pairing::default();
        let (mut read, mut last) = (0, None);
        // `BETWEEN` is inclusive: the cursor's own call item is skipped below; without a
        // cursor, `A$` sorts after every action item.
        let upper = q.before.as_deref().map_or_else(|| "A$".to_owned(), call_sk);
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :below")
            .expression_attribute_values(":pk", s(tenant_pk(tenant)))
            .expression_attribute_values(":from", s(ACTIONS_FROM))
            .expression_attribute_values(":below", s(&upper))
            .scan_index_forward(false)
            .limit((2 * q.limit + 1).min(1000) as i32);
        self.paged("Query(actions)", query, |items| {
            for item in items {
                if read == q.limit || get_s(item, "sk").ok() == Some(upper.as_str()) {
                    continue;
                }
                let Some(paired) = pairing.feed(tenant, item) else {
                    continue;
                };
                read += 1;
                last = Some(paired.into_page(&mut page));
            }
            Ok(read < q.limit)
        })
        .await?;
        if read == q.limit {
            page.next = last;
        }
        Ok(page)
    }

    /// Only the actions waiting for a person have an index (`waiting`); any other filter reads
    /// the tenant's history, bounded.
    fn indexes(&self, state: Option<State>, _agent_id: Option<&str>) -> bool {
        state == Some(State::PendingApproval)
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
        let record = idempotency_of(tenant, agent_id, key, item)?;
        // TTL deletes lazily (up to days later): a lapsed record is ignored here.
        Ok((record.expires_at > now).then_some(record))
    }

    async fn defer_sweep(&self, action: &Action) -> StoreResult<()> {
        self.defer(action).await
    }

    async fn quarantine(&self, bad: &Unreadable, at: Timestamp) -> StoreResult<()> {
        self.quarantine_action(bad, at).await
    }

    async fn quarantined(&self, tenant: &str) -> StoreResult<Vec<Quarantined>> {
        let mut found = Vec::new();
        let query = self
            .query()
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(quarantine_pk(tenant)));
        self.paged("Query(quarantine)", query, |items| {
            for item in items {
                found.push(Quarantined::try_from(item)?);
            }
            Ok(true)
        })
        .await?;
        found.sort_by(|a, b| {
            (a.quarantined_at, &a.action_id).cmp(&(b.quarantined_at, &b.action_id))
        });
        Ok(found)
    }

    /// Every shard of the sparse `sweep` index, merged earliest first. The key range reads
    /// entries whose lower bound has come; the filter keeps those whose instant has.
    async fn sweep_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<SweepRef>> {
        let mut due = Vec::new();
        for shard in 0..SWEEP_SHARDS {
            let mut from_shard = 0;
            let query = self
                .query()
                .index_name("sweep")
                .key_condition_expression("sp = :shard AND sa <= :until")
                .filter_expression("#at <= :until")
                .expression_attribute_names("#at", "at")
                .expression_attribute_values(":shard", s(sweep_pk(shard)))
                .expression_attribute_values(":until", nanos(until))
                .limit(limit.clamp(1, 1000) as i32);
            self.paged("Query(sweep)", query, |items| {
                for item in items {
                    // One bad entry must not stop the sweep (SC-EDGE-08): a bad key names
                    // nothing to load; a bad instant is due now, and its load quarantines it.
                    let keys = get_s(item, "pk").and_then(|pk| Ok((pk, get_s(item, "sk")?)));
                    let Some((tenant, action_id)) =
                        keys.ok().and_then(|(pk, sk)| parse_state_keys(pk, sk))
                    else {
                        tracing::error!(item = ?item.get("sk"), "sweep entry with a bad key; skipped");
                        continue;
                    };
                    let sweep_at = match item.get("at") {
                        Some(AttributeValue::N(ns)) => ns
                            .parse::<i128>()
                            .ok()
                            .and_then(|ns| Timestamp::from_nanosecond(ns).ok()),
                        _ => None,
                    }
                    .unwrap_or(until);
                    due.push(SweepRef {
                        tenant,
                        action_id,
                        sweep_at,
                    });
                    from_shard += 1;
                }
                Ok(from_shard < limit)
            })
            .await?;
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

#[async_trait]
impl Stops for DynamoStore {
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
        let mut stops = self
            .batch_get("BatchGetItem(stops)", keys)
            .await?
            .iter()
            .map(Stop::try_from)
            .collect::<StoreResult<Vec<_>>>()?;
        stops.sort_by(|a, b| a.scope().cmp(b.scope()));
        Ok(stops)
    }
}

impl Store for DynamoStore {}
