//! The Postgres adapter's tables, as versioned migrations compiled into the binary. Each start
//! applies the ones the database lacks, in one transaction under an advisory lock (instances
//! starting together wait for each other), and refuses a database whose schema is newer than
//! this binary knows: an older binary must not write rows whose meaning it does not know.

use super::{unavailable, Pooled};
use crate::store::{StoreError, StoreResult};

/// The migrations, oldest first: the schema's version is the count applied. Append only; a
/// released migration is never edited.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the tables of the SQLite adapter, with the same keys and text-sortable instants
    //    (fixed-width UTC, nanoseconds: `timestamptz` would cut them to microseconds). Text
    //    compares bytewise (`C`) whatever the database's locale: ids and instants sort as time.
    r#"
CREATE TABLE actions (
    tenant   TEXT COLLATE "C" NOT NULL,
    id       TEXT COLLATE "C" NOT NULL,
    agent_id TEXT COLLATE "C" NOT NULL,
    state    TEXT COLLATE "C" NOT NULL,
    version  BIGINT NOT NULL,
    sweep_at TEXT COLLATE "C",
    body     BYTEA NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX actions_sweep ON actions (sweep_at) WHERE sweep_at IS NOT NULL;
CREATE TABLE events (
    tenant    TEXT COLLATE "C" NOT NULL,
    action_id TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    body      BYTEA NOT NULL,
    PRIMARY KEY (tenant, action_id, seq)
);
CREATE TABLE idempotency (
    tenant         TEXT COLLATE "C" NOT NULL,
    agent_id       TEXT COLLATE "C" NOT NULL,
    key            TEXT COLLATE "C" NOT NULL,
    payload_digest TEXT COLLATE "C" NOT NULL,
    action_id      TEXT COLLATE "C" NOT NULL,
    expires_at     TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, agent_id, key)
);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);
CREATE TABLE quarantine (
    tenant    TEXT COLLATE "C" NOT NULL,
    action_id TEXT COLLATE "C" NOT NULL,
    reason    TEXT COLLATE "C" NOT NULL,
    at        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, action_id)
);
CREATE TABLE stops (
    tenant TEXT COLLATE "C" NOT NULL,
    scope  TEXT COLLATE "C" NOT NULL,
    body   BYTEA NOT NULL,
    PRIMARY KEY (tenant, scope)
);
CREATE TABLE outbox (
    tenant    TEXT COLLATE "C" NOT NULL,
    action_id TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    rev       BIGINT NOT NULL,
    next_at   TEXT COLLATE "C" NOT NULL,
    dead_at   TEXT COLLATE "C",
    body      BYTEA NOT NULL,
    PRIMARY KEY (tenant, action_id, seq)
);
CREATE INDEX outbox_due ON outbox (next_at) WHERE dead_at IS NULL;
CREATE INDEX outbox_dead ON outbox (tenant, dead_at) WHERE dead_at IS NOT NULL;
"#,
    // 2: the lists filtered by state, alone or with an agent (the approver page's pending
    //    list, the CLI's filters), read only their matches, newest first (SC-SEC-05).
    r#"
CREATE INDEX actions_state ON actions (tenant, state, id);
CREATE INDEX actions_agent_state ON actions (tenant, agent_id, state, id);
"#,
    // 3: whose turn it is to sweep, and until when (`PostgresStore::take_turn`): a row, not a
    //    lock held in a transaction across the pass's tool runs.
    r#"
CREATE TABLE sweep_turn (
    id    SMALLINT PRIMARY KEY CHECK (id = 1),
    owner TEXT COLLATE "C" NOT NULL,
    until TIMESTAMPTZ NOT NULL
);
"#,
    // 4: what a notification channel keeps about an action between notices (SC-CH-03): the
    //    Slack message a request was posted as, which later notices update.
    r#"
CREATE TABLE channel_notes (
    tenant    TEXT COLLATE "C" NOT NULL,
    action_id TEXT COLLATE "C" NOT NULL,
    channel   TEXT COLLATE "C" NOT NULL,
    note      TEXT NOT NULL,
    PRIMARY KEY (tenant, action_id, channel)
);
"#,
    // 5: scoped grants (SC-GR-…): one row per grant, `live` while a use is left and it is not
    //    revoked; intake reads the live ones of one agent and tool.
    r#"
CREATE TABLE grants (
    tenant     TEXT COLLATE "C" NOT NULL,
    id         TEXT COLLATE "C" NOT NULL,
    agent_id   TEXT COLLATE "C" NOT NULL,
    tool       TEXT COLLATE "C" NOT NULL,
    version    BIGINT NOT NULL,
    live       BOOLEAN NOT NULL,
    expires_at TEXT COLLATE "C" NOT NULL,
    body       BYTEA NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX grants_live ON grants (tenant, agent_id, tool) WHERE live;
"#,
];

/// Any number will do as long as it is fixed: it names "countersign migrates" among the
/// database's advisory locks.
const MIGRATION_LOCK: i64 = 0x636f_756e_7465_7273; // "counters"

/// What went wrong with the schema at start.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "the database's countersign schema is version {found}, newer than this binary knows \
         ({known}): upgrade countersign before starting it against this database"
    )]
    Newer { found: i64, known: i64 },
    /// Only where nothing may be migrated (`verify`).
    #[error(
        "the database's countersign schema is version {found}, older than this binary's \
         ({known}): start the server on it once to migrate it, then verify"
    )]
    Older { found: i64, known: i64 },
}

/// Is there a countersign store at [`MIGRATIONS`]'s version? Read only: `verify` must not turn
/// a mistyped URL or schema into an empty store that passes.
pub(super) async fn existing(client: &Pooled) -> StoreResult<()> {
    let there: bool = client
        .query_one("SELECT to_regclass('countersign_schema') IS NOT NULL", &[])
        .await
        .map_err(unavailable)?
        .get(0);
    if !there {
        return Err(StoreError::Absent(
            "the database has no countersign tables (in its search_path)".into(),
        ));
    }
    let found: i64 = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM countersign_schema",
            &[],
        )
        .await
        .map_err(unavailable)?
        .get(0);
    let known = MIGRATIONS.len() as i64;
    let wrong = match found {
        found if found > known => SchemaError::Newer { found, known },
        found if found < known => SchemaError::Older { found, known },
        _ => return Ok(()),
    };
    Err(StoreError::Unavailable(wrong.to_string()))
}

/// Bring the schema up to [`MIGRATIONS`]; the version it is at afterwards.
pub(super) async fn migrate(client: &mut Pooled) -> StoreResult<i64> {
    let tx = client.transaction().await.map_err(unavailable)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(unavailable)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS countersign_schema (
             version    BIGINT PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(unavailable)?;
    let found: i64 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM countersign_schema",
            &[],
        )
        .await
        .map_err(unavailable)?
        .get(0);
    let known = MIGRATIONS.len() as i64;
    if found > known {
        return Err(StoreError::Unavailable(
            SchemaError::Newer { found, known }.to_string(),
        ));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql).await.map_err(unavailable)?;
        tx.execute(
            "INSERT INTO countersign_schema (version) VALUES ($1)",
            &[&(i as i64 + 1)],
        )
        .await
        .map_err(unavailable)?;
    }
    tx.commit().await.map_err(unavailable)?;
    Ok(known)
}
