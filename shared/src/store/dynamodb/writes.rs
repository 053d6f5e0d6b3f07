//! Writes. A transition is ONE `UpdateItem` of the action's state item, conditional on
//! (state, version) and on the event list's length, that appends its audit event to that list:
//! the change and its record land together or not at all. Conditions are [`Condition`] values,
//! rendered here; a failed condition is the typed `Conflict`, anything else `Unavailable`.

use super::item::{call_item, event_value, n, s, state_attributes, state_item, state_value, Item};
use super::keys::{call_sk, epoch_seconds, nanos, state_sk, tenant_pk};
use super::meter::{malformed, meter, unavailable, Units, CAPACITY};
use super::records::{quarantine_item, QUARANTINED};
use super::DynamoStore;
use crate::domain::{Action, Creation, State, Transition};
use crate::store::{IdempotencyRecord, StoreError, StoreResult, Unreadable};
use aws_sdk_dynamodb::{
    error::{DisplayErrorContext, ProvideErrorMetadata, SdkError},
    operation::{
        transact_write_items::TransactWriteItemsError,
        update_item::builders::UpdateItemFluentBuilder,
    },
    types::{AttributeValue, Put, ReturnValue, TransactWriteItem},
};
use jiff::Timestamp;

/// Re-sends of a transaction that DynamoDB cancelled for a concurrent transaction on the same
/// item (`TransactionConflict`): the conditions make a re-send safe.
const TRANSACTION_CONFLICT_RETRIES: u32 = 4;

/// What must hold for a write to land.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Condition {
    /// The item does not exist yet.
    Absent,
    /// The item does not exist, or holds exactly this call (a re-sent submission).
    AbsentOrSameCall(AttributeValue),
    /// The action is still at (state, version), holds `version` events, and none numbered
    /// `seq` or later: the linearization point of every transition (an event that would
    /// repeat a number is a conflict too).
    At {
        state: State,
        version: u64,
        seq: u64,
    },
    /// No idempotency record, or only one that lapsed by `now` (TTL deletes lazily).
    AbsentOrLapsed { now: Timestamp },
}

/// A condition as the request carries it.
pub(super) struct Rendered {
    pub expression: &'static str,
    pub names: Vec<(&'static str, &'static str)>,
    pub values: Vec<(&'static str, AttributeValue)>,
}

impl Condition {
    pub(super) fn render(self) -> Rendered {
        let (expression, names, values) = match self {
            Condition::Absent => ("attribute_not_exists(pk)", vec![], vec![]),
            Condition::AbsentOrSameCall(call) => (
                "attribute_not_exists(pk) OR #c = :call",
                vec![("#c", "c")],
                vec![(":call", call)],
            ),
            Condition::At {
                state,
                version,
                seq,
            } => (
                "#s = :expected_state AND #v = :expected_version \
                 AND size(#e) = :expected_version AND size(#e) < :seq",
                vec![("#s", "s"), ("#v", "v"), ("#e", "e")],
                vec![
                    (":expected_state", state_value(state)),
                    (":expected_version", n(version)),
                    (":seq", n(seq)),
                ],
            ),
            Condition::AbsentOrLapsed { now } => (
                "attribute_not_exists(pk) OR #x <= :now",
                vec![("#x", "x")],
                vec![(":now", nanos(now))],
            ),
        };
        Rendered {
            expression,
            names,
            values,
        }
    }
}

/// A lost condition is `Conflict`; anything else is `Unavailable`.
pub(super) fn write_error<E, R>(op: &'static str, e: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if e.as_service_error().and_then(|s| s.code()) == Some("ConditionalCheckFailedException") {
        tracing::debug!(op, "conditional write lost");
        return StoreError::Conflict;
    }
    unavailable(op, e)
}

impl DynamoStore {
    /// An `UpdateItem` of one of a tenant's items (an action's state or call item), metered.
    pub(super) fn update(&self, tenant: &str, sk: String) -> UpdateItemFluentBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(tenant_pk(tenant)))
            .key("sk", s(sk))
            .return_consumed_capacity(CAPACITY)
    }

    /// Sealed actions expire this long after sealing, under a retention.
    fn expiry_of(&self, a: &Action) -> Option<Timestamp> {
        let (retention, sealed_at) = (self.retention?, a.sealed_at()?);
        sealed_at.checked_add(retention).ok()
    }

    /// Without an `Idempotency-Key` the call item first (plain put; a re-sent one of the same
    /// call is accepted), then the state item with the first event — the commit. The id is
    /// fresh, so nobody races these writes; a call item whose state item never commits (a crash
    /// between the two puts) is never read as an action (reads need both), and lists count it.
    /// With a key, concurrent submits race for it: the call item, the state item and the
    /// idempotency record go in one transaction, so only the winner's call item is ever written
    /// (a loser's stayed behind for good before: issue 14, defect 6).
    pub(super) async fn create_action(
        &self,
        t: &Creation,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        let a = &t.action;
        let call = call_item(a);
        let same = Condition::AbsentOrSameCall(call["c"].clone());
        let mut state = state_item(a, &t.event, self.expiry_of(a));
        // The notice of the first event lands in the same write (SC-NOT-01).
        state.extend(
            super::outbox::first(t)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v)),
        );
        match idem {
            None => {
                self.put_item("PutItem(call)", call, same).await?;
                self.put_item("PutItem(state)", state, Condition::Absent)
                    .await
            }
            Some(r) => {
                // A lapsed record of the same key may linger until TTL removes it: replace only that.
                let now = a.created_at();
                let items = vec![
                    self.put(call, same)?,
                    self.put(state, Condition::Absent)?,
                    self.put(Item::from(r), Condition::AbsentOrLapsed { now })?,
                ];
                self.transact("TransactWriteItems(create)", items).await
            }
        }
    }

    /// One `UpdateItem` of the state item: the new state, version and terms, the event
    /// appended, conditional on the expected (state, version).
    pub(super) async fn commit_transition(&self, t: &Transition) -> StoreResult<()> {
        let (state, version) = t.expected;
        let a = &t.action;
        let expires = self.expiry_of(a);
        let attributes = state_attributes(a, &t.event, expires);
        let first_seq = t.events().next().map_or(t.event.seq, |e| e.seq);
        let condition = Condition::At {
            state,
            version,
            seq: first_seq,
        }
        .render();
        let call_digest = attributes
            .set
            .iter()
            .find(|(name, _)| *name == "cd")
            .map(|(_, v)| v.clone());
        let mut sets = Vec::new();
        let mut req = self
            .update(a.tenant(), state_sk(a.id()))
            .condition_expression(condition.expression);
        for (name, attribute) in condition.names {
            req = req.expression_attribute_names(name, attribute);
        }
        for (name, value) in condition.values {
            req = req.expression_attribute_values(name, value);
        }
        for (i, (name, value)) in attributes.set.into_iter().enumerate() {
            sets.push(format!("#a{i} = :a{i}"));
            req = req
                .expression_attribute_names(format!("#a{i}"), name)
                .expression_attribute_values(format!(":a{i}"), value);
        }
        sets.push("#e = list_append(#e, :event)".into());
        req = req.expression_attribute_values(
            ":event",
            AttributeValue::L(
                t.events()
                    .zip(version + 1..)
                    .map(|(e, at)| event_value(e, at))
                    .collect(),
            ),
        );
        // The notice this transition raises lands in the same write (SC-NOT-01).
        if let Some(notice) = super::outbox::append(t) {
            sets.push(notice.clause.into());
            for (name, attribute) in notice.names {
                req = req.expression_attribute_names(name, attribute);
            }
            for (name, value) in notice.values {
                req = req.expression_attribute_values(name, value);
            }
        }
        let mut expression = format!("SET {}", sets.join(", "));
        if !attributes.remove.is_empty() {
            let removes: Vec<String> = (0..attributes.remove.len())
                .map(|i| format!("#r{i}"))
                .collect();
            expression += &format!(" REMOVE {}", removes.join(", "));
            for (i, name) in attributes.remove.into_iter().enumerate() {
                req = req.expression_attribute_names(format!("#r{i}"), name);
            }
        }
        let out = req
            .update_expression(expression)
            .return_values(ReturnValue::UpdatedOld)
            .send()
            .await
            .map_err(|e| write_error("UpdateItem(commit)", e))?;
        meter("UpdateItem(commit)", Units::Write, out.consumed_capacity());
        if out.attributes().and_then(|old| old.get("cd")) != call_digest.as_ref() {
            // No transition changes the call; a record that did is stored as given.
            tracing::warn!(tenant = %a.tenant(), action_id = %a.id(), "a commit changed the call: rewriting the call item");
            self.put_call(a).await?;
        }
        if let Some(expires) = expires {
            self.expire_call(a, expires).await;
        }
        Ok(())
    }

    /// `at` := the exact `sweep_at` of an action the sweep met too early (see `sweep_entry`),
    /// conditional on its (state, version) and on its being in the index. A lost condition
    /// means a transition moved it, which set its entry anew: nothing to do.
    pub(super) async fn defer(&self, a: &Action) -> StoreResult<()> {
        let Some(at) = a.sweep_at() else {
            return Ok(());
        };
        let condition = Condition::At {
            state: a.state(),
            version: a.version(),
            seq: a.version() + 1,
        }
        .render();
        let mut req = self
            .update(a.tenant(), state_sk(a.id()))
            .update_expression("SET #at = :at")
            .condition_expression(format!(
                "{} AND attribute_exists(#at)",
                condition.expression
            ))
            .expression_attribute_names("#at", "at")
            .expression_attribute_values(":at", nanos(at));
        for (name, attribute) in condition.names {
            req = req.expression_attribute_names(name, attribute);
        }
        for (name, value) in condition.values {
            req = req.expression_attribute_values(name, value);
        }
        match req.send().await {
            Ok(out) => {
                meter(
                    "UpdateItem(defer sweep)",
                    Units::Write,
                    out.consumed_capacity(),
                );
                Ok(())
            }
            Err(e) => match write_error("UpdateItem(defer sweep)", e) {
                StoreError::Conflict => Ok(()),
                other => Err(other),
            },
        }
    }

    /// SC-EDGE-08: the quarantine record, then the action out of lists and the sweep (its
    /// state item marked, its sweep entry removed). Each step is idempotent; a failure in
    /// between is completed by the next read that meets the record.
    pub(super) async fn quarantine_action(
        &self,
        bad: &Unreadable,
        at: Timestamp,
    ) -> StoreResult<()> {
        let out = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(quarantine_item(bad, at)))
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("PutItem(quarantine)", e))?;
        meter("PutItem(quarantine)", Units::Write, out.consumed_capacity());
        let out = self
            .update(&bad.tenant, state_sk(&bad.action_id))
            .update_expression("SET #q = :at REMOVE #sp, #sa, #at, #wp")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#q", QUARANTINED)
            .expression_attribute_names("#sp", "sp")
            .expression_attribute_names("#sa", "sa")
            .expression_attribute_names("#at", "at")
            .expression_attribute_names("#wp", "wp")
            .expression_attribute_values(":at", nanos(at))
            .send()
            .await;
        match out {
            Ok(out) => meter(
                "UpdateItem(quarantine)",
                Units::Write,
                out.consumed_capacity(),
            ),
            Err(e) => match write_error("UpdateItem(quarantine)", e) {
                // No state item: nothing lists or sweeps it.
                StoreError::Conflict => {}
                other => return Err(other),
            },
        }
        Ok(())
    }

    async fn put_call(&self, a: &Action) -> StoreResult<()> {
        let out = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(call_item(a)))
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| write_error("PutItem(call rewrite)", e))?;
        meter(
            "PutItem(call rewrite)",
            Units::Write,
            out.consumed_capacity(),
        );
        Ok(())
    }

    async fn put_item(
        &self,
        op: &'static str,
        item: Item,
        condition: Condition,
    ) -> StoreResult<()> {
        let c = condition.render();
        let mut req = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(c.expression)
            .return_consumed_capacity(CAPACITY);
        for (name, attribute) in c.names {
            req = req.expression_attribute_names(name, attribute);
        }
        for (name, value) in c.values {
            req = req.expression_attribute_values(name, value);
        }
        let out = req.send().await.map_err(|e| write_error(op, e))?;
        meter(op, Units::Write, out.consumed_capacity());
        Ok(())
    }

    fn put(&self, item: Item, condition: Condition) -> StoreResult<TransactWriteItem> {
        let c = condition.render();
        let mut put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(c.expression);
        for (name, attribute) in c.names {
            put = put.expression_attribute_names(name, attribute);
        }
        for (name, value) in c.values {
            put = put.expression_attribute_values(name, value);
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
                .return_consumed_capacity(CAPACITY)
                .send()
                .await;
            let e = match sent {
                Ok(out) => {
                    meter(op, Units::Write, out.consumed_capacity());
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

    /// Best effort after a sealing commit under a retention: the call item expires with the
    /// state item (which the commit already gave its `ttl`). A failure leaves a call item
    /// that no read returns once its state item is gone; it is logged.
    async fn expire_call(&self, a: &Action, expires: Timestamp) {
        let updated = self
            .update(a.tenant(), call_sk(a.id()))
            .update_expression("SET #ttl = :ttl")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":ttl", epoch_seconds(expires))
            .send()
            .await;
        match updated {
            Ok(out) => meter(
                "UpdateItem(call expiry)",
                Units::Write,
                out.consumed_capacity(),
            ),
            Err(e) => {
                tracing::warn!(tenant = %a.tenant(), action_id = %a.id(), error = %DisplayErrorContext(e), "could not set the retention of a call item");
            }
        }
    }
}
