//! The notification worker (SC-NOT-01/02): delivers the outbox that transitions write, at least
//! once, signed like webhooks; retries with backoff, then parks a dead letter.
//!
//! It runs beside the transitions, never inside them: a slow or dead receiver delays only its
//! own notices. Embedded, [`run`] polls every second; on AWS the resume function's minute sweep
//! calls [`Notifier::deliver_due`].
//!
//! Its own room: of the store it knows only the [`Outbox`] port (what is due, what a notice
//! tells of, settling it), never the engine or the API (`tests/architecture.rs`). Each post is
//! in `post`; the tenant's Slack app is a channel beside the endpoints, in `slack`: the same
//! entries, tries, backoff and dead letters, and a Slack that is down fails only its own part of
//! an entry (the endpoints that took it are not sent it again). The approval mails of a tenant
//! with `[tenants.<name>.email]` are one more delivery of the same entry, in `email`.

pub mod email;
mod post;
pub mod slack;

use crate::{
    config::{Config, Endpoint},
    domain::notice::{Notice, NoticeKind, OutboxEntry, Settled},
    store::{Outbox, StoreError},
    target,
    tools::secrets::Secrets,
    Clock,
};
use serde::Serialize;
use std::{sync::Arc, time::Duration};

/// How long one endpoint may take to answer one notice.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Entries taken per pass (they are delivered concurrently).
const BATCH: usize = 64;

pub struct Notifier {
    config: Arc<Config>,
    outbox: Arc<dyn Outbox>,
    clock: Arc<dyn Clock>,
    /// Public-only unless the tenant lists the host (SC-SEC-08), each request bounded by TIMEOUT.
    clients: target::Clients,
    /// The approver page: notices link to `<page>#action=<id>`.
    page: String,
    /// The channels' secrets fetched at boot (SSM); environment secrets are read when used.
    secrets: Secrets,
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryReport {
    /// Entries every subscribed endpoint took (removed from the outbox).
    pub delivered: usize,
    /// Entries with a failed endpoint, scheduled again.
    pub retrying: usize,
    /// Entries whose tries are used up: parked as dead letters.
    pub parked: usize,
}

impl Notifier {
    /// `page` is the approver page's address; `[server] public_url` overrides it.
    pub fn new(
        config: Arc<Config>,
        outbox: Arc<dyn Outbox>,
        clock: Arc<dyn Clock>,
        page: &str,
    ) -> Self {
        // Redirects are never followed: a 3xx is a failed try.
        let clients = target::Clients::new(Some(TIMEOUT));
        let page = config.public_url.clone().unwrap_or_else(|| page.to_owned());
        Notifier {
            config,
            outbox,
            clock,
            clients,
            page,
            secrets: Secrets::default(),
        }
    }

    /// With the channels' secrets the process fetched at boot (the AWS functions: SSM).
    pub fn with_secrets(self, secrets: Secrets) -> Self {
        Notifier { secrets, ..self }
    }

    /// One pass over the due entries, each tried concurrently.
    pub async fn deliver_due(self: &Arc<Self>) -> Result<DeliveryReport, StoreError> {
        let due = self.outbox.outbox_due(self.clock.now(), BATCH).await?;
        // One action's notices in order, one after the other (a Slack request is posted before
        // its update is tried); different actions concurrently.
        let mut by_action = std::collections::BTreeMap::<_, Vec<OutboxEntry>>::new();
        for entry in due {
            let key = (entry.tenant.clone(), entry.action_id.clone());
            by_action.entry(key).or_default().push(entry);
        }
        let mut tries = tokio::task::JoinSet::new();
        for (_, mut entries) in by_action {
            entries.sort_by_key(|e| e.seq);
            let me = self.clone();
            tries.spawn(async move {
                let mut settled = Vec::new();
                for entry in entries {
                    settled.push(me.settle(entry).await);
                }
                settled
            });
        }
        let mut report = DeliveryReport::default();
        let mut done_all = Vec::new();
        while let Some(done) = tries.join_next().await {
            match done {
                Ok(settled) => done_all.extend(settled.into_iter().map(Ok)),
                Err(e) => done_all.push(Err(e)),
            }
        }
        for done in done_all {
            match done {
                Ok(Ok(Some(Settled::Done))) => report.delivered += 1,
                Ok(Ok(Some(Settled::Again(e)))) if e.dead_at.is_some() => report.parked += 1,
                Ok(Ok(Some(Settled::Again(_)))) => report.retrying += 1,
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "settling a notification failed; it is tried again")
                }
                Err(e) => tracing::error!(error = %e, "a notification task failed"),
            }
        }
        crate::telemetry::notified(report.delivered, report.retrying, report.parked);
        Ok(report)
    }

    /// Try one entry and record the result. `None`: someone else changed it meanwhile.
    async fn settle(&self, entry: OutboxEntry) -> Result<Option<Settled>, StoreError> {
        let (took, failure) = self.try_once(&entry).await?;
        let settled = entry.after_try(took, failure, self.clock.now(), &self.config.notify_retry);
        let next = match &settled {
            Settled::Done => None,
            Settled::Again(next) => Some(next),
        };
        match self.outbox.outbox_settle(&entry, next).await {
            Ok(()) => {
                log(&entry, &settled);
                Ok(Some(settled))
            }
            Err(StoreError::Conflict) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Post the notice to every subscribed endpoint that has not taken it yet, to the tenant's
    /// Slack app, and mail an approval request to each approver not yet mailed.
    async fn try_once(
        &self,
        entry: &OutboxEntry,
    ) -> Result<(Vec<String>, Option<String>), StoreError> {
        let tenant = self.config.tenant(&entry.tenant);
        let endpoints: Vec<&Endpoint> = tenant
            .map(|t| t.notify.iter())
            .into_iter()
            .flatten()
            .filter(|e| e.wants(entry.kind) && !entry.delivered.iter().any(|d| *d == e.key()))
            .collect();
        let slack = tenant
            .and_then(|t| Some((t, t.slack.as_ref()?)))
            .filter(|_| !entry.delivered.iter().any(|d| d == slack::CHANNEL));
        let mail = tenant
            .and_then(|t| t.email.as_ref())
            .filter(|_| entry.kind == NoticeKind::ApprovalRequested);
        if endpoints.is_empty() && slack.is_none() && mail.is_none() {
            return Ok((Vec::new(), None));
        }
        let subject = match self.outbox.outbox_subject(entry).await {
            Ok(read) => read,
            // An unreadable record (SC-EDGE-08) fails this try like a dead receiver: retried
            // with backoff, then parked where admins see it — never a hot loop.
            Err(StoreError::Malformed(_)) => {
                return Ok((Vec::new(), Some("action unreadable".into())))
            }
            Err(e) => return Err(e),
        };
        let Some((action, event)) = subject else {
            // The record is gone (retention): nothing is left to tell.
            tracing::warn!(tenant = %entry.tenant, action_id = %entry.action_id, notice = %entry.id(), "the action of a notification is gone; dropped");
            return Ok((Vec::new(), None));
        };
        let notice = Notice {
            kind: entry.kind,
            action: &action,
            event: &event,
            page_url: format!("{}#action={}", self.page, action.id()),
            asked: entry.asked.as_ref(),
        };
        let (mut took, mut failure) = (Vec::new(), None);
        for endpoint in endpoints {
            match post::send(&self.clients, endpoint, &notice, self.clock.now()).await {
                Ok(()) => took.push(endpoint.key()),
                Err(why) => failure = Some(why),
            }
        }
        // Only an action that asked for approval has a Slack message.
        if let Some((tenant, config)) = slack.filter(|_| action.approval().is_some()) {
            let sent = match slack::WebApi::new(&self.clients, config, &self.secrets) {
                Ok(api) => {
                    let outbox = &*self.outbox;
                    slack::deliver(
                        &api,
                        outbox,
                        config,
                        tenant,
                        entry,
                        &action,
                        &notice.page_url,
                    )
                    .await
                }
                Err(why) => Err(why),
            };
            match sent {
                Ok(()) => took.push(slack::CHANNEL.to_owned()),
                Err(why) => failure = Some(why),
            }
        }
        if let Some(mail) = mail {
            let now = self.clock.now();
            let (mailed, why) = email::send(
                &self.config,
                mail,
                &self.secrets,
                entry,
                &action,
                &self.page,
                now,
            )
            .await;
            took.extend(mailed);
            failure = why.or(failure);
        }
        Ok((took, failure))
    }
}

fn log(entry: &OutboxEntry, settled: &Settled) {
    let (tenant, action_id, notice) = (&entry.tenant, &entry.action_id, entry.id());
    match settled {
        Settled::Done => tracing::info!(%tenant, %action_id, %notice, "notification delivered"),
        Settled::Again(next) if next.dead_at.is_some() => {
            tracing::warn!(%tenant, %action_id, %notice, error = ?next.last_error, "notification parked as a dead letter")
        }
        Settled::Again(next) => {
            tracing::info!(%tenant, %action_id, %notice, error = ?next.last_error, next_at = %next.next_at, "notification failed; retrying")
        }
    }
}

/// The process that sends notifications checks at boot that every endpoint's secret is set
/// (the configuration names the variable; parsing it reads no secret), and the mail's with
/// the `secrets` it fetched (`ssm_fetched`: the AWS functions). Errors name the entry.
pub fn check_secrets(
    config: &Config,
    secrets: &Secrets,
    ssm_fetched: bool,
) -> Result<(), crate::config::ConfigError> {
    email::check_secrets(config, secrets, ssm_fetched)?;
    for (tenant, t) in &config.tenants {
        for (i, endpoint) in t.notify.iter().enumerate() {
            if std::env::var(&endpoint.secret_env).map_or(true, |v| v.is_empty()) {
                return Err(crate::config::ConfigError(format!(
                    "tenants.{tenant}.notify[{i}].secret_env: environment variable {} is not set",
                    endpoint.secret_env
                )));
            }
        }
    }
    Ok(())
}

/// The embedded worker: a pass every `every`, forever, each by the notifier `current` gives
/// then (the local server's follows its configuration's reloads).
pub async fn run(mut current: impl FnMut() -> Arc<Notifier>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = current().deliver_due().await {
            tracing::error!(error = %e, "notification pass failed; the next tick retries");
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn sc_sec_02_notification_secrets_are_checked_where_the_process_boots() {
        let config = |env: &str| {
            Config::from_toml(&format!(
                "[tenants.acme]\ntime_zone = \"UTC\"\n[[tenants.acme.notify]]\nurl = \"https://hooks.example.com/a\"\nsecret_env = \"{env}\"\nevents = [\"action_sealed\"]\n"
            ))
            .expect("parsing reads no secret")
        };
        let unset = config("COUNTERSIGN_NOTIFY_SURELY_UNSET");
        let none = super::Secrets::default();
        let err = super::check_secrets(&unset, &none, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tenants.acme.notify[0].secret_env: environment variable COUNTERSIGN_NOTIFY_SURELY_UNSET is not set"),
            "{err}"
        );
        std::env::set_var("COUNTERSIGN_NOTIFY_BOOT_TEST", "s");
        assert!(
            super::check_secrets(&config("COUNTERSIGN_NOTIFY_BOOT_TEST"), &none, false).is_ok()
        );
    }
}
