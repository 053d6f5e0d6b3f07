//! One bounded read of a tenant's actions, newest first: through the `actions_state` or
//! `actions_agent_state` index when the filter names a state (only matches are read), else the
//! tenant's history, left for the engine to filter.

use super::unavailable;
use crate::domain::Action;
use crate::store::{ListPage, ListQuery, StoreResult, Unreadable};
use rusqlite::{types::Value, Connection};

/// The read's SQL: ?1 tenant, ?2 the cursor, ?3 the limit, ?4 the state, ?5 the agent.
fn statement(indexed: bool, agent: bool) -> String {
    // Named: without statistics the planner prefers the primary key's tenant range, which
    // reads every action of the tenant to find the matches.
    let (index, filter) = match (indexed, agent) {
        (false, _) => ("", ""),
        (true, false) => ("INDEXED BY actions_state", "AND state = ?4"),
        (true, true) => (
            "INDEXED BY actions_agent_state",
            "AND state = ?4 AND agent_id = ?5",
        ),
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
    use rusqlite::Connection;

    /// The filtered reads go through their index: SQLite's plan names it.
    #[test]
    fn state_filters_read_their_index() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::schema::SCHEMA).unwrap();
        for (index, agent) in [("actions_state", None), ("actions_agent_state", Some("a"))] {
            let sql = format!(
                "EXPLAIN QUERY PLAN {}",
                super::statement(true, agent.is_some())
            );
            let plan: Vec<String> = conn
                .prepare(&sql)
                .unwrap()
                .query_map(
                    rusqlite::params_from_iter(
                        ["t", "act_9", "10", "pending_approval"]
                            .into_iter()
                            .chain(agent),
                    ),
                    |r| r.get(3),
                )
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(
                plan.iter().any(|p| p.contains(index) && p.contains("id<?"))
                    && !plan.iter().any(|p| p.contains("TEMP B-TREE")),
                "{index}: {plan:?}"
            );
        }
    }
}
