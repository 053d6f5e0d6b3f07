//! What happens after a ticket commits, in one place (SC-EDGE-07, SC-REC-01): a ticket due now
//! whose tool fits the request was committed already claimed and runs here; any other ticket
//! gets its wake. And the one catalog lookup every path uses.

use super::{
    handle::{wake_of, Engine},
    runs::Running,
};
use crate::{
    config::ToolEntry,
    domain::{Action, Lease, State},
};
use jiff::Timestamp;

impl Engine {
    /// Whether a ticket being committed runs inside this request (SC-EDGE-07): only when it is
    /// due now and its tool's whole claim budget fits the request budget (API Gateway ends an
    /// integration at 29–30 s), and the process is not shutting down. Then it is committed
    /// already claimed under the returned lease (one write: no sweep can take it in between);
    /// otherwise its wake runs it.
    pub(super) fn inline_claim(
        &self,
        tool: &ToolEntry,
        due_at: Timestamp,
        now: Timestamp,
    ) -> Option<(Running<'_>, Lease)> {
        let fits = tool.claim_budget() <= self.config.limits.request_budget;
        if due_at > now || !fits {
            return None;
        }
        let running = self.runs.enter()?;
        let lease = Lease {
            owner: self.claim_owner(),
            epoch: 1,
            until: self.lease_end(tool, now),
        };
        Some((running, lease))
    }

    /// After a request committed `action`: run it when it was committed claimed by this
    /// request (`inline` holds its run), arm the wake of any other ticket, leave the rest.
    /// Never an error: the ticket is committed, so the caller is answered with it (the sweep
    /// performs it if the wake is lost, SC-REC-01) rather than invited to submit it again.
    pub(super) async fn hand_off(&self, action: Action, inline: Option<Running<'_>>) -> Action {
        match (action.state(), inline) {
            (State::Executing, Some(_running)) => self.run_inline(action).await,
            (State::Approved, _) => {
                self.arm(&action).await;
                action
            }
            _ => action,
        }
    }

    /// Run an action this request committed already claimed and answer with the record as it
    /// ends up. A failure is logged, not returned: the claim is committed, and recovery
    /// settles it when the lease lapses.
    async fn run_inline(&self, claimed: Action) -> Action {
        let Some(tool) = self.tool_of(&claimed) else {
            return claimed;
        };
        match self.run_claimed(&claimed, tool).await {
            Ok(performed) => performed.into_action(),
            Err(e) => {
                tracing::error!(tenant = %claimed.tenant(), action_id = %claimed.id(), error = %e, "inline run failed; recovery settles the claim");
                claimed
            }
        }
    }

    /// Arm the wake for a committed ticket. A failure is logged, not returned: the ticket is
    /// committed and the sweep rediscovers it (SC-REC-01).
    pub(super) async fn arm(&self, action: &Action) {
        let (Some(ticket), Some(wake)) = (&action.ticket(), wake_of(action)) else {
            return;
        };
        if let Err(e) = self
            .waker
            .arm(&wake, ticket.due_at(), ticket.deadline())
            .await
        {
            tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), error = %e, "arming the wake failed; the sweep will pick the ticket up");
        }
    }

    /// Arm a stand-in wake for a ticket another instance committed ([`crate::wake::Waker::arm_backup`]).
    pub(super) async fn arm_backup(&self, action: &Action) {
        let (Some(ticket), Some(wake)) = (&action.ticket(), wake_of(action)) else {
            return;
        };
        if let Err(e) = self
            .waker
            .arm_backup(&wake, ticket.due_at(), ticket.deadline())
            .await
        {
            tracing::warn!(tenant = %action.tenant(), action_id = %action.id(), error = %e, "arming a stand-in wake failed; the poll and the sweep retry");
        }
    }

    /// The catalog entry named `tool` in `tenant`'s catalog now.
    pub(super) fn tool_named(&self, tenant: &str, tool: &str) -> Option<&ToolEntry> {
        self.config.tenant(tenant).and_then(|t| t.tool(tool))
    }

    /// The catalog entry of the tool an action's committed ticket calls.
    pub(super) fn tool_of(&self, action: &Action) -> Option<&ToolEntry> {
        let ticket = action.ticket()?;
        self.tool_named(action.tenant(), ticket.pending_tool())
    }
}
