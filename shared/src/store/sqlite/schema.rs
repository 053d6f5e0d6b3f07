//! The SQLite adapter's tables and connection settings.

use super::unavailable;
use crate::store::{StoreError, StoreResult};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS actions (
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    state      TEXT NOT NULL,
    version    INTEGER NOT NULL,
    sweep_at   TEXT,            -- RFC 3339 UTC, fixed width: sorts as text
    body       BLOB NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS actions_sweep ON actions (sweep_at) WHERE sweep_at IS NOT NULL;
-- Lists filtered by state, or by state and agent, read only their matches (newest first), for
-- every state but the two an allowed call passes through (see list::UNLISTED). The indexes of
-- every state, from before, are replaced.
DROP INDEX IF EXISTS actions_state;
DROP INDEX IF EXISTS actions_agent_state;
CREATE INDEX IF NOT EXISTS actions_listed ON actions (tenant, state, id)
    WHERE state NOT IN ('executing', 'succeeded');
CREATE INDEX IF NOT EXISTS actions_agent_listed ON actions (tenant, agent_id, state, id)
    WHERE state NOT IN ('executing', 'succeeded');
CREATE TABLE IF NOT EXISTS events (
    tenant    TEXT NOT NULL,
    action_id TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    body      BLOB NOT NULL,
    PRIMARY KEY (tenant, action_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (
    tenant         TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    key            TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    action_id      TEXT NOT NULL,
    expires_at     TEXT NOT NULL,
    PRIMARY KEY (tenant, agent_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS quarantine (
    tenant    TEXT NOT NULL,
    action_id TEXT NOT NULL,
    reason    TEXT NOT NULL,
    at        TEXT NOT NULL,
    PRIMARY KEY (tenant, action_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stops (
    tenant TEXT NOT NULL,
    scope  TEXT NOT NULL,
    body   BLOB NOT NULL,
    PRIMARY KEY (tenant, scope)
) WITHOUT ROWID;
-- Scoped grants (SC-GR-…): `live` while a use is left and it is not revoked; intake reads the
-- live ones of one agent and tool.
CREATE TABLE IF NOT EXISTS grants (
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    agent_id   TEXT NOT NULL,
    tool       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    live       INTEGER NOT NULL,
    expires_at TEXT NOT NULL,
    body       BLOB NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
-- Intake reads the live, unexpired ones of one agent and tool: their ids and versions from this
-- index alone, a body only for a grant the store does not remember at that version (GrantMemo).
-- The first index, on (tenant, agent_id, tool) alone, was passed over by the planner for the
-- primary key's tenant prefix: every such read walked all of the tenant's grants (issue 33).
DROP INDEX IF EXISTS grants_live;
CREATE INDEX IF NOT EXISTS grants_live_until
    ON grants (tenant, agent_id, tool, expires_at, version) WHERE live = 1;
";

/// The durability of every connection (the bench's raw ceiling uses the same). FULL: a WAL
/// commit is on disk before it returns, so a transition that was answered (or after which a tool
/// was called) survives a host crash (SC-EDGE-03). NORMAL may roll the last commits back on power
/// loss, and a `recovery = "fail"` tool would run twice. Group commit pays the fsync once per
/// batch instead of once per transition.
pub const SYNCHRONOUS: &str = "FULL";

/// Page size of a new database. An action's row (1–2 KB of JSON) is larger than the most a
/// `WITHOUT ROWID` table keeps in a 4 KiB page (≈ 1 KB), so at the default every row spilled
/// into an overflow page of its own, and every transition wrote two pages; in 8 KiB it fits
/// (up to ≈ 2 KB in the page). An existing database keeps its page size.
pub(super) const PAGE_SIZE: i64 = 8192;

pub(super) fn open(path: &Path) -> StoreResult<Connection> {
    Connection::open(path).map_err(unavailable)
}

/// The tables every countersign store has ([`SCHEMA`] and the outbox's).
const TABLES: [&str; 6] = [
    "actions",
    "events",
    "idempotency",
    "quarantine",
    "stops",
    "outbox",
];

/// Does `path` hold a countersign store? Looked at without creating the file or writing to it
/// (`verify` must not turn a mistyped path into an empty store that passes).
pub(super) fn existing(path: &Path) -> StoreResult<()> {
    if !path.is_file() {
        return Err(StoreError::Absent(format!(
            "no database at {}",
            path.display()
        )));
    }
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(unavailable)?;
    let mut found = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut s| {
            s.query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(unavailable)?;
    found.retain(|t| TABLES.contains(&t.as_str()));
    match found.len() {
        0 => Err(StoreError::Absent(format!(
            "{} has no countersign tables",
            path.display()
        ))),
        n if n < TABLES.len() => Err(StoreError::Unavailable(format!(
            "{} has only some of countersign's tables ({}): a store of an older version; \
             start the server on it once to bring it up to date",
            path.display(),
            found.join(", ")
        ))),
        _ => Ok(()),
    }
}

/// WAL, durable commits ([`SYNCHRONOUS`]), a busy timeout for the other connections, and
/// temporary data in memory: every write's savepoint copies each page it first changes into a
/// sub-journal, by default a temporary file (a system call per page); nothing durable is there.
pub(super) fn configure(conn: Connection) -> StoreResult<Connection> {
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(unavailable)?;
    conn.pragma_update(None, "synchronous", SYNCHRONOUS)
        .map_err(unavailable)?;
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(unavailable)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(unavailable)?;
    Ok(conn)
}
