//! Test fixtures shared by the domain's unit tests.

use super::{
    action::{Action, Actor, Approval, Decision, Stage},
    canonical,
};
use jiff::Timestamp;
use serde_json::{json, Value};

/// A fixed instant `secs` after a base (tests never read the clock).
pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + secs).unwrap()
}

/// An uncommitted action of tenant `acme` waiting for a countersignature of `mail.send(args)`.
pub fn pending(id: &str, args: Value) -> Action {
    // As intake builds it (domain::context): the call the approver is shown.
    let context =
        json!({"tool": "mail.send", "args": args, "agent_id": "agent-1", "action_kind": null});
    Action {
        id: id.into(),
        tenant: "acme".into(),
        agent_id: "agent-1".into(),
        tool: "mail.send".into(),
        args_digest: canonical::digest(&args),
        args,
        action_kind: None,
        run: None,
        schedule: None,
        decision: Decision::RequireApproval,
        stage: Stage::PendingApproval { approvals: vec![] },
        approval: Some(Approval {
            context_digest: canonical::digest(&context),
            context,
            expires_at: at(3600),
            approver: None,
            decided_at: None,
            quorum: Default::default(),
        }),
        actor: Actor::agent("agent-1"),
        version: 0,
        created_at: at(0),
        updated_at: at(0),
        chain_head: String::new(),
    }
}
