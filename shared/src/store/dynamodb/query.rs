//! Reads that walk pages: every `Query` of the adapter goes through [`DynamoStore::paged`], so
//! paging and metering are written once.

use super::item::Item;
use super::meter::{malformed, meter, unavailable, Units, CAPACITY};
use super::DynamoStore;
use crate::store::StoreResult;
use aws_sdk_dynamodb::{operation::query::builders::QueryFluentBuilder, types::KeysAndAttributes};
use std::collections::HashMap;

impl DynamoStore {
    /// A `Query` of this table, to be finished by the caller and sent by [`DynamoStore::paged`].
    pub(super) fn query(&self) -> QueryFluentBuilder {
        self.client.query().table_name(&self.table)
    }

    /// Send `query` page by page, each metered as `op`, and hand each page's items to `page`
    /// until the results end or `page` answers `false` (it has read enough).
    pub(super) async fn paged(
        &self,
        op: &'static str,
        query: QueryFluentBuilder,
        mut page: impl FnMut(&[Item]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        let mut start = None;
        loop {
            let out = query
                .clone()
                .set_exclusive_start_key(start)
                .return_consumed_capacity(CAPACITY)
                .send()
                .await
                .map_err(|e| unavailable(op, e))?;
            meter(op, Units::Read, out.consumed_capacity());
            let more = page(out.items())?;
            start = out.last_evaluated_key().cloned();
            if start.is_none() || !more {
                return Ok(());
            }
        }
    }

    /// The items of `keys` (at most 100) that exist, in no order: one `BatchGetItem`, metered as
    /// `op`, sent again for the keys DynamoDB left unprocessed.
    pub(super) async fn batch_get(
        &self,
        op: &'static str,
        keys: aws_sdk_dynamodb::types::builders::KeysAndAttributesBuilder,
    ) -> StoreResult<Vec<Item>> {
        let keys: KeysAndAttributes = keys.build().map_err(malformed)?;
        let mut request = Some(HashMap::from([(self.table.clone(), keys)]));
        let mut found = Vec::new();
        while let Some(asked) = request.take() {
            let out = self
                .client
                .batch_get_item()
                .set_request_items(Some(asked))
                .return_consumed_capacity(CAPACITY)
                .send()
                .await
                .map_err(|e| unavailable(op, e))?;
            meter(op, Units::Read, out.consumed_capacity());
            if let Some(items) = out.responses().and_then(|r| r.get(&self.table)) {
                found.extend(items.iter().cloned());
            }
            request = out.unprocessed_keys().filter(|u| !u.is_empty()).cloned();
        }
        Ok(found)
    }
}
