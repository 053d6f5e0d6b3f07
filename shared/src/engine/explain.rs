//! Explain (SC-POL-05): which rule a call would match and why, for admins — the same gate as
//! intake, with every rule it looked at; nothing is stored, nothing runs.

use super::handle::{require, Engine};
use crate::{
    config::{Principal, Role},
    domain::{
        policy::{self, Gate, Step},
        Call,
    },
    Error,
};

impl Engine {
    pub fn may_explain(&self, who: &Principal) -> Result<(), Error> {
        require(who, &[Role::Admin], "explain the policy")
    }

    /// Which rule `call` (as an agent would submit it, [`Call::hypothetical`]) would match.
    pub fn explain(&self, who: &Principal, call: &Call) -> Result<(Gate, Vec<Step>), Error> {
        self.may_explain(who)?;
        let tenant = self.tenant(&who.tenant)?;
        let now = self.clock.now();
        // The window as intake would take it (SC-INT-02), so a bad one is the same 400.
        if let Some(w) = call.schedule() {
            w.admit(now, self.config.limits.window)
                .map_err(|m| Error::validation("schedule", m))?;
        }
        Ok(policy::explain(&tenant.policy, &call.facts(now)))
    }
}
