//! Decisions in a batch (SC-GR-20): one approver approves or denies several pending actions in
//! one request. Each is the single approve or deny of `approval.rs` — the same rules, its own
//! context digest, its own write and audit event, its own answer — and a refusal of one leaves
//! the others as they are. A ticket an approval here commits is not run by the request: its wake
//! is armed, so one request never runs many tools.

use super::{
    approval::Via,
    handle::{require, Engine},
};
use crate::{
    config::{Principal, Role},
    domain::Action,
    Error,
};
use futures_util::{stream, StreamExt};
use std::{collections::HashSet, sync::Arc};

/// The most decisions one request may carry.
pub const MAX_DECISIONS: usize = 100;

/// Decisions of one batch under way at once: each is a load and a write or two.
const AT_ONCE: usize = 8;

/// One approver's decision on one action.
#[derive(Debug, Clone)]
pub struct Ruling {
    pub action_id: String,
    pub kind: RulingKind,
}

#[derive(Debug, Clone)]
pub enum RulingKind {
    /// Countersign the context with this digest (SC-APP-02).
    Approve { context_digest: String },
    /// Seal `denied` in the approver's words; of the context with this digest, when given.
    Deny {
        reason: String,
        context_digest: Option<String>,
    },
}

impl Engine {
    /// Whether `who` may decide actions at all: an approver. Asked before a batch's body is
    /// read, so a key that may not decide learns nothing from its shape.
    pub fn may_decide(&self, who: &Principal) -> Result<(), Error> {
        require(who, &[Role::Approver], "decide actions")
    }

    /// Every ruling, each through the single approve or deny; the answers in the rulings'
    /// order. `Err` only for a batch that is refused whole (the role, its size, an action
    /// named twice), before anything is decided.
    pub async fn decide_all(
        self: &Arc<Self>,
        who: &Principal,
        rulings: Vec<Ruling>,
    ) -> Result<Vec<Result<Action, Error>>, Error> {
        self.may_decide(who)?;
        if rulings.is_empty() || rulings.len() > MAX_DECISIONS {
            return Err(Error::validation(
                "decisions",
                format!(
                    "decisions must hold 1–{MAX_DECISIONS} entries; it holds {}",
                    rulings.len()
                ),
            ));
        }
        let mut named = HashSet::new();
        if let Some(i) = rulings
            .iter()
            .position(|r| !named.insert(r.action_id.as_str()))
        {
            return Err(Error::validation(
                &format!("decisions[{i}].id"),
                "this action is named twice: one decision per action",
            ));
        }
        let answers = stream::iter(rulings)
            .map(|ruling| self.rule_one(who, ruling))
            .buffered(AT_ONCE)
            .collect()
            .await;
        Ok(answers)
    }

    async fn rule_one(self: &Arc<Self>, who: &Principal, ruling: Ruling) -> Result<Action, Error> {
        let by = Via {
            who: who.clone(),
            channel: None,
            inline: false,
            grant: None,
        };
        let id = ruling.action_id.as_str();
        let answer = match &ruling.kind {
            RulingKind::Approve { context_digest } => self.approve_by(by, id, context_digest).await,
            RulingKind::Deny {
                reason,
                context_digest,
            } => {
                self.deny_by(&by, id, reason, context_digest.as_deref())
                    .await
            }
        };
        crate::telemetry::decided_in_batch(
            matches!(ruling.kind, RulingKind::Approve { .. }),
            answer.is_ok(),
        );
        answer
    }
}
