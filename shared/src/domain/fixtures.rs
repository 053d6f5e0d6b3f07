//! Test fixtures shared by the domain's unit tests.

use super::{
    action::{Action, Approval, Decision, Standing},
    call::Call,
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
    let approval = Approval {
        context_digest: canonical::digest(&context),
        context,
        expires_at: at(3600),
        approver: None,
        person: None,
        decided_at: None,
        quorum: Default::default(),
    };
    Action::first(
        Call::for_test(id, "mail.send", args),
        Decision::RequireApproval,
        Standing::PendingApproval { approvals: vec![] },
        Some(approval),
        at(0),
    )
}
