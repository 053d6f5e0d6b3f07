use super::*;
use crate::domain::{
    countersign::Decider,
    fixtures::at,
    policy::{Countersigners, Matched},
    quorum::Signoff,
};
use jiff::SignedDuration;
use serde_json::{json, Value};

fn call(agent: &str, tool: &str, args: Value) -> Call {
    Call::for_test("act_01J0000000000000000000000A", tool, args).with_caller("acme", agent)
}

fn approved() -> Call {
    call("agent-1", "mail.send", json!({"to": "a@b", "amount": 40}))
}

fn gate(decision: Decision, rule: usize, groups: &[&str], approvals: u32, grantable: bool) -> Gate {
    Gate {
        decision,
        result: None,
        rule: Some(Matched {
            index: rule,
            label: "mail".into(),
        }),
        failed: None,
        countersigners: Countersigners {
            groups: groups.iter().map(|g| g.to_string()).collect(),
            approvals,
            grantable,
        },
        shadow: Vec::new(),
    }
}

fn asks() -> Gate {
    gate(Decision::RequireApproval, 1, &["finance"], 1, false)
}

const FINANCE: &[&str] = &["finance", "ops"];

fn granting<'a>(
    call: &'a Call,
    gate: &'a Gate,
    groups: &'a [String],
    earlier: &'a [Signoff],
) -> Granting<'a> {
    Granting {
        call,
        gate,
        approver: Decider {
            id: "fin-1",
            groups,
            person: None,
            channel: None,
        },
        earlier,
        now: at(0),
    }
}

fn groups(g: &[&str]) -> Vec<String> {
    g.iter().map(|s| s.to_string()).collect()
}

/// SC-GR-01: a grant asked for with an approve is judged in a fixed order — its bounds, its
/// pins against the call, its condition, then the rule: it must ask a person, the approver must
/// be one it admits, a quorum rule must be grantable and the grant ride on the completing
/// approval. Each refusal names what is wrong; the first failing check decides.
#[test]
fn sc_gr_01_what_a_grant_asked_for_meets() {
    let c = approved();
    let hours = |h| Some(SignedDuration::from_hours(h));
    let ask = |ttl, uses, pin: &[&str], when: Option<&str>| Ask {
        ttl,
        uses,
        pin: pin.iter().map(|p| p.to_string()).collect(),
        when: when.map(str::to_owned),
    };
    let (asking, allowing, denying) = (
        asks(),
        gate(Decision::Allow, 1, &[], 1, false),
        gate(Decision::Deny, 0, &[], 1, false),
    );
    let quorum = gate(Decision::RequireApproval, 1, &["finance"], 2, false);
    let grantable = gate(Decision::RequireApproval, 1, &["finance"], 2, true);
    let bounds = |param| move |r: &Result<Terms, Refusal>| matches!(r, Err(Refusal::Bounds { param: p, .. }) if *p == param);
    let (fin, ops) = (groups(FINANCE), groups(&["ops"]));
    type Check = Box<dyn Fn(&Result<Terms, Refusal>) -> bool>;
    /// name, asked, the gate, the approver's groups, the quorum's earlier approvals → what it
    /// comes to
    type Row<'a> = (
        &'a str,
        Ask,
        &'a Gate,
        &'a Vec<String>,
        &'a [Signoff],
        Check,
    );
    let none: &[Signoff] = &[];
    let fin_2 = |grant: Option<Asked>| Signoff {
        approver: "fin-2".into(),
        at: at(0),
        person: None,
        grant,
    };
    let asked = |uses| Asked {
        ttl_seconds: 3600,
        uses,
        pin: vec![],
        when: None,
    };
    let (without, more, same) = (
        [fin_2(None)],
        [fin_2(Some(asked(2)))],
        [fin_2(Some(asked(1)))],
    );
    let refused = |want: Refusal| -> Check { Box::new(move |r| r.as_ref().err() == Some(&want)) };
    #[rustfmt::skip]
    let table: Vec<Row> = vec![
        ("ttl zero", ask(hours(0), None, &[], None), &asking, &fin, none, Box::new(bounds("grant.ttl"))),
        ("ttl over 30 days", ask(hours(721), None, &[], None), &asking, &fin, none, Box::new(bounds("grant.ttl"))),
        ("no uses", ask(None, Some(0), &[], None), &asking, &fin, none, Box::new(bounds("grant.uses"))),
        ("1,001 uses", ask(None, Some(1001), &[], None), &asking, &fin, none, Box::new(bounds("grant.uses"))),
        ("bounds before the rule", ask(None, Some(1001), &[], None), &denying, &ops, none, Box::new(bounds("grant.uses"))),
        ("a pin the call lacks", ask(None, None, &["cc"], None), &asking, &fin, none, refused(Refusal::NoSuchArg("cc".into()))),
        ("a condition that does not compile", ask(None, None, &[], Some("args.amount <")), &asking, &fin, none, Box::new(|r| matches!(r, Err(Refusal::Condition(m)) if m.contains("parse")))),
        ("the policy allows it", ask(None, None, &[], None), &allowing, &fin, none, refused(Refusal::NotAsked)),
        ("the policy denies it", ask(None, None, &[], None), &denying, &fin, none, refused(Refusal::NotAsked)),
        ("outside the rule's groups", ask(None, None, &[], None), &asking, &ops, none, refused(Refusal::NotInGroups(groups(&["finance"])))),
        ("a quorum rule", ask(None, None, &[], None), &quorum, &fin, none, refused(Refusal::Quorum(2))),
        ("a grantable quorum, its first approval", ask(None, None, &[], None), &grantable, &fin, none, Box::new(|r| r.as_ref().is_ok_and(|t| t.approvals == 2))),
        ("a grantable quorum, an earlier approval without it", ask(None, None, &[], None), &grantable, &fin, &without, refused(Refusal::QuorumDisagrees("fin-2".into()))),
        ("a grantable quorum, an earlier approval asking more", ask(None, None, &[], None), &grantable, &fin, &more, refused(Refusal::QuorumDisagrees("fin-2".into()))),
        ("a grantable quorum, each asking the same", ask(hours(1), Some(1), &[], None), &grantable, &fin, &same, Box::new(|r| r.as_ref().is_ok_and(|t| t.approvals == 2))),
        ("30 days, 1,000 uses", ask(hours(720), Some(1000), &["to"], Some("args.amount <= 100")), &asking, &fin, none, Box::new(|r| r.is_ok())),
    ];
    for (name, ask, gate, groups, earlier, check) in table {
        let judged = grant(&ask, &granting(&c, gate, groups, earlier));
        assert!(check(&judged), "{name}: {judged:?}");
    }
    // The defaults, and what the terms record.
    let t = grant(
        &Ask {
            pin: vec!["to".into()],
            ..Ask::default()
        },
        &granting(&c, &asking, &fin, &[]),
    )
    .unwrap();
    assert_eq!(t.expires_at, at(3600));
    assert_eq!(t.uses, 1);
    assert_eq!(t.pins, *json!({"to": "a@b"}).as_object().unwrap());
    assert_eq!(t.id, "grt_01J0000000000000000000000A");
    assert_eq!((t.rule, t.rule_label.as_str(), t.approvals), (1, "mail", 1));
    // Only the groups the rule admitted are recorded: the grant reaches no further.
    assert_eq!(t.granted_by.groups, ["finance"]);
    assert!(
        is_grant_id(&t.id)
            && !is_grant_id("grt_x")
            && !is_grant_id("act_01J0000000000000000000000A")
    );
}

fn granted(ask: Ask) -> Grant {
    let fin = groups(FINANCE);
    Grant::new(grant(&ask, &granting(&approved(), &asks(), &fin, &[])).unwrap())
}

/// SC-GR-02: a grant only turns its own rule's `require_approval` into `allow`, for the same
/// tenant, agent and tool, while live, for calls that repeat its pins and meet its condition.
/// Everything else is decided as if it did not exist — a deny stays a deny.
#[test]
fn sc_gr_02_a_grant_only_narrows() {
    let g = granted(Ask {
        uses: Some(2),
        pin: vec!["to".into()],
        when: Some("args.amount <= 100".into()),
        ..Ask::default()
    });
    let same = |args: Value| call("agent-1", "mail.send", args);
    let ok = json!({"to": "a@b", "amount": 99});
    let asking = asks();
    let (other_rule, other_groups, more) = (
        gate(Decision::RequireApproval, 2, &["finance"], 1, false),
        gate(Decision::RequireApproval, 1, &["board"], 1, false),
        gate(Decision::RequireApproval, 1, &["finance"], 2, true),
    );
    let anyone = gate(Decision::RequireApproval, 1, &[], 1, false);
    let revoked = g.revoke("admin-1", None, at(5)).unwrap();
    let used_up = g.spend(at(1)).unwrap().spend(at(2)).unwrap();
    #[rustfmt::skip]
    /// name, the grant, the call, the gate, now → whether it admits the call
    type Row<'a> = (&'a str, &'a Grant, Call, Gate, i64, Result<(), Miss>);
    let table: Vec<Row> = vec![
        (
            "the same agent, tool and pin",
            &g,
            same(ok.clone()),
            asking.clone(),
            10,
            Ok(()),
        ),
        (
            "a rule naming no groups admits the granter",
            &g,
            same(ok.clone()),
            anyone,
            10,
            Ok(()),
        ),
        (
            "the policy denies it",
            &g,
            same(ok.clone()),
            gate(Decision::Deny, 1, &[], 1, false),
            10,
            Err(Miss::NotAsked),
        ),
        (
            "the policy allows it anyway",
            &g,
            same(ok.clone()),
            gate(Decision::Allow, 1, &[], 1, false),
            10,
            Err(Miss::NotAsked),
        ),
        (
            "another agent",
            &g,
            call("agent-2", "mail.send", ok.clone()),
            asking.clone(),
            10,
            Err(Miss::Caller),
        ),
        (
            "another tool",
            &g,
            call("agent-1", "mail.draft", ok.clone()),
            asking.clone(),
            10,
            Err(Miss::Caller),
        ),
        (
            "another tenant",
            &g,
            same(ok.clone()).with_caller("other", "agent-1"),
            asking.clone(),
            10,
            Err(Miss::Caller),
        ),
        (
            "another rule",
            &g,
            same(ok.clone()),
            other_rule,
            10,
            Err(Miss::Rule),
        ),
        (
            "the rule now asks a quorum",
            &g,
            same(ok.clone()),
            more,
            10,
            Err(Miss::Rule),
        ),
        (
            "the rule's groups no longer hold the granter",
            &g,
            same(ok.clone()),
            other_groups,
            10,
            Err(Miss::Groups),
        ),
        (
            "a second before expiry",
            &g,
            same(ok.clone()),
            asking.clone(),
            3599,
            Ok(()),
        ),
        (
            "at expiry",
            &g,
            same(ok.clone()),
            asking.clone(),
            3600,
            Err(Miss::Expired),
        ),
        (
            "revoked",
            &revoked,
            same(ok.clone()),
            asking.clone(),
            10,
            Err(Miss::Revoked),
        ),
        (
            "used up",
            &used_up,
            same(ok.clone()),
            asking.clone(),
            10,
            Err(Miss::UsedUp),
        ),
        (
            "the pin differs",
            &g,
            same(json!({"to": "c@d", "amount": 1})),
            asking.clone(),
            10,
            Err(Miss::Pin("to".into())),
        ),
        (
            "the pin is missing",
            &g,
            same(json!({"amount": 1})),
            asking.clone(),
            10,
            Err(Miss::Pin("to".into())),
        ),
        (
            "the condition is false",
            &g,
            same(json!({"to": "a@b", "amount": 101})),
            asking.clone(),
            10,
            Err(Miss::Condition),
        ),
        (
            "the condition cannot be evaluated",
            &g,
            same(json!({"to": "a@b"})),
            asking.clone(),
            10,
            Err(Miss::Condition),
        ),
    ];
    for (name, grant, call, gate, now, want) in table {
        assert_eq!(grant.admits(&call, &gate, at(now)), want, "{name}");
    }
    // The oldest grant that admits the call is the one used.
    let newer = Grant::new(Terms {
        id: "grt_01J0000000000000000000000Z".into(),
        ..g.terms().clone()
    });
    let both = [newer, revoked.clone(), g.clone()];
    let first = first_admitting(&both, &same(ok.clone()), &asking, at(10)).unwrap();
    assert_eq!(first.id(), g.id());
    assert!(first_admitting(&[revoked], &same(ok), &asking, at(10)).is_none());
}

/// SC-GR-04: a use is the next version with one use fewer; the last
/// use leaves none; a revocation records how many uses came before it, and after it nothing
/// is used. Revoking twice changes nothing.
#[test]
fn sc_gr_04_uses_and_revocation_are_versions() {
    let g = granted(Ask {
        uses: Some(2),
        ..Ask::default()
    });
    let one = g.spend(at(1)).unwrap();
    assert_eq!((one.uses_left(), one.version(), one.spent()), (1, 2, 1));
    let two = one.spend(at(2)).unwrap();
    assert_eq!((two.uses_left(), two.version()), (0, 3));
    assert_eq!(two.spend(at(3)).unwrap_err(), Miss::UsedUp);
    let revoked = one.revoke("fin-1", None, at(4)).unwrap();
    assert_eq!(revoked.revoked().unwrap().after_uses, 1);
    assert_eq!(revoked.version(), 3);
    assert_eq!(revoked.spend(at(5)).unwrap_err(), Miss::Revoked);
    assert!(revoked.revoke("fin-2", None, at(6)).is_none());
    assert_eq!(g.spend(at(3600)).unwrap_err(), Miss::Expired);
}

/// SC-GR-05: a stored grant loads only as written — a changed term breaks its digest, and
/// uses, revocation and version must add up.
#[test]
fn sc_gr_05_a_stored_grant_is_tamper_evident() {
    let g = granted(Ask {
        uses: Some(3),
        pin: vec!["to".into()],
        ..Ask::default()
    });
    let used = g
        .spend(at(1))
        .unwrap()
        .revoke("fin-1", None, at(2))
        .unwrap();
    let stored = serde_json::to_value(&used).unwrap();
    assert_eq!(
        serde_json::from_value::<Grant>(stored.clone()).unwrap(),
        used
    );
    let changed = |path: &[&str], v: Value| {
        let mut s = stored.clone();
        let mut at = &mut s;
        for p in &path[..path.len() - 1] {
            at = &mut at[*p];
        }
        at[path[path.len() - 1]] = v;
        serde_json::from_value::<Grant>(s)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    #[rustfmt::skip]
    let table: Vec<(&str, &[&str], Value, &str)> = vec![
        ("more uses", &["terms", "uses"], json!(30), "digest"),
        ("another pin", &["terms", "pins", "to"], json!("x@y"), "digest"),
        ("a later expiry", &["terms", "expires_at"], json!("2099-01-01T00:00:00.000000Z"), "digest"),
        ("another granter", &["terms", "granted_by", "approver"], json!("eve"), "digest"),
        ("more uses left than granted", &["uses_left"], json!(4), "add up"),
        ("a use dropped after the revocation", &["revoked", "after_uses"], json!(0), "after its revocation"),
        ("a version", &["version"], json!(9), "version"),
    ];
    for (name, path, value, error) in table {
        let e = changed(path, value).unwrap_err();
        assert!(e.contains(error), "{name}: {e}");
    }
}

/// SC-GR-08: the approve that grants puts the terms on the record and names them in its event;
/// the chain holds the two to each other — a changed term, or a record whose grant no event
/// names, does not verify.
#[test]
fn sc_gr_08_the_chain_names_the_grant_on_the_record() {
    use crate::domain::{
        audit::{self, ChainError},
        fixtures::pending,
        transition::{Creation, TicketTerms, Transition},
        Actor,
    };
    let a = pending(
        "act_01J0000000000000000000000A",
        json!({"to": "a@b", "amount": 40}),
    );
    let created = Creation::new(a, Actor::agent("agent-1"), Some("approval_required"), at(0));
    let terms = granted(Ask::default()).terms().clone();
    let ticket = TicketTerms {
        correlation_id: "cor_1".into(),
        catalog_fingerprint: "sha256:tool".into(),
        due_at: at(1),
        deadline: at(600),
    };
    let approved =
        Transition::approve_granting(&created.action, "fin-1", ticket, None, terms.clone(), at(1));
    let events = vec![created.event.clone(), approved.event.clone()];
    let record = approved.action.clone();
    assert_eq!(record.grant(), Some(&terms));
    assert_eq!(
        approved.event.grant.as_ref().unwrap().digest,
        terms.digest()
    );
    assert_eq!(audit::verify(&record, &events), Ok(()));
    let mut widened = record.clone();
    widened.grant.as_mut().unwrap().uses = 1000;
    assert_eq!(
        audit::verify(&widened, &events),
        Err(ChainError::Grant { seq: 2 })
    );
    let mut dropped = record.clone();
    dropped.grant = None;
    assert_eq!(
        audit::verify(&dropped, &events),
        Err(ChainError::Grant { seq: 2 })
    );
    let mut unnamed = events.clone();
    unnamed[1].grant = None;
    assert!(
        audit::verify(&record, &unnamed).is_err(),
        "the hash covers the reference"
    );
}
