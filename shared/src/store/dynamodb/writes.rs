//! Writes: every condition is a [`Condition`] value, rendered to its expression here, and a
//! transaction's outcome is typed three ways (conditional failure → `Conflict`; a concurrent
//! transaction on the same item → bounded re-send; anything else → `Unavailable`).

use super::item::{action_item, event_item, n, s, Item};
use super::keys::{action_pk, epoch_seconds, event_sk, instant, quarantine_pk, ACTION_SK};
use super::meter::{malformed, meter, unavailable, Units, CAPACITY};
use super::DynamoStore;
use crate::domain::{Action, State, Transition};
use crate::store::{IdempotencyRecord, StoreError, StoreResult, Unreadable};
use aws_sdk_dynamodb::{
    error::DisplayErrorContext,
    operation::transact_write_items::TransactWriteItemsError,
    types::{AttributeValue, Put, TransactWriteItem},
};
use jiff::Timestamp;

/// Re-sends of a transaction that DynamoDB cancelled for a concurrent transaction on the same
/// item (`TransactionConflict`): the conditions make a re-send safe.
const TRANSACTION_CONFLICT_RETRIES: u32 = 4;

/// What must hold for a write to land.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Condition {
    /// The item does not exist yet.
    Absent,
    /// The action is still at this (state, version): the linearization point of a transition.
    At { state: State, version: u64 },
    /// No idempotency record, or only one that lapsed by `now` (TTL deletes lazily).
    AbsentOrLapsed { now: Timestamp },
}

/// A condition rendered for the request: expression, attribute names, attribute values.
pub(super) struct Rendered {
    pub expression: &'static str,
    pub names: Vec<(&'static str, &'static str)>,
    pub values: Vec<(&'static str, AttributeValue)>,
}

impl Condition {
    pub(super) fn render(self) -> Rendered {
        match self {
            Condition::Absent => Rendered {
                expression: "attribute_not_exists(pk)",
                names: vec![],
                values: vec![],
            },
            Condition::At { state, version } => Rendered {
                expression: "#state = :expected_state AND #version = :expected_version",
                names: vec![("#state", "state"), ("#version", "version")],
                values: vec![
                    (":expected_state", s(state.as_str())),
                    (":expected_version", n(version)),
                ],
            },
            Condition::AbsentOrLapsed { now } => Rendered {
                expression: "attribute_not_exists(pk) OR #expires <= :now",
                names: vec![("#expires", "expires")],
                values: vec![(":now", s(instant(now)))],
            },
        }
    }
}

impl DynamoStore {
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

    /// Sealed actions (and their events) expire this long after sealing, under a retention.
    pub(super) fn expiry_of(&self, a: &Action) -> Option<Timestamp> {
        let (retention, sealed_at) = (self.retention?, a.sealed_at?);
        sealed_at.checked_add(retention).ok()
    }

    pub(super) async fn create_action(
        &self,
        t: &Transition,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        let expires = self.expiry_of(&t.action);
        let mut items = vec![
            self.put(action_item(&t.action, expires), Condition::Absent)?,
            self.put(event_item(t, expires), Condition::Absent)?,
        ];
        if let Some(r) = idem {
            // A lapsed record of the same key may linger until TTL removes it: replace only that.
            let now = t.action.created_at;
            items.push(self.put(Item::from(r), Condition::AbsentOrLapsed { now })?);
        }
        self.transact("TransactWriteItems(create)", items).await
    }

    pub(super) async fn commit_transition(&self, t: &Transition) -> StoreResult<()> {
        let Some((state, version)) = t.expected else {
            return Err(StoreError::Malformed(
                "commit needs an expected state".into(),
            ));
        };
        let expires = self.expiry_of(&t.action);
        let items = vec![
            self.put(
                action_item(&t.action, expires),
                Condition::At { state, version },
            )?,
            self.put(event_item(t, expires), Condition::Absent)?,
        ];
        self.transact("TransactWriteItems(commit)", items).await?;
        if t.action.state.is_sealed() {
            self.expire_earlier_events(&t.action, t.event.seq).await;
        }
        Ok(())
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
                .return_consumed_capacity(CAPACITY)
                .send()
                .await;
            match updated {
                Ok(out) => meter(
                    "UpdateItem(event expiry)",
                    Units::Write,
                    out.consumed_capacity(),
                ),
                Err(e) => {
                    tracing::warn!(tenant = %a.tenant, action_id = %a.id, seq, error = %DisplayErrorContext(e), "could not set the retention of an event");
                }
            }
        }
    }

    /// SC-EDGE-08: the quarantine item, then the action item out of the `by_tenant` and `sweep`
    /// indexes (their key attributes removed). Each step is idempotent; a failure in between is
    /// completed by the next read that meets the record.
    pub(super) async fn quarantine_action(
        &self,
        bad: &Unreadable,
        at: Timestamp,
    ) -> StoreResult<()> {
        let out = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(quarantine_pk(&bad.tenant)))
            .item("sk", s(&bad.action_id))
            .item("reason", s(&bad.reason))
            .item("quarantined_at", s(instant(at)))
            .return_consumed_capacity(CAPACITY)
            .send()
            .await
            .map_err(|e| unavailable("PutItem(quarantine)", e))?;
        meter("PutItem(quarantine)", Units::Write, out.consumed_capacity());
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(action_pk(&bad.tenant, &bad.action_id)))
            .key("sk", s(ACTION_SK))
            .update_expression("REMOVE tenant_pk, sweep_pk, sweep_at")
            .condition_expression("attribute_exists(pk)")
            .return_consumed_capacity(CAPACITY)
            .send()
            .await;
        match out {
            Ok(out) => meter(
                "UpdateItem(quarantine)",
                Units::Write,
                out.consumed_capacity(),
            ),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
            Err(e) => return Err(unavailable("UpdateItem(quarantine)", e)),
        }
        Ok(())
    }
}
