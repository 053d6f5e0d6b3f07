//! Reads that walk pages: every `Query` of the adapter goes through [`DynamoStore::paged`], so
//! paging and metering are written once.

use super::item::Item;
use super::meter::{meter, unavailable, Units, CAPACITY};
use super::DynamoStore;
use crate::store::StoreResult;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;

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
}
