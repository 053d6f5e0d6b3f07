//! Reads: one action, a page of actions, an action's audit events.

use super::Engine;
use crate::{
    config::Principal,
    domain::{Action, Event, State},
    store::ListQuery,
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

impl Engine {
    pub async fn get(&self, who: &Principal, action_id: &str) -> Result<Action, Error> {
        self.load(&who.tenant, action_id).await
    }

    /// Newest first; `next_cursor` is set when more may follow.
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
        let query = ListQuery {
            state: f.state,
            agent_id: f.agent_id,
            limit,
            before: f.cursor,
        };
        let page = self.store.list(&who.tenant, &query).await?;
        let next = (page.len() == limit)
            .then(|| page.last().map(|a| a.id.clone()))
            .flatten();
        Ok((page, next))
    }

    pub async fn events(&self, who: &Principal, action_id: &str) -> Result<Vec<Event>, Error> {
        self.load(&who.tenant, action_id).await?;
        Ok(self.store.events(&who.tenant, action_id).await?)
    }
}
