//! Intake (SPEC §4 Intake): idempotency, window, stop, capability, policy — in that order (the
//! call's shape is the API's: `api::body`).

use super::{require, Engine};
use crate::{
    config::{Principal, Role, Tenant},
    domain::{
        action::Quorum,
        admission::{admit, Admission, IntakeFacts},
        canonical,
        condition::CallFacts,
        context::{approval_context, ContextInput},
        policy,
        transition::TicketTerms,
        window::Window,
        Action, Actor, Creation, Decision, Outcome, SealReason, Stage, State, Submission,
    },
    error::Refusal,
    store::IdempotencyRecord,
    Error,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use std::sync::Arc;

/// How long an Idempotency-Key is remembered.
pub const IDEMPOTENCY_TTL: SignedDuration = SignedDuration::from_hours(24);

/// The intake's answer: the action, and whether it is an idempotent replay.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub action: Action,
    pub replayed: bool,
}

impl Engine {
    /// Intake of one call. Runs as a task the process owns ([`Engine::owned`]): a call allowed
    /// now is claimed and run inside it, whether or not its client waits for the answer.
    pub async fn submit(
        self: &Arc<Self>,
        who: &Principal,
        call: Submission,
        idempotency_key: Option<&str>,
    ) -> Result<Submitted, Error> {
        let (who, key) = (who.clone(), idempotency_key.map(str::to_owned));
        self.owned(move |engine| async move { engine.intake(&who, call, key.as_deref()).await })
            .await
    }

    async fn intake(
        &self,
        who: &Principal,
        call: Submission,
        idempotency_key: Option<&str>,
    ) -> Result<Submitted, Error> {
        require(who, &[Role::Agent], "submit actions")?;
        let tenant = self.tenant(&who.tenant)?;
        let now = self.clock.now();
        let payload_digest = call.payload_digest.clone();
        let key = match idempotency_key {
            Some(key) => {
                if let Some(replay) = self.replay(who, key, &payload_digest, now).await? {
                    return replay;
                }
                Some((key, payload_digest.as_str()))
            }
            None => None,
        };
        let window = self.window_of(&call, now)?;
        let (first, reason) = self
            .decide(tenant, draft(who, call, window, now), now)
            .await?;
        // SC-EDGE-07: a due ticket whose tool fits the request is committed already claimed.
        let (first, inline) = self.claimed_inline(first, now);
        // A ticket committed by policy is the system's decision (SC-INT-09); the rest is the agent's.
        let actor = match first.state() {
            State::Approved | State::Executing => Actor::system(),
            _ => Actor::agent(&who.id),
        };
        let t = Creation::new(first, actor, Some(&reason), now);
        let Some(action) = self.create_keyed(who, &t, key, now).await? else {
            // The same key committed first in a concurrent request: answer as it did.
            return match key {
                Some((key, digest)) => match self.replay(who, key, digest, now).await? {
                    Some(replay) => replay,
                    None => Err(Error::Unavailable(
                        "idempotency record vanished; retry".into(),
                    )),
                },
                None => Err(Error::Internal(
                    "an action without a key was refused".into(),
                )),
            };
        };
        tracing::info!(tenant = %action.tenant, action_id = %action.id, tool = %action.tool,
            decision = ?action.decision, state = %action.state(), "action submitted");
        crate::telemetry::submitted(action.decision);
        let action = self.hand_off(action, inline).await;
        answer(action, false)
    }

    /// The requested window, checked against the window rules (SC-INT-02).
    fn window_of(&self, call: &Submission, now: Timestamp) -> Result<Option<Window>, Error> {
        let Some(w) = call.window else {
            return Ok(None);
        };
        w.admit(now, self.config.limits.window)
            .map(Some)
            .map_err(|m| Error::validation("schedule", m))
    }

    /// A due ticket whose tool fits the request, committed already claimed by this request
    /// (SC-EDGE-07); the run guard travels with it to [`Engine::hand_off`].
    fn claimed_inline(
        &self,
        mut first: Action,
        now: Timestamp,
    ) -> (Action, Option<super::runs::Running<'_>>) {
        let Stage::Approved { ticket } = &first.stage else {
            return (first, None);
        };
        let inline = self
            .tool_named(&first.tenant, &first.tool)
            .and_then(|tool| self.inline_claim(tool, ticket.due_at(), now));
        let Some((running, lease)) = inline else {
            return (first, None);
        };
        first.stage = Stage::Executing {
            ticket: ticket.clone(),
            lease,
        };
        (first, Some(running))
    }

    /// Create the action with its idempotency record, if keyed. `None`: the key is another
    /// request's.
    async fn create_keyed(
        &self,
        who: &Principal,
        t: &Creation,
        key: Option<(&str, &str)>,
        now: Timestamp,
    ) -> Result<Option<Action>, Error> {
        let idem = key.map(|(key, payload_digest)| IdempotencyRecord {
            tenant: who.tenant.clone(),
            agent_id: who.id.clone(),
            key: key.to_owned(),
            payload_digest: payload_digest.to_owned(),
            action_id: t.action.id.clone(),
            expires_at: super::commit::later(now, IDEMPOTENCY_TTL),
        });
        self.create(t, idem.as_ref()).await
    }

    /// The original answer for a known key, or a conflict if the payload differs.
    async fn replay(
        &self,
        who: &Principal,
        key: &str,
        payload_digest: &str,
        now: Timestamp,
    ) -> Result<Option<Result<Submitted, Error>>, Error> {
        let Some(record) = self
            .store
            .idempotency(&who.tenant, &who.id, key, now)
            .await?
        else {
            return Ok(None);
        };
        if record.payload_digest != payload_digest {
            return Ok(Some(Err(Error::IdempotencyConflict)));
        }
        let action = self.load(&who.tenant, &record.action_id).await?;
        Ok(Some(answer(action, true)))
    }

    /// Stop, capability, then policy ([`admit`]). Returns the action's first committed form
    /// and the reason of its first event.
    async fn decide(
        &self,
        tenant: &Tenant,
        mut a: Action,
        now: Timestamp,
    ) -> Result<(Action, String), Error> {
        let gate = policy::gate(&tenant.policy, &call_facts(&a, now));
        tracing::debug!(tool = %a.tool, rule = ?gate.rule, decision = ?gate.decision, "policy gate");
        let tool = tenant.tool(&a.tool);
        let facts = IntakeFacts {
            stopped: self.stopped(&a.tenant, &a.agent_id).await?,
            kind_declared: a
                .action_kind
                .as_ref()
                .is_none_or(|kind| tenant.action_kinds.contains(kind)),
            gate: &gate,
            tool: &a.tool,
            in_catalog: tool.is_some(),
            window: a.schedule,
            now,
            allow_now_within: self.config.limits.allow_now_within,
            run_deadline: self.config.limits.run_deadline,
            approval_ttl: tenant.approval_ttl,
        };
        a.decision = gate.decision;
        match (admit(&facts), tool) {
            (Admission::Invalid { param, message }, _) => Err(Error::validation(param, message)),
            (Admission::Refused(reason), _) => {
                a.decision = Decision::Deny;
                a.stage = sealed(reason.state(), reason.outcome(), now);
                Ok((a, reason.to_string()))
            }
            (Admission::SetResult(result), _) => {
                let outcome = Outcome {
                    result,
                    ..SealReason::SetResult.outcome()
                };
                a.stage = sealed(State::Succeeded, outcome, now);
                Ok((a, SealReason::SetResult.to_string()))
            }
            (
                Admission::Ticket {
                    due_at,
                    deadline,
                    reason,
                },
                Some(tool),
            ) => {
                let terms = TicketTerms {
                    catalog_fingerprint: &tool.fingerprint(),
                    due_at,
                    deadline,
                };
                a.stage = Stage::Approved {
                    ticket: terms.build(&a),
                };
                Ok((a, reason.into()))
            }
            (Admission::Approval { expires_at }, _) => {
                a.approval = Some(asked(tenant, &a, expires_at, &gate));
                a.stage = Stage::PendingApproval { approvals: vec![] };
                Ok((a, "approval_required".into()))
            }
            // `admit` answers a ticket only for a tool in the catalog.
            (Admission::Ticket { .. }, None) => Err(Error::Internal(format!(
                "a ticket for {:?}, which is not in the catalog",
                a.tool
            ))),
        }
    }
}

/// The call as submitted, before the gate: `decide` gives it its decision and first stage.
fn draft(who: &Principal, call: Submission, window: Option<Window>, now: Timestamp) -> Action {
    Action {
        id: format!("act_{}", ulid::Ulid::new()),
        tenant: who.tenant.clone(),
        agent_id: who.id.clone(),
        tool: call.tool,
        args_digest: canonical::digest(&call.args),
        args: Value::Object(call.args),
        action_kind: call.action_kind,
        run: call.run,
        schedule: window,
        decision: Decision::Deny,
        stage: Stage::PendingApproval { approvals: vec![] },
        approval: None,
        actor: Actor::agent(&who.id),
        version: 0,
        created_at: now,
        updated_at: now,
        // Set by the first transition (the chain's genesis binds this action).
        chain_head: String::new(),
    }
}

/// What a policy condition sees of the call (SC-POL-01).
pub(crate) fn call_facts(a: &Action, now: Timestamp) -> CallFacts<'_> {
    CallFacts {
        tool: &a.tool,
        args: &a.args,
        agent_id: &a.agent_id,
        action_kind: a.action_kind.as_deref(),
        schedule: a.schedule,
        now,
    }
}

/// The countersignature asked for: the context the approver is shown, and its digest.
fn asked(
    tenant: &Tenant,
    a: &Action,
    expires_at: Timestamp,
    gate: &policy::Gate,
) -> crate::domain::action::Approval {
    let quorum = Quorum {
        required: gate.countersigners.approvals.max(1),
        groups: gate.countersigners.groups.clone(),
        signed: Vec::new(),
    };
    let (context, context_digest) = approval_context(&ContextInput {
        tool: &a.tool,
        args: &a.args,
        agent_id: &a.agent_id,
        action_kind: a.action_kind.as_deref(),
        schedule: a.schedule.as_ref(),
        time_zone: &tenant.time_zone,
        time_zone_name: &tenant.time_zone_name,
        rule: gate.rule.as_ref(),
        quorum: &quorum,
    });
    crate::domain::action::Approval {
        context,
        context_digest,
        expires_at,
        approver: None,
        decided_at: None,
        quorum,
    }
}

fn sealed(state: State, outcome: Outcome, at: Timestamp) -> Stage {
    Stage::Sealed { state, outcome, at }
}

/// The intake answer for an action, the same on first sight and on replay.
fn answer(action: Action, replayed: bool) -> Result<Submitted, Error> {
    if action.state() == State::Denied && action.decision == Decision::Deny {
        if let Some(refusal) = action.reason().and_then(Refusal::from_reason) {
            return Err(Error::Refused {
                code: refusal,
                message: refusal.message().to_owned(),
                action_id: action.id,
            });
        }
    }
    Ok(Submitted { action, replayed })
}
