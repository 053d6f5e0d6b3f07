//! Postgres for the tests: the server `scripts/postgres.sh` starts (its URL in
//! `COUNTERSIGN_TEST_DATABASE_URL`, else that script's default), and a fresh schema per test
//! so tests run in parallel on one database and each sees only its own rows.

use countersign::store::postgres::{Options, PostgresStore};

/// The script's server unless the environment names another.
pub fn base_url() -> String {
    std::env::var("COUNTERSIGN_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://countersign:countersign@127.0.0.1:54329/countersign".into())
}

/// The CA of the script's server certificate (TLS tests).
pub fn ca_file() -> std::path::PathBuf {
    std::env::var("COUNTERSIGN_TEST_DATABASE_CA")
        .unwrap_or_else(|_| "/tmp/countersign-postgres-54329/ca.crt".into())
        .into()
}

/// A new, empty schema; the URL whose connections use it (its `search_path`).
pub async fn fresh_url(label: &str) -> String {
    let label: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let schema = format!("t_{label}_{}", ulid::Ulid::new()).to_lowercase();
    let (client, connection) = tokio_postgres::connect(&base_url(), tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!("no Postgres at COUNTERSIGN_TEST_DATABASE_URL ({e}): source scripts/postgres.sh")
        });
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    with_schema(&base_url(), &schema)
}

/// `url` with its connections' `search_path` set to `schema`.
pub fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// The local server's database on a fresh schema.
pub async fn database(label: &str) -> countersign::boot::embedded::Database {
    countersign::boot::embedded::Database::Postgres {
        url: fresh_url(label).await,
        options: Options::default(),
    }
}

/// A plain connection to `url`'s schema, to look at or damage rows behind the store's back.
pub async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A store on a fresh schema.
pub async fn store(label: &str) -> PostgresStore {
    PostgresStore::connect(&fresh_url(label).await, &Options::default())
        .await
        .unwrap()
}

/// A pseudo-random one of `apis` for request `i` (spread, not round-robin).
pub fn spread(apis: &[crate::Api], i: usize) -> &crate::Api {
    &apis[(i.wrapping_mul(2_654_435_761) >> 7) % apis.len()]
}

/// Commit `n` scheduled `report.build` tickets (the `schedule` rule: no person), each through
/// [`spread`]'s instance, due at `due(i)` with a window of `window`; their ids.
pub async fn commit_scheduled(
    apis: &[crate::Api],
    n: usize,
    due: impl Fn(usize) -> jiff::Timestamp,
    window: jiff::SignedDuration,
) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
        let mut submits = Vec::new();
        for &i in chunk {
            let api = spread(apis, i).clone();
            let (not_before, not_after) = (due(i), due(i) + window);
            submits.push(tokio::spawn(async move {
                api.submit(
                    crate::keys::AGENT,
                    serde_json::json!({"tool": "report.build", "args": {"n": i},
                           "schedule": {"not_before": not_before.to_string(), "not_after": not_after.to_string()}}),
                )
                .await
            }));
        }
        for s in submits {
            let (status, v) = s.await.unwrap();
            assert_eq!(status, 201, "{v}");
            ids.push(v["id"].as_str().unwrap().to_owned());
        }
    }
    ids
}
