//! One store conformance suite, run against every adapter (SQLite, DynamoDB on LocalStack, and
//! Postgres from scripts/postgres.sh), so all keep the same semantics: conditional writes and typed conflicts (SPEC §1.3),
//! atomicity of transition + audit event (§1.7), listing and pagination, idempotency records
//! (SC-INT-07), stops (SC-STOP-01), the sweep index (SC-REC-01/02, SC-APP-04) and the
//! notification outbox (SC-NOT-01/02): every port of the store (`Actions`, `Stops`, `Outbox`).

use countersign::{
    domain::{
        action::Approval,
        actor::Channel,
        audit::{self, ChainError},
        canonical,
        notice::{OutboxEntry, RetryRule, Settled},
        transition::TicketTerms,
        Action, Actor, Call, Creation, Decision, Lease, SealReason, Standing, State, Transition,
        Window,
    },
    store::{
        dynamodb::DynamoStore, sqlite::SqliteStore, Actions, IdempotencyRecord, ListQuery, Stop,
        Stops, Store, StoreError, Unreadable,
    },
};
use countersign_tests::{localstack, postgres};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::sync::Arc;

fn t0() -> Timestamp {
    "2031-01-01T00:00:00Z".parse().unwrap()
}

fn far() -> Timestamp {
    "2099-01-01T00:00:00Z".parse().unwrap()
}

fn plus(t: Timestamp, secs: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(secs)).unwrap()
}

fn tenant(label: &str) -> String {
    format!("{label}_{}", ulid::Ulid::new()).to_lowercase()
}

/// A pending action (not yet committed) whose approval lapses at `expires_at`.
fn pending(tenant: &str, agent: &str, expires_at: Timestamp) -> Action {
    let call = Call::for_test(
        &format!("act_{}", ulid::Ulid::new()),
        "mail.send",
        json!({"to": "a@example.com"}),
    )
    .with_caller(tenant, agent);
    let approval = Approval {
        context: json!({"tool": "mail.send"}),
        context_digest: "sha256:ctx".into(),
        expires_at,
        approver: None,
        person: None,
        decided_at: None,
        quorum: Default::default(),
    };
    let stage = Standing::PendingApproval { approvals: vec![] };
    Action::first(call, Decision::RequireApproval, stage, Some(approval), t0())
}

/// `a` with its stored record edited: how a test outside the domain forges one.
fn edited(a: &Action, edit: impl FnOnce(&mut serde_json::Value)) -> Action {
    let mut record: serde_json::Value = serde_json::from_slice(&a.to_stored()).unwrap();
    edit(&mut record);
    Action::from_stored(&serde_json::to_vec(&record).unwrap()).unwrap()
}

/// `a` waiting for the countersignature of the context intake would show: its own call.
fn showing_its_call(a: &Action) -> Action {
    let call = a.call();
    let shown = json!({"tool": call.tool(), "args": call.args(), "agent_id": call.agent_id(),
        "action_kind": call.action_kind()});
    edited(a, |r| {
        r["approval"]["context_digest"] = json!(canonical::digest(&shown));
        r["approval"]["context"] = shown;
    })
}

async fn create_pending(
    store: &dyn Actions,
    tenant: &str,
    agent: &str,
    expires_at: Timestamp,
) -> Action {
    let t = Creation::new(
        pending(tenant, agent, expires_at),
        Actor::agent(agent),
        Some("approval_required"),
        t0(),
    );
    store.create(&t, None).await.expect("create");
    t.action.clone()
}

fn approve(a: &Action, due_at: Timestamp, deadline: Timestamp, now: Timestamp) -> Transition {
    let terms = TicketTerms {
        correlation_id: format!("cor_{}", ulid::Ulid::new()),
        catalog_fingerprint: "sha256:tool".into(),
        due_at,
        deadline,
    };
    Transition::approve(a, "approver-1", terms, now)
}

/// The whole suite, over any adapter: each port of the store in turn (`Actions`, `Stops`,
/// `Outbox`), then the read that spans two.
pub async fn conformance(store: Arc<dyn Store>) {
    actions(store.clone()).await;
    stops(&*store).await;
    outbox(&*store).await;
    channel_notes(&*store).await;
    load_with_stops(&*store).await;
}

/// The action store: conditional writes, atomic events, lists, quarantine, idempotency, sweep.
async fn actions(store: Arc<dyn Actions>) {
    // First: it needs the sweep index to itself.
    sweep(&*store).await;
    sweep_scheduled_approval(&*store).await;
    conflicts(&*store).await;
    event_and_transition_are_atomic(&*store).await;
    racing_commits_have_one_winner(store.clone()).await;
    concurrent_writes_each_get_their_own_outcome(store.clone()).await;
    listing(&*store).await;
    quarantine(&*store).await;
    idempotency(&*store).await;
}

/// §1.3: create is conditional on absence, commit on (state, version); losers get `Conflict`.
async fn conflicts(store: &dyn Actions) {
    let tn = tenant("conflicts");
    let t = Creation::new(
        pending(&tn, "a1", far()),
        Actor::agent("a1"),
        Some("approval_required"),
        t0(),
    );
    store.create(&t, None).await.unwrap();
    assert_eq!(
        store.load(&tn, t.action.id()).await.unwrap(),
        Some(t.action.clone())
    );
    assert_eq!(
        store.events(&tn, t.action.id()).await.unwrap(),
        vec![t.event.clone()]
    );
    assert!(
        matches!(store.create(&t, None).await, Err(StoreError::Conflict)),
        "same id twice"
    );
    assert_eq!(
        store.load("someone-else", t.action.id()).await.unwrap(),
        None,
        "tenant is part of the key"
    );

    let base = t.action.clone();
    let mut stale = approve(&base, plus(t0(), 60), plus(t0(), 3600), t0());
    stale.expected = (State::PendingApproval, 7);
    assert!(matches!(
        store.commit(&stale).await,
        Err(StoreError::Conflict)
    ));
    let mut wrong_state = approve(&base, plus(t0(), 60), plus(t0(), 3600), t0());
    wrong_state.expected = (State::Approved, base.version());
    assert!(matches!(
        store.commit(&wrong_state).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.load(&tn, base.id()).await.unwrap(),
        Some(base.clone()),
        "a lost write changes nothing"
    );
    assert_eq!(store.events(&tn, base.id()).await.unwrap().len(), 1);

    let good = approve(&base, plus(t0(), 60), plus(t0(), 3600), t0());
    store.commit(&good).await.unwrap();
    assert_eq!(
        store.load(&tn, base.id()).await.unwrap(),
        Some(good.action.clone())
    );
    let events = store.events(&tn, base.id()).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(events[1], good.event);
    assert!(
        matches!(store.commit(&good).await, Err(StoreError::Conflict)),
        "replayed commit"
    );
}

/// §1.7: when the audit event cannot be written, the transition does not land either.
async fn event_and_transition_are_atomic(store: &dyn Actions) {
    let tn = tenant("atomic");
    let a = create_pending(store, &tn, "a1", far()).await;
    let approved = approve(&a, plus(t0(), 60), plus(t0(), 3600), t0());
    store.commit(&approved).await.unwrap();

    let mut claim =
        Transition::claim(&approved.action, "wrk_1", plus(t0(), 120), plus(t0(), 61)).unwrap();
    claim.event.seq = 2; // collides with the approval's event
    assert!(matches!(
        store.commit(&claim).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.load(&tn, a.id()).await.unwrap(),
        Some(approved.action.clone()),
        "the action did not move"
    );
    assert_eq!(store.events(&tn, a.id()).await.unwrap().len(), 2);

    let claim =
        Transition::claim(&approved.action, "wrk_1", plus(t0(), 120), plus(t0(), 61)).unwrap();
    store.commit(&claim).await.unwrap();
    let done = Transition::finish(&claim.action, Ok(json!({"ok": true})), plus(t0(), 62));
    store.commit(&done).await.unwrap();
    let stored = store.load(&tn, a.id()).await.unwrap().unwrap();
    assert_eq!(stored.state(), State::Succeeded);
    assert_eq!(stored.chain_head(), done.event.hash);
    let events = store.events(&tn, a.id()).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.to).collect::<Vec<_>>(),
        [
            State::PendingApproval,
            State::Approved,
            State::Executing,
            State::Succeeded
        ]
    );
}

/// §1.3: two contenders from the same base: exactly one commits.
async fn racing_commits_have_one_winner(store: Arc<dyn Actions>) {
    for _ in 0..10 {
        let tn = tenant("race");
        let a = create_pending(&*store, &tn, "a1", far()).await;
        let cancel = Transition::seal(
            &a,
            Actor::agent("a1"),
            &SealReason::Cancelled,
            plus(t0(), 1),
        );
        let deny = Transition::seal(
            &a,
            Actor::user("approver-1"),
            &SealReason::Denied("no".into()),
            plus(t0(), 1),
        );
        let (x, y) = tokio::join!(store.commit(&cancel), store.commit(&deny));
        assert!(x.is_ok() != y.is_ok(), "exactly one winner: {x:?} {y:?}");
        let loser = if x.is_ok() { y } else { x };
        assert!(matches!(loser, Err(StoreError::Conflict)), "{loser:?}");
        let winner = if store.load(&tn, a.id()).await.unwrap().unwrap().state() == State::Cancelled
        {
            &cancel
        } else {
            &deny
        };
        assert_eq!(
            store.load(&tn, a.id()).await.unwrap(),
            Some(winner.action.clone())
        );
        assert_eq!(
            store.events(&tn, a.id()).await.unwrap().len(),
            2,
            "one event per committed transition"
        );
    }
}

/// §1.3 and §1.7 under load: many writes in flight at once (the SQLite adapter commits them in
/// shared batches) each get their own outcome. Per action, a cancel and a deny race from the
/// same base and exactly one lands; a third write whose condition holds but whose audit event
/// collides is undone whole (action and event), without taking its batch-mates with it.
async fn concurrent_writes_each_get_their_own_outcome(store: Arc<dyn Actions>) {
    let tn = tenant("batch");
    let mut bases = Vec::new();
    for _ in 0..60 {
        bases.push(create_pending(&*store, &tn, "a1", far()).await);
    }
    let mut tasks = tokio::task::JoinSet::new();
    for (i, a) in bases.iter().enumerate() {
        let cancel = Transition::seal(a, Actor::agent("a1"), &SealReason::Cancelled, plus(t0(), 1));
        let deny = Transition::seal(
            a,
            Actor::user("approver-1"),
            &SealReason::Denied("no".into()),
            plus(t0(), 1),
        );
        let mut collides = approve(a, plus(t0(), 60), plus(t0(), 3600), t0());
        collides.event.seq = 1; // the create's event
        for (kind, t) in [("cancel", cancel), ("deny", deny), ("collides", collides)] {
            let store = store.clone();
            tasks.spawn(async move { (i, kind, store.commit(&t).await) });
        }
    }
    let mut won = vec![Vec::new(); bases.len()];
    while let Some(done) = tasks.join_next().await {
        let (i, kind, outcome) = done.unwrap();
        match outcome {
            Ok(()) => won[i].push(kind),
            Err(StoreError::Conflict) => {}
            Err(e) => panic!("{kind} on action {i}: {e:?}"),
        }
    }
    for (a, won) in bases.iter().zip(&won) {
        assert!(
            won == &["cancel"] || won == &["deny"],
            "exactly one of cancel/deny, never the colliding write: {won:?}"
        );
        let stored = store.load(&tn, a.id()).await.unwrap().unwrap();
        assert_eq!(
            stored.state().to_string(),
            if won[0] == "cancel" {
                "cancelled"
            } else {
                "denied"
            }
        );
        let events = store.events(&tn, a.id()).await.unwrap();
        assert_eq!(events.len(), 2, "one event per committed transition");
        assert_eq!(events[1].hash, stored.chain_head());
    }
}

/// Newest first, paged by `before`, one tenant only; a read returns at most its limit and says
/// where to continue only when it stopped at that limit (SC-SEC-05: filters are the engine's).
async fn listing(store: &dyn Actions) {
    let tn = tenant("list");
    let other = tenant("list_other");
    let mut ids = Vec::new();
    for agent in ["a1", "a1", "a1", "a1", "a2", "a2", "a2"] {
        ids.push(create_pending(store, &tn, agent, far()).await);
    }
    create_pending(store, &other, "a1", far()).await;

    let mut newest_first: Vec<String> = ids.iter().map(|a| a.id().to_owned()).collect();
    newest_first.sort();
    newest_first.reverse();
    let page = |before: Option<String>, limit: usize| ListQuery {
        limit,
        before,
        ..ListQuery::default()
    };

    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let got = store.list(&tn, &page(before.clone(), 3)).await.unwrap();
        assert!(got.actions.len() <= 3);
        seen.extend(got.actions.iter().map(|a| a.id().to_owned()));
        match got.next {
            Some(next) => {
                assert_eq!(got.actions.len(), 3, "a cursor only after a full read");
                assert_eq!(Some(&next), seen.last(), "it continues after the last read");
                before = Some(next);
            }
            None => break,
        }
    }
    assert_eq!(
        seen, newest_first,
        "pages cover the tenant, newest first, without overlap"
    );
    let all = store.list(&tn, &page(None, 50)).await.unwrap();
    assert_eq!((all.actions.len(), all.next), (7, None));
    assert_eq!(
        store
            .list(&other, &page(None, 50))
            .await
            .unwrap()
            .actions
            .len(),
        1
    );
    assert!(store
        .list(&tenant("nobody"), &page(None, 50))
        .await
        .unwrap()
        .actions
        .is_empty());
}

/// SC-EDGE-08: a quarantined action leaves lists and the sweep, stays loadable by id for
/// inspection, and is listed (once, however often it is quarantined) for its tenant only.
async fn quarantine(store: &dyn Actions) {
    let tn = tenant("quarantine");
    let kept = create_pending(store, &tn, "a1", far()).await;
    let bad = create_pending(store, &tn, "a1", far()).await;
    let unreadable = Unreadable {
        tenant: tn.clone(),
        action_id: bad.id().to_owned(),
        reason: "malformed action record: recursion limit exceeded".into(),
    };
    store.quarantine(&unreadable, t0()).await.unwrap();
    store.quarantine(&unreadable, plus(t0(), 5)).await.unwrap();

    let listed = store
        .list(
            &tn,
            &ListQuery {
                limit: 50,
                before: None,
                ..ListQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        listed.actions.iter().map(|a| a.id()).collect::<Vec<_>>(),
        [kept.id()]
    );
    assert!(listed.unreadable.is_empty());
    let due = store.sweep_due(Timestamp::MAX, 100_000).await.unwrap();
    assert!(due.iter().any(|r| r.action_id == kept.id()));
    assert!(
        !due.iter().any(|r| r.action_id == bad.id()),
        "out of the sweep"
    );
    let q = store.quarantined(&tn).await.unwrap();
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(q[0].action_id, bad.id());
    assert_eq!(q[0].reason, unreadable.reason);
    assert!(store
        .quarantined(&tenant("other"))
        .await
        .unwrap()
        .is_empty());
    assert!(store.load(&tn, bad.id()).await.unwrap().is_some());
}

/// SC-INT-07: the record commits with the action, is scoped to tenant + agent + key, lapses,
/// and a lapsed record may be replaced.
async fn idempotency(store: &dyn Actions) {
    let tn = tenant("idem");
    let record = |action: &Action, digest: &str, expires_at: Timestamp| IdempotencyRecord {
        tenant: tn.clone(),
        agent_id: "a1".into(),
        key: "order-4711".into(),
        payload_digest: digest.into(),
        action_id: action.id().to_owned(),
        expires_at,
    };
    let first = Creation::new(pending(&tn, "a1", far()), Actor::agent("a1"), None, t0());
    let rec = record(&first.action, "sha256:p1", plus(t0(), 86_400));
    store.create(&first, Some(&rec)).await.unwrap();
    assert_eq!(
        store
            .idempotency(&tn, "a1", "order-4711", t0())
            .await
            .unwrap(),
        Some(rec.clone())
    );
    assert_eq!(
        store
            .idempotency(&tn, "a2", "order-4711", t0())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .idempotency(&tn, "a1", "order-4712", t0())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .idempotency("other", "a1", "order-4711", t0())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .idempotency(&tn, "a1", "order-4711", plus(t0(), 86_400))
            .await
            .unwrap(),
        None,
        "lapsed"
    );

    // A live key: the second action does not commit either (atomic with its record).
    let second = Creation::new(
        pending(&tn, "a1", far()),
        Actor::agent("a1"),
        None,
        plus(t0(), 3600),
    );
    let rec2 = record(&second.action, "sha256:p2", plus(t0(), 3600 + 86_400));
    assert!(matches!(
        store.create(&second, Some(&rec2)).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(store.load(&tn, second.action.id()).await.unwrap(), None);
    assert!(store
        .events(&tn, second.action.id())
        .await
        .unwrap()
        .is_empty());

    // After it lapsed, the key may be used again.
    let later = plus(t0(), 90_000);
    let third = Creation::new(pending(&tn, "a1", far()), Actor::agent("a1"), None, later);
    let rec3 = record(&third.action, "sha256:p3", plus(later, 86_400));
    store.create(&third, Some(&rec3)).await.unwrap();
    assert_eq!(
        store
            .idempotency(&tn, "a1", "order-4711", later)
            .await
            .unwrap(),
        Some(rec3)
    );
}

/// SC-STOP-01: agent and tenant-wide stops, replaced idempotently, lifted once. SC-CH-08: a
/// stop keeps the channel it came through, and one without reads back without.
async fn stops(store: &dyn Stops) {
    let tn = tenant("stops");
    let scopes = |stops: Vec<Stop>| {
        let mut s: Vec<String> = stops.iter().map(|s| s.scope().to_owned()).collect();
        s.sort();
        s
    };
    assert!(store.stops_for(&tn, "a1").await.unwrap().is_empty());
    let agent_stop = Stop {
        tenant: tn.clone(),
        agent_id: Some("a1".into()),
        stopped_at: t0(),
        stopped_by: "admin-1".into(),
        channel: Some(Channel::Cli),
    };
    store.put_stop(&agent_stop).await.unwrap();
    store.put_stop(&agent_stop).await.unwrap();
    assert_eq!(
        store.stops_for(&tn, "a1").await.unwrap(),
        vec![agent_stop.clone()]
    );
    assert!(store.stops_for(&tn, "a2").await.unwrap().is_empty());
    assert!(store.stops_for("other", "a1").await.unwrap().is_empty());

    let tenant_stop = Stop {
        agent_id: None,
        channel: None,
        ..agent_stop.clone()
    };
    store.put_stop(&tenant_stop).await.unwrap();
    assert_eq!(
        scopes(store.stops_for(&tn, "a1").await.unwrap()),
        ["*", "a1"]
    );
    assert_eq!(store.stops_for(&tn, "a2").await.unwrap(), [tenant_stop]);

    assert!(store.lift_stop(&tn, "a1").await.unwrap());
    assert!(!store.lift_stop(&tn, "a1").await.unwrap(), "already lifted");
    assert!(store.lift_stop(&tn, "*").await.unwrap());
    assert!(store.stops_for(&tn, "a1").await.unwrap().is_empty());
}

/// SC-NOT-01/02: a notice lands with its transition or not at all; settling is conditional on
/// the entry's revision; dead letters are listed, not due, and revived; each entry reads back
/// the action and the event it tells of.
async fn outbox(store: &dyn Store) {
    // Earlier than every other case's events: its entries come first among the due.
    let early = plus(t0(), -86_400);
    let tn = tenant("outbox");
    let created = Creation::new(
        pending(&tn, "a1", far()),
        Actor::agent("a1"),
        Some("approval_required"),
        early,
    );
    store.create(&created, None).await.unwrap();
    let a = created.action.clone();
    let due = store.outbox_due(early, 100).await.unwrap();
    let mine: Vec<&OutboxEntry> = due.iter().filter(|e| e.action_id == a.id()).collect();
    assert_eq!(mine.len(), 1, "the create wrote its notice: {due:?}");
    let requested = mine[0].clone();
    assert_eq!((requested.seq, requested.attempts), (1, 0));
    // What the request said as it was raised is kept with it (SC-NOT-01: every try sends it).
    assert_eq!(
        requested.asked.as_ref().map(|a| a.approvals_needed),
        Some(1),
        "{requested:?}"
    );
    let (told, event) = store.outbox_subject(&requested).await.unwrap().unwrap();
    assert_eq!((told.id(), event.seq), (a.id(), 1));

    // A transition that loses its condition writes no notice.
    let seal = Transition::seal(&a, Actor::system(), &SealReason::ApprovalExpired, early);
    let mut lost = seal.clone();
    lost.expected = (State::PendingApproval, 7);
    assert!(matches!(
        store.commit(&lost).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        store.outbox_entry(&tn, a.id(), 2).await.unwrap(),
        None,
        "a lost write leaves no notice"
    );
    // The winning one does, beside the first; both tell of the action as it is now.
    store.commit(&seal).await.unwrap();
    let sealed = store
        .outbox_entry(&tn, a.id(), 2)
        .await
        .unwrap()
        .expect("the seal's notice");
    assert_eq!(sealed.kind.as_str(), "action_sealed");
    let (told, event) = store.outbox_subject(&sealed).await.unwrap().unwrap();
    assert_eq!((told.state(), event.seq), (seal.action.state(), 2));
    assert_ne!(told.state(), State::PendingApproval);
    let (told, _) = store.outbox_subject(&requested).await.unwrap().unwrap();
    assert_eq!(told.state(), seal.action.state());
    let unknown = |tenant: &str, action_id: &str, seq| OutboxEntry {
        tenant: tenant.into(),
        action_id: action_id.into(),
        seq,
        ..requested.clone()
    };
    for gone in [
        unknown(&tn, a.id(), 9),
        unknown(&tn, "act_gone", 1),
        unknown("other", a.id(), 1),
    ] {
        assert!(
            store.outbox_subject(&gone).await.unwrap().is_none(),
            "{gone:?}"
        );
    }

    // Settling is conditional on the entry's revision.
    let rule = RetryRule {
        attempts: 1,
        ..Default::default()
    };
    let Settled::Again(dead) = requested.after_try(vec![], Some("http 500".into()), early, &rule)
    else {
        panic!("a failure is kept");
    };
    store.outbox_settle(&requested, Some(&dead)).await.unwrap();
    assert!(
        matches!(
            store.outbox_settle(&requested, None).await,
            Err(StoreError::Conflict)
        ),
        "a stale settle loses"
    );
    store.outbox_settle(&sealed, None).await.unwrap();
    assert_eq!(
        store.outbox_entry(&tn, a.id(), 2).await.unwrap(),
        None,
        "delivered, removed"
    );
    let listed = store.outbox_dead(&tn, 10).await.unwrap();
    assert!(
        listed.iter().any(|e| e.action_id == a.id() && e.seq == 1),
        "the dead letter is listed: {listed:?}"
    );
    let later = plus(early, 100 * 3600);
    assert!(
        store
            .outbox_due(later, 100)
            .await
            .unwrap()
            .iter()
            .all(|e| e.action_id != a.id()),
        "a dead letter is not due"
    );
    let revived = dead.revived(early);
    store.outbox_settle(&dead, Some(&revived)).await.unwrap();
    let due = store.outbox_due(early, 100).await.unwrap();
    assert!(
        due.iter().any(|e| e.action_id == a.id()),
        "redelivered, due again"
    );
    assert!(store.outbox_dead(&tn, 10).await.unwrap().is_empty());
}

/// SC-CH-03: a channel's note about an action (the Slack message's channel and ts) is kept,
/// replaced, read back per channel, and leaves the action's record, version and events as
/// they were; nothing is kept for an action that does not exist.
async fn channel_notes(store: &dyn Store) {
    let tn = tenant("notes");
    let created = Creation::new(
        pending(&tn, "a1", far()),
        Actor::agent("a1"),
        Some("approval_required"),
        t0(),
    );
    store.create(&created, None).await.unwrap();
    let a = created.action.clone();
    assert_eq!(
        store.channel_note(&tn, a.id(), "slack").await.unwrap(),
        None
    );
    store
        .keep_channel_note(&tn, a.id(), "slack", "C0123456789 1700000001.000100")
        .await
        .unwrap();
    store
        .keep_channel_note(&tn, a.id(), "slack", "C0123456789 1700000002.000100")
        .await
        .unwrap();
    assert_eq!(
        store
            .channel_note(&tn, a.id(), "slack")
            .await
            .unwrap()
            .as_deref(),
        Some("C0123456789 1700000002.000100"),
        "the last note kept"
    );
    assert_eq!(
        store.channel_note(&tn, a.id(), "email").await.unwrap(),
        None
    );
    assert_eq!(
        store.channel_note("other", a.id(), "slack").await.unwrap(),
        None
    );
    let now = store.load(&tn, a.id()).await.unwrap().unwrap();
    assert_eq!(
        (now.version(), now.chain_head()),
        (a.version(), a.chain_head())
    );
    assert_eq!(store.events(&tn, a.id()).await.unwrap().len(), 1);
    // A transition after a note still lands on (state, version).
    let seal = Transition::seal(&a, Actor::system(), &SealReason::ApprovalExpired, t0());
    store.commit(&seal).await.unwrap();
    assert!(store
        .channel_note(&tn, a.id(), "slack")
        .await
        .unwrap()
        .is_some());
    store
        .keep_channel_note(&tn, "act_gone", "slack", "C1 1.0")
        .await
        .unwrap();
    assert!(
        store.load(&tn, "act_gone").await.unwrap().is_none(),
        "no record made"
    );
    assert_eq!(
        store.channel_note(&tn, "act_gone", "slack").await.unwrap(),
        None
    );
}

/// SC-RES-03: a wake's facts — the action, and the stops of its agent only once it is approved.
async fn load_with_stops(store: &dyn Store) {
    let tn = tenant("wake_facts");
    let stop = Stop {
        tenant: tn.clone(),
        agent_id: Some("a1".into()),
        stopped_at: t0(),
        stopped_by: "admin-1".into(),
        channel: None,
    };
    store.put_stop(&stop).await.unwrap();
    let a = create_pending(store, &tn, "a1", far()).await;
    let (found, stops) = store.load_with_stops(&tn, a.id()).await.unwrap();
    assert_eq!(
        (found.map(|f| f.id().to_owned()), stops),
        (Some(a.id().to_owned()), vec![])
    );
    let approved = approve(&a, plus(t0(), 60), plus(t0(), 3600), t0());
    store.commit(&approved).await.unwrap();
    let (found, stops) = store.load_with_stops(&tn, a.id()).await.unwrap();
    assert_eq!(found.map(|f| f.state()), Some(State::Approved));
    assert_eq!(stops, vec![stop]);
    let (none, stops) = store.load_with_stops(&tn, "act_gone").await.unwrap();
    assert!(none.is_none() && stops.is_empty());
}

/// SC-REC-01/02, SC-APP-04: the sweep index holds lapsing approvals, due tickets and expiring
/// leases by their instant, earliest first; sealed actions leave it.
async fn sweep(store: &dyn Actions) {
    // Its own span of time, after everything the other cases left waiting.
    let b = plus(t0(), 365 * 86_400);
    let tn = tenant("sweep");
    let lapsing = create_pending(store, &tn, "a1", plus(b, 600)).await;
    let waiting = create_pending(store, &tn, "a1", far()).await;
    let waiting = approve(&waiting, plus(b, 300), plus(b, 3600), b);
    store.commit(&waiting).await.unwrap();
    let running = create_pending(store, &tn, "a1", far()).await;
    let running = approve(&running, b, plus(b, 3600), b);
    store.commit(&running).await.unwrap();
    let running = Transition::claim(&running.action, "wrk_1", plus(b, 120), plus(b, 1)).unwrap();
    store.commit(&running).await.unwrap();
    let sealed = create_pending(store, &tn, "a1", plus(b, 60)).await;
    store
        .commit(&Transition::seal(
            &sealed,
            Actor::user("approver-1"),
            &SealReason::Denied("no".into()),
            b,
        ))
        .await
        .unwrap();
    let later = create_pending(store, &tn, "a1", far()).await;
    let later = approve(&later, plus(b, 86_400), plus(b, 90_000), b);
    store.commit(&later).await.unwrap();

    let ids = |refs: Vec<countersign::store::SweepRef>| {
        refs.into_iter().map(|r| r.action_id).collect::<Vec<_>>()
    };
    // An executing action may come before its lease ends (an adapter need not index a lease's
    // end on every claim: Actions::defer_sweep); nothing else comes early. Deferred, it waits.
    let early = ids(store.sweep_due(plus(b, 60), 10).await.unwrap());
    assert!(
        early.iter().all(|id| *id == running.action.id()),
        "nothing else due yet: {early:?}"
    );
    store.defer_sweep(&running.action).await.unwrap();
    assert!(
        store.sweep_due(plus(b, 60), 10).await.unwrap().is_empty(),
        "nothing due yet"
    );
    let due = store.sweep_due(plus(b, 660), 10).await.unwrap();
    assert!(due.iter().all(|r| r.tenant == tn));
    assert_eq!(due[0].sweep_at, plus(b, 120));
    assert_eq!(
        ids(due),
        [
            running.action.id().to_owned(),
            waiting.action.id().to_owned(),
            lapsing.id().to_owned()
        ]
    );
    assert_eq!(
        ids(store.sweep_due(plus(b, 660), 2).await.unwrap()),
        [
            running.action.id().to_owned(),
            waiting.action.id().to_owned()
        ]
    );

    // Sealing removes it from the index.
    store
        .commit(&Transition::seal(
            &waiting.action,
            Actor::agent("a1"),
            &SealReason::Cancelled,
            plus(b, 5),
        ))
        .await
        .unwrap();
    assert_eq!(
        ids(store.sweep_due(plus(b, 660), 10).await.unwrap()),
        [running.action.id().to_owned(), lapsing.id().to_owned()]
    );
    // Deferring a version that has moved on changes nothing.
    store.defer_sweep(&waiting.action).await.unwrap();
    assert_eq!(
        ids(store.sweep_due(plus(b, 660), 10).await.unwrap()),
        [running.action.id().to_owned(), lapsing.id().to_owned()]
    );
    // Rediscovery reads every waiting ticket, however far.
    let all = ids(store.sweep_due(Timestamp::MAX, 100_000).await.unwrap());
    assert!(all.contains(&later.action.id().to_owned()));
    assert!(!all.contains(&sealed.id().to_owned()));
}

/// SC-APP-04 with a window: a scheduled approval may be listed from its window's start (where
/// its ticket will be due if approved in time: an adapter may index it there so the approve
/// moves no index entry), never before; deferred, it waits until its approval lapses. Approved
/// in time, it is due at the window's start.
async fn sweep_scheduled_approval(store: &dyn Actions) {
    // Its own span of time, after the sweep case's.
    let b = plus(t0(), 2 * 365 * 86_400);
    let tn = tenant("sweep_sched");
    let scheduled = |expires_at| {
        let window = Window {
            not_before: plus(b, 100),
            not_after: plus(b, 700),
        };
        let a = edited(&pending(&tn, "a1", expires_at), |r| {
            r["schedule"] = json!(window)
        });
        Creation::new(a, Actor::agent("a1"), Some("approval_required"), b)
    };
    let late = scheduled(plus(b, 650));
    store.create(&late, None).await.unwrap();
    let timely = scheduled(plus(b, 650));
    store.create(&timely, None).await.unwrap();
    let tenant = tn.as_str();
    let mine = |until| async move {
        let refs = store.sweep_due(until, 10_000).await.unwrap();
        refs.into_iter()
            .filter(|r| r.tenant == tenant)
            .map(|r| r.action_id)
            .collect::<Vec<_>>()
    };
    assert!(
        mine(plus(b, 99)).await.is_empty(),
        "nothing before not_before"
    );
    let approved = approve(&timely.action, plus(b, 100), plus(b, 700), plus(b, 50));
    store.commit(&approved).await.unwrap();
    let at_start = mine(plus(b, 100)).await;
    assert!(
        at_start.contains(&approved.action.id().to_owned()),
        "the approved ticket is due at the window's start: {at_start:?}"
    );
    assert!(
        at_start.len() == 1 || at_start.contains(&late.action.id().to_owned()),
        "{at_start:?}"
    );
    store.defer_sweep(&late.action).await.unwrap();
    assert_eq!(
        mine(plus(b, 649)).await,
        std::slice::from_ref(&approved.action.id()),
        "deferred, the late approval waits for its expiry"
    );
    assert_eq!(
        mine(plus(b, 650)).await,
        [approved.action.id().to_owned(), late.action.id().to_owned()]
    );
}

/// SC-SEC-06 over a store: what the adapter stores and loads back is what the verifier holds
/// to its record. Someone with write access to the store (forging through the adapter's own
/// writes, so the test holds for any item layout) moves a whole action to another id, cuts an
/// event out of a chain, and edits the args under a recomputed digest: each fails. With the
/// chain starting from "" (before SC-SEC-06) the moved and edited ones verified.
async fn tampered_chains_fail(store: &dyn Actions) {
    let tn = tenant("chain");
    // A new action as intake commits it (real digests), and its denial.
    let real = || {
        // The context as intake builds it: the call the approver is shown.
        let a = showing_its_call(&pending(&tn, "a1", far()));
        let created = Creation::new(a, Actor::agent("a1"), Some("approval_required"), t0());
        let denied = Transition::seal(
            &created.action,
            Actor::user("approver-1"),
            &SealReason::Denied("not today".into()),
            plus(t0(), 1),
        );
        (created, denied)
    };
    let chain = real();
    let create = |c: Creation| async move { store.create(&c, None).await.unwrap() };
    let write = |t: Transition| async move { store.commit(&t).await.unwrap() };
    let verified = |id: String| {
        let tn = tn.clone();
        async move {
            let action = store.load(&tn, &id).await.unwrap().unwrap();
            let events = store.events(&tn, &id).await.unwrap();
            audit::verify(&action, &events)
        }
    };
    create(chain.0.clone()).await;
    write(chain.1.clone()).await;
    let id = chain.0.action.id().to_owned();
    assert_eq!(
        verified(id.clone()).await,
        Ok(()),
        "the real chain verifies"
    );

    // Moved: the record and its events stored under another id.
    let moved = format!("act_{}", ulid::Ulid::new());
    let mut forged = chain.0.clone();
    forged.action = edited(&forged.action, |r| r["id"] = json!(moved));
    create(forged).await;
    let mut forged = chain.1.clone();
    forged.action = edited(&forged.action, |r| r["id"] = json!(moved));
    write(forged).await;
    assert_eq!(verified(moved).await, Err(ChainError::Hash { seq: 1 }));

    // Cut: the record counts two events, the store holds the first and a later one.
    let (first, mut last) = real();
    let cut = first.action.id().to_owned();
    create(first).await;
    last.event.seq = 3;
    write(last).await;
    assert_eq!(
        verified(cut).await,
        Err(ChainError::Sequence {
            position: 2,
            seq: 3
        })
    );

    // Edited args: the record rewritten with other args and their digest, chained onto the
    // stored head as a next event would be.
    let (first, _) = real();
    let edited_id = first.action.id().to_owned();
    create(first.clone()).await;
    let rewritten = self::edited(&first.action, |r| {
        r["args"] = json!({"to": "attacker@example.com"});
        r["args_digest"] = json!(canonical::digest(&r["args"]));
    });
    let mut forged = Transition::seal(
        &rewritten,
        Actor::user("approver-1"),
        &SealReason::Denied("not today".into()),
        plus(t0(), 1),
    );
    forged.expected = (State::PendingApproval, 1);
    write(forged).await;
    assert_eq!(verified(edited_id).await, Err(ChainError::Hash { seq: 1 }));

    assert_eq!(verified(id).await, Ok(()), "the real chain is untouched");
}

#[tokio::test]
async fn sc_sec_06_tampered_chains_fail_on_sqlite() {
    tampered_chains_fail(&SqliteStore::in_memory().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_sec_06_tampered_chains_fail_on_dynamodb() {
    tampered_chains_fail(&localstack::fresh_store("chain").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_sec_06_tampered_chains_fail_on_postgres() {
    tampered_chains_fail(&postgres::store("chain").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn store_conformance_postgres() {
    conformance(Arc::new(postgres::store("conformance").await)).await;
}

/// Issue 16, defect 5: an approval that runs at once commits its ticket already claimed
/// (`pending_approval → executing`, one conditional write, SC-EDGE-07). Caught on main: that
/// write appended one event, `pending_approval → executing`, so the audit trail had no
/// `approved` although the contract's diagram passes through it. The write now appends the
/// countersignature (`pending_approval → approved`, the approver, the context digest) and then
/// the claim (`approved → executing`), and stays one write: a second commit at the old
/// (state, version) loses.
async fn approve_and_claim_record_the_approval(store: &dyn Actions) {
    let tn = tenant("approve_claim");
    // The context shows the record's own call, as intake builds it: `verify` holds it to that.
    let a = showing_its_call(&pending(&tn, "a1", far()));
    let created = Creation::new(a, Actor::agent("a1"), Some("approval_required"), t0());
    store.create(&created, None).await.unwrap();
    let a = created.action.clone();
    let terms = TicketTerms {
        correlation_id: format!("cor_{}", ulid::Ulid::new()),
        catalog_fingerprint: "sha256:tool".into(),
        due_at: t0(),
        deadline: plus(t0(), 60),
    };
    let lease = Lease {
        owner: "approving-request".into(),
        epoch: 1,
        until: plus(t0(), 30),
    };
    let claimed = Transition::approve_claimed(&a, "approver-1", terms, lease, plus(t0(), 1));
    store.commit(&claimed).await.unwrap();

    let loaded = store.load(&tn, a.id()).await.unwrap().unwrap();
    let events = store.events(&tn, a.id()).await.unwrap();
    let trail: Vec<_> = events
        .iter()
        .map(|e| (e.from, e.to, e.reason.as_deref(), e.actor.clone()))
        .collect();
    assert_eq!(
        trail,
        [
            (
                None,
                State::PendingApproval,
                Some("approval_required"),
                Actor::agent("a1")
            ),
            (
                Some(State::PendingApproval),
                State::Approved,
                Some("approved"),
                Actor::user("approver-1")
            ),
            (
                Some(State::Approved),
                State::Executing,
                Some("claimed"),
                Actor::system()
            ),
        ]
    );
    let digest = &a.approval().unwrap().context_digest;
    assert_eq!(events[1].context_digest.as_ref(), Some(digest));
    assert_eq!((loaded.state(), loaded.version()), (State::Executing, 3));
    assert_eq!(audit::verify(&loaded, &events), Ok(()));
    let again = approve(&a, t0(), plus(t0(), 60), plus(t0(), 2));
    assert!(matches!(
        store.commit(&again).await,
        Err(StoreError::Conflict)
    ));
}

#[tokio::test]
async fn sc_app_03_issue16_approve_and_claim_record_the_approval_on_sqlite() {
    approve_and_claim_record_the_approval(&SqliteStore::in_memory().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_app_03_issue16_approve_and_claim_record_the_approval_on_dynamodb() {
    approve_and_claim_record_the_approval(&localstack::fresh_store("approve_claim").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_app_03_issue16_approve_and_claim_record_the_approval_on_postgres() {
    approve_and_claim_record_the_approval(&postgres::store("approve_claim").await).await;
}

#[tokio::test]
async fn store_conformance_sqlite() {
    conformance(Arc::new(SqliteStore::in_memory().unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn store_conformance_dynamodb() {
    conformance(Arc::new(localstack::fresh_store("conformance").await)).await;
}

/// DynamoDB only: TTL attributes (idempotency records; a sealed action's two items under a
/// retention), a sealed action leaves the sweep index, a call item whose state item never
/// committed is not an action, and a malformed stored record fails closed on load (SPEC §1.2).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamodb_ttl_retention_and_fail_closed() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let (client, table) = localstack::fresh_table("ttl").await;
    let store = DynamoStore::new(client.clone(), &table)
        .with_retention(Some(SignedDuration::from_hours(24 * 90)));
    let tn = tenant("ttl");
    let a = create_pending(&store, &tn, "a1", far()).await;
    let sealed = Transition::seal(
        &a,
        Actor::agent("a1"),
        &SealReason::Cancelled,
        plus(t0(), 10),
    );
    store.commit(&sealed).await.unwrap();

    let pk = format!("T#{tn}");
    let get = |sk: String| {
        let (client, table, pk) = (client.clone(), table.clone(), pk.clone());
        async move {
            client
                .get_item()
                .table_name(&table)
                .key("pk", AttributeValue::S(pk))
                .key("sk", AttributeValue::S(sk.clone()))
                .send()
                .await
                .unwrap()
                .item
                .unwrap_or_else(|| panic!("{sk} exists"))
        }
    };
    let expected = (plus(t0(), 10).as_second() + 90 * 86_400).to_string();
    for sk in [format!("A#{}", a.id()), format!("A#{}#S", a.id())] {
        let item = get(sk.clone()).await;
        assert_eq!(
            item.get("ttl"),
            Some(&AttributeValue::N(expected.clone())),
            "{sk}"
        );
        assert!(
            !item.contains_key("sp"),
            "sealed actions leave the sweep index"
        );
    }

    // A call item alone (its state item never committed) is not an action.
    let orphan = pending(&tn, "a1", far());
    let mut call = get(format!("A#{}", a.id())).await;
    call.insert("sk".into(), AttributeValue::S(format!("A#{}", orphan.id())));
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(call))
        .send()
        .await
        .unwrap();
    assert_eq!(store.load(&tn, orphan.id()).await.unwrap(), None);
    assert!(store.events(&tn, orphan.id()).await.unwrap().is_empty());
    let listed = store
        .list(
            &tn,
            &ListQuery {
                limit: 10,
                ..ListQuery::default()
            },
        )
        .await
        .unwrap();
    let ids: Vec<&str> = listed.actions.iter().map(|x| x.id()).collect();
    assert_eq!(ids, [a.id()]);

    // Fail closed: a record whose ticket is inconsistent with its state is refused.
    let waiting = create_pending(&store, &tn, "a1", far()).await;
    let approved = approve(&waiting, plus(t0(), 60), plus(t0(), 600), t0());
    store.commit(&approved).await.unwrap();
    client
        .update_item()
        .table_name(&table)
        .key("pk", AttributeValue::S(pk.clone()))
        .key("sk", AttributeValue::S(format!("A#{}#S", waiting.id())))
        .update_expression("SET #s = :p")
        .expression_attribute_names("#s", "s")
        .expression_attribute_values(":p", AttributeValue::S("p".into()))
        .send()
        .await
        .unwrap();
    assert!(matches!(
        store.load(&tn, waiting.id()).await,
        Err(StoreError::Malformed(_))
    ));
}
