//! The call: what an agent asked to run — its id and tenant, the agent, the tool, the args and
//! their digest, the action kind, the caller's run ids and the window. Committed once at
//! intake, never changed by a transition; every state of an [`Action`](super::Action) holds the
//! same one, and everything that needs the call (the policy gate, the approval context, the
//! ticket, the audit chain's genesis, the deed, the view) borrows it from here.
//!
//! Adding a member to the call: here (the type, its reader, its stored form — the compiler
//! points at the constructors and at `write`), the DynamoDB mapping (`store/dynamodb/item.rs`)
//! and the view (`api/view.rs`, by [`Shown`]) — a test of each fails until the member is there;
//! the versioned documents (the chain's genesis, the approval context, the deed) take it only
//! with a new format. A member absent from old records is left out of the stored form when
//! absent (as `run` is), so their bytes do not change.

pub use super::submission::RunRef;
use super::{canonical, condition::CallFacts, submission::Submission, window::Window};
use serde::{ser::SerializeStruct, Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

/// One committed tool call. Read through its accessors (its fields are the domain's); built by [`Call::submitted`] (or read
/// back from its stored form, the members at the top level of the action's record).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Call {
    pub(super) id: String,
    pub(super) tenant: String,
    pub(super) agent_id: String,
    pub(super) tool: String,
    pub(super) args: Value,
    pub(super) args_digest: String,
    pub(super) action_kind: Option<String>,
    /// Absent in records written without run ids.
    #[serde(default)]
    pub(super) run: Option<RunRef>,
    pub(super) schedule: Option<Window>,
}

impl Call {
    /// The call `agent_id` of `tenant` submitted, under the action id `id` (made by the
    /// caller: the domain generates nothing), its window already held to the window rules.
    pub fn submitted(
        id: String,
        tenant: &str,
        agent_id: &str,
        submission: Submission,
        schedule: Option<Window>,
    ) -> Call {
        Call {
            id,
            tenant: tenant.to_owned(),
            agent_id: agent_id.to_owned(),
            tool: submission.tool,
            args_digest: canonical::digest(&submission.args),
            args: Value::Object(submission.args),
            action_kind: submission.action_kind,
            run: submission.run,
            schedule,
        }
    }

    /// A call not submitted, as the policy would see it from `agent_id` of `tenant` (explain,
    /// SC-POL-05): no id, no run ids.
    pub fn hypothetical(
        tenant: &str,
        agent_id: &str,
        tool: String,
        args: Map<String, Value>,
        action_kind: Option<String>,
        schedule: Option<Window>,
    ) -> Call {
        Call {
            id: String::new(),
            tenant: tenant.to_owned(),
            agent_id: agent_id.to_owned(),
            tool,
            args_digest: canonical::digest(&args),
            args: Value::Object(args),
            action_kind,
            run: None,
            schedule,
        }
    }

    /// `act_` + a ULID.
    pub fn id(&self) -> &str {
        &self.id
    }
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }
    pub fn tool(&self) -> &str {
        &self.tool
    }
    /// The arguments, exactly as the tool will receive them (a JSON object).
    pub fn args(&self) -> &Value {
        &self.args
    }
    /// `sha256:<hex>` of the canonical args.
    pub fn args_digest(&self) -> &str {
        &self.args_digest
    }
    pub fn action_kind(&self) -> Option<&str> {
        self.action_kind.as_deref()
    }
    pub fn run(&self) -> Option<&RunRef> {
        self.run.as_ref()
    }
    /// The window it may run in, if it has one.
    pub fn schedule(&self) -> Option<Window> {
        self.schedule
    }

    /// The window, borrowed (for the forms that hold it by reference).
    pub fn schedule_ref(&self) -> Option<&Window> {
        self.schedule.as_ref()
    }

    /// The id the tool sees for this call: the caller's `run.call_id`, else the action id.
    pub fn call_id(&self) -> &str {
        self.run
            .as_ref()
            .and_then(|r| r.call_id.as_deref())
            .filter(|c| !c.trim().is_empty())
            .unwrap_or(&self.id)
    }

    /// What a policy condition sees of this call at `now` (SC-POL-01).
    pub fn facts(&self, now: jiff::Timestamp) -> CallFacts<'_> {
        CallFacts {
            tool: &self.tool,
            args: &self.args,
            agent_id: &self.agent_id,
            action_kind: self.action_kind.as_deref(),
            schedule: self.schedule,
            now,
        }
    }

    /// The call as the API shows it (`run` always present, null when none).
    pub fn shown(&self) -> Shown<'_> {
        Shown(self)
    }

    /// The members in their stored (and shown) order; `run` left out when absent unless
    /// `run_always`.
    fn write<S: Serializer>(&self, s: S, run_always: bool) -> Result<S::Ok, S::Error> {
        // Every member named, so a new one does not compile until its stored form is written.
        let Call {
            id,
            tenant,
            agent_id,
            tool,
            args,
            args_digest,
            action_kind,
            run,
            schedule,
        } = self;
        let mut m = s.serialize_struct("Call", 9)?;
        m.serialize_field("id", id)?;
        m.serialize_field("tenant", tenant)?;
        m.serialize_field("agent_id", agent_id)?;
        m.serialize_field("tool", tool)?;
        m.serialize_field("args", args)?;
        m.serialize_field("args_digest", args_digest)?;
        m.serialize_field("action_kind", action_kind)?;
        if run_always || run.is_some() {
            m.serialize_field("run", run)?;
        } else {
            m.skip_field("run")?;
        }
        m.serialize_field("schedule", schedule)?;
        m.end()
    }
}

/// The stored form: the members in order, `run` only when given (records written before run
/// ids existed have none, and a record is written as it was read).
impl Serialize for Call {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.write(s, false)
    }
}

/// The call as the API answers it: the stored form with `run` always present.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(&'a Call);

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write(s, true)
    }
}

/// A call for tests: `tool` with `args` from `agent-1` of `acme`, no kind, run ids or window.
/// Compiled always (hidden from the docs): the store conformance tests in the tests crate build
/// records with it, and the product crate keeps no feature only for them.
#[doc(hidden)]
impl Call {
    pub fn for_test(id: &str, tool: &str, args: Value) -> Call {
        Call {
            id: id.to_owned(),
            tenant: "acme".into(),
            agent_id: "agent-1".into(),
            tool: tool.to_owned(),
            args_digest: canonical::digest(&args),
            args,
            action_kind: None,
            run: None,
            schedule: None,
        }
    }

    /// This call with another window.
    pub fn with_schedule(self, schedule: Option<Window>) -> Call {
        Call { schedule, ..self }
    }

    /// This call from another agent of another tenant.
    pub fn with_caller(self, tenant: &str, agent_id: &str) -> Call {
        Call {
            tenant: tenant.to_owned(),
            agent_id: agent_id.to_owned(),
            ..self
        }
    }

    /// This call with an action kind and run ids.
    pub fn with_kind_and_run(self, action_kind: Option<&str>, run: Option<RunRef>) -> Call {
        Call {
            action_kind: action_kind.map(str::to_owned),
            run,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn submission(run: Option<RunRef>) -> Submission {
        Submission {
            tool: "mail.send".into(),
            args: json!({"to": "a@b", "n": 1.5}).as_object().unwrap().clone(),
            action_kind: Some("email".into()),
            run,
            window: None,
            payload_digest: "sha256:00".into(),
        }
    }

    /// SC-EDGE-03: the stored form leaves out absent run ids, the shown form keeps them null,
    /// and both read back into the same call.
    #[test]
    fn sc_edge_03_the_stored_and_shown_forms() {
        let call = Call::submitted("act_1".into(), "acme", "agent-1", submission(None), None);
        let stored = serde_json::to_string(&call).unwrap();
        let expected = format!(
            r#"{{"id":"act_1","tenant":"acme","agent_id":"agent-1","tool":"mail.send","args":{{"n":1.5,"to":"a@b"}},"args_digest":"{}","action_kind":"email","schedule":null}}"#,
            call.args_digest()
        );
        assert_eq!(stored, expected);
        let shown = serde_json::to_value(call.shown()).unwrap();
        assert_eq!(shown["run"], Value::Null);
        assert_eq!(serde_json::from_str::<Call>(&stored).unwrap(), call);
        assert_eq!(serde_json::from_value::<Call>(shown).unwrap(), call);
    }

    /// The tool sees the caller's call id, or the action id when there is none (or a blank one).
    #[test]
    fn sc_res_07_the_call_id_the_tool_sees() {
        let with = |call_id: Option<&str>| {
            let run = RunRef {
                call_id: call_id.map(str::to_owned),
                ..RunRef::default()
            };
            Call::submitted("act_1".into(), "acme", "a", submission(Some(run)), None)
        };
        assert_eq!(with(Some("call-9")).call_id(), "call-9");
        assert_eq!(with(Some("  ")).call_id(), "act_1");
        assert_eq!(with(None).call_id(), "act_1");
    }
}
