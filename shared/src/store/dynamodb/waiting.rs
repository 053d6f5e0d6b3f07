//! The pending list through the sparse `waiting` index: it holds the state items of the
//! actions that wait for a person, and nothing else. A state item carries `wp` (its tenant's
//! partition key) and `wg` (its agent) exactly while it is `pending_approval`: the transition's
//! own write sets them and the one out of the state removes them (`item::state_attributes`), so
//! however many other actions a tenant has, the list reads only the waiting ones. The index
//! keeps the keys and `wg`; the actions' items are then fetched by key.

use super::item::{action_of, get_s, Item};
use super::keys::{call_sk, parse_action_sk, state_sk, tenant_pk};
use super::meter::malformed;
use super::records::{unreadable, QUARANTINED};
use super::DynamoStore;
use crate::store::{ListPage, ListQuery, StoreResult};
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use std::collections::HashMap;

/// Keys per `BatchGetItem` (DynamoDB's maximum): 50 actions of two items each.
const BATCH_KEYS: usize = 100;

impl DynamoStore {
    /// Newest first from the index (eventually consistent, like every list): with an agent,
    /// at most `q.limit` entries are read and those of other agents passed over; without, at
    /// most `q.answers`. The engine checks each action's state again, as one approved since
    /// the index was read may still be in it.
    pub(super) async fn list_waiting(&self, tenant: &str, q: &ListQuery) -> StoreResult<ListPage> {
        let entries = if q.agent_id.is_some() {
            q.limit
        } else {
            q.answers
        };
        let below = q
            .before
            .as_deref()
            .map_or_else(|| "A$".to_owned(), state_sk);
        let query = self
            .query()
            .index_name("waiting")
            .key_condition_expression("wp = :pk AND sk < :below")
            .expression_attribute_values(":pk", AttributeValue::S(tenant_pk(tenant)))
            .expression_attribute_values(":below", AttributeValue::S(below))
            .scan_index_forward(false)
            .limit(entries.clamp(1, 1000) as i32);
        let (mut ids, mut read, mut last) = (Vec::new(), 0, None);
        self.paged("Query(waiting)", query, |items| {
            for item in items {
                if read == entries || ids.len() == q.answers {
                    break;
                }
                read += 1;
                let sk = get_s(item, "sk").unwrap_or_default();
                let Some((id, true)) = parse_action_sk(sk) else {
                    tracing::error!(sk, "waiting entry with a bad key; skipped");
                    continue;
                };
                last = Some(id.clone());
                let agent = item.get("wg").and_then(|v| v.as_s().ok());
                if q.agent_id.as_ref().is_none_or(|a| Some(a) == agent) {
                    ids.push(id);
                }
            }
            Ok(read < entries && ids.len() < q.answers)
        })
        .await?;
        let mut page = self.actions_by_id(tenant, &ids).await?;
        page.next = if ids.len() == q.answers {
            ids.last().cloned()
        } else if read == entries {
            last
        } else {
            None
        };
        Ok(page)
    }

    /// The actions of `ids` (their call and state items), in the order given; one no longer
    /// there or quarantined is left out, one that does not load is reported.
    async fn actions_by_id(&self, tenant: &str, ids: &[String]) -> StoreResult<ListPage> {
        let mut items: HashMap<String, Item> = HashMap::new();
        for chunk in ids.chunks(BATCH_KEYS / 2) {
            let mut keys = KeysAndAttributes::builder();
            for id in chunk {
                for sk in [call_sk(id), state_sk(id)] {
                    keys = keys.keys(Item::from([
                        ("pk".into(), AttributeValue::S(tenant_pk(tenant))),
                        ("sk".into(), AttributeValue::S(sk)),
                    ]));
                }
            }
            for item in self.batch_get("BatchGetItem(waiting)", keys).await? {
                if let Ok(sk) = get_s(&item, "sk").map(str::to_owned) {
                    items.insert(sk, item);
                }
            }
        }
        let mut page = ListPage::default();
        for id in ids {
            match (items.get(&call_sk(id)), items.get(&state_sk(id))) {
                (_, None) => {}
                (_, Some(state)) if state.contains_key(QUARANTINED) => {}
                (None, Some(_)) => page.unreadable.push(unreadable(
                    tenant,
                    id,
                    malformed("state item without its call"),
                )),
                (Some(call), Some(state)) => match action_of(tenant, id, call, state) {
                    Ok(action) => page.actions.push(action),
                    Err(e) => page.unreadable.push(unreadable(tenant, id, e)),
                },
            }
        }
        Ok(page)
    }
}
