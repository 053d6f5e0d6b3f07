//! Each store — SQLite, Postgres, DynamoDB on LocalStack — fresh for one test: as a store for an
//! engine ([`store`], the [`crate::rig::Rig`]'s), or as a place for the local server over real
//! HTTP, started again over the same records (a restart, perhaps with another config). The
//! tests that prove one guarantee on every store (`on_every_store!`) start from here.

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    store::{dynamodb::DynamoStore, sqlite::SqliteStore, Store},
};
use std::sync::Arc;

/// A fresh store of its own on `backend` (`label` names it): an SQLite file, a Postgres schema,
/// or a table on LocalStack.
pub async fn store(backend: Backend, label: &str) -> Arc<dyn Store> {
    match backend {
        Backend::Sqlite => Arc::new(SqliteStore::open(&crate::temp_db(label)).unwrap()),
        Backend::Dynamodb => Arc::new(crate::localstack::fresh_store(label).await),
        Backend::Postgres => Arc::new(crate::postgres::store(label).await),
    }
}

/// The three stores; the `Backend` that [`crate::on_every_store`] names.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Sqlite,
    Dynamodb,
    Postgres,
}

/// Where a test's records live, so that each server started on it sees the same ones.
pub enum Place {
    /// SQLite or Postgres: the server opens it itself.
    Db(Database),
    /// A DynamoDB table (LocalStack): the server's store is this adapter.
    Dynamodb {
        client: aws_sdk_dynamodb::Client,
        table: String,
    },
}

impl Place {
    /// A fresh place for one test's records on `backend`: an SQLite file, a Postgres schema, or
    /// a table of its own on LocalStack.
    pub async fn fresh(backend: Backend, label: &str) -> Place {
        match backend {
            Backend::Sqlite => Place::Db(Database::Sqlite(crate::temp_db(label))),
            Backend::Postgres => Place::Db(crate::postgres::database(label).await),
            Backend::Dynamodb => {
                let (client, table) = crate::localstack::fresh_table(label).await;
                Place::Dynamodb { client, table }
            }
        }
    }

    /// The local server over these records, on a free port of 127.0.0.1.
    pub async fn serve(&self, config: Arc<Config>) -> Server {
        let listen = "127.0.0.1:0".parse().unwrap();
        let started = match self {
            Place::Db(db) => Server::start_on(config, db, listen, Parts::default()).await,
            Place::Dynamodb { client, table } => {
                let store: Arc<dyn Store> = Arc::new(DynamoStore::new(client.clone(), table));
                let parts = Parts {
                    // The server's own database goes unused: the table is its store.
                    wrap_store: Box::new(move |_| store),
                    ..Parts::default()
                };
                let unused = Database::Sqlite(crate::temp_db("unused"));
                Server::start_on(config, &unused, listen, parts).await
            }
        };
        started.expect("the local server starts")
    }

    /// Damage the stored record of `action_id` behind the store's back so that it no longer
    /// loads (SC-EDGE-08): its args nested past the parser's limit (on DynamoDB those of the
    /// call item, `a`).
    pub async fn make_unreadable(&self, action_id: &str) {
        let deep = (0..130).fold(
            serde_json::json!(1),
            |inner, _| serde_json::json!({ "a": inner }),
        );
        match self {
            Place::Db(db) => {
                let raw = crate::raw::Raw::open(db).await;
                raw.edit_body(action_id, |record| record["args"] = deep)
                    .await
            }
            Place::Dynamodb { client, table } => {
                rewrite_call_item(client, table, action_id, |body| {
                    let mut call: serde_json::Value = serde_json::from_slice(body).unwrap();
                    call["a"] = deep;
                    serde_json::to_vec(&call).unwrap()
                })
                .await
            }
        }
    }
}

/// Overwrite the body `c` of an action's DynamoDB call item through `rewrite` (found by scan:
/// the key layout is the adapter's business; the call item holds the call, `a` being its args).
pub async fn rewrite_call_item(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    action_id: &str,
    rewrite: impl FnOnce(&[u8]) -> Vec<u8>,
) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let scanned = client
        .scan()
        .table_name(table)
        .filter_expression("sk = :sk")
        .expression_attribute_values(":sk", AttributeValue::S(format!("A#{action_id}")))
        .send()
        .await
        .unwrap();
    let [item] = scanned.items() else {
        panic!("one call item for {action_id}: {scanned:?}")
    };
    let Some(AttributeValue::S(body)) = item.get("c") else {
        panic!("c: {:?}", item.get("c"))
    };
    let mut item = item.clone();
    let body = String::from_utf8(rewrite(body.as_bytes())).unwrap();
    item.insert("c".into(), AttributeValue::S(body));
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}
