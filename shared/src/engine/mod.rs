//! The use cases over the ports. Each public method is one API operation or one wake.
//!
//! Races are decided by the store's conditional writes; every loser re-reads and reports
//! what won.

mod approval;
mod cancel;
mod commit;
mod decisions;
mod explain;
mod grants;
mod handoff;
mod insights;
mod intake;
mod notifications;
mod perform;
mod quarantine;
mod query;
mod resume;
mod runs;
mod sweep;

pub use decisions::{Ruling, RulingKind, MAX_DECISIONS};
pub use insights::{Insights, MAX_RANGE, MAX_READ};
pub use intake::Submitted;
pub use query::{ListFilter, SCAN_FACTOR};
pub use resume::ResumeOutcome;
pub use sweep::SweepReport;

use crate::{
    config::{Config, Principal, Role, Tenant},
    domain::{resume::Wake, Action},
    error::Missing,
    store::Store,
    tools::ToolRunner,
    wake::Waker,
    Clock, Error,
};
use std::sync::Arc;

pub struct Engine {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    waker: Arc<dyn Waker>,
    tools: Arc<dyn ToolRunner>,
    clock: Arc<dyn Clock>,
    /// Lease owner name of this process (fencing is by version; this is for the audit).
    worker_id: String,
    /// The runs under way, for a graceful shutdown (SC-EDGE-05); shared by every
    /// configuration of this engine ([`Engine::with_config`]).
    runs: Arc<runs::Runs>,
    /// The notification worker over the same store, built on first use (the AWS sweep).
    notifier: std::sync::OnceLock<Arc<crate::notify::Notifier>>,
    /// The notification channels' secrets fetched at boot (SSM on AWS: the Slack bot token and
    /// signing secret); environment secrets are read where they are used.
    channel_secrets: crate::tools::secrets::Secrets,
}

impl Engine {
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        waker: Arc<dyn Waker>,
        tools: Arc<dyn ToolRunner>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let worker_id = format!("wrk_{}", ulid::Ulid::new());
        Engine {
            config,
            store,
            waker,
            tools,
            clock,
            worker_id,
            runs: Arc::new(runs::Runs::new()),
            notifier: std::sync::OnceLock::new(),
            channel_secrets: Default::default(),
        }
    }

    /// This engine under another configuration (a reload, SC-OPS-03): the same store, waker,
    /// tools, clock, worker name and runs. The configuration is never changed in place: an
    /// operation that holds an engine sees one configuration from start to end, and a reload
    /// swaps in a whole new engine (`crate::boot::live`). A drain waits for the runs of every one.
    pub fn with_config(&self, config: Arc<Config>) -> Engine {
        Engine {
            config,
            store: self.store.clone(),
            waker: self.waker.clone(),
            tools: self.tools.clone(),
            clock: self.clock.clone(),
            worker_id: self.worker_id.clone(),
            runs: self.runs.clone(),
            notifier: std::sync::OnceLock::new(),
            channel_secrets: self.channel_secrets.clone(),
        }
    }

    /// With the notification channels' secrets fetched at boot (`aws::load_channel_secrets`).
    pub fn with_channel_secrets(self, channel_secrets: crate::tools::secrets::Secrets) -> Engine {
        Engine {
            channel_secrets,
            ..self
        }
    }

    /// The channels' fetched secrets: the Slack interactions verify with the signing secret.
    pub fn channel_secrets(&self) -> &crate::tools::secrets::Secrets {
        &self.channel_secrets
    }

    /// With other tools (the AWS functions fetch the secrets a new configuration names).
    pub fn with_tools(self, tools: Arc<dyn ToolRunner>) -> Engine {
        Engine { tools, ..self }
    }

    /// Graceful shutdown (SC-EDGE-05): from now on nothing new is claimed (a wake or sweep
    /// answers `deferred`, a request commits its ticket unclaimed); returns when every run
    /// under way has finished its attempts and committed its result.
    pub async fn drain(&self) {
        self.runs.drain().await;
    }

    /// Run one request's operation — one that may commit a claimed run and run it — as a task
    /// this process owns, and answer with what it came to (SC-EDGE-12). The request awaits the
    /// task's handle: a client that hangs up makes axum drop the request's future, not the
    /// task, so a run once claimed finishes, commits its result and is answered to nobody; its
    /// run guard lives in the task, so a graceful shutdown waits for it (SC-EDGE-05).
    async fn owned<T, F>(self: &Arc<Self>, op: impl FnOnce(Arc<Self>) -> F) -> Result<T, Error>
    where
        F: std::future::Future<Output = Result<T, Error>> + Send + 'static,
        T: Send + 'static,
    {
        match tokio::spawn(op(self.clone())).await {
            Ok(answer) => answer,
            // A panic stays a panic of the request, as if it had run in it.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Internal(format!("the request's task ended: {e}"))),
        }
    }

    /// The engine's time, for checks made at the edge (a token's expiry, SC-ID-02).
    pub fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// This engine's name in the leases it holds (`<worker id>/<claim id>`).
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The lease owner of one claim: this process plus a claim id, so a read-back after an
    /// ambiguous write tells our claim from a contender's identical one (SC-EDGE-04).
    fn claim_owner(&self) -> String {
        format!("{}/{}", self.worker_id, ulid::Ulid::new())
    }

    /// The configuration this engine runs under, for its whole life.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    fn tenant(&self, name: &str) -> Result<&Tenant, Error> {
        self.config
            .tenant(name)
            .ok_or_else(|| Error::Internal(format!("tenant {name} is not configured")))
    }

    /// Load an action of the caller's tenant; another tenant's id is simply not found.
    async fn load(&self, tenant: &str, action_id: &str) -> Result<Action, Error> {
        if !is_action_id(action_id) {
            return Err(Error::NotFound(Missing::Action));
        }
        match self.load_or_quarantine(tenant, action_id).await? {
            quarantine::Loaded::Found(action) => Ok(*action),
            quarantine::Loaded::Missing => Err(Error::NotFound(Missing::Action)),
            quarantine::Loaded::Quarantined => Err(Error::Internal(format!(
                "action {action_id} does not load; it is quarantined"
            ))),
        }
    }

    async fn stopped(&self, tenant: &str, agent_id: &str) -> Result<bool, Error> {
        Ok(!self.store.stops_for(tenant, agent_id).await?.is_empty())
    }
}

/// `act_` + a ULID: anything else names no action (and never reaches the store).
pub(crate) fn is_action_id(id: &str) -> bool {
    id.strip_prefix("act_")
        .is_some_and(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The wake that finds this action's committed ticket.
fn wake_of(action: &Action) -> Option<Wake> {
    action.ticket().map(|t| wake_with(action, t))
}

fn wake_with(action: &Action, ticket: &crate::domain::Ticket) -> Wake {
    Wake {
        tenant: action.tenant().to_owned(),
        action_id: action.id().to_owned(),
        correlation_id: ticket.correlation_id().to_owned(),
    }
}

fn require(who: &Principal, roles: &[Role], what: &str) -> Result<(), Error> {
    if roles.contains(&who.role) {
        Ok(())
    } else {
        let role = format!("{:?}", who.role).to_lowercase();
        let article = if role.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        Err(Error::Forbidden(format!(
            "{article} {role} key cannot {what}"
        )))
    }
}
