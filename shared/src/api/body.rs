//! The request bodies and their shape checks: what a caller may send, turned into the domain
//! values the engine takes. The engine never sees a body.

use super::error::ApiError;
use crate::{
    domain::{canonical, submission::MAX_ID, RunRef, Submission, Window},
    Error,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Largest accepted request body.
pub const MAX_BODY: usize = 256 * 1024;
/// Largest accepted `args`, serialized.
pub const MAX_ARGS: usize = 64 * 1024;
/// Longest tool name.
const MAX_TOOL: usize = 256;
/// Longest deny reason.
pub(super) const MAX_REASON: usize = 1000;

/// The body of `POST /v1/actions`. Unknown fields are rejected.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// The tool to call: a name from the tenant's catalog.
    #[schema(min_length = 1)]
    pub tool: String,
    /// The call's arguments, exactly as the tool receives them (≤ 64 KiB serialized).
    #[schema(value_type = Object)]
    pub args: serde_json::Map<String, Value>,
    #[serde(default)]
    pub action_kind: Option<String>,
    #[serde(default)]
    pub run: Option<RunRef>,
    #[serde(default)]
    pub schedule: Option<RequestedWindow>,
}

/// RFC 3339 times with an offset; at least the minimum width apart, ending within 72 h.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestedWindow {
    // Both are required; read as options so that a missing one is named in the window's own
    // words ("not_before is required", `param: "schedule"`).
    #[schema(value_type = String, format = DateTime, required = true)]
    pub not_before: Option<String>,
    #[schema(value_type = String, format = DateTime, required = true)]
    pub not_after: Option<String>,
}

impl SubmitRequest {
    /// The call in shape, or the first field at fault. The window's rules that depend on the
    /// time (SC-INT-02) are the intake's.
    pub fn into_submission(self) -> Result<Submission, ApiError> {
        self.check_shape()?;
        // Of the payload as sent (window text included): what an idempotent replay must repeat.
        let payload_digest = canonical::digest(&self);
        let window = match &self.schedule {
            Some(w) => Some(
                Window::parse(w.not_before.as_deref(), w.not_after.as_deref())
                    .map_err(|m| Error::validation("schedule", m))?,
            ),
            None => None,
        };
        Ok(Submission {
            tool: self.tool,
            args: self.args,
            action_kind: self.action_kind,
            run: self.run,
            window,
            payload_digest,
        })
    }

    fn check_shape(&self) -> Result<(), ApiError> {
        if self.tool.trim().is_empty() {
            return Err(Error::validation("tool", "tool must be a non-empty string").into());
        }
        if self.tool.len() > MAX_TOOL {
            return Err(Error::validation("tool", "tool must be at most 256 bytes").into());
        }
        if let Some(kind) = &self.action_kind {
            if kind.trim().is_empty() || kind.len() > MAX_ID {
                return Err(Error::validation(
                    "action_kind",
                    format!("action_kind must be 1–{MAX_ID} bytes, or null"),
                )
                .into());
            }
        }
        if let Some(run) = &self.run {
            check_run(run)?;
        }
        let size = serde_json::to_vec(&self.args)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_ARGS {
            return Err(ApiError::PayloadTooLarge(format!(
                "args is {size} bytes; the limit is {MAX_ARGS}"
            )));
        }
        Ok(())
    }
}

fn check_run(run: &RunRef) -> Result<(), Error> {
    let ids = [
        ("run.run_id", &run.run_id),
        ("run.thread_id", &run.thread_id),
        ("run.call_id", &run.call_id),
    ];
    for (param, id) in ids {
        if id
            .as_ref()
            .is_some_and(|v| v.trim().is_empty() || v.len() > MAX_ID)
        {
            return Err(Error::validation(
                param,
                format!("{param} must be 1–{MAX_ID} bytes when given"),
            ));
        }
    }
    Ok(())
}

/// An `Idempotency-Key` (header, or MCP `_meta`): 1–255 visible ASCII characters.
pub fn idempotency_key(key: &str) -> Result<&str, Error> {
    let ok = !key.is_empty() && key.len() <= 255 && key.bytes().all(|b| (0x21..=0x7e).contains(&b));
    if ok {
        Ok(key)
    } else {
        Err(Error::validation(
            "Idempotency-Key",
            "Idempotency-Key must be 1–255 visible ASCII characters",
        ))
    }
}

/// The countersignature: the digest of the context the approver was shown, and the grant of
/// further calls the approver gives with it, if any (SC-GR-01, docs/grants.md).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    pub context_digest: String,
    #[serde(default)]
    pub grant: Option<GrantBody>,
}

/// A scoped grant asked for with an approve: each term optional.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantBody {
    /// How long it lasts, e.g. `"1h"`, `"7d"` as `"168h"` (default 1 h, at most 30 days).
    #[serde(default)]
    ttl: Option<String>,
    /// How many calls it allows (default 1, at most 1,000).
    #[serde(default)]
    uses: Option<u32>,
    /// Argument fields later calls must repeat exactly (the approved call's values).
    #[serde(default)]
    pin: Vec<String>,
    /// A CEL condition over the later call, like a policy rule's `when`.
    #[serde(default)]
    when: Option<String>,
}

impl GrantBody {
    /// The grant asked for, its ttl read as a duration (its bounds are the domain's).
    pub fn ask(self) -> Result<crate::domain::grant::Ask, Error> {
        let ttl = match &self.ttl {
            Some(text) => Some(text.parse::<jiff::SignedDuration>().map_err(|_| {
                Error::validation(
                    "grant.ttl",
                    format!(
                        "{:?} is not a duration like \"90m\", \"1h\", \"720h\"",
                        crate::error::shown(text)
                    ),
                )
            })?),
            None => None,
        };
        Ok(crate::domain::grant::Ask {
            ttl,
            uses: self.uses,
            pin: self.pin,
            when: self.when,
        })
    }
}

/// The confirmation page's form (`application/x-www-form-urlencoded`, docs/email.md): read
/// field by field, the first of each name, a missing one empty.
#[derive(ToSchema)]
pub struct ConfirmForm {
    /// The mailed link's token.
    pub token: String,
    /// `approve` or `deny`.
    pub decision: String,
    /// A deny's reason, in the approver's words.
    pub reason: Option<String>,
}

impl ConfirmForm {
    pub fn read(form: &[u8]) -> ConfirmForm {
        let field = |name: &str| {
            form_urlencoded::parse(form)
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        ConfirmForm {
            token: field("token").unwrap_or_default(),
            decision: field("decision").unwrap_or_default(),
            reason: field("reason"),
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyBody {
    /// Why, in the approver's words (1–1000 characters).
    reason: String,
}

impl DenyBody {
    /// The reason, trimmed.
    pub fn reason(&self) -> Result<&str, Error> {
        reason_at("reason", &self.reason)
    }
}

/// A deny's reason, trimmed: 1–1000 characters, or a validation error for `param`.
fn reason_at<'a>(param: &str, reason: &'a str) -> Result<&'a str, Error> {
    let reason = reason.trim();
    if reason.is_empty() || reason.len() > MAX_REASON {
        return Err(Error::validation(
            param,
            format!("{param} must be 1–1000 characters"),
        ));
    }
    Ok(reason)
}

/// The body of `POST /v1/decisions` (SC-GR-20): one decision per action, 1–100 of them.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    #[schema(min_items = 1, max_items = 100)]
    pub decisions: Vec<DecisionItem>,
}

/// One action's decision, as its own approve or deny would take it.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionItem {
    /// `act_` + ULID.
    pub id: String,
    pub decision: Verdict,
    /// The digest of the context the approver was shown: required to approve; a deny that
    /// gives one is refused `context_changed` when it is no longer current.
    #[serde(default)]
    pub context_digest: Option<String>,
    /// A deny's reason, in the approver's words (1–1000 characters); an approve takes none.
    #[serde(default)]
    pub reason: Option<String>,
}

/// What a person decided of one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approve,
    Deny,
}

impl DecideBody {
    /// The rulings in order, or the first entry at fault (nothing is decided then).
    pub fn rulings(self) -> Result<Vec<crate::engine::Ruling>, Error> {
        use crate::engine::{Ruling, RulingKind};
        let mut out = Vec::with_capacity(self.decisions.len());
        for (i, d) in self.decisions.into_iter().enumerate() {
            let at = |field: &str| format!("decisions[{i}].{field}");
            let kind = match (d.decision, d.context_digest, d.reason) {
                (Verdict::Approve, Some(context_digest), None) => {
                    RulingKind::Approve { context_digest }
                }
                (Verdict::Approve, None, _) => {
                    return Err(Error::validation(
                        &at("context_digest"),
                        "an approve needs the context_digest the approver was shown",
                    ))
                }
                (Verdict::Approve, Some(_), Some(_)) => {
                    return Err(Error::validation(
                        &at("reason"),
                        "an approve takes no reason",
                    ))
                }
                (Verdict::Deny, context_digest, reason) => RulingKind::Deny {
                    reason: reason_at(&at("reason"), reason.as_deref().unwrap_or(""))?.to_owned(),
                    context_digest,
                },
            };
            out.push(Ruling {
                action_id: d.id,
                kind,
            });
        }
        Ok(out)
    }
}

/// Whom to stop: one agent, or (no body, or no `agent_id`) the whole tenant.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopBody {
    #[serde(default)]
    agent_id: Option<String>,
}

impl StopBody {
    /// The agent to stop; `None`: the whole tenant.
    pub fn agent_id(&self) -> Result<Option<&str>, Error> {
        match self.agent_id.as_deref() {
            Some(id) if id.trim().is_empty() || id == "*" || id.len() > MAX_ID => {
                Err(Error::validation(
                    "agent_id",
                    "agent_id must be an agent id; omit it to stop the tenant",
                ))
            }
            id => Ok(id),
        }
    }
}
