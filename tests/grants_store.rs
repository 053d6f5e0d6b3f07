//! The grants port on every store (SC-GR-06, SC-GR-07): a grant is put once, read back as
//! written (its digest checked on load), listed newest first, found by agent and tool while
//! live, and changed only by one conditional write on its version. Races over real stores: the
//! last use of a grant by two calls has exactly one winner; a revocation racing a use leaves
//! the use before it or not at all, and the record says which.

use countersign::{
    domain::{
        countersign::Decider,
        grant::{self, Ask, Grant, Granting},
        policy::{Countersigners, Gate, Matched},
        Call, Decision,
    },
    store::{dynamodb::DynamoStore, sqlite::SqliteStore, Grants, Store, StoreError},
};
use countersign_tests::{localstack, postgres};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::sync::Arc;

fn t0() -> Timestamp {
    "2031-01-01T00:00:00Z".parse().unwrap()
}

fn plus(secs: i64) -> Timestamp {
    t0().checked_add(SignedDuration::from_secs(secs)).unwrap()
}

fn tenant(label: &str) -> String {
    format!("{label}_{}", ulid::Ulid::new()).to_lowercase()
}

fn asking() -> Gate {
    Gate {
        decision: Decision::RequireApproval,
        result: None,
        rule: Some(Matched {
            index: 0,
            label: "mail".into(),
        }),
        failed: None,
        countersigners: Countersigners {
            groups: vec![],
            approvals: 1,
            grantable: false,
        },
        shadow: Vec::new(),
    }
}

/// A grant of `uses` calls of `tool` by `agent` of `tenant`, granted at t0 for an hour.
fn granted(tenant: &str, agent: &str, tool: &str, uses: u32) -> Grant {
    let call = Call::for_test(
        &format!("act_{}", ulid::Ulid::new()),
        tool,
        json!({"to": "a@b"}),
    )
    .with_caller(tenant, agent);
    let gate = asking();
    let terms = grant::grant(
        &Ask {
            uses: Some(uses),
            pin: vec!["to".into()],
            ..Ask::default()
        },
        &Granting {
            call: &call,
            gate: &gate,
            approver: Decider {
                id: "fin-1",
                groups: &[],
                person: None,
                channel: None,
            },
            earlier: &[],
            now: t0(),
        },
    )
    .unwrap();
    Grant::new(terms)
}

/// Put, read, list, find, and the conditional write: a stale version loses with `Conflict`.
async fn conformance(store: &dyn Store) {
    let tn = tenant("grants");
    let g = granted(&tn, "agent-1", "mail.send", 2);
    store.put_grant(&g).await.unwrap();
    assert!(
        matches!(store.put_grant(&g).await, Err(StoreError::Conflict)),
        "a grant is put once"
    );
    assert_eq!(store.grant(&tn, g.id()).await.unwrap(), Some(g.clone()));
    assert_eq!(store.grant(&tenant("other"), g.id()).await.unwrap(), None);
    // Other agents' and tools' grants are not found for this one; newest first in the list.
    let other_tool = granted(&tn, "agent-1", "mail.draft", 1);
    let other_agent = granted(&tn, "agent-2", "mail.send", 1);
    store.put_grant(&other_tool).await.unwrap();
    store.put_grant(&other_agent).await.unwrap();
    let found = store
        .grants_for(&tn, "agent-1", "mail.send", plus(1))
        .await
        .unwrap();
    assert_eq!(found, vec![g.clone()]);
    let listed: Vec<String> = store
        .grants(&tn, 10)
        .await
        .unwrap()
        .iter()
        .map(|g| g.id().to_owned())
        .collect();
    let mut newest_first = vec![other_agent.id(), other_tool.id(), g.id()];
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(listed, newest_first);
    assert_eq!(store.grants(&tn, 1).await.unwrap().len(), 1);
    // One use: the write at the next version lands, the same write again loses.
    let one = g.spend(plus(1)).unwrap();
    store.update_grant(&one).await.unwrap();
    assert!(matches!(
        store.update_grant(&one).await,
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        store.update_grant(&g.spend(plus(2)).unwrap()).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.grant(&tn, g.id()).await.unwrap().unwrap().uses_left(),
        1
    );
    // Found again at its new version, not as the store read it before the use (the store
    // remembers the grants it decoded, by id and version).
    let found = store.grants_for(&tn, "agent-1", "mail.send", plus(1));
    assert_eq!(found.await.unwrap(), vec![one.clone()]);
    // Used up: no longer found live; expired ones neither.
    store
        .update_grant(&one.spend(plus(2)).unwrap())
        .await
        .unwrap();
    assert!(store
        .grants_for(&tn, "agent-1", "mail.send", plus(3))
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .grants_for(&tn, "agent-1", "mail.draft", plus(3600))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .grants_for(&tn, "agent-1", "mail.draft", plus(3599))
            .await
            .unwrap()
            .len(),
        1
    );
    // Revoked: no longer found live.
    let revoked = other_agent.revoke("admin-1", None, plus(4)).unwrap();
    store.update_grant(&revoked).await.unwrap();
    assert!(store
        .grants_for(&tn, "agent-2", "mail.send", plus(5))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.grant(&tn, other_agent.id()).await.unwrap(),
        Some(revoked)
    );
}

/// One use as intake makes it: read the live grants of the agent's tool, judge, write; a lost
/// write reads again and is judged on what won. `true`: this caller used the grant.
async fn use_once(store: &dyn Grants, tenant: &str, id: &str, now: Timestamp) -> bool {
    loop {
        let live = store
            .grants_for(tenant, "agent-1", "mail.send", now)
            .await
            .unwrap();
        let Some(current) = live.into_iter().find(|g| g.id() == id) else {
            return false;
        };
        let Ok(next) = current.spend(now) else {
            return false;
        };
        match store.update_grant(&next).await {
            Ok(()) => return true,
            Err(StoreError::Conflict) => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

/// A revocation as `DELETE /v1/grants/{id}` makes it: it always lands, after whatever use won.
async fn revoke_once(store: &dyn Grants, tenant: &str, id: &str, now: Timestamp) -> Grant {
    loop {
        let current = store.grant(tenant, id).await.unwrap().unwrap();
        let next = current.revoke("admin-1", None, now).unwrap();
        match store.update_grant(&next).await {
            Ok(()) => return next,
            Err(StoreError::Conflict) => continue,
            Err(e) => panic!("{e}"),
        }
    }
}

/// SC-GR-06: two calls race for a grant's last use, `pairs` times: exactly one wins each time.
/// SC-GR-07: a revocation races a use, `pairs` times: either the use landed first (the
/// revocation records one use before it) or it did not happen at all (none before it, and the
/// grant allows nothing more).
async fn races(store: Arc<dyn Store>, pairs: usize) {
    let (mut used_first, mut revoked_first) = (0, 0);
    for i in 0..pairs {
        // A tenant per pair: each race reads one small partition.
        let tn = tenant("races");
        let g = granted(&tn, "agent-1", "mail.send", 1);
        store.put_grant(&g).await.unwrap();
        let (a, b) = (store.clone(), store.clone());
        let (ta, id) = (tn.clone(), g.id().to_owned());
        let (x, y) = tokio::join!(
            tokio::spawn(async move { use_once(&*a, &ta, &id, plus(1)).await }),
            {
                let (tb, id) = (tn.clone(), g.id().to_owned());
                tokio::spawn(async move { use_once(&*b, &tb, &id, plus(1)).await })
            }
        );
        let (x, y) = (x.unwrap(), y.unwrap());
        assert!(
            x ^ y,
            "pair {i}: exactly one call uses the last use ({x}, {y})"
        );
        let after = store.grant(&tn, g.id()).await.unwrap().unwrap();
        assert_eq!((after.uses_left(), after.version()), (0, 2), "pair {i}");

        let g = granted(&tn, "agent-1", "mail.send", 1);
        store.put_grant(&g).await.unwrap();
        let (a, b) = (store.clone(), store.clone());
        let (ta, tb, ia, ib) = (tn.clone(), tn.clone(), g.id().to_owned(), g.id().to_owned());
        let (used, revoked) = tokio::join!(
            tokio::spawn(async move { use_once(&*a, &ta, &ia, plus(1)).await }),
            tokio::spawn(async move { revoke_once(&*b, &tb, &ib, plus(1)).await })
        );
        let (used, revoked) = (used.unwrap(), revoked.unwrap());
        let stored = store.grant(&tn, g.id()).await.unwrap().unwrap();
        assert_eq!(
            stored, revoked,
            "pair {i}: the revocation is the last write"
        );
        let record = stored.revoked().unwrap();
        match used {
            true => {
                assert_eq!((record.after_uses, stored.uses_left()), (1, 0), "pair {i}");
                used_first += 1;
            }
            false => {
                assert_eq!((record.after_uses, stored.uses_left()), (0, 1), "pair {i}");
                assert!(stored.spend(plus(2)).is_err(), "pair {i}: nothing after");
                revoked_first += 1;
            }
        }
    }
    eprintln!(
        "revoke vs use over {pairs} pairs: use first {used_first}, revoke first {revoked_first}"
    );
}

const PAIRS: usize = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_gr_06_sc_gr_07_grants_on_sqlite() {
    let store = Arc::new(SqliteStore::in_memory().unwrap());
    conformance(&*store).await;
    races(store, PAIRS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_gr_06_sc_gr_07_grants_on_dynamodb() {
    let store: Arc<DynamoStore> = Arc::new(localstack::fresh_store("grants").await);
    conformance(&*store).await;
    races(store, PAIRS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_gr_06_sc_gr_07_grants_on_postgres() {
    let store = Arc::new(postgres::store("grants").await);
    conformance(&*store).await;
    races(store, PAIRS).await;
}

/// A fresh tenant with a grant of another tool, and a grant of two uses, one of them spent;
/// its body with that use given back (`uses_left` 2 again at version 2): an edit behind the
/// store's back.
async fn a_grant_to_damage(store: &dyn Store) -> (String, Grant, Vec<u8>) {
    let tn = tenant("damaged");
    let other = granted(&tn, "agent-1", "mail.draft", 1);
    store.put_grant(&other).await.unwrap();
    let g = granted(&tn, "agent-1", "mail.send", 2);
    store.put_grant(&g).await.unwrap();
    let spent = g.spend(plus(1)).unwrap();
    store.update_grant(&spent).await.unwrap();
    let mut body = serde_json::to_value(&spent).unwrap();
    body["uses_left"] = json!(2);
    (tn, spent, serde_json::to_vec(&body).unwrap())
}

/// SC-GR-05 on every store, after the edit: by id the store answers `Malformed`; intake's
/// read of the agent's tool and the tenant's list leave the damaged grant out (it allows
/// nothing) and still read the tenant's other grants.
///
/// Caught on main: one damaged grant made every read of its agent's tool fail (`grants_for`
/// answered `Malformed`), so each call of that tool was refused with a 500 instead of waiting
/// for a person, and `GET /v1/grants` failed whole.
async fn a_damaged_grant_allows_nothing_and_takes_nothing_down(
    store: &dyn Store,
    tn: &str,
    damaged: &Grant,
) {
    assert!(
        matches!(
            store.grant(tn, damaged.id()).await,
            Err(StoreError::Malformed(_))
        ),
        "by id, the damage is named"
    );
    let found = store
        .grants_for(tn, "agent-1", "mail.send", plus(2))
        .await
        .expect("intake's read goes on");
    assert!(found.iter().all(|g| g.id() != damaged.id()), "{found:?}");
    let listed = store.grants(tn, 10).await.expect("the list goes on");
    assert!(listed.iter().all(|g| g.id() != damaged.id()));
    assert_eq!(listed.len(), 1, "the tenant's other grant is listed");
    assert_eq!(
        store
            .grants_for(tn, "agent-1", "mail.draft", plus(2))
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn sc_gr_05_a_damaged_grant_allows_nothing_on_sqlite() {
    let path = countersign_tests::temp_db("damaged-grant");
    let store = SqliteStore::open(&path).unwrap();
    let (tn, g, body) = a_grant_to_damage(&store).await;
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    let changed = raw
        .execute(
            "UPDATE grants SET body = ?1 WHERE tenant = ?2 AND id = ?3",
            rusqlite::params![body, tn, g.id()],
        )
        .unwrap();
    assert_eq!(changed, 1);
    a_damaged_grant_allows_nothing_and_takes_nothing_down(&store, &tn, &g).await;
}

#[tokio::test]
async fn sc_gr_05_a_damaged_grant_allows_nothing_on_postgres() {
    let url = postgres::fresh_url("damaged_grant").await;
    let store = countersign::store::postgres::PostgresStore::connect(&url, &Default::default())
        .await
        .unwrap();
    let (tn, g, body) = a_grant_to_damage(&store).await;
    let raw = postgres::sql(&url).await;
    let changed = raw
        .execute(
            "UPDATE grants SET body = $1 WHERE tenant = $2 AND id = $3",
            &[&body, &tn, &g.id()],
        )
        .await
        .unwrap();
    assert_eq!(changed, 1);
    a_damaged_grant_allows_nothing_and_takes_nothing_down(&store, &tn, &g).await;
}

#[tokio::test]
async fn sc_gr_05_a_damaged_grant_allows_nothing_on_dynamodb() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let (client, table) = localstack::fresh_table("damaged-grant").await;
    let store = DynamoStore::new(client.clone(), &table);
    let (tn, g, body) = a_grant_to_damage(&store).await;
    // The grant's item, found by its id attribute (docs/dynamodb.md: `i`), its body `g`.
    let items = client
        .scan()
        .table_name(&table)
        .filter_expression("i = :i")
        .expression_attribute_values(":i", AttributeValue::S(g.id().to_owned()))
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    assert_eq!(items.len(), 1, "{items:?}");
    client
        .update_item()
        .table_name(&table)
        .key("pk", items[0]["pk"].clone())
        .key("sk", items[0]["sk"].clone())
        .update_expression("SET g = :g")
        .expression_attribute_values(":g", AttributeValue::S(String::from_utf8(body).unwrap()))
        .send()
        .await
        .unwrap();
    a_damaged_grant_allows_nothing_and_takes_nothing_down(&store, &tn, &g).await;
}
