//! One bounded read of a tenant's actions, newest first: through the `actions_listed` or
//! `actions_agent_listed` index when the filter names a state they hold ([`listed`]: only
//! matches are read), else the tenant's history, left for the engine to filter.

use super::unavailable;
use crate::domain::Action;
use crate::domain::State;
use crate::store::{ListPage, ListQuery, StoreResult, Unreadable};
use rusqlite::{types::Value, Connection};

/// The states the list indexes leave out: each allowed call passes through both, so an entry of
/// theirs would move twice per call (WAL frames are whole pages: leaving both out took ≈ 20 % off
/// an allowed call's bytes on disk). `executing` is held for the length of a run; `succeeded`
/// is most of a tenant's history, which its unindexed read walks in the same order.
const UNLISTED: [State; 2] = [State::Executing, State::Succeeded];

/// The indexes' condition, word for word (their `WHERE` in `schema`): SQLite reads a partial
/// index only for a query that holds the same term (a bound `state = ?4` does not show it).
const LISTED_TERM: &str = "state NOT IN ('executing', 'succeeded')";

/// Whether a list of this state reads only its matches, through an index.
pub(super) fn listed(state: State) -> bool {
    !UNLISTED.contains(&state)
}

/// The read's SQL: ?1 tenant, ?2 the cursor, ?3 the limit, ?4 the state, ?5 the agent.
fn statement(indexed: bool, agent: bool) -> String {
    // Named: without statistics the planner prefers the primary key's tenant range, which
    // reads every action of the tenant to find the matches.
    let (index, filter) = match (indexed, agent) {
        (false, _) => ("", ""),
        (true, false) => ("INDEXED BY actions_listed", "AND state = ?4"),
        (true, true) => (
            "INDEXED BY actions_agent_listed",
            "AND state = ?4 AND agent_id = ?5",
        ),
    };
    let filter = match indexed {
        true => format!("AND {LISTED_TERM} {filter}"),
        false => String::new(),
    };
    format!(
        "SELECT id, body FROM actions a {index} WHERE tenant = ?1 AND id < ?2 {filter}
           AND NOT EXISTS (SELECT 1 FROM quarantine q
                           WHERE q.tenant = a.tenant AND q.action_id = a.id)
         ORDER BY id DESC LIMIT ?3"
    )
}

pub(super) fn page(
    conn: &Connection,
    tenant: &str,
    q: &ListQuery,
    indexed: bool,
) -> StoreResult<ListPage> {
    let limit = if indexed { q.answers } else { q.limit };
    let mut stmt = conn
        .prepare_cached(&statement(indexed, q.agent_id.is_some()))
        .map_err(unavailable)?;
    let mut bound = vec![
        Value::from(tenant.to_owned()),
        // No cursor: below every id (a bound, not `?2 IS NULL OR …`, so the index's range
        // starts there instead of at the newest match).
        Value::from(q.before.clone().unwrap_or_else(|| char::MAX.to_string())),
        (limit as i64).into(),
    ];
    if indexed {
        bound.push(q.state.map(|s| s.as_str().to_owned()).into());
        bound.extend(q.agent_id.clone().map(Value::from));
    }
    let rows = stmt
        .query_map(rusqlite::params_from_iter(bound), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?))
        })
        .map_err(unavailable)?;
    let mut page = ListPage::default();
    let mut read = 0;
    for row in rows {
        let (id, body) = row.map_err(unavailable)?;
        match Action::from_stored(&body) {
            Ok(action) => page.actions.push(action),
            Err(e) => page.unreadable.push(Unreadable {
                tenant: tenant.to_owned(),
                action_id: id.clone(),
                reason: e.to_string(),
            }),
        }
        read += 1;
        if read == limit {
            page.next = Some(id);
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::{listed, statement, LISTED_TERM, UNLISTED};
    use crate::domain::State;
    use crate::store::sqlite::{schema::SCHEMA, SqliteStore};
    use rusqlite::Connection;

    fn plan(conn: &Connection, state: State, agent: Option<&str>) -> Vec<String> {
        let sql = format!("EXPLAIN QUERY PLAN {}", statement(true, agent.is_some()));
        conn.prepare(&sql)
            .unwrap()
            .query_map(
                rusqlite::params_from_iter(
                    ["t", "act_9", "10", state.as_str()]
                        .into_iter()
                        .chain(agent),
                ),
                |r| r.get(3),
            )
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// SC-SEC-05: a list of any state the indexes hold reads only its matches (SQLite's plan
    /// names the index and needs no sort); the indexes' `WHERE` in the schema is the term the
    /// statement repeats, and it leaves out exactly the unlisted states.
    #[test]
    fn sc_sec_05_every_listed_state_reads_its_index() {
        let quoted: Vec<String> = UNLISTED
            .iter()
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        assert_eq!(LISTED_TERM, format!("state NOT IN ({})", quoted.join(", ")));
        assert_eq!(
            SCHEMA.matches(LISTED_TERM).count(),
            2,
            "both indexes' WHERE"
        );
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        let listed_states: Vec<State> = State::ALL.into_iter().filter(|s| listed(*s)).collect();
        assert_eq!(listed_states.len(), State::ALL.len() - UNLISTED.len());
        for state in listed_states {
            for (index, agent) in [
                ("actions_listed", None),
                ("actions_agent_listed", Some("a")),
            ] {
                let plan = plan(&conn, state, agent);
                assert!(
                    plan.iter().any(|p| p.contains(index) && p.contains("id<?"))
                        && !plan.iter().any(|p| p.contains("TEMP B-TREE")),
                    "{state:?}, {index}: {plan:?}"
                );
            }
        }
    }

    /// A database made before the partial indexes: opening it replaces the indexes of every
    /// state with the listed ones, built from the rows already there.
    #[test]
    fn sc_sec_05_an_older_database_gets_the_listed_indexes() {
        let dir = std::env::temp_dir().join(format!("countersign-list-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE actions (tenant TEXT NOT NULL, id TEXT NOT NULL, agent_id TEXT NOT NULL,
                 state TEXT NOT NULL, version INTEGER NOT NULL, sweep_at TEXT, body BLOB NOT NULL,
                 PRIMARY KEY (tenant, id)) WITHOUT ROWID;
             CREATE INDEX actions_state ON actions (tenant, state, id);
             CREATE INDEX actions_agent_state ON actions (tenant, agent_id, state, id);
             INSERT INTO actions VALUES ('t', 'act_1', 'a', 'pending_approval', 1, NULL, X'7B7D');
             INSERT INTO actions VALUES ('t', 'act_2', 'a', 'succeeded', 2, NULL, X'7B7D');",
        )
        .unwrap();
        drop(old);
        drop(SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let mut indexes: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'actions' AND sql IS NOT NULL")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        indexes.sort();
        assert_eq!(
            indexes,
            ["actions_agent_listed", "actions_listed", "actions_sweep"]
        );
        let entries: i64 = conn
            .query_row(
                &format!("SELECT COUNT(*) FROM actions INDEXED BY actions_listed WHERE tenant = 't' AND {LISTED_TERM} AND state = 'pending_approval'"),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(entries, 1, "the pending row is in the new index");
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
