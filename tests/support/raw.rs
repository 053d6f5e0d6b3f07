//! Raw SQL on the local server's database, behind the store's back: the tests that damage
//! records (SC-EDGE-08, SC-SEC-06) do it the same way on SQLite and on Postgres.

use countersign::boot::embedded::Database;

/// A plain connection to a [`Database`].
pub enum Raw {
    Sqlite(rusqlite::Connection),
    Postgres(tokio_postgres::Client),
}

impl Raw {
    pub async fn open(db: &Database) -> Raw {
        match db {
            Database::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).unwrap();
                conn.busy_timeout(std::time::Duration::from_secs(5))
                    .unwrap();
                Raw::Sqlite(conn)
            }
            Database::Postgres { url, .. } => Raw::Postgres(crate::postgres::sql(url).await),
        }
    }

    /// Run `sql` (parameters `$1`, `$2`… in order of appearance, all text: SQLite numbers its
    /// named parameters that way); the rows it changed.
    pub async fn execute(&self, sql: &str, params: &[&str]) -> u64 {
        match self {
            Raw::Sqlite(conn) => conn
                .execute(sql, rusqlite::params_from_iter(params))
                .unwrap() as u64,
            Raw::Postgres(client) => {
                let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                client.execute(sql, &params).await.unwrap()
            }
        }
    }

    /// The stored body of action `id`.
    pub async fn body(&self, id: &str) -> Vec<u8> {
        const SQL: &str = "SELECT body FROM actions WHERE id = $1";
        match self {
            Raw::Sqlite(conn) => conn.query_row(SQL, [id], |r| r.get(0)).unwrap(),
            Raw::Postgres(client) => client.query_one(SQL, &[&id]).await.unwrap().get(0),
        }
    }

    /// Overwrite the stored body of action `id`.
    pub async fn set_body(&self, id: &str, body: &[u8]) {
        const SQL: &str = "UPDATE actions SET body = $1 WHERE id = $2";
        let changed = match self {
            Raw::Sqlite(conn) => conn.execute(SQL, rusqlite::params![body, id]).unwrap() as u64,
            Raw::Postgres(client) => client.execute(SQL, &[&body, &id]).await.unwrap(),
        };
        assert_eq!(changed, 1, "action {id} is stored");
    }

    /// Rewrite the stored body of action `id` (the record as JSON) through `edit`.
    pub async fn edit_body(&self, id: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut record: serde_json::Value = serde_json::from_slice(&self.body(id).await).unwrap();
        edit(&mut record);
        self.set_body(id, &serde_json::to_vec(&record).unwrap())
            .await;
    }
}
