//! Explain (SC-POL-05): which rule a call would match and why, for admins — the same gate as
//! intake, with every rule it looked at; nothing is stored, nothing runs.

use super::{require, Engine};
use crate::{
    config::{Principal, Role},
    domain::{
        condition::CallFacts,
        policy::{self, Gate, Step},
        window::Window,
    },
    Error,
};
use serde_json::Value;

/// A call to explain: as an agent would submit it, with the agent named.
pub struct Hypothetical<'a> {
    pub tool: &'a str,
    pub args: &'a Value,
    pub agent_id: &'a str,
    pub action_kind: Option<&'a str>,
    /// As parsed at the edge; its rules that depend on the time are checked here.
    pub schedule: Option<Window>,
}

impl Engine {
    pub fn may_explain(&self, who: &Principal) -> Result<(), Error> {
        require(who, &[Role::Admin], "explain the policy")
    }

    pub fn explain(
        &self,
        who: &Principal,
        call: &Hypothetical<'_>,
    ) -> Result<(Gate, Vec<Step>), Error> {
        self.may_explain(who)?;
        let tenant = self.tenant(&who.tenant)?;
        let now = self.clock.now();
        // The window as intake would take it (SC-INT-02), so a bad one is the same 400.
        let schedule = call
            .schedule
            .map(|w| {
                w.admit(now, self.config.limits.window)
                    .map_err(|m| Error::validation("schedule", m))
            })
            .transpose()?;
        let facts = CallFacts {
            tool: call.tool,
            args: call.args,
            agent_id: call.agent_id,
            action_kind: call.action_kind,
            schedule,
            now,
        };
        Ok(policy::explain(&tenant.policy, &facts))
    }
}
