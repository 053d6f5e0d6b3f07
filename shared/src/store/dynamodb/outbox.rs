//! The notification outbox on DynamoDB (SC-NOT-01): attributes of the action's state item,
//! written by the transition's own request (the first state item's put, or the commit's
//! `UpdateItem`), so a notice lands with its transition or not at all — no second item, no
//! transaction.
//!
//! | attribute | value |
//! |---|---|
//! | `nq` | L of S: the pending notices, each an `OutboxEntry` as JSON |
//! | `nr` | N: the outbox's revision, bumped by every change of `nq` (never removed: the settle's condition) |
//! | `np` | S: `N#<shard>` while a notice is live; `D#<tenant>` once only dead letters remain; absent when `nq` is empty |
//! | `na` | N: the earliest next try (live), or the earliest `dead_at` (dead), nanoseconds |
//!
//! | `cn_<channel>` | S: what a channel keeps about the action between notices (SC-CH-03), e.g. `cn_slack`: the Slack message's channel and ts |
//!
//! `np`/`na` key the sparse `notify` index (projecting `nq`), read by the delivery worker per
//! shard and by the dead-letter list per tenant. A channel's note rides on the state item too,
//! so it expires with the action under a retention.

use super::item::{action_of, events_of, get_s, s, Item};
use super::keys::{nanos, parse_state_keys, state_sk, sweep_shard, tenant_pk, SWEEP_SHARDS};
use super::meter::{malformed, meter, unavailable, Units, CAPACITY};
use super::DynamoStore;
use crate::domain::{notice::OutboxEntry, Action, Change, Event};
use crate::store::{Outbox, StoreError, StoreResult};
use async_trait::async_trait;
use aws_sdk_dynamodb::{error::ProvideErrorMetadata, types::AttributeValue};
use jiff::Timestamp;

pub(super) const INDEX: &str = "notify";

/// Re-reads when another entry of the same action changed between our read and write.
const OTHER_ENTRY_RETRIES: usize = 5;

enum Retry {
    /// The outbox's revision moved: read again.
    Revision,
    Store(StoreError),
}

impl From<StoreError> for Retry {
    fn from(e: StoreError) -> Self {
        Retry::Store(e)
    }
}

fn live_pk(action_id: &str) -> String {
    format!("N#{}", sweep_shard(action_id))
}

fn dead_pk(tenant: &str) -> String {
    // The tenant partition key is escaped already; reuse it so no tenant forges another's.
    format!("D#{}", tenant_pk(tenant))
}

fn entry_value(entry: &OutboxEntry) -> AttributeValue {
    s(serde_json::to_string(entry).expect("an outbox entry serializes"))
}

/// The outbox attributes of a new state item whose first event notifies.
pub(super) fn first(t: &Change) -> Vec<(&'static str, AttributeValue)> {
    let Some(entry) = t.outbox_entry() else {
        return Vec::new();
    };
    let a = &t.action;
    vec![
        ("nq", AttributeValue::L(vec![entry_value(&entry)])),
        ("nr", AttributeValue::N("1".into())),
        ("np", s(live_pk(a.id()))),
        ("na", nanos(entry.next_at)),
    ]
}

/// The clause a notifying commit adds to its `UpdateItem`: append the notice, bump the
/// revision, and put the item in the live partition, due now (any older live notice is due by
/// then too).
pub(super) struct Append {
    pub clause: &'static str,
    pub names: [(&'static str, &'static str); 4],
    pub values: Vec<(&'static str, AttributeValue)>,
}

pub(super) fn append(t: &Change) -> Option<Append> {
    let entry = t.outbox_entry()?;
    let a = &t.action;
    Some(Append {
        clause: "#nq = list_append(if_not_exists(#nq, :nq_none), :nq_new), #nr = if_not_exists(#nr, :nr_zero) + :nr_one, #np = :np, #na = :na",
        names: [("#nq", "nq"), ("#nr", "nr"), ("#np", "np"), ("#na", "na")],
        values: vec![
            (":nq_none", AttributeValue::L(vec![])),
            (":nq_new", AttributeValue::L(vec![entry_value(&entry)])),
            (":nr_zero", AttributeValue::N("0".into())),
            (":nr_one", AttributeValue::N("1".into())),
            (":np", s(live_pk(a.id()))),
            (":na", nanos(entry.next_at)),
        ],
    })
}

fn entries_of(item: &Item) -> StoreResult<Vec<OutboxEntry>> {
    match item.get("nq") {
        None => Ok(Vec::new()),
        Some(AttributeValue::L(list)) => {
            list.iter()
                .map(|v| match v {
                    AttributeValue::S(json) => serde_json::from_str(json)
                        .map_err(|e| malformed(format!("outbox entry: {e}"))),
                    _ => Err(malformed("outbox entry is not a string")),
                })
                .collect()
        }
        Some(_) => Err(malformed("nq is not a list")),
    }
}

fn revision_of(item: &Item) -> StoreResult<u64> {
    match item.get("nr") {
        Some(AttributeValue::N(n)) => n.parse().map_err(|_| malformed("nr is not a number")),
        _ => Err(malformed("an outbox without a revision")),
    }
}

/// Where an item with these notices sits in the index: (`np`, `na`), or out of it.
fn index_keys(
    tenant: &str,
    action_id: &str,
    entries: &[OutboxEntry],
) -> Option<(String, Timestamp)> {
    let live = entries
        .iter()
        .filter(|e| e.dead_at.is_none())
        .map(|e| e.next_at)
        .min();
    match live {
        Some(at) => Some((live_pk(action_id), at)),
        None => entries
            .iter()
            .filter_map(|e| e.dead_at)
            .min()
            .map(|at| (dead_pk(tenant), at)),
    }
}

impl DynamoStore {
    /// One page-walk of the `notify` index under partition `pk` with `na ≤ until`.
    async fn notify_query(
        &self,
        pk: String,
        until: Option<Timestamp>,
        limit: usize,
    ) -> StoreResult<Vec<OutboxEntry>> {
        let mut found = Vec::new();
        let query = self
            .query()
            .index_name(INDEX)
            .expression_attribute_values(":p", s(&pk))
            .limit(limit.clamp(1, 100) as i32);
        let query = match until {
            Some(until) => query
                .key_condition_expression("np = :p AND na <= :until")
                .expression_attribute_values(":until", nanos(until)),
            None => query.key_condition_expression("np = :p"),
        };
        self.paged("Query(notify)", query, |items| {
            for item in items {
                let (tenant, action_id) = parse_state_keys(get_s(item, "pk")?, get_s(item, "sk")?)
                    .ok_or_else(|| malformed("notify entry with bad keys"))?;
                for entry in entries_of(item)? {
                    if entry.tenant != tenant || entry.action_id != action_id {
                        return Err(malformed("outbox entry of another action"));
                    }
                    found.push(entry);
                }
            }
            Ok(found.len() < limit)
        })
        .await?;
        Ok(found)
    }

    /// The outbox of one action: its notices and revision (consistent read of the state item).
    async fn outbox_of(
        &self,
        tenant: &str,
        action_id: &str,
    ) -> StoreResult<Option<(Vec<OutboxEntry>, u64)>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(state_sk(action_id)))
            .projection_expression("nq, nr")
            .consistent_read(true)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("GetItem(outbox)", e))?;
        meter("GetItem(outbox)", Units::Read, out.consumed_capacity());
        match out.item() {
            Some(item) if item.contains_key("nr") => {
                Ok(Some((entries_of(item)?, revision_of(item)?)))
            }
            _ => Ok(None),
        }
    }

    async fn outbox_replace_once(
        &self,
        was: &OutboxEntry,
        next: Option<&OutboxEntry>,
    ) -> Result<(), Retry> {
        let (tenant, action_id) = (&was.tenant, &was.action_id);
        let (mut entries, revision) = self
            .outbox_of(tenant, action_id)
            .await?
            .ok_or(StoreError::Conflict)?;
        let at = entries
            .iter()
            .position(|e| e.seq == was.seq && e.rev == was.rev)
            .ok_or(StoreError::Conflict)?;
        match next {
            Some(n) => entries[at] = n.clone(),
            None => {
                entries.remove(at);
            }
        }
        let mut req = self
            .update(tenant, state_sk(action_id))
            .condition_expression("#nr = :was")
            .expression_attribute_names("#nr", "nr")
            .expression_attribute_values(":was", AttributeValue::N(revision.to_string()))
            .expression_attribute_values(":next", AttributeValue::N((revision + 1).to_string()));
        req = match index_keys(tenant, action_id, &entries) {
            Some((np, na)) => req
                .update_expression("SET #nr = :next, #nq = :nq, #np = :np, #na = :na")
                .expression_attribute_names("#nq", "nq")
                .expression_attribute_names("#np", "np")
                .expression_attribute_names("#na", "na")
                .expression_attribute_values(
                    ":nq",
                    AttributeValue::L(entries.iter().map(entry_value).collect()),
                )
                .expression_attribute_values(":np", s(np))
                .expression_attribute_values(":na", nanos(na)),
            None => req
                .update_expression("SET #nr = :next REMOVE #nq, #np, #na")
                .expression_attribute_names("#nq", "nq")
                .expression_attribute_names("#np", "np")
                .expression_attribute_names("#na", "na"),
        };
        match req.send().await {
            Ok(out) => {
                meter("UpdateItem(outbox)", Units::Write, out.consumed_capacity());
                Ok(())
            }
            Err(e)
                if e.as_service_error().and_then(|s| s.code())
                    == Some("ConditionalCheckFailedException") =>
            {
                Err(Retry::Revision)
            }
            Err(e) => Err(Retry::Store(unavailable("UpdateItem(outbox)", e))),
        }
    }
}

#[async_trait]
impl Outbox for DynamoStore {
    async fn outbox_due(&self, until: Timestamp, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        let mut due = Vec::new();
        for shard in 0..SWEEP_SHARDS {
            due.extend(
                self.notify_query(format!("N#{shard}"), Some(until), limit)
                    .await?
                    .into_iter()
                    .filter(|e| e.dead_at.is_none() && e.next_at <= until),
            );
        }
        due.sort_by(|a, b| a.next_at.cmp(&b.next_at).then_with(|| a.id().cmp(&b.id())));
        due.truncate(limit);
        Ok(due)
    }

    /// A tenant's dead letters: the items whose notices are all dead. (A dead letter beside a
    /// live notice of the same action is listed once that one is delivered or dies too.)
    async fn outbox_dead(&self, tenant: &str, limit: usize) -> StoreResult<Vec<OutboxEntry>> {
        let mut dead: Vec<OutboxEntry> = self
            .notify_query(dead_pk(tenant), None, limit)
            .await?
            .into_iter()
            .filter(|e| e.dead_at.is_some())
            .collect();
        dead.sort_by_key(|e| e.dead_at);
        dead.truncate(limit);
        Ok(dead)
    }

    async fn outbox_entry(
        &self,
        tenant: &str,
        action_id: &str,
        seq: u64,
    ) -> StoreResult<Option<OutboxEntry>> {
        Ok(self
            .outbox_of(tenant, action_id)
            .await?
            .and_then(|(entries, _)| entries.into_iter().find(|e| e.seq == seq)))
    }

    /// Replace (or drop) one entry iff it is still at `was.rev`. The write is conditional on
    /// the whole outbox's revision, so a change of another entry of the same action meanwhile
    /// (a transition appending, a settle of its other notice) is read again and retried; a
    /// change of this entry is the `Conflict`.
    async fn outbox_settle(
        &self,
        was: &OutboxEntry,
        next: Option<&OutboxEntry>,
    ) -> StoreResult<()> {
        for _ in 0..OTHER_ENTRY_RETRIES {
            match self.outbox_replace_once(was, next).await {
                Err(Retry::Revision) => continue,
                Err(Retry::Store(e)) => return Err(e),
                Ok(()) => return Ok(()),
            }
        }
        Err(StoreError::Unavailable(
            "the outbox kept changing; the next pass retries".into(),
        ))
    }

    /// The action's two items in one consistent Query: its events are in its state item.
    async fn outbox_subject(&self, entry: &OutboxEntry) -> StoreResult<Option<(Action, Event)>> {
        let (tenant, action_id) = (&entry.tenant, &entry.action_id);
        let Some((call, state)) = self.action_items(tenant, action_id).await? else {
            return Ok(None);
        };
        let action = action_of(tenant, action_id, &call, &state)?;
        let event = events_of(&state)?.into_iter().find(|e| e.seq == entry.seq);
        Ok(event.map(|e| (action, e)))
    }

    async fn channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
    ) -> StoreResult<Option<String>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(state_sk(action_id)))
            .projection_expression("#cn")
            .expression_attribute_names("#cn", note_attribute(channel))
            .consistent_read(true)
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("GetItem(note)", e))?;
        meter("GetItem(note)", Units::Read, out.consumed_capacity());
        match out
            .item()
            .and_then(|item| item.get(&note_attribute(channel)))
        {
            Some(AttributeValue::S(note)) => Ok(Some(note.clone())),
            Some(_) => Err(malformed("a channel note is not a string")),
            None => Ok(None),
        }
    }

    /// An unconditional `SET` on the state item — but only on one that exists, so a note never
    /// makes a stub item of an action that is gone. The version is untouched: a transition's
    /// conditional write does not see it.
    async fn keep_channel_note(
        &self,
        tenant: &str,
        action_id: &str,
        channel: &str,
        note: &str,
    ) -> StoreResult<()> {
        let sent = self
            .update(tenant, state_sk(action_id))
            .update_expression("SET #cn = :note")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#cn", note_attribute(channel))
            .expression_attribute_values(":note", s(note))
            .send()
            .await;
        match sent {
            Ok(out) => {
                meter("UpdateItem(note)", Units::Write, out.consumed_capacity());
                Ok(())
            }
            Err(e)
                if e.as_service_error().and_then(|s| s.code())
                    == Some("ConditionalCheckFailedException") =>
            {
                Ok(())
            }
            Err(e) => Err(unavailable("UpdateItem(note)", e)),
        }
    }
}

fn note_attribute(channel: &str) -> String {
    format!("cn_{channel}")
}
