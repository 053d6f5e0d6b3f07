//! Notifications (SC-NOT-01/02): which transitions notify, the stable event id, the payloads,
//! and the outbox entry's retry rule. Pure: the worker in `crate::notify` does the I/O.

use super::{action::Action, audit::Event, state::State};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The events a tenant can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// The action entered `pending_approval`: a person should look at it.
    ApprovalRequested,
    /// The last approval committed its ticket (`pending_approval → approved`): a Slack message
    /// loses its buttons (SC-CH-03).
    ActionApproved,
    /// The action was sealed (any terminal state).
    ActionSealed,
}

impl NoticeKind {
    pub const ALL: [NoticeKind; 3] = [
        NoticeKind::ApprovalRequested,
        NoticeKind::ActionApproved,
        NoticeKind::ActionSealed,
    ];

    /// The notice an audit event raises, if any: entering `pending_approval`, the approval that
    /// commits the ticket, or any sealing.
    pub fn of(event: &Event) -> Option<NoticeKind> {
        match (event.from, event.to) {
            (_, to) if to.is_sealed() => Some(NoticeKind::ActionSealed),
            (None, State::PendingApproval) => Some(NoticeKind::ApprovalRequested),
            // A quorum's partial approval: asked again, saying how many are still needed.
            (Some(State::PendingApproval), State::PendingApproval) => {
                Some(NoticeKind::ApprovalRequested)
            }
            (Some(State::PendingApproval), State::Approved) => Some(NoticeKind::ActionApproved),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::ApprovalRequested => "approval_requested",
            NoticeKind::ActionApproved => "action_approved",
            NoticeKind::ActionSealed => "action_sealed",
        }
    }

    pub fn parse(s: &str) -> Option<NoticeKind> {
        NoticeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The stable id of the notice raised by event `seq` of an action: every delivery of it, to
/// every endpoint, on every retry or redelivery, carries this same id (receivers dedupe on it).
pub fn notice_id(action_id: &str, seq: u64) -> String {
    let ulid = action_id.strip_prefix("act_").unwrap_or(action_id);
    format!("ntf_{ulid}_{seq}")
}

/// `ntf_<ulid>_<seq>` back to (`act_<ulid>`, seq); anything else names no notice.
pub fn parse_notice_id(id: &str) -> Option<(String, u64)> {
    let (ulid, seq_text) = id.strip_prefix("ntf_")?.split_once('_')?;
    let ulid_ok = ulid.len() == 26 && ulid.bytes().all(|b| b.is_ascii_alphanumeric());
    let seq: u64 = seq_text.parse().ok().filter(|s| *s > 0)?;
    // One spelling per notice: no leading zeros, no sign.
    (ulid_ok && seq.to_string() == seq_text).then(|| (format!("act_{ulid}"), seq))
}

/// One notice, ready to render for an endpoint.
pub struct Notice<'a> {
    pub kind: NoticeKind,
    pub action: &'a Action,
    pub event: &'a Event,
    /// Where an approver opens this action (the approver page).
    pub page_url: String,
    /// What the request said when it was raised ([`OutboxEntry::asked`]); `None` for an entry
    /// written before it was kept, told from the action as it is now.
    pub asked: Option<&'a Asked>,
}

/// Where a quorum stood when an approval request was raised. Kept on the outbox entry so every
/// try of one notice sends the same body: the action may have moved on (another approval, a
/// deny, the run) before a retry, and the notice is of its event, not of the action now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asked {
    pub approvals_needed: u32,
    pub approved_by: Vec<String>,
}

impl Asked {
    fn of(a: &Action) -> Asked {
        Asked {
            approvals_needed: still_needed(a),
            approved_by: a.approvals().iter().map(|s| s.approver.clone()).collect(),
        }
    }
}

impl Notice<'_> {
    pub fn id(&self) -> String {
        notice_id(self.action.id(), self.event.seq)
    }

    /// The generic signed JSON (docs/notifications.md).
    pub fn json(&self) -> Value {
        json!({
            "id": self.id(),
            "type": self.kind.as_str(),
            "tenant": self.action.tenant(),
            "action_id": self.action.id(),
            "occurred_at": super::time::text(&self.event.at),
            "data": self.data(),
        })
    }

    /// The quorum as the request was raised.
    fn asked(&self) -> Asked {
        self.asked
            .cloned()
            .unwrap_or_else(|| Asked::of(self.action))
    }

    fn data(&self) -> Value {
        let a = self.action;
        match self.kind {
            NoticeKind::ApprovalRequested => {
                let approval = a.approval.as_ref();
                let asked = self.asked();
                json!({
                    "tool": a.call().tool(),
                    "args": a.call().args(),
                    "agent_id": a.call().agent_id(),
                    "context": approval.map(|p| &p.context),
                    "context_digest": approval.map(|p| &p.context_digest),
                    "expires_at": approval.map(|p| super::time::text(&p.expires_at)),
                    "approvals_needed": asked.approvals_needed,
                    "approved_by": asked.approved_by,
                    "page_url": self.page_url,
                })
            }
            NoticeKind::ActionApproved => json!({
                "approved_by": a.approval().and_then(|p| p.approver.as_ref()),
                "due_at": a.ticket().map(|t| super::time::text(&t.due_at())),
            }),
            NoticeKind::ActionSealed => json!({
                "state": self.event.to,
                "reason": self.event.reason,
                "outcome_kind": outcome_kind(a),
            }),
        }
    }

    /// Shaped for Slack incoming webhooks: `{"text", "blocks"}`. Carries no arguments (a chat
    /// channel is wider than the approvers); the page shows them.
    pub fn slack(&self) -> Value {
        let a = self.action;
        let text = match self.kind {
            NoticeKind::ApprovalRequested => {
                let window = a
                    .approval
                    .as_ref()
                    .and_then(|p| p.context["schedule"]["summary"].as_str())
                    .map(|s| format!(", to run {s}"))
                    .unwrap_or_default();
                let asked = self.asked();
                let needed = match (asked.approvals_needed, asked.approved_by.len()) {
                    (n, 0) if n <= 1 => String::new(),
                    (n, 0) => format!(" ({n} approvals needed)"),
                    (n, given) => format!(" ({given} approved, {n} more needed)"),
                };
                format!(
                    "Approval requested: `{}` from agent `{}`{window}{needed}. <{}|Review it>",
                    a.call().tool(),
                    a.call().agent_id(),
                    self.page_url
                )
            }
            NoticeKind::ActionApproved => format!(
                "`{}` ({}) is approved by {}",
                a.call().tool(),
                a.id(),
                a.approval()
                    .and_then(|p| p.approver.as_deref())
                    .unwrap_or("an approver")
            ),
            NoticeKind::ActionSealed => format!(
                "`{}` ({}) is {}: {}",
                a.call().tool(),
                a.id(),
                self.event.to,
                self.event.reason.as_deref().unwrap_or("no reason")
            ),
        };
        json!({
            "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        })
    }
}

/// How many approvals a pending action still needs (SC-POL-04).
pub(super) fn still_needed(a: &Action) -> u32 {
    match a.next_action() {
        super::next::NextAction::Approval { still_needed, .. } => still_needed,
        _ => 0,
    }
}

/// `result` (the tool answered), `error` (the tool failed) or `reason` (sealed without a run).
fn outcome_kind(action: &Action) -> &'static str {
    match &action.outcome() {
        Some(o) if o.result.is_some() => "result",
        Some(o) if o.error.is_some() => "error",
        _ => "reason",
    }
}

/// How long a failing notice is retried: `first`, doubling up to `cap`, for `attempts` tries;
/// then it is parked as a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryRule {
    pub first: SignedDuration,
    pub cap: SignedDuration,
    pub attempts: u32,
}

impl Default for RetryRule {
    /// 10 s, 20 s, … capped at 15 min, 20 tries: a receiver may be down for about 3.5 hours.
    fn default() -> Self {
        RetryRule {
            first: SignedDuration::from_secs(10),
            cap: SignedDuration::from_mins(15),
            attempts: 20,
        }
    }
}

impl RetryRule {
    /// The pause after failed try number `n` (1-based); `None` once the tries are used up.
    pub fn pause_after(&self, n: u32) -> Option<SignedDuration> {
        if n >= self.attempts {
            return None;
        }
        let doubled = (0..n.saturating_sub(1)).fold(self.first, |d, _| {
            d.checked_mul(2).unwrap_or(self.cap).min(self.cap)
        });
        Some(doubled.min(self.cap))
    }
}

/// One notice waiting in the outbox: written with its transition (same conditional write),
/// removed once every subscribed endpoint answered 2xx.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxEntry {
    pub tenant: String,
    pub action_id: String,
    pub seq: u64,
    pub kind: NoticeKind,
    /// Failed tries so far.
    pub attempts: u32,
    pub next_at: Timestamp,
    /// Set when the tries are used up: a dead letter, kept until an admin redelivers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_at: Option<Timestamp>,
    /// Why the last try failed (a kind and a status; never a URL or a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Endpoints (by [`endpoint_key`]) that already took it: a retry skips them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delivered: Vec<String>,
    /// Bumped by every change: the conditional update's expected value.
    pub rev: u64,
    /// An approval request's quorum as it was raised: what every try of it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Asked>,
}

/// What a try leaves behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Every endpoint took it: remove the entry.
    Done,
    /// Try again at `next_at` (or parked dead).
    Again(OutboxEntry),
}

impl OutboxEntry {
    /// The entry of an action's event, if the event notifies.
    /// `action` is the action as the event left it.
    pub fn for_event(action: &Action, event: &Event) -> Option<OutboxEntry> {
        let kind = NoticeKind::of(event)?;
        Some(OutboxEntry {
            tenant: action.tenant().to_owned(),
            action_id: action.id().to_owned(),
            seq: event.seq,
            kind,
            attempts: 0,
            next_at: event.at,
            dead_at: None,
            last_error: None,
            delivered: Vec::new(),
            rev: 0,
            asked: (kind == NoticeKind::ApprovalRequested).then(|| Asked::of(action)),
        })
    }

    pub fn id(&self) -> String {
        notice_id(&self.action_id, self.seq)
    }

    /// After a try: `took` the endpoints that answered 2xx now, `failure` why another did not.
    pub fn after_try(
        &self,
        took: Vec<String>,
        failure: Option<String>,
        now: Timestamp,
        rule: &RetryRule,
    ) -> Settled {
        let Some(failure) = failure else {
            return Settled::Done;
        };
        let mut next = self.clone();
        next.delivered.extend(took);
        next.attempts += 1;
        next.last_error = Some(failure);
        next.rev += 1;
        match rule.pause_after(next.attempts) {
            Some(pause) => next.next_at = now.saturating_add(pause).expect("in range"),
            None => next.dead_at = Some(now),
        }
        Settled::Again(next)
    }

    /// An admin's redelivery: a fresh round of tries from now, to every endpoint.
    pub fn revived(&self, now: Timestamp) -> OutboxEntry {
        OutboxEntry {
            attempts: 0,
            next_at: now,
            dead_at: None,
            delivered: Vec::new(),
            rev: self.rev + 1,
            ..self.clone()
        }
    }
}

/// A short name for an endpoint that does not reveal its URL (which may hold a token).
pub fn endpoint_key(url: &str) -> String {
    super::canonical::sha256_hex(url.as_bytes())[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Actor;

    fn event(from: Option<State>, to: State) -> Event {
        crate::domain::audit::Entry {
            seq: 2,
            at: Timestamp::UNIX_EPOCH,
            actor: Actor::system(),
            from,
            to,
            reason: None,
            context_digest: None,
            outcome_digest: None,
            grant: None,
            shadow: Vec::new(),
        }
        .chain("")
    }

    #[test]
    fn sc_not_01_which_transitions_notify() {
        use State::*;
        let table = [
            (None, PendingApproval, Some(NoticeKind::ApprovalRequested)),
            (None, Denied, Some(NoticeKind::ActionSealed)),
            (None, Succeeded, Some(NoticeKind::ActionSealed)),
            (None, Approved, None),
            (None, Executing, None),
            (
                Some(PendingApproval),
                Approved,
                Some(NoticeKind::ActionApproved),
            ),
            // SC-POL-04: a quorum's partial approval asks again.
            (
                Some(PendingApproval),
                PendingApproval,
                Some(NoticeKind::ApprovalRequested),
            ),
            (Some(Approved), Executing, None),
            (Some(Executing), Executing, None),
            (
                Some(PendingApproval),
                Cancelled,
                Some(NoticeKind::ActionSealed),
            ),
            (
                Some(PendingApproval),
                Denied,
                Some(NoticeKind::ActionSealed),
            ),
            (Some(Approved), Cancelled, Some(NoticeKind::ActionSealed)),
            (Some(Executing), Succeeded, Some(NoticeKind::ActionSealed)),
            (Some(Executing), Failed, Some(NoticeKind::ActionSealed)),
        ];
        for (from, to, expected) in table {
            assert_eq!(
                NoticeKind::of(&event(from, to)),
                expected,
                "{from:?} → {to}"
            );
        }
    }

    /// An action pending a quorum of two, as its creation left it.
    fn pending_two() -> Action {
        use crate::domain::{
            fixtures::{at, pending},
            transition::Creation,
        };
        let mut a = pending(
            "act_01J0000000000000000000000N",
            serde_json::json!({"amount": 1}),
        );
        a.approval.as_mut().unwrap().quorum.required = 2;
        Creation::new(a, Actor::agent("agent-1"), None, at(0))
            .action
            .clone()
    }

    /// SC-POL-04: after one of two approvals the notice says one more is needed, and by whom
    /// the first was given.
    #[test]
    fn sc_pol_04_a_partial_approval_says_how_many_are_still_needed() {
        use crate::domain::{fixtures::at, transition::Transition};
        let a = pending_two();
        let signed = Transition::sign(&a, "fin-1", &[], at(1)).unwrap();
        assert!(signed.notify);
        let notice = Notice {
            kind: NoticeKind::ApprovalRequested,
            action: &signed.action,
            event: &signed.event,
            page_url: "https://example.test/ui/".into(),
            asked: None,
        };
        let data = &notice.json()["data"];
        assert_eq!(data["approvals_needed"], 1);
        assert_eq!(data["approved_by"], serde_json::json!(["fin-1"]));
        let text = notice.slack()["text"].as_str().unwrap().to_owned();
        assert!(text.contains("(1 approved, 1 more needed)"), "{text}");
    }

    /// SC-NOT-01: a retry sends the same notice even when the action moved on meanwhile. Caught
    /// by tests/notifications.rs (receiver down, then up, on Postgres): the quorum's figures were
    /// told from the action at each try, so a retry after the second approval said
    /// `approvals_needed: 0, approved_by: []` under the first try's id.
    #[test]
    fn sc_not_01_a_retry_tells_the_request_as_it_was_raised() {
        use crate::domain::{fixtures::at, transition::Transition};
        let a = pending_two();
        let first = Transition::sign(&a, "fin-1", &[], at(1)).unwrap();
        let entry = OutboxEntry::for_event(&first.action, &first.event).unwrap();
        let notice = |action| Notice {
            kind: entry.kind,
            action,
            event: &first.event,
            page_url: "https://example.test/ui/".into(),
            asked: entry.asked.as_ref(),
        };
        let raised = notice(&first.action).json();
        // The action moves on before the retry: here it lapses (a deny or the run alike).
        let reason = crate::domain::SealReason::ApprovalExpired;
        let moved = Transition::seal(&first.action, Actor::system(), &reason, at(2));
        assert_ne!(moved.action.state(), State::PendingApproval);
        assert_eq!(notice(&moved.action).json(), raised);
        assert_eq!(raised["data"]["approvals_needed"], 1);
        assert_eq!(raised["data"]["approved_by"], serde_json::json!(["fin-1"]));
    }

    #[test]
    fn sc_not_01_notice_ids_are_stable_and_parse_back() {
        let action = "act_01JC0000000000000000000000";
        assert_eq!(notice_id(action, 3), "ntf_01JC0000000000000000000000_3");
        assert_eq!(
            parse_notice_id(&notice_id(action, 3)),
            Some((action.to_owned(), 3))
        );
        for bad in [
            "",
            "ntf_",
            "ntf_01JC0000000000000000000000",
            "ntf_01JC0000000000000000000000_0",
            "ntf_01JC0000000000000000000000_03",
            "ntf_01JC0000000000000000000000_x",
            "ntf_01JC00000000000000000000_1",
            "act_01JC0000000000000000000000_1",
            "ntf_01JC00000000000000000000-!_1",
        ] {
            assert_eq!(parse_notice_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn sc_not_02_retries_back_off_then_park() {
        let rule = RetryRule::default();
        let pauses: Vec<_> = (1..=21).map(|n| rule.pause_after(n)).collect();
        assert_eq!(pauses[0], Some(SignedDuration::from_secs(10)));
        assert_eq!(pauses[1], Some(SignedDuration::from_secs(20)));
        assert_eq!(pauses[6], Some(SignedDuration::from_secs(640)));
        assert_eq!(pauses[7], Some(SignedDuration::from_mins(15)));
        assert_eq!(pauses[18], Some(SignedDuration::from_mins(15)));
        assert_eq!(pauses[19], None);
        let covered: SignedDuration = pauses.iter().flatten().copied().sum();
        assert!(covered > SignedDuration::from_hours(1), "{covered:#}");

        let now = Timestamp::UNIX_EPOCH;
        let entry = OutboxEntry {
            tenant: "acme".into(),
            action_id: "act_x".into(),
            seq: 1,
            kind: NoticeKind::ApprovalRequested,
            attempts: 0,
            next_at: now,
            dead_at: None,
            last_error: None,
            delivered: vec![],
            rev: 0,
            asked: None,
        };
        let two_tries = RetryRule {
            attempts: 2,
            ..rule
        };
        assert_eq!(
            entry.after_try(vec!["a".into()], None, now, &two_tries),
            Settled::Done
        );
        let Settled::Again(once) =
            entry.after_try(vec!["a".into()], Some("http 503".into()), now, &two_tries)
        else {
            panic!("a failure is tried again")
        };
        assert_eq!(
            (
                once.attempts,
                once.rev,
                once.dead_at,
                once.delivered.clone()
            ),
            (1, 1, None, vec!["a".to_owned()])
        );
        assert_eq!(once.next_at, now + SignedDuration::from_secs(10));
        let Settled::Again(dead) = once.after_try(vec![], Some("timeout".into()), now, &two_tries)
        else {
            panic!("a failure is kept")
        };
        assert_eq!((dead.attempts, dead.dead_at), (2, Some(now)));
        let revived = dead.revived(now);
        assert_eq!(
            (
                revived.attempts,
                revived.dead_at,
                revived.delivered.len(),
                revived.rev
            ),
            (0, None, 0, 3)
        );
    }
}
