//! The ticket: the one closed record a resume may act on (SPEC §1.1–1.2).
//!
//! Fields are private and read through accessors. A ticket is built only by
//! [`Ticket::commit`], called from the commit transitions; deserialization re-checks every
//! invariant, so a malformed stored ticket fails closed instead of running something.

use super::{call::Call, window::Window};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why the run waits. One kind today: a scheduled action (approved, or scheduled by policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AwaitReason {
    ScheduledAction,
}

/// The one await target: the exact tool call that was committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwaitTarget {
    pub reason: AwaitReason,
    pub call_id: String,
    pub tool: String,
    pub args: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TicketRecord {
    correlation_id: String,
    action_id: String,
    tenant: String,
    catalog_fingerprint: String,
    due_at: Timestamp,
    deadline: Timestamp,
    target: AwaitTarget,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TicketRecord", into = "TicketRecord")]
pub struct Ticket(TicketRecord);

/// What a ticket is committed with besides its call.
#[derive(Debug, Clone, PartialEq)]
pub struct Terms {
    /// `cor_` + a ULID, made by the caller (the domain generates nothing): a wake must name it.
    pub correlation_id: String,
    /// The tool's catalog entry as it was when the ticket committed (SC-RES-04).
    pub catalog_fingerprint: String,
    pub due_at: Timestamp,
    pub deadline: Timestamp,
}

impl Terms {
    /// The terms of a ticket committed at `now` for `call` (see [`span`]).
    pub fn new(
        call: &Call,
        correlation_id: String,
        catalog_fingerprint: String,
        at_once: bool,
        now: Timestamp,
        run_deadline: SignedDuration,
    ) -> Terms {
        let (due_at, deadline) = span(call.schedule(), at_once, now, run_deadline);
        Terms {
            correlation_id,
            catalog_fingerprint,
            due_at,
            deadline,
        }
    }
}

/// When a ticket committed at `now` runs — the one rule for intake (policy) and approval alike:
/// from the window's start, or `now` if that is later or it runs `at_once` (an allowed call
/// whose window opens within the minute, SC-INT-05), until the window's end; without a window,
/// from `now` until `run_deadline` later.
pub fn span(
    window: Option<Window>,
    at_once: bool,
    now: Timestamp,
    run_deadline: SignedDuration,
) -> (Timestamp, Timestamp) {
    let due_at = match window {
        Some(w) if !at_once => w.not_before.max(now),
        _ => now,
    };
    let deadline = window.map_or_else(
        || now.saturating_add(run_deadline).unwrap_or(Timestamp::MAX),
        |w| w.not_after,
    );
    (due_at, deadline.max(now))
}

impl Ticket {
    /// Build the ticket being committed for `call` on `terms`.
    pub(crate) fn commit(call: &Call, terms: &Terms) -> Ticket {
        let record = TicketRecord {
            correlation_id: terms.correlation_id.clone(),
            action_id: call.id().to_owned(),
            tenant: call.tenant().to_owned(),
            catalog_fingerprint: terms.catalog_fingerprint.clone(),
            due_at: terms.due_at,
            deadline: terms.deadline,
            target: AwaitTarget {
                reason: AwaitReason::ScheduledAction,
                call_id: call.call_id().to_owned(),
                tool: call.tool().to_owned(),
                args: call.args().clone(),
            },
        };
        Ticket::try_from(record).expect("the commit path builds a valid ticket")
    }

    pub fn correlation_id(&self) -> &str {
        &self.0.correlation_id
    }
    pub fn action_id(&self) -> &str {
        &self.0.action_id
    }
    pub fn tenant(&self) -> &str {
        &self.0.tenant
    }
    pub fn catalog_fingerprint(&self) -> &str {
        &self.0.catalog_fingerprint
    }
    /// Earliest start: `max(committed_at, not_before)`.
    pub fn due_at(&self) -> Timestamp {
        self.0.due_at
    }
    /// Latest start: the window's `not_after`.
    pub fn deadline(&self) -> Timestamp {
        self.0.deadline
    }
    pub fn reason(&self) -> AwaitReason {
        self.0.target.reason
    }
    pub fn call_id(&self) -> &str {
        &self.0.target.call_id
    }
    pub fn pending_tool(&self) -> &str {
        &self.0.target.tool
    }
    pub fn target(&self) -> &AwaitTarget {
        &self.0.target
    }
    /// The committed call: tool name and arguments.
    pub fn tool_call(&self) -> (&str, &Value) {
        (&self.0.target.tool, &self.0.target.args)
    }
}

impl TryFrom<TicketRecord> for Ticket {
    type Error = String;

    fn try_from(r: TicketRecord) -> Result<Self, String> {
        let non_empty = [
            ("correlation_id", &r.correlation_id),
            ("action_id", &r.action_id),
            ("tenant", &r.tenant),
            ("catalog_fingerprint", &r.catalog_fingerprint),
            ("call_id", &r.target.call_id),
            ("tool", &r.target.tool),
        ];
        if let Some((name, _)) = non_empty.iter().find(|(_, v)| v.is_empty()) {
            return Err(format!(
                "ticket must contain one valid closed await target: empty {name}"
            ));
        }
        if !r.correlation_id.starts_with("cor_") || !r.action_id.starts_with("act_") {
            return Err("ticket must contain one valid closed await target: bad ids".into());
        }
        if !r.target.args.is_object() {
            return Err(
                "ticket must contain one valid closed await target: args not an object".into(),
            );
        }
        if r.due_at > r.deadline {
            return Err(
                "ticket must contain one valid closed await target: due after deadline".into(),
            );
        }
        Ok(Ticket(r))
    }
}

impl From<Ticket> for TicketRecord {
    fn from(t: Ticket) -> Self {
        t.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ticket() -> Ticket {
        let call = Call::for_test("act_1", "mail.send", json!({"to": "a@b"}));
        let terms = Terms {
            correlation_id: "cor_1".into(),
            catalog_fingerprint: "sha256:ab".into(),
            due_at: "2026-10-21T12:00:00Z".parse().unwrap(),
            deadline: "2026-10-21T13:00:00Z".parse().unwrap(),
        };
        Ticket::commit(&call, &terms)
    }

    /// The one rule for a ticket's terms, as intake (allow: at once; schedule) and approval
    /// (SC-APP-03: due at the window's start, or now) commit them.
    #[test]
    fn sc_app_03_one_rule_for_when_a_ticket_runs() {
        let at = |secs: i64| Timestamp::from_second(1_800_000_000 + secs).unwrap();
        let w = |nb, na| {
            Some(Window {
                not_before: at(nb),
                not_after: at(na),
            })
        };
        let minute = SignedDuration::from_secs(60);
        #[rustfmt::skip]
        let table = [
            // window, at once, now → due, deadline
            (None,           false, 0,   (0, 60)),
            (None,           true,  0,   (0, 60)),
            (w(300, 900),    false, 0,   (300, 900)),
            (w(300, 900),    true,  0,   (0, 900)),
            (w(-10, 900),    false, 0,   (0, 900)),
            (w(300, 900),    false, 400, (400, 900)),
        ];
        for (i, (window, at_once, now, (due, deadline))) in table.into_iter().enumerate() {
            let span = span(window, at_once, at(now), minute);
            assert_eq!(span, (at(due), at(deadline)), "row {i}");
        }
    }

    #[test]
    fn round_trips_through_its_stored_form() {
        let t = ticket();
        let back: Ticket = serde_json::from_value(serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.tool_call().0, "mail.send");
    }

    #[test]
    fn malformed_tickets_fail_closed() {
        let good = serde_json::to_value(ticket()).unwrap();
        let mut cases = Vec::new();
        let mut v = good.clone();
        v["target"]["args"] = json!([1]);
        cases.push(v);
        let mut v = good.clone();
        v["correlation_id"] = json!("");
        cases.push(v);
        let mut v = good.clone();
        v["due_at"] = json!("2026-10-22T00:00:00Z");
        cases.push(v);
        let mut v = good.clone();
        v["target"]["second_target"] = json!({});
        cases.push(v);
        let mut v = good.clone();
        v["target"]["reason"] = json!("sleep");
        cases.push(v);
        let mut v = good;
        v.as_object_mut().unwrap().remove("tenant");
        cases.push(v);
        for case in cases {
            assert!(
                serde_json::from_value::<Ticket>(case.clone()).is_err(),
                "{case}"
            );
        }
    }
}
