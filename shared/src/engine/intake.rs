//! Intake (SPEC §4 Intake): idempotency, window, stop, capability, policy — in that order (the
//! call's shape is the API's: `api::body`).

use super::handle::{require, Engine};
use crate::{
    config::{Person, Principal, Role, Tenant},
    domain::{
        admission::{admit, first_form, granted, Admission, IntakeFacts, Making},
        policy,
        window::Window,
        Action, Call, Creation, Decision, State, Submission,
    },
    error::Refusal,
    store::IdempotencyRecord,
    Error,
};
use jiff::{SignedDuration, Timestamp};
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
        let call = Call::submitted(new_id("act"), &who.tenant, &who.id, call, window);
        let (t, inline) = self.decide(tenant, call, who.person.as_ref(), now).await?;
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
        tracing::info!(tenant = %action.tenant(), action_id = %action.id(), tool = %action.call().tool(),
            decision = ?action.decision(), state = %action.state(), "action submitted");
        crate::telemetry::submitted(action.decision());
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
            action_id: t.action.id().to_owned(),
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

    /// Stop, capability, then policy ([`admit`]), and the action's first commit as the
    /// domain builds it ([`first_form`]). A due ticket whose tool fits the request is committed
    /// already claimed by it (SC-EDGE-07); the run guard travels with it to
    /// [`Engine::hand_off`].
    async fn decide(
        &self,
        tenant: &Tenant,
        call: Call,
        person: Option<&Person>,
        now: Timestamp,
    ) -> Result<(Creation, Option<super::runs::Running<'_>>), Error> {
        let gate = policy::gate(&tenant.policy, &call.facts(now));
        tracing::debug!(tool = %call.tool(), rule = ?gate.rule, decision = ?gate.decision, shadow = ?gate.shadow, "policy gate");
        crate::telemetry::shadowed(&gate.shadow, gate.decision);
        let tool = tenant.tool(call.tool());
        let facts = IntakeFacts {
            stopped: self.stopped(call.tenant(), call.agent_id()).await?,
            kind_declared: call
                .action_kind()
                .is_none_or(|kind| tenant.action_kinds.iter().any(|k| k == kind)),
            gate: &gate,
            tool: call.tool(),
            in_catalog: tool.is_some(),
            window: call.schedule(),
            now,
            allow_now_within: self.config.limits.allow_now_within,
            run_deadline: self.config.limits.run_deadline,
            approval_ttl: tenant.approval_ttl,
        };
        let mut admission = admit(&facts);
        if let Admission::Invalid { param, message } = admission {
            return Err(Error::validation(param, message));
        }
        // A call that would wait for a person may be allowed by a grant (SC-GR-02): its use
        // is committed first; a lost race for its last use waits for a person as usual.
        let grant = match admission {
            Admission::Approval { .. } => self.use_grant(&call, &gate, now).await?,
            _ => None,
        };
        if grant.is_some() {
            admission = granted(&facts);
        }
        let (inline, catalog_fingerprint) = match (&admission, tool) {
            (Admission::Ticket { due_at, .. }, Some(tool)) => (
                self.inline_claim(tool, *due_at, now),
                Some(tool.fingerprint()),
            ),
            _ => (None, None),
        };
        let (running, lease) = inline.unzip();
        let making = Making {
            gate: &gate,
            catalog_fingerprint,
            correlation_id: new_id("cor"),
            lease,
            time_zone: &tenant.time_zone,
            time_zone_name: &tenant.time_zone_name,
            person,
            grant: grant.as_ref().map(|g| g.terms()),
            now,
        };
        let first = first_form(call, admission, making).map_err(Error::Internal)?;
        Ok((first, running))
    }
}

/// A new id: `<prefix>_` + a ULID (`act_…` for an action, `cor_…` for a ticket's correlation).
pub(super) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// The intake answer for an action, the same on first sight and on replay.
fn answer(action: Action, replayed: bool) -> Result<Submitted, Error> {
    if action.state() == State::Denied && action.decision() == Decision::Deny {
        if let Some(refusal) = action.reason().and_then(Refusal::from_reason) {
            return Err(Error::Refused {
                code: refusal,
                message: refusal.message().to_owned(),
                action_id: action.id().to_owned(),
            });
        }
    }
    Ok(Submitted { action, replayed })
}
