//! Reads: one action, a page of actions, an action's audit events.

use super::Engine;
use crate::{
    config::Principal,
    domain::{Action, Event, State},
    store::{ListPage, ListQuery},
    Error,
};

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub state: Option<State>,
    pub agent_id: Option<String>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

pub const MAX_PAGE: usize = 100;

/// A filtered list reads at most this many stored actions per answered one.
pub const SCAN_FACTOR: usize = 5;

impl ListFilter {
    fn matches(&self, a: &Action) -> bool {
        self.state.is_none_or(|s| a.state == s)
            && self.agent_id.as_ref().is_none_or(|id| &a.agent_id == id)
    }

    /// The answer from one bounded read: up to `limit` matches, and the cursor after the last
    /// one answered — or, when none more matched, after the last one read.
    fn page(&self, read: ListPage, limit: usize) -> (Vec<Action>, Option<String>) {
        let mut answer = Vec::new();
        for action in read.actions {
            if self.matches(&action) {
                answer.push(action);
                if answer.len() == limit {
                    let next = answer.last().map(|a| a.id.clone());
                    return (answer, next);
                }
            }
        }
        (answer, read.next)
    }
}

impl Engine {
    pub async fn get(&self, who: &Principal, action_id: &str) -> Result<Action, Error> {
        self.load(&who.tenant, action_id).await
    }

    /// Newest first; `next_cursor` is set when more may follow. One request reads at most
    /// [`SCAN_FACTOR`] × `limit` stored actions whatever its filter (SC-SEC-05): a filter that
    /// matches little answers what it found with a cursor to continue from.
    pub async fn list(
        &self,
        who: &Principal,
        f: ListFilter,
    ) -> Result<(Vec<Action>, Option<String>), Error> {
        let limit = f.limit.unwrap_or(50);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::validation(
                "limit",
                format!("limit must be between 1 and {MAX_PAGE}"),
            ));
        }
        if let Some(c) = &f.cursor {
            if !super::is_action_id(c) {
                return Err(Error::validation(
                    "cursor",
                    "cursor must be a next_cursor from an earlier page",
                ));
            }
        }
        let filtered = f.state.is_some() || f.agent_id.is_some();
        let query = ListQuery {
            limit: if filtered { SCAN_FACTOR * limit } else { limit },
            before: f.cursor.clone(),
        };
        let read = self.store.list(&who.tenant, &query).await?;
        Ok(f.page(read, limit))
    }

    pub async fn events(&self, who: &Principal, action_id: &str) -> Result<Vec<Event>, Error> {
        self.load(&who.tenant, action_id).await?;
        Ok(self.store.events(&who.tenant, action_id).await?)
    }
}
