//! Decision insights (SC-GR-22), for admins: the tenant's actions created in a range, read
//! newest first from the store's list — the same bounded read as `GET /v1/actions` — and tallied
//! by `domain::insights`. A range is at most [`MAX_RANGE`]; a request reads at most
//! [`MAX_READ`] actions (pages of [`PAGE`]), and says so when the range held more.

use super::{require, Engine};
use crate::{
    config::{Principal, Role},
    domain::insights::{Row, Tally},
    store::ListQuery,
    Error,
};
use jiff::{SignedDuration, Timestamp};

/// The widest range one request may ask for.
pub const MAX_RANGE: SignedDuration = SignedDuration::from_hours(31 * 24);
/// The most actions one request reads.
pub const MAX_READ: usize = 2_000;
/// Actions per read of the store.
const PAGE: usize = 100;

/// The figures of a range, and how much of it they cover.
#[derive(Debug)]
pub struct Insights {
    pub from: Timestamp,
    pub to: Timestamp,
    pub rows: Vec<Row>,
    /// Actions read (of the range and just after it).
    pub read: usize,
    /// Whether every action of the range was read; when not, the rows cover `covered_from`
    /// up to `to`.
    pub complete: bool,
    pub covered_from: Timestamp,
}

impl Engine {
    pub fn may_see_insights(&self, who: &Principal) -> Result<(), Error> {
        require(who, &[Role::Admin], "read decision insights")
    }

    /// The insights of the actions `who`'s tenant created in `[from, to)`.
    pub async fn insights(
        &self,
        who: &Principal,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Insights, Error> {
        self.may_see_insights(who)?;
        if from >= to {
            return Err(Error::validation("from", "from must be before to"));
        }
        if to.duration_since(from) > MAX_RANGE {
            return Err(Error::validation(
                "from",
                "the range may be at most 31 days: narrow from or to",
            ));
        }
        let mut tally = Tally::default();
        let (mut read, mut before, mut oldest) = (0, None, to);
        let complete = loop {
            if read >= MAX_READ {
                break false;
            }
            let query = ListQuery {
                limit: PAGE,
                answers: PAGE,
                before: before.take(),
                state: None,
                agent_id: None,
            };
            let mut page = self.store.list(&who.tenant, &query).await?;
            for bad in std::mem::take(&mut page.unreadable) {
                self.quarantine(bad).await;
            }
            read += page.actions.len();
            // Newest first: the first one older than the range ends it.
            let mut ended = false;
            for action in &page.actions {
                let created = action.created_at();
                if created < from {
                    ended = true;
                    break;
                }
                if created < to {
                    tally.add(action);
                    oldest = oldest.min(created);
                }
            }
            match page.next {
                Some(next) if !ended => before = Some(next),
                _ => break true,
            }
        };
        Ok(Insights {
            from,
            to,
            rows: tally.rows(),
            read,
            complete,
            covered_from: if complete { from } else { oldest },
        })
    }
}
