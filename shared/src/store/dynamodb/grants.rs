//! The scoped grants on DynamoDB: one item per grant in the tenant's grant partition
//! (`T#<tenant>#G`, sort key `<agent>#<tool>#<id>`), so intake reads the live grants of one
//! agent's tool with one consistent `Query` of a key prefix. A use or a revocation is one
//! conditional `PutItem` on the version (`v = :expected`): 1 WRU for a grant of under 1 KB.
//! Reads by id (a revocation) and the list walk the tenant's grant partition: they are rare
//! and bounded by the tenant's grants.

use super::item::{get_s, malformed, n, s, Item};
use super::keys::{grant_sk, grants_of, grants_pk, nanos};
use super::meter::{meter, Units, CAPACITY};
use super::writes::write_error;
use super::DynamoStore;
use crate::domain::grant::Grant;
use crate::store::{undamaged, Grants, StoreResult};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use jiff::Timestamp;

impl From<&Grant> for Item {
    fn from(g: &Grant) -> Item {
        let t = g.terms();
        let live = g.revoked().is_none() && g.uses_left() > 0;
        Item::from([
            ("pk".into(), s(grants_pk(&t.tenant))),
            ("sk".into(), s(grant_sk(&t.agent_id, &t.tool, &t.id))),
            ("i".into(), s(&t.id)),
            ("v".into(), n(g.version())),
            ("l".into(), AttributeValue::Bool(live)),
            ("x".into(), nanos(t.expires_at)),
            (
                "g".into(),
                s(serde_json::to_string(g).expect("a grant serializes")),
            ),
        ])
    }
}

impl TryFrom<&Item> for Grant {
    type Error = crate::store::StoreError;

    /// Through the grant's own checks (its digest, its counts).
    fn try_from(item: &Item) -> StoreResult<Grant> {
        serde_json::from_str(get_s(item, "g")?).map_err(|e| malformed(format!("grant: {e}")))
    }
}

impl DynamoStore {
    async fn put_grant_item(
        &self,
        g: &Grant,
        condition: &str,
        expected: Option<u64>,
    ) -> StoreResult<()> {
        let op = "PutItem(grant)";
        let mut req = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(Item::from(g)))
            .condition_expression(condition)
            .return_consumed_capacity(CAPACITY);
        req = match expected {
            Some(v) => req
                .expression_attribute_names("#v", "v")
                .expression_attribute_values(":v", n(v)),
            None => req,
        };
        let out = req.send().await.map_err(|e| write_error(op, e))?;
        meter(op, Units::Write, out.consumed_capacity());
        Ok(())
    }

    /// The tenant's grants (a damaged one left out), or the one of id `id` (a damaged one
    /// `Malformed`).
    async fn grant_items(&self, tenant: &str, id: Option<&str>) -> StoreResult<Vec<Grant>> {
        let damaged = match id {
            Some(_) => Damaged::Fails,
            None => Damaged::LeftOut(tenant),
        };
        let mut query = self
            .query()
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(grants_pk(tenant)))
            .consistent_read(true);
        if let Some(id) = id {
            query = query
                .filter_expression("i = :i")
                .expression_attribute_values(":i", s(id));
        }
        self.grants_of("Query(grants)", query, damaged).await
    }

    /// Every grant `query` finds, page by page; intake's read and the list through the memo of
    /// grants decoded (`GrantMemo`).
    async fn grants_of(
        &self,
        op: &'static str,
        query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        damaged: Damaged<'_>,
    ) -> StoreResult<Vec<Grant>> {
        let mut found = Vec::new();
        self.paged(op, query, |items| {
            for item in items {
                match damaged {
                    Damaged::Fails => found.push(Grant::try_from(item)?),
                    Damaged::LeftOut(tenant) => {
                        let key = get_s(item, "i").unwrap_or("(no id)");
                        let version = item.get("v").and_then(|v| v.as_n().ok());
                        let read = match version.and_then(|v| v.parse().ok()) {
                            Some(v) => self.grant_memo.grant(tenant, key, v, || item.try_into()),
                            None => Grant::try_from(item),
                        };
                        found.extend(undamaged(tenant, key, read));
                    }
                }
            }
            Ok(true)
        })
        .await?;
        Ok(found)
    }
}

/// What a read does with a grant that fails its checks: one asked for by id names the damage;
/// intake's read and the list leave it out ([`undamaged`]).
#[derive(Clone, Copy)]
enum Damaged<'a> {
    Fails,
    LeftOut(&'a str),
}

#[async_trait]
impl Grants for DynamoStore {
    async fn put_grant(&self, g: &Grant) -> StoreResult<()> {
        self.put_grant_item(g, "attribute_not_exists(pk)", None)
            .await
    }

    async fn update_grant(&self, next: &Grant) -> StoreResult<()> {
        let expected = next.version() - 1;
        self.put_grant_item(next, "#v = :v", Some(expected)).await
    }

    async fn grant(&self, tenant: &str, id: &str) -> StoreResult<Option<Grant>> {
        Ok(self.grant_items(tenant, Some(id)).await?.pop())
    }

    async fn grants(&self, tenant: &str, limit: usize) -> StoreResult<Vec<Grant>> {
        let mut all = self.grant_items(tenant, None).await?;
        all.sort_by(|a, b| b.id().cmp(a.id()));
        all.truncate(limit);
        Ok(all)
    }

    async fn grants_for(
        &self,
        tenant: &str,
        agent_id: &str,
        tool: &str,
        now: Timestamp,
    ) -> StoreResult<Vec<Grant>> {
        let query = self
            .query()
            .key_condition_expression("pk = :pk AND begins_with(sk, :of)")
            .filter_expression("l = :live AND x > :now")
            .expression_attribute_values(":pk", s(grants_pk(tenant)))
            .expression_attribute_values(":of", s(grants_of(agent_id, tool)))
            .expression_attribute_values(":live", AttributeValue::Bool(true))
            .expression_attribute_values(":now", nanos(now))
            .consistent_read(true);
        self.grants_of("Query(grants_for)", query, Damaged::LeftOut(tenant))
            .await
    }
}
