//! The item encoding's tests: compact values, kept members, and every lifecycle step round-tripping.
use super::*;

#[test]
fn compact_values_round_trip() {
    for actor in [
        Actor::system(),
        Actor::agent("billing-agent"),
        Actor::user("ana:ops"),
    ] {
        assert_eq!(actor_of(&actor_code(&actor)).unwrap(), actor);
    }
    for st in State::ALL {
        assert_eq!(state_of(state_code(st)).unwrap(), st);
    }
    let hash = "ab".repeat(32);
    assert!(matches!(hash_value(&hash), AttributeValue::B(_)));
    assert_eq!(hash_of(&hash_value(&hash)).unwrap(), hash);
    assert_eq!(hash_of(&hash_value("AB")).unwrap(), "AB");
    let upper = "AB".repeat(32);
    assert_eq!(
        hash_of(&hash_value(&upper)).unwrap(),
        upper,
        "not lower hex: kept as text"
    );
    let digest = format!("sha256:{hash}");
    assert!(matches!(digest_value(&digest), AttributeValue::B(_)));
    assert_eq!(digest_of(&digest_value(&digest)).unwrap(), digest);
    assert_eq!(digest_of(&digest_value("sha512:x")).unwrap(), "sha512:x");
}

#[test]
fn unknown_members_are_kept() {
    let rest = leftovers(json!({"seq": 1, "new_field": [1]}), &EVENT_FIELDS).unwrap();
    assert_eq!(Value::Object(rest), json!({"new_field": [1]}));
    assert!(leftovers(json!({"seq": 1}), &EVENT_FIELDS).is_none());
}

use crate::domain::{
    action::{Approval, Person},
    quorum::Signer,
    transition::TicketTerms,
    Change, Creation, Decision, SealReason, Standing, Transition,
};

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A stand-in for the table: the state item after a create and after each commit, as
/// `UpdateItem` would leave it (SET, REMOVE, the event appended).
fn store(transitions: &[Change]) -> Item {
    let (first, rest) = transitions.split_first().unwrap();
    let mut state = state_item(&first.action, &first.event, None);
    for tr in rest {
        let attributes = state_attributes(&tr.action, &tr.event, None);
        for (name, value) in attributes.set {
            state.insert(name.into(), value);
        }
        for name in attributes.remove {
            state.remove(name);
        }
        match state.get_mut("e") {
            Some(AttributeValue::L(events)) => {
                let position = events.len() as u64 + 1;
                events.push(event_value(&tr.event, position))
            }
            _ => panic!("no events"),
        }
    }
    state
}

fn call(schedule: Option<Window>, args: Value, agent_id: &str) -> crate::domain::Call {
    let run = RunRef {
        run_id: Some("run-1".into()),
        thread_id: None,
        call_id: None,
    };
    crate::domain::Call::for_test("act_01JD3N0000000000000000000A", "mail.send", args)
        .with_caller("ac#me", agent_id)
        .with_schedule(schedule)
        .with_kind_and_run(Some("email"), Some(run))
}

fn submitted_with(call: crate::domain::Call, context: Value, context_digest: String) -> Action {
    let approval = Approval {
        context,
        context_digest,
        expires_at: t("2026-10-21T18:00:00Z"),
        approver: None,
        person: None,
        decided_at: None,
        quorum: Default::default(),
    };
    Action::first(
        call,
        Decision::RequireApproval,
        Standing::PendingApproval { approvals: vec![] },
        Some(approval),
        t("2026-10-21T12:00:00Z"),
    )
}

fn submitted(schedule: Option<Window>) -> Action {
    let args = json!({"to": "ops@example.com", "n": 1.5});
    let context = json!({"tool": "mail.send", "args": args, "agent_id": "agent-1"});
    let digest = format!("sha256:{}", "ab".repeat(32));
    submitted_with(call(schedule, args, "agent-1"), context, digest)
}

/// Every step of the lifecycle, the cancel path and a recovery loads back exactly as
/// committed, and the sweep entry moves only where the design says it does.
#[test]
fn actions_round_trip_through_their_two_items() {
    let window = Window {
        not_before: t("2026-10-21T16:00:00Z"),
        not_after: t("2026-10-21T18:00:00Z"),
    };
    let create = |w| {
        Creation::new(
            submitted(w),
            Actor::agent("agent-1"),
            Some("approval_required"),
            t("2026-10-21T12:00:01Z"),
        )
    };
    let terms = TicketTerms {
        correlation_id: "cor_1".into(),
        catalog_fingerprint: format!("sha256:{}", "cd".repeat(32)),
        due_at: window.not_before,
        deadline: window.not_after,
    };
    // A person approves (through Slack) and cancels with a token (SC-ID-07, SC-CH-07): their
    // person and the channel round-trip too.
    let ada = Person {
        issuer: "https://login.example.com".into(),
        subject: "ada".into(),
        email: Some("ada@example.com".into()),
        name: Some("Ada Lovelace".into()),
    };
    let by_ada = Signer {
        id: "ada",
        person: Some(&ada),
        channel: Some(Channel::Slack),
    };
    let c = create(Some(window));
    let a = Transition::approve(&c.action, by_ada, terms, t("2026-10-21T13:00:00Z"));
    let cl = Transition::claim(
        &a.action,
        "wrk_1",
        t("2026-10-21T16:02:00Z"),
        t("2026-10-21T16:00:01Z"),
    )
    .unwrap();
    let re = Transition::claim(
        &cl.action,
        "wrk_2",
        t("2026-10-21T16:05:00Z"),
        t("2026-10-21T16:03:00Z"),
    )
    .unwrap();
    let done = Transition::finish(
        &re.action,
        Ok(json!({"sent": true})),
        t("2026-10-21T16:03:01Z"),
    );
    let changes = |first: &Creation, rest: Vec<Transition>| -> Vec<Change> {
        std::iter::once((**first).clone())
            .chain(rest.iter().map(|t| (**t).clone()))
            .collect()
    };
    let lifecycle = changes(&c, vec![a.clone(), cl.clone(), re, done]);
    let c2 = create(None);
    let cancelled = Transition::seal(
        &c2.action,
        by_ada.actor(),
        &SealReason::Cancelled,
        t("2026-10-21T12:01:00Z"),
    );
    let cancel_path = changes(&c2, vec![cancelled]);
    for path in [&lifecycle[..], &cancel_path[..]] {
        let call = call_item(&path[0].action);
        for upto in 1..=path.len() {
            let state = store(&path[..upto]);
            let expected = &path[upto - 1].action;
            let loaded = action_of(expected.tenant(), expected.id(), &call, &state).unwrap();
            assert_eq!(&loaded, expected, "after {upto} transitions");
            let events: Vec<Event> = path[..upto].iter().map(|t| t.event.clone()).collect();
            assert_eq!(events_of(&state).unwrap(), events);
        }
    }
    // The context's args are stored once (in the call), and put back.
    let AttributeValue::S(body) = &call_item(&c.action)["c"] else {
        panic!("call body")
    };
    assert_eq!(body.matches("ops@example.com").count(), 1, "{body}");

    // The sweep entry: the key stays at not_before; a pending scheduled approval is already
    // at the due time its ticket gets when approved in time (its expiry, not_after, comes
    // later; the sweep defers it there if it meets it first), so the approval and the claim
    // leave the entry as it is (the sweep defers a claim to the lease's end if it meets it).
    assert_eq!(c.action.sweep_at(), Some(window.not_after));
    let (_, bound, at) = sweep_entry(&c.action).unwrap();
    assert_eq!((bound, at), (window.not_before, window.not_before));
    assert_eq!(sweep_entry(&a.action), sweep_entry(&c.action));
    assert_eq!(sweep_entry(&cl.action), sweep_entry(&a.action));
    assert_eq!(cl.action.sweep_at(), Some(t("2026-10-21T16:02:00Z")));
    assert!(
        sweep_entry(&lifecycle[4].action).is_none(),
        "sealed: out of the index"
    );
}

/// Issue 19 (cost): with 300-byte arguments, a windowed call whose context names its rule made a
/// call item of 1,033 bytes — past the 1 KB of one write unit — because the context repeated the
/// call's tool, agent, kind and window ends. They are elided now and put back on load: the item
/// stays under 1 KB and the context loads exactly as countersigned (its digest still matches).
#[test]
fn issue19_the_call_item_keeps_one_copy_of_what_the_context_repeats() {
    use crate::domain::{context, policy::Matched, quorum::Quorum};
    let window = Window {
        not_before: t("2026-10-21T16:00:00.123456Z"),
        not_after: t("2026-10-21T18:00:00Z"),
    };
    let args = json!({"to": "ops@example.com", "subject": "s", "body": "x".repeat(250)});
    let the_call = call(Some(window), args, "billing-agent-with-a-longer-name");
    let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let rule = Matched {
        index: 3,
        label: "mail outside our domain".into(),
    };
    let quorum = Quorum {
        required: 2,
        groups: vec!["finance".into()],
        ..Default::default()
    };
    let (shown, digest) = context::approval_context(&context::ContextInput {
        call: &the_call,
        time_zone: &tz,
        time_zone_name: "Europe/Berlin",
        rule: Some(&rule),
        quorum: &quorum,
    });
    let a = submitted_with(the_call, shown.clone(), digest.clone());

    let call = call_item(&a);
    let AttributeValue::S(body) = &call["c"] else {
        panic!("the call body is text")
    };
    for repeated in [
        "mail.send",
        "billing-agent-with-a-longer-name",
        "2026-10-21T16:00:00.123456Z",
    ] {
        assert_eq!(body.matches(repeated).count(), 1, "{repeated} once: {body}");
    }
    let size: usize = call
        .iter()
        .map(|(k, v)| {
            k.len()
                + match v {
                    AttributeValue::S(s) => s.len(),
                    _ => 0,
                }
        })
        .sum();
    assert!(size < 1024, "call item {size} bytes: {body}");

    let c = Creation::new(a, Actor::agent("x"), None, t("2026-10-21T12:00:01Z"));
    let created: Change = (*c).clone();
    let loaded = action_of(
        c.action.tenant(),
        c.action.id(),
        &call,
        &store(std::slice::from_ref(&created)),
    )
    .unwrap();
    let back = loaded.approval().unwrap();
    assert_eq!(back.context, shown, "the context loads as it was shown");
    assert_eq!(crate::domain::canonical::digest(&back.context), digest);

    // A context member that differs from the call's is kept as it is, never replaced.
    let mut record: Value = serde_json::from_slice(&c.action.to_stored()).unwrap();
    record["approval"]["context"]["tool"] = json!("other.tool");
    let odd = Action::from_stored(&serde_json::to_vec(&record).unwrap()).unwrap();
    let loaded = action_of(odd.tenant(), odd.id(), &call_item(&odd), &store(&[created])).unwrap();
    assert_eq!(loaded.approval().unwrap().context["tool"], "other.tool");
}

/// Issue 29: each member of the call's stored form has its place in the call item
/// (`ACTION_FIELDS` names it, `Call` above holds it) — a new member of the call fails here until
/// its DynamoDB mapping is written, instead of landing unnoticed among the state item's leftovers.
#[test]
fn issue29_every_member_of_the_call_is_mapped() {
    let a = submitted(None);
    let stored = serde_json::to_value(a.call()).unwrap();
    for member in stored.as_object().unwrap().keys() {
        assert!(
            ACTION_FIELDS.contains(&member.as_str()),
            "{member}: not in ACTION_FIELDS"
        );
    }
    // That its value comes back is `actions_round_trip_through_their_two_items`'s to show.
}
