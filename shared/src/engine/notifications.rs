//! Admin operations on the notification outbox: list dead letters, redeliver one.

use super::handle::{require, Engine};
use crate::{
    config::{Principal, Role},
    domain::notice::{parse_notice_id, OutboxEntry},
    error::Missing,
    notify::Notifier,
    store::StoreError,
    Error,
};
use std::sync::Arc;

/// Dead letters one list answers at most (SC-SEC-05: bounded reads).
const MAX_LIST: usize = 100;

impl Engine {
    /// The notification worker over this engine's store and clock, built once. Notices link to
    /// `[server] public_url`, else to the relative `/ui/` (the local server passes its own
    /// address to [`Notifier::new`] instead).
    pub fn notifier(&self) -> Arc<Notifier> {
        self.notifier
            .get_or_init(|| {
                Arc::new(
                    Notifier::new(
                        self.config.clone(),
                        self.store.clone(),
                        self.clock.clone(),
                        "/ui/",
                    )
                    .with_secrets(self.channel_secrets.clone()),
                )
            })
            .clone()
    }

    /// The tenant's dead letters, oldest first.
    pub async fn dead_notifications(
        &self,
        who: &Principal,
        limit: Option<usize>,
    ) -> Result<Vec<OutboxEntry>, Error> {
        require(who, &[Role::Admin], "list notifications")?;
        let limit = limit.unwrap_or(MAX_LIST);
        if !(1..=MAX_LIST).contains(&limit) {
            return Err(Error::validation(
                "limit",
                format!("limit must be between 1 and {MAX_LIST}"),
            ));
        }
        Ok(self.store.outbox_dead(&who.tenant, limit).await?)
    }

    /// Give a notice a fresh round of tries, to every endpoint, from now. Works on a dead letter
    /// and on one still retrying; a delivered notice is gone from the outbox (404).
    pub async fn redeliver(&self, who: &Principal, id: &str) -> Result<OutboxEntry, Error> {
        require(who, &[Role::Admin], "redeliver notifications")?;
        let missing = || Error::NotFound(Missing::Notification(id.to_owned()));
        let (action_id, seq) = parse_notice_id(id).ok_or_else(missing)?;
        // A worker may settle the entry between our read and write: read again and retry.
        for _ in 0..3 {
            let entry = self
                .store
                .outbox_entry(&who.tenant, &action_id, seq)
                .await?
                .ok_or_else(missing)?;
            let revived = entry.revived(self.clock.now());
            match self.store.outbox_settle(&entry, Some(&revived)).await {
                Ok(()) => {
                    tracing::info!(tenant = %who.tenant, %action_id, notice = %id, by = %who.id, "notification redelivery requested");
                    return Ok(revived);
                }
                Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Unavailable(
            "the notification keeps changing; try again".into(),
        ))
    }
}
