//! The server on Postgres (scripts/postgres.sh starts one): over real HTTP and TLS, restarted
//! on the same database, checked by the store-wide verifier; its schema migrations; its
//! durability settings (SC-EDGE-03).

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    operate::invariants::{self, Rule},
    store::postgres::{Options, PostgresStore},
    Clock, SystemClock,
};
use countersign_tests::{config_toml, in_secs, keys, postgres, Api, ToolServer};
use serde_json::{json, Value};
use std::sync::Arc;

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

/// TLS to the database, the test server's certificate trusted.
fn tls(url: &str) -> Database {
    Database::Postgres {
        url: format!("{url}&sslmode=require"),
        options: Options {
            pool_size: 4,
            ca_file: Some(postgres::ca_file()),
        },
    }
}

/// A plain connection to the test's schema, to look at or damage rows.
async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// SC-EDGE-03 on Postgres: a commit is answered once it is flushed to disk (`fsync` and
/// `synchronous_commit` on, as shipped), so an answered transition survives a host crash.
#[tokio::test]
async fn sc_edge_03_postgres_commits_are_synced_before_they_are_answered() {
    let store = postgres::store("durable").await;
    assert_eq!(store.setting("fsync").await.unwrap(), "on");
    assert_eq!(store.setting("synchronous_commit").await.unwrap(), "on");
}

/// The migrations run once however often the server starts, and a database whose schema is
/// newer than the binary is refused before anything is read or written.
#[tokio::test]
async fn postgres_schema_migrates_once_and_refuses_a_newer_schema() {
    let url = postgres::fresh_url("migrate").await;
    let first = PostgresStore::connect(&url, &Options::default())
        .await
        .unwrap();
    let known = first.schema_version().await.unwrap();
    assert!(known >= 1);
    // Several instances starting at once: each finds the schema current.
    let mut starts = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let url = url.clone();
        starts.spawn(async move { PostgresStore::connect(&url, &Options::default()).await });
    }
    while let Some(again) = starts.join_next().await {
        let again = again.unwrap().unwrap();
        assert_eq!(again.schema_version().await.unwrap(), known);
    }
    let db = sql(&url).await;
    let applied = db
        .query_one("SELECT count(*) FROM countersign_schema", &[])
        .await
        .unwrap();
    assert_eq!(
        applied.get::<_, i64>(0),
        known,
        "each migration applied once"
    );

    db.execute(
        "INSERT INTO countersign_schema (version) VALUES ($1)",
        &[&(known + 1)],
    )
    .await
    .unwrap();
    let refused = PostgresStore::connect(&url, &Options::default()).await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("newer than this binary"), "{message}");
}

/// With `sslmode=require` the server's certificate must verify: without its CA the connection
/// is refused (an impostor answering on the database's address gets nothing), with it the
/// session is encrypted (the server says so).
#[tokio::test]
async fn postgres_tls_is_required_and_the_server_certificate_verified() {
    let url = postgres::fresh_url("tls").await;
    let untrusted = PostgresStore::connect(
        &format!("{url}&sslmode=require"),
        &Options {
            pool_size: 1,
            ca_file: None,
        },
    )
    .await;
    assert!(untrusted.is_err(), "a certificate no root vouches for");
    let Database::Postgres {
        url: tls_url,
        options,
    } = tls(&url)
    else {
        unreachable!()
    };
    let store = PostgresStore::connect(&tls_url, &options).await.unwrap();
    assert_eq!(store.setting("ssl").await.unwrap(), "on");
    assert!(
        store.encrypted().await.unwrap(),
        "this session runs over TLS"
    );
}

/// The server over real HTTP on Postgres (TLS): it runs, waits and cancels; a restart on the
/// same database finds the waiting ticket; `verify`'s check passes on what it wrote and names
/// an audit event edited in the database (SC-SEC-06) and a record that does not load.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_server_over_tls_serves_restarts_and_verifies() {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let url = postgres::fresh_url("server").await;
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start_on(config.clone(), &tls(&url), listen, Parts::default())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    let (s, ran) = api
        .submit(keys::AGENT, json!({"tool": "search.web", "args": {"q": 1}}))
        .await;
    assert_eq!(
        (s, ran["state"].as_str()),
        (200, Some("succeeded")),
        "{ran}"
    );
    let (s, pending) = api
        .submit(keys::AGENT, json!({"tool": "mail.send", "args": {}}))
        .await;
    assert_eq!(s, 202, "{pending}");
    let (s, scheduled) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {}, "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}))
        .await;
    assert_eq!(s, 201, "{scheduled}");
    let (_, cancelled) = api
        .submit(keys::AGENT, json!({"tool": "report.build", "args": {"c": 1}, "schedule": {"not_before": in_secs(3600), "not_after": in_secs(7200)}}))
        .await;
    let (s, _) = api.cancel(&id(&cancelled), keys::AGENT).await;
    assert_eq!(s, 200);
    server.shutdown().await.unwrap();

    let server = Server::start_on(config.clone(), &tls(&url), listen, Parts::default())
        .await
        .unwrap();
    let api = Api::new(server.addr);
    let (s, listed) = api.get("/v1/actions?limit=10", keys::ADMIN).await;
    assert_eq!(s, 200, "{listed}");
    assert_eq!(listed["data"].as_array().unwrap().len(), 4, "{listed}");
    let (_, again) = api
        .get(&format!("/v1/actions/{}", id(&scheduled)), keys::AGENT)
        .await;
    assert_eq!(
        again["state"], "approved",
        "the ticket outlived the restart"
    );
    server.shutdown().await.unwrap();

    let tenants: Vec<String> = config.tenants.keys().cloned().collect();
    let Database::Postgres {
        url: tls_url,
        options,
    } = tls(&url)
    else {
        unreachable!()
    };
    let store = PostgresStore::connect(&tls_url, &options).await.unwrap();
    let now = SystemClock.now();
    let clean = invariants::check(&store, &tenants, now).await.unwrap();
    assert!(clean.ok(), "{clean:?}");
    assert_eq!(clean.actions, 4, "{clean:?}");
    assert_eq!(clean.states["succeeded"], 1);

    let db = sql(&url).await;
    let row = db
        .query_one(
            "SELECT body FROM events WHERE action_id = $1 AND seq = 1",
            &[&id(&ran)],
        )
        .await
        .unwrap();
    let mut event: Value = serde_json::from_slice(row.get(0)).unwrap();
    event["reason"] = json!("forged");
    db.execute(
        "UPDATE events SET body = $1 WHERE action_id = $2 AND seq = 1",
        &[&event.to_string().into_bytes(), &id(&ran)],
    )
    .await
    .unwrap();
    db.execute(
        "UPDATE actions SET body = $1 WHERE id = $2",
        &[&b"{not json".to_vec(), &id(&pending)],
    )
    .await
    .unwrap();
    let damaged = invariants::check(&store, &tenants, now).await.unwrap();
    let mut found: Vec<(String, Rule)> = damaged
        .violations
        .iter()
        .map(|v| (v.action_id.clone(), v.rule))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        (id(&ran), Rule::AuditChain),
        (id(&pending), Rule::Unreadable),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(found, expected, "{damaged:?}");
}

/// SC-CAN-03 on Postgres where one instance's concurrent claims share one statement (issue
/// 17: a burst due together claims in a few transactions, not one per ticket). One ticket's
/// row is held by another session, as by a cancel in flight: the shared statement skips it
/// and commits the others at once, never waiting for it; that one is sent alone and waits,
/// and it and the cancel racing it have exactly one winner. Every claim gets its own answer.
/// Caught on main: the claims committed one transaction each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_can_03_postgres_claims_committed_together_skip_a_ticket_whose_cancel_is_in_flight() {
    use countersign::domain::{Actor, SealReason, Transition};
    use countersign::store::{Actions, StoreError};
    use jiff::{SignedDuration, Timestamp};
    const N: usize = 24;
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let url = postgres::fresh_url("shared_claims").await;
    let database = Database::Postgres {
        url: url.clone(),
        options: Options::default(),
    };
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start_on(config, &database, listen, Parts::default())
        .await
        .unwrap();
    // Due in an hour: no timer of the server's fires during the test.
    let due = Timestamp::now() + SignedDuration::from_secs(3600);
    let api = Api::new(server.addr);
    let ids = postgres::commit_scheduled(
        std::slice::from_ref(&api),
        N,
        |_| due,
        SignedDuration::from_secs(600),
    )
    .await;
    server.shutdown().await.unwrap();

    let store = Arc::new(
        PostgresStore::connect(&url, &Options::default())
            .await
            .unwrap(),
    );
    let mut tickets = Vec::new();
    for id in &ids {
        tickets.push(store.load("acme", id).await.unwrap().unwrap());
    }
    let held = &tickets[0];
    let mut other = sql(&url).await;
    let tx = other.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM actions WHERE tenant = 'acme' AND id = $1 FOR UPDATE",
        &[&held.id()],
    )
    .await
    .unwrap();

    let now = due + SignedDuration::from_secs(1);
    let lease_until = now + SignedDuration::from_secs(60);
    let cancel = Transition::seal(held, Actor::agent("agent-1"), &SealReason::Cancelled, now);
    let cancelling = tokio::spawn({
        let store = store.clone();
        async move { store.commit(&cancel).await }
    });
    let mut claims = tokio::task::JoinSet::new();
    for (i, ticket) in tickets.iter().enumerate() {
        let claim = Transition::claim(ticket, "wrk_1", lease_until, now).unwrap();
        let store = store.clone();
        claims.spawn(async move { (i, store.commit(&claim).await) });
    }
    let mut answered = vec![None; N];
    while answered[1..].iter().any(Option::is_none) {
        let (i, outcome) =
            tokio::time::timeout(std::time::Duration::from_secs(10), claims.join_next())
                .await
                .expect("the claims of rows nobody holds are answered while the held row waits")
                .unwrap()
                .unwrap();
        assert_ne!(
            i, 0,
            "the held row's claim cannot land while its row is held"
        );
        answered[i] = Some(outcome.is_ok());
    }
    assert!(
        answered[1..].iter().all(|a| *a == Some(true)),
        "every claim whose row nobody held landed: {answered:?}"
    );
    assert!(
        !cancelling.is_finished(),
        "the cancel waits for the held row"
    );

    // The row is let go: the held ticket's claim and its cancel race; exactly one lands.
    tx.rollback().await.unwrap();
    let (_, claimed) = claims.join_next().await.unwrap().unwrap();
    let cancelled = cancelling.await.unwrap();
    match (&claimed, &cancelled) {
        (Ok(()), Err(StoreError::Conflict)) | (Err(StoreError::Conflict), Ok(())) => {}
        other => panic!("exactly one of the claim and the cancel lands: {other:?}"),
    }
    let stored = store.load("acme", held.id()).await.unwrap().unwrap();
    let want = if claimed.is_ok() {
        "executing"
    } else {
        "cancelled"
    };
    assert_eq!(stored.state().to_string(), want);
    let events = store.events("acme", held.id()).await.unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.to.to_string() == "executing")
            .count(),
        usize::from(claimed.is_ok()),
        "an executing event only for a claim that landed"
    );

    // The others: each claimed once, with its event, in fewer transactions than claims.
    let claimed_ids: Vec<&str> = tickets[1..].iter().map(|t| t.id()).collect();
    for id in &claimed_ids {
        let a = store.load("acme", id).await.unwrap().unwrap();
        assert_eq!(a.state().to_string(), "executing");
        let events = store.events("acme", id).await.unwrap();
        assert_eq!(events.last().unwrap().hash, a.chain_head());
    }
    let row = other
        .query_one(
            "SELECT count(DISTINCT xmin::text) FROM actions WHERE tenant = 'acme' AND id = ANY($1)",
            &[&claimed_ids],
        )
        .await
        .unwrap();
    let transactions: i64 = row.get(0);
    assert!(
        (transactions as usize) < claimed_ids.len(),
        "{} claims committed in {transactions} transactions",
        claimed_ids.len()
    );
}

/// SC-REC-01 with several instances on one Postgres: the sweep holds no transaction and no lock
/// across the tools it runs, and a pass that runs long on one instance does not keep the others
/// from sweeping. Two engines over one schema whose sessions are ended by the server after
/// 500 ms idle in a transaction (`idle_in_transaction_session_timeout`, common on managed
/// Postgres); two scheduled tickets whose wakes never fire (the sweep is what runs them), a
/// tool that answers in 2 s, a turn of 1 s.
///
/// Caught on main: the pass ran inside a transaction holding an advisory lock — the server
/// killed that session mid-pass (the pass answered an error), and the second instance's sweep
/// was skipped for as long as the first one's pass ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_rec_01_postgres_sweep_holds_nothing_across_tool_runs() {
    use countersign::{boot::embedded::sweep_turn, store::Actions, tools::Executors, Engine};
    use countersign_tests::{submission, Behaviour, RecordingWaker};
    let url =
        postgres::fresh_url("sweepturn").await + "%20-cidle_in_transaction_session_timeout%3D500";
    let tools = ToolServer::start().await;
    tools.behave(Behaviour {
        delay_ms: 2_000,
        ..Behaviour::default()
    });
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let instance = || async {
        let store = PostgresStore::connect(&url, &Options::default())
            .await
            .unwrap();
        let engine = Arc::new(Engine::new(
            config.clone(),
            Arc::new(store.clone()),
            Arc::new(RecordingWaker::default()),
            Arc::new(Executors::new()),
            Arc::new(SystemClock),
        ));
        (engine, store)
    };
    let ((a, a_store), (b, b_store)) = (instance().await, instance().await);
    let agent = config.principal(keys::AGENT).unwrap();
    let mut ids = Vec::new();
    for q in 0..2 {
        let call = submission(json!({"tool": "report.build", "args": {"q": q},
            "schedule": {"not_before": in_secs(1), "not_after": in_secs(120)}}));
        ids.push(
            a.submit(agent, call, None)
                .await
                .unwrap()
                .action
                .id()
                .to_owned(),
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(2_100)).await;
    let turn = std::time::Duration::from_secs(1);
    let first = tokio::spawn({
        let (a, store) = (a.clone(), a_store.clone());
        async move { sweep_turn(&a, &store, turn).await }
    });
    // Mid-pass (the first tool answers at 2 s): the first instance's turn has lapsed.
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    let second = sweep_turn(&b, &b_store, turn).await.unwrap();
    assert!(
        second.is_some(),
        "a long pass on one instance does not keep the others from sweeping"
    );
    let first = first.await.unwrap();
    assert!(
        matches!(first, Ok(Some(_))),
        "the pass survives idle_in_transaction_session_timeout: {first:?}"
    );
    for id in &ids {
        let done = a_store.load("acme", id).await.unwrap().unwrap();
        assert_eq!(done.state().as_str(), "succeeded", "{id}");
        assert_eq!(tools.count_for(id), 1, "{id}: run once");
    }
    // Within a turn the others skip their tick: the instances take turns.
    assert!(sweep_turn(&a, &a_store, turn).await.unwrap().is_some());
    assert!(sweep_turn(&b, &b_store, turn).await.unwrap().is_none());
}

/// The database URL as libpq spells it works, and what is wrong in it is named. Caught on main:
/// `sslmode=verify-full` (what a cloud's guide says to use) failed as an opaque "invalid
/// connection string"; a wrong password or an unknown `sslmode` did not say which setting.
#[tokio::test]
async fn issue30_postgres_urls_as_libpq_spells_them_and_errors_that_name_the_setting() {
    let url = postgres::fresh_url("libpq").await;
    let trusted = Options {
        pool_size: 1,
        ca_file: Some(postgres::ca_file()),
    };
    for mode in ["verify-full", "verify-ca"] {
        let store = PostgresStore::connect(&format!("{url}&sslmode={mode}"), &trusted)
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        assert!(store.encrypted().await.unwrap(), "sslmode={mode}: TLS");
    }
    // libpq's `sslrootcert` names the CA in the URL itself.
    let ca = postgres::ca_file();
    let store = PostgresStore::connect(
        &format!("{url}&sslmode=verify-full&sslrootcert={}", ca.display()),
        &Options::default(),
    )
    .await
    .unwrap();
    assert!(store.encrypted().await.unwrap());
    let error = |url: String| async move {
        PostgresStore::connect(&url, &Options::default())
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let wrong_mode = error(format!("{url}&sslmode=verify-everything")).await;
    assert!(
        wrong_mode.contains("sslmode") && wrong_mode.contains("verify-full"),
        "{wrong_mode}"
    );
    let wrong_password = error(url.replacen(":countersign@", ":wrong@", 1)).await;
    assert!(
        wrong_password.contains("password") && wrong_password.contains("database URL"),
        "{wrong_password}"
    );
    let no_server = error(url.replacen(":54329/", ":9/", 1)).await;
    assert!(
        no_server.contains("127.0.0.1:9") && no_server.contains("database URL"),
        "{no_server}"
    );
}
