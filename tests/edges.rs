//! Guarantees at the edges (SPEC SC-EDGE-01, -02, -04, -05, -06, -07), each proven on SQLite, on
//! DynamoDB (LocalStack) and on Postgres (scripts/postgres.sh): the engine with a fault-injecting store decorator
//! (`countersign_tests::faults`), an injected clock and tools over real HTTP. Every scenario below failed on the
//! main branch before the fix it names; its comment says what it caught.

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    domain::{resume::Wake, Action, State},
    engine::ResumeOutcome,
    store::Actions,
    tools::{Call, Executors, ToolAnswer, ToolRunner},
    Clock,
};
use countersign_tests::faults::{Fault, FaultyStore, Gate, Matching, Write};
use countersign_tests::{
    config_toml, keys, on_every_store, postgres, rig::Rig, stores, stores::Backend, submission,
    temp_db, Behaviour, ToolServer,
};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::{sync::Arc, time::Duration};

/// The shared rig over a fault-injecting store (`store`, the handle to inject with).
struct Edge {
    rig: Rig,
    store: Arc<FaultyStore>,
}

impl std::ops::Deref for Edge {
    type Target = Rig;
    fn deref(&self) -> &Rig {
        &self.rig
    }
}

/// `limits`: extra `[limits]` lines (e.g. a request budget).
async fn edge(backend: Backend, limits: &str) -> Edge {
    let tools = ToolServer::start().await;
    edge_with(backend, limits, tools, Arc::new(Executors::new())).await
}

/// As [`edge`], with the tool server and the tool port given.
async fn edge_with(
    backend: Backend,
    limits: &str,
    tools: ToolServer,
    runner: Arc<dyn ToolRunner>,
) -> Edge {
    let toml =
        config_toml(&tools, "1m", "2s").replacen("[limits]\n", &format!("[limits]\n{limits}\n"), 1);
    let config = Arc::new(Config::from_toml(&toml).unwrap());
    let store = Arc::new(FaultyStore::new(stores::store(backend, "edges").await));
    let rig = Rig::on(tools, config, store.clone(), runner);
    Edge { rig, store }
}

impl Edge {
    /// A `report.build` ticket (policy `schedule`, recovery `retry`: 3 attempts per claim)
    /// for the window [now+nb, now+na].
    async fn report(&self, nb: i64, na: i64) -> Action {
        self.submit_in_window(
            "report.build",
            json!({"quarter": "Q3"}),
            (nb, na),
            State::Approved,
        )
        .await
    }
    /// Submit `tool` with `args` for the window [now+nb, now+na]; it lands in `expected`.
    async fn submit_in_window(
        &self,
        tool: &str,
        args: serde_json::Value,
        (nb, na): (i64, i64),
        expected: State,
    ) -> Action {
        let req = submission(json!({
            "tool": tool,
            "args": args,
            "schedule": {"not_before": self.at(nb).to_string(), "not_after": self.at(na).to_string()},
        }));
        let a = self
            .engine
            .submit(&self.who(keys::AGENT), req, None)
            .await
            .unwrap()
            .action;
        assert_eq!(a.state(), expected);
        a
    }
    /// A `report.build` ticket whose window [now+10 s, now+80 s] has just opened (the clock is
    /// moved into it): due, committed, not yet run.
    async fn due_report(&self) -> Action {
        let a = self.report(10, 80).await;
        self.set(self.at(11));
        a
    }
    /// Resume `a`'s wake in its own task (the test acts while it runs).
    fn spawn_resume(
        &self,
        a: &Action,
    ) -> tokio::task::JoinHandle<Result<ResumeOutcome, countersign::Error>> {
        let (engine, wake) = (self.engine.clone(), wake_of(a));
        tokio::spawn(async move { engine.resume(&wake).await })
    }
    async fn load(&self, id: &str) -> Action {
        self.store.load("acme", id).await.unwrap().unwrap()
    }
    fn set(&self, at: Timestamp) {
        self.clock.set(at);
    }
    /// Wait (real time) until the tool server has seen `n` calls for `id`.
    async fn tool_calls(&self, id: &str, n: usize) {
        for _ in 0..1000 {
            if self.tools.count_for(id) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the tool never saw {n} calls for {id}");
    }
}

fn wake_of(a: &Action) -> Wake {
    Wake {
        tenant: a.tenant().to_owned(),
        action_id: a.id().to_owned(),
        correlation_id: a.ticket().unwrap().correlation_id().to_owned(),
    }
}

fn failing_tool() -> Behaviour {
    Behaviour {
        status: 503,
        ..Behaviour::default()
    }
}

// ---------------------------------------------------------------------------------------------
// SC-EDGE-01: every attempt starts inside the window, checked right before it.

/// Caught on main: the deadline was checked once, before the claim. (a) A claim write that
/// took until after the deadline still started attempt 1; (b) a retry was sent after its
/// backoff although the deadline had passed during the pause.
async fn no_attempt_after_deadline(backend: Backend) {
    let e = edge(backend, "").await;
    e.tools.behave(failing_tool());

    // (a) The claim commits, the window closes while its answer is on the way back.
    let a = e.report(10, 70).await;
    e.set(a.ticket().unwrap().deadline() - SignedDuration::from_secs(1));
    let gate = Gate::new();
    e.store.inject(
        Matching::claim().of(a.id()),
        Fault::HoldAfter(gate.clone()),
        1,
    );
    let run = e.spawn_resume(&a);
    gate.reached().await;
    e.set(e.at(2));
    gate.open();
    run.await.unwrap().unwrap();
    assert_eq!(
        e.tools.count_for(a.id()),
        0,
        "no attempt after the deadline"
    );
    let sealed = e.load(a.id()).await;
    assert_eq!(
        (sealed.state(), sealed.reason()),
        (State::Cancelled, Some("schedule_missed"))
    );

    // (b) Attempt 1 answers 503 just before the deadline; the deadline passes in the backoff.
    let b = e.report(10, 70).await;
    e.set(b.ticket().unwrap().deadline() - SignedDuration::from_millis(500));
    let run = e.spawn_resume(&b);
    e.tool_calls(b.id(), 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // inside the 1 s backoff
    e.set(e.at(1));
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(b.id()), 1, "no retry after the deadline");
    assert_eq!(
        e.load(b.id()).await.state(),
        State::Failed,
        "attempt 1's answer is the outcome"
    );
}

on_every_store!(no_attempt_after_deadline: sc_edge_01_no_attempt_after_deadline_sqlite, sc_edge_01_no_attempt_after_deadline_dynamodb, sc_edge_01_no_attempt_after_deadline_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-02: a stop is final from the moment it is answered.

/// Caught on main: stops were read only before the claim. (a) A stop answered after the claim
/// committed still let attempt 1 run; (b) a stop answered between attempts let the retries run.
async fn stop_is_final_once_answered(backend: Backend) {
    let e = edge(backend, "").await;
    let admin = e.who(keys::ADMIN);

    // (a) The claim commits; the stop is answered before the worker's first attempt.
    let a = e.due_report().await;
    let gate = Gate::new();
    e.store.inject(
        Matching::claim().of(a.id()),
        Fault::HoldAfter(gate.clone()),
        1,
    );
    let run = e.spawn_resume(&a);
    gate.reached().await;
    e.engine.stop(&admin, Some("agent-1")).await.unwrap();
    gate.open();
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(a.id()), 0, "no attempt after the stop");
    let sealed = e.load(a.id()).await;
    assert_eq!(
        (sealed.state(), sealed.reason()),
        (State::Denied, Some("stopped"))
    );
    e.engine.lift_stop(&admin, "agent-1").await.unwrap();

    // (b) Attempt 1 answers 503; the stop is answered during the backoff.
    e.tools.behave(failing_tool());
    let b = e.due_report().await;
    let run = e.spawn_resume(&b);
    e.tool_calls(b.id(), 1).await;
    e.engine.stop(&admin, None).await.unwrap();
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(b.id()), 1, "no retry after the stop");
    assert_eq!(e.load(b.id()).await.state(), State::Failed);
}

on_every_store!(stop_is_final_once_answered: sc_edge_02_stop_is_final_once_answered_sqlite, sc_edge_02_stop_is_final_once_answered_dynamodb, sc_edge_02_stop_is_final_once_answered_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-04: a tool's answer survives transient and ambiguous store errors.

/// Caught on main: (a) two transient errors at the result commit dropped a real answer (the
/// resume failed, the action stayed `executing` until its lease lapsed); (b) a result commit
/// that applied but answered an error failed the resume; (c) a claim that applied but answered
/// an error stranded the action `executing` with the tool never called. (d, e) A claim or result
/// whose re-send met its own applied first send (a conflict) is ours too, found by reading back.
async fn results_survive_store_faults(backend: Backend) {
    let e = edge(backend, "").await;
    let faults = [
        (Matching::result(), Fault::Fail, 2),
        (Matching::result(), Fault::Ambiguous, 1),
        (Matching::claim(), Fault::Ambiguous, 1),
        (Matching::claim(), Fault::AppliedConflict, 1),
        (Matching::result(), Fault::AppliedConflict, 1),
    ];
    let mut ids = Vec::new();
    for (matching, fault, times) in faults {
        let a = e.due_report().await;
        e.store.inject(matching.of(a.id()), fault.clone(), times);
        let out = e.engine.resume(&wake_of(&a)).await.unwrap();
        let ran = matches!(
            out,
            ResumeOutcome::Ran {
                state: State::Succeeded
            }
        );
        assert!(ran, "{fault:?}: {out:?}");
        assert_eq!(e.tools.count_for(a.id()), 1, "{fault:?}");
        ids.push(a.id().to_owned());
    }
    for id in &ids {
        assert_eq!(e.load(id).await.state(), State::Succeeded, "{id}");
    }
    let injected = e.store.injected();
    assert_eq!((injected.failed, injected.ambiguous), (2, 4));
}

on_every_store!(results_survive_store_faults: sc_edge_04_results_survive_store_faults_sqlite, sc_edge_04_results_survive_store_faults_dynamodb, sc_edge_04_results_survive_store_faults_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-05: shutdown claims nothing new and lets the runs under way commit.

/// Caught on main: there was no way to drain — shutdown aborted the sweep and dropped the
/// per-wake runs mid-tool, so a finished call was later sealed `outcome_unknown`.
async fn drain_lets_runs_commit(backend: Backend) {
    let e = edge(backend, "").await;
    let a = e.due_report().await;
    let b = e.due_report().await;
    e.tools.hold();
    let run = e.spawn_resume(&a);
    e.tool_calls(a.id(), 1).await;
    let drained = tokio::spawn({
        let engine = e.engine.clone();
        async move { engine.drain().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!drained.is_finished(), "a run is under way");
    let late = e.engine.resume(&wake_of(&b)).await.unwrap();
    assert!(matches!(late, ResumeOutcome::Deferred), "{late:?}");
    e.tools.release();
    drained.await.unwrap();
    assert_eq!(
        e.load(a.id()).await.state(),
        State::Succeeded,
        "committed before drain returned"
    );
    assert!(matches!(
        run.await.unwrap().unwrap(),
        ResumeOutcome::Ran { .. }
    ));
    assert_eq!(
        e.load(b.id()).await.state(),
        State::Approved,
        "no new claim while draining"
    );
    assert_eq!(e.tools.count_for(b.id()), 0);
}

on_every_store!(drain_lets_runs_commit: sc_edge_05_drain_lets_runs_commit_sqlite, sc_edge_05_drain_lets_runs_commit_dynamodb, sc_edge_05_drain_lets_runs_commit_postgres);

/// SC-EDGE-05 through the local server (on SQLite or Postgres): shutdown waits for the wake's
/// run under way and its result commits before it returns. Caught on main: `shutdown` returned
/// at once and the action was still `executing`.
async fn local_server_shutdown_lets_runs_commit(db: Database) {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "1m", "2s")).unwrap());
    let listen = "127.0.0.1:0".parse().unwrap();
    let server = Server::start_on(config, &db, listen, Parts::default())
        .await
        .unwrap();
    let api = countersign_tests::Api::new(server.addr);
    tools.hold();
    let (status, a) = api
        .submit(
            keys::AGENT,
            json!({"tool": "report.build", "args": {"q": 1},
                   "schedule": {"not_before": countersign_tests::in_secs(2), "not_after": countersign_tests::in_secs(120)}}),
        )
        .await;
    assert_eq!(status, 201, "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    for _ in 0..1000 {
        if tools.count_for(&id) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(tools.count_for(&id), 1, "the wake ran the tool");
    let shutdown = tokio::spawn(server.shutdown());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !shutdown.is_finished(),
        "shutdown waits for the run under way"
    );
    tools.release();
    shutdown.await.unwrap().unwrap();
    let store = db.open().await.unwrap();
    let done = store.load("acme", &id).await.unwrap().unwrap();
    assert_eq!(
        done.state(),
        State::Succeeded,
        "the result committed before exit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_05_local_server_shutdown_lets_runs_commit_sqlite() {
    local_server_shutdown_lets_runs_commit(Database::Sqlite(temp_db("edge05"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_05_local_server_shutdown_lets_runs_commit_postgres() {
    local_server_shutdown_lets_runs_commit(postgres::database("edge05").await).await;
}

// ---------------------------------------------------------------------------------------------
// SC-EDGE-06: the same bytes on every attempt; the attempt number in a header.

/// Caught on main: the body carried `attempt`, so each retry under the same Idempotency-Key
/// sent different bytes.
async fn identical_bodies_on_every_attempt(backend: Backend) {
    let e = edge(backend, "").await;
    e.tools.behave(failing_tool());
    let a = e.due_report().await;
    e.engine.resume(&wake_of(&a)).await.unwrap();
    let calls = e.tools.calls_for(a.id());
    assert_eq!(calls.len(), 3, "three attempts per claim of a retry tool");
    assert!(
        calls.iter().all(|c| c.raw == calls[0].raw),
        "byte-identical bodies"
    );
    assert!(calls.iter().all(|c| c.signature_ok));
    assert!(calls
        .iter()
        .all(|c| c.idempotency_key.as_deref() == Some(a.id())));
    assert_eq!(
        calls.iter().map(|c| c.attempt).collect::<Vec<_>>(),
        [1, 2, 3],
        "Countersign-Attempt header"
    );
    let body: serde_json::Value = serde_json::from_slice(&calls[0].raw).unwrap();
    assert_eq!(
        body,
        json!({"action_id": a.id(), "tool": "report.build", "args": {"quarter": "Q3"}})
    );
}

on_every_store!(identical_bodies_on_every_attempt: sc_edge_06_identical_bodies_on_every_attempt_sqlite, sc_edge_06_identical_bodies_on_every_attempt_dynamodb, sc_edge_06_identical_bodies_on_every_attempt_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-07: no request waits on a tool longer than its caller can.

/// Caught on main: (a) an allowed call ran inside the request whatever its tool's claim budget
/// (here 2 s against a 1 s request budget); (b) the committed, due ticket of an inline run
/// was visible to the sweep before the inline claim, and the sweep took it.
async fn inline_runs_fit_the_request(backend: Backend) {
    // (a) search.web: recovery `fail`, timeout 2 s → claim budget 2 s > request budget 1 s.
    let e = edge(backend, "request_budget = \"1s\"").await;
    let agent = e.who(keys::AGENT);
    let req = || submission(json!({"tool": "search.web", "args": {"q": "x"}}));
    let a = e.engine.submit(&agent, req(), None).await.unwrap().action;
    assert_eq!(
        a.state(),
        State::Approved,
        "committed, not run in the request"
    );
    assert_eq!(e.tools.count_for(a.id()), 0);
    let armed = e.waker.armed.lock().unwrap().clone();
    assert!(
        armed.iter().any(|(w, _)| w.action_id == a.id()),
        "the wake runs it"
    );
    let out = e.engine.resume(&wake_of(&a)).await.unwrap();
    assert!(
        matches!(
            out,
            ResumeOutcome::Ran {
                state: State::Succeeded
            }
        ),
        "{out:?}"
    );

    // (b) Budget fits: the inline run commits its action already claimed, so a sweep that
    // looks while the request is between its commit and its tool call finds nothing due.
    let e = edge(backend, "request_budget = \"25s\"").await;
    let gate = Gate::new();
    let create = Matching {
        write: Some(Write::Create),
        ..Matching::any()
    };
    e.store.inject(create, Fault::HoldAfter(gate.clone()), 1);
    let submit = tokio::spawn({
        let (engine, agent) = (e.engine.clone(), agent.clone());
        async move { engine.submit(&agent, req(), None).await }
    });
    gate.reached().await;
    let swept = e.engine.sweep().await.unwrap();
    assert_eq!((swept.resumed, swept.recovered), (0, 0), "{swept:?}");
    gate.open();
    let b = submit.await.unwrap().unwrap().action;
    assert_eq!(
        b.state(),
        State::Succeeded,
        "the request ran it and answers the result"
    );
    assert_eq!(e.tools.count_for(b.id()), 1);
}

on_every_store!(inline_runs_fit_the_request: sc_edge_07_inline_runs_fit_the_request_sqlite, sc_edge_07_inline_runs_fit_the_request_dynamodb, sc_edge_07_inline_runs_fit_the_request_postgres);

// ---------------------------------------------------------------------------------------------
// SC-APP-04 with a window: a scheduled approval lapses at its expiry, whatever the sweep index.

/// The DynamoDB adapter indexes a scheduled approval from its window's start (where its ticket
/// will be due when approved in time, so a timely approve moves no index entry: issue 9's
/// cost). The sweep then meets a late approval before it lapses: it must leave it pending and
/// defer it, never seal it early, and seal it once its expiry has come. (Checked: without the
/// sweep's guard the DynamoDB run sealed the late approval at the window's start.)
async fn scheduled_approval_lapses_at_its_expiry(backend: Backend) {
    let e = edge(backend, "").await;
    let submit = || {
        let args = json!({"to": "ops@example.com"});
        e.submit_in_window("mail.send", args, (60, 600), State::PendingApproval)
    };
    let (late, timely) = (submit().await, submit().await);
    let digest = timely.approval().unwrap().context_digest.clone();
    e.engine
        .approve(&e.who(keys::APPROVER), timely.id(), &digest)
        .await
        .unwrap();

    e.set(e.at(120)); // inside the window: the timely one is due, the late one still waits
    let first = e.engine.sweep().await.unwrap();
    assert_eq!((first.resumed, first.expired), (1, 0), "{first:?}");
    assert_eq!(e.load(timely.id()).await.state(), State::Succeeded);
    assert_eq!(e.load(late.id()).await.state(), State::PendingApproval);
    let again = e.engine.sweep().await.unwrap();
    assert_eq!(again.due, 0, "deferred until its expiry: {again:?}");

    e.set(e.at(481)); // past its expiry (not_after)
    let lapsed = e.engine.sweep().await.unwrap();
    assert_eq!(lapsed.expired, 1, "{lapsed:?}");
    let sealed = e.load(late.id()).await;
    assert_eq!(
        (sealed.state(), sealed.reason()),
        (State::Cancelled, Some("approval_expired"))
    );
}

on_every_store!(scheduled_approval_lapses_at_its_expiry: sc_app_04_scheduled_approval_lapses_at_its_expiry_sqlite, sc_app_04_scheduled_approval_lapses_at_its_expiry_dynamodb, sc_app_04_scheduled_approval_lapses_at_its_expiry_postgres);

// ---------------------------------------------------------------------------------------------
// SC-REC-02 / SC-RES-07: a worker held up past its lease starts no attempt; recovery takes over.

/// Caught on main: a worker checked the window and the stops before each attempt but not its
/// own lease. Held up past it (here: its clock moved during a backoff, as a paused process
/// would find), it still started the next attempt of a `retry` tool — while the sweep, seeing
/// the lapsed lease, may re-claim and re-run the same action: two runs at once. Now it yields
/// (commits nothing) and the sweep's recovery runs the remaining attempts under a new epoch.
async fn worker_past_its_lease_yields(backend: Backend) {
    let e = edge(backend, "").await;
    e.tools.behave(failing_tool());
    let a = e.due_report().await;
    let run = e.spawn_resume(&a);
    e.tool_calls(a.id(), 1).await;
    let lease = e.load(a.id()).await.lease().cloned().expect("claimed");
    assert!(lease.until < a.ticket().unwrap().deadline());
    // Inside attempt 1's backoff: the lease ends before attempt 2 could time out.
    e.set(lease.until - SignedDuration::from_millis(500));
    let outcome = run.await.unwrap().unwrap();
    assert!(matches!(outcome, ResumeOutcome::Yielded), "{outcome:?}");
    assert_eq!(
        e.tools.count_for(a.id()),
        1,
        "no attempt on a lease about to lapse"
    );
    let held = e.load(a.id()).await;
    assert_eq!(
        (held.state(), held.lease().map(|l| l.epoch)),
        (State::Executing, Some(lease.epoch)),
        "nothing committed"
    );

    // Once the lease has lapsed, recovery re-claims it (epoch 2) and runs its attempts.
    e.set(lease.until + SignedDuration::from_secs(1));
    let swept = e.engine.sweep().await.unwrap();
    assert_eq!(swept.recovered, 1, "{swept:?}");
    let done = e.load(a.id()).await;
    assert_eq!(
        done.state(),
        State::Failed,
        "the 503s of the re-run are its outcome"
    );
    let claims = e
        .store
        .events("acme", a.id())
        .await
        .unwrap()
        .iter()
        .filter(|ev| ev.to == State::Executing)
        .count();
    assert_eq!(claims, 2, "the worker's claim and the recovery's");
    assert!(e.tools.count_for(a.id()) > 1);
}

on_every_store!(worker_past_its_lease_yields: sc_rec_02_a_worker_past_its_lease_yields_to_recovery_sqlite, sc_rec_02_a_worker_past_its_lease_yields_to_recovery_dynamodb, sc_rec_02_a_worker_past_its_lease_yields_to_recovery_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-10: every transition resolves an ambiguous write by reading back.

/// Every write the engine makes, each met once by a fault that applies the write and then
/// hides it: the SDK re-sent it and met our own write (`AppliedConflict`), or the answer was
/// lost (`Ambiguous`).
#[derive(Clone, Copy, Debug)]
enum WriteKind {
    CreateAllowed,
    CreateAllowedKeyed,
    CreatePending,
    CreateDenied,
    Approve,
    ApproveClaimed,
    Deny,
    Cancel,
    StopSeal,
    Expiry,
    Claim,
    Result,
    Reclaim,
    SealUnknown,
}

const WRITE_KINDS: [WriteKind; 14] = [
    WriteKind::CreateAllowed,
    WriteKind::CreateAllowedKeyed,
    WriteKind::CreatePending,
    WriteKind::CreateDenied,
    WriteKind::Approve,
    WriteKind::ApproveClaimed,
    WriteKind::Deny,
    WriteKind::Cancel,
    WriteKind::StopSeal,
    WriteKind::Expiry,
    WriteKind::Claim,
    WriteKind::Result,
    WriteKind::Reclaim,
    WriteKind::SealUnknown,
];

impl Edge {
    fn submit_req(&self, tool: &str, args: serde_json::Value) -> countersign::domain::Submission {
        submission(json!({"tool": tool, "args": args}))
    }
    fn next_create(&self, fault: &Fault) {
        let create = Matching {
            write: Some(Write::Create),
            ..Matching::any()
        };
        self.store.inject(create, fault.clone(), 1);
    }
    fn next_to(&self, id: &str, from: Option<State>, to: State, fault: &Fault) {
        let m = Matching {
            write: Some(Write::Commit),
            from,
            to: Some(to),
            ..Matching::any()
        };
        self.store.inject(m.of(id), fault.clone(), 1);
    }
    async fn pending_mail(&self) -> Action {
        let req = self.submit_req("mail.send", json!({"to": "ops@example.com"}));
        let a = self
            .engine
            .submit(&self.who(keys::AGENT), req, None)
            .await
            .unwrap();
        assert_eq!(a.action.state(), State::PendingApproval);
        a.action
    }
    fn digest(a: &Action) -> String {
        a.approval().unwrap().context_digest.clone()
    }
    /// A due ticket's wake runs attempt 1 and its process dies before the result commit;
    /// the clock is moved past the lease it left.
    async fn woken_then_dead(&self, a: &Action) -> Action {
        let stopped = self.store.injected().stopped;
        self.store
            .inject(Matching::result().of(a.id()), Fault::StopBefore, 1);
        let run = self.spawn_resume(a);
        let run = tokio::spawn(async move {
            let _ = run.await;
        });
        self.lapsed_claim(a, stopped, run).await
    }
    /// An action whose claim holds a lease no worker will finish: the tool answered attempt 1,
    /// then the process stopped before the result commit (`StopBefore`). Returns it with the
    /// clock moved past the lease.
    async fn lapsed_claim(
        &self,
        a: &Action,
        stopped_before: usize,
        run: tokio::task::JoinHandle<()>,
    ) -> Action {
        self.tool_calls(a.id(), 1).await;
        for _ in 0..1000 {
            if self.store.injected().stopped > stopped_before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.abort();
        let held = self.load(a.id()).await;
        let lease = held.lease().cloned().expect("claimed");
        self.set(lease.until + SignedDuration::from_secs(1));
        held
    }
}

/// One row: drive the write under `fault`; everything after it must happen as if it answered.
/// What each row caught on main (before the one write path) is said beside it.
async fn own_write_row(e: &Edge, kind: WriteKind, fault: &Fault) {
    let agent = e.who(keys::AGENT);
    let approver = e.who(keys::APPROVER);
    let ctx = format!("{kind:?} under {fault:?}");
    match kind {
        // Caught: a created-already-claimed allowed call answered 500 (Ambiguous) or a
        // conflict, and never ran; an agent resubmitting ran a `retry` tool's downstream twice.
        WriteKind::CreateAllowed => {
            e.next_create(fault);
            let req = e.submit_req("search.web", json!({"q": ctx}));
            let a = e.engine.submit(&agent, req, None).await.expect(&ctx).action;
            assert_eq!(a.state(), State::Succeeded, "{ctx}");
            assert_eq!(e.tools.count_for(a.id()), 1, "{ctx}: ran once");
        }
        // Caught: with an Idempotency-Key the conflict was taken for a concurrent request's
        // key; `replay` answered our own `executing` record and nobody ever ran it.
        WriteKind::CreateAllowedKeyed => {
            e.next_create(fault);
            let req = e.submit_req("search.web", json!({"q": ctx}));
            let key = format!("key-{}", ulid::Ulid::new());
            let a = e.engine.submit(&agent, req, Some(&key)).await.expect(&ctx);
            assert!(!a.replayed, "{ctx}: the first answer is no replay");
            assert_eq!(a.action.state(), State::Succeeded, "{ctx}");
            assert_eq!(e.tools.count_for(a.action.id()), 1, "{ctx}: ran once");
        }
        WriteKind::CreatePending => {
            e.next_create(fault);
            let req = e.submit_req("mail.send", json!({"to": ctx}));
            let a = e.engine.submit(&agent, req, None).await.expect(&ctx).action;
            assert_eq!(a.state(), State::PendingApproval, "{ctx}");
            assert_eq!(e.load(a.id()).await.version(), 1, "{ctx}");
        }
        WriteKind::CreateDenied => {
            e.next_create(fault);
            let req = e.submit_req("unlisted.tool", json!({"q": ctx}));
            match e.engine.submit(&agent, req, None).await {
                Err(countersign::Error::Refused { action_id, .. }) => {
                    assert_eq!(e.load(&action_id).await.state(), State::Denied, "{ctx}");
                }
                other => panic!("{ctx}: {other:?}"),
            }
        }
        // Caught: an approve whose own write came back as a conflict returned without arming
        // the wake; the sweep found the ticket up to a minute late.
        WriteKind::Approve => {
            let a = e
                .submit_in_window(
                    "mail.send",
                    json!({"to": ctx}),
                    (10, 80),
                    State::PendingApproval,
                )
                .await;
            e.next_to(a.id(), Some(State::PendingApproval), State::Approved, fault);
            let approved = e
                .engine
                .approve(&approver, a.id(), &Edge::digest(&a))
                .await
                .expect(&ctx);
            assert_eq!(approved.state(), State::Approved, "{ctx}");
            let armed = e.waker.armed.lock().unwrap().clone();
            assert!(
                armed.iter().any(|(w, _)| w.action_id == a.id()),
                "{ctx}: the wake is armed"
            );
        }
        // Caught (defect 1): the approve-and-claim applied, its conflict was reported as a lost
        // race, `run_inline` never ran, and the sweep later sealed it `outcome_unknown`
        // although no attempt was ever sent.
        WriteKind::ApproveClaimed => {
            let a = e.pending_mail().await;
            e.next_to(
                a.id(),
                Some(State::PendingApproval),
                State::Executing,
                fault,
            );
            let done = e
                .engine
                .approve(&approver, a.id(), &Edge::digest(&a))
                .await
                .expect(&ctx);
            assert_eq!(done.state(), State::Succeeded, "{ctx}");
            assert_eq!(e.tools.count_for(a.id()), 1, "{ctx}: ran once");
        }
        WriteKind::Deny => {
            let a = e.pending_mail().await;
            e.next_to(a.id(), None, State::Denied, fault);
            let denied = e
                .engine
                .deny(&approver, a.id(), "not today")
                .await
                .expect(&ctx);
            assert_eq!(denied.state(), State::Denied, "{ctx}");
        }
        // Caught (defect 2): a re-sent cancel that met its own applied write answered
        // `409 action_sealed {cancelled}` and skipped deleting the wake.
        WriteKind::Cancel => {
            let a = e.report(10, 80).await;
            e.next_to(a.id(), None, State::Cancelled, fault);
            let cancelled = e.engine.cancel(&agent, a.id()).await.expect(&ctx);
            assert_eq!(cancelled.state(), State::Cancelled, "{ctx}");
            let disarmed = e.waker.disarmed.lock().unwrap().clone();
            assert!(
                disarmed.iter().any(|w| w.action_id == a.id()),
                "{ctx}: the wake is deleted"
            );
        }
        WriteKind::StopSeal => {
            let a = e.due_report().await;
            let admin = e.who(keys::ADMIN);
            e.engine.stop(&admin, Some("agent-1")).await.unwrap();
            e.next_to(a.id(), None, State::Denied, fault);
            let out = e.engine.resume(&wake_of(&a)).await;
            e.engine.lift_stop(&admin, "agent-1").await.unwrap();
            let out = out.expect(&ctx);
            assert!(
                matches!(
                    out,
                    ResumeOutcome::Sealed {
                        state: State::Denied,
                        ..
                    }
                ),
                "{ctx}: {out:?}"
            );
        }
        WriteKind::Expiry => {
            let a = e.pending_mail().await;
            e.set(a.approval().unwrap().expires_at + SignedDuration::from_secs(1));
            e.next_to(a.id(), None, State::Cancelled, fault);
            let swept = e.engine.sweep().await.expect(&ctx);
            assert_eq!(swept.failed, 0, "{ctx}: {swept:?}");
            let sealed = e.load(a.id()).await;
            assert_eq!(
                (sealed.state(), sealed.reason()),
                (State::Cancelled, Some("approval_expired")),
                "{ctx}"
            );
        }
        WriteKind::Claim | WriteKind::Result => {
            let a = e.due_report().await;
            match kind {
                WriteKind::Claim => {
                    e.next_to(a.id(), Some(State::Approved), State::Executing, fault)
                }
                _ => e.next_to(a.id(), Some(State::Executing), State::Succeeded, fault),
            }
            let out = e.engine.resume(&wake_of(&a)).await.expect(&ctx);
            assert!(
                matches!(
                    out,
                    ResumeOutcome::Ran {
                        state: State::Succeeded
                    }
                ),
                "{ctx}: {out:?}"
            );
            assert_eq!(e.tools.count_for(a.id()), 1, "{ctx}");
        }
        // A `retry` tool's lapsed claim: the recovery re-claim (epoch 2) is the faulted write.
        WriteKind::Reclaim => {
            let a = e.due_report().await;
            e.woken_then_dead(&a).await;
            e.next_to(a.id(), Some(State::Executing), State::Executing, fault);
            let swept = e.engine.sweep().await.expect(&ctx);
            assert_eq!((swept.recovered, swept.failed), (1, 0), "{ctx}: {swept:?}");
            let done = e.load(a.id()).await;
            assert_eq!(
                (done.state(), done.lease()),
                (State::Succeeded, None),
                "{ctx}"
            );
            assert_eq!(
                e.tools.count_for(a.id()),
                2,
                "{ctx}: attempt 1 and the re-run"
            );
        }
        // A `fail` tool's lapsed claim: the recovery seal is the faulted write.
        WriteKind::SealUnknown => {
            let a = e.pending_mail().await;
            let stopped = e.store.injected().stopped;
            e.store
                .inject(Matching::result().of(a.id()), Fault::StopBefore, 1);
            let approve = tokio::spawn({
                let (engine, approver, digest) =
                    (e.engine.clone(), approver.clone(), Edge::digest(&a));
                let id = a.id().to_owned();
                async move {
                    let _ = engine.approve(&approver, &id, &digest).await;
                }
            });
            e.lapsed_claim(&a, stopped, approve).await;
            e.next_to(a.id(), Some(State::Executing), State::Failed, fault);
            let swept = e.engine.sweep().await.expect(&ctx);
            assert_eq!((swept.recovered, swept.failed), (1, 0), "{ctx}: {swept:?}");
            let sealed = e.load(a.id()).await;
            assert_eq!(
                (sealed.state(), sealed.reason()),
                (State::Failed, Some("outcome_unknown")),
                "{ctx}"
            );
        }
    }
    e.store.clear();
}

/// The table: every write kind × both faults that hide an applied write. Each row runs in a
/// task of its own, so the report names every row that fails, not only the first.
async fn own_write_is_never_a_lost_race(backend: Backend) {
    let e = Arc::new(edge(backend, "").await);
    let mut failed = Vec::new();
    for fault in [Fault::AppliedConflict, Fault::Ambiguous] {
        for kind in WRITE_KINDS {
            let (row, injected) = (e.clone(), fault.clone());
            let run = tokio::spawn(async move { own_write_row(&row, kind, &injected).await });
            if run.await.is_err() {
                e.store.clear();
                failed.push(format!("{kind:?} under {fault:?}"));
            }
        }
    }
    assert!(failed.is_empty(), "rows that failed: {failed:#?}");
}

on_every_store!(own_write_is_never_a_lost_race: sc_edge_10_own_write_is_never_a_lost_race_sqlite, sc_edge_10_own_write_is_never_a_lost_race_dynamodb, sc_edge_10_own_write_is_never_a_lost_race_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-11: a recovery that halts before its first attempt of a later epoch is not "never ran".

/// Caught on main (defect 4): a `retry` tool's attempt 1 reached the tool, the worker died,
/// the sweep re-claimed at epoch 2, and a stop answered during that claim write (or the window
/// closing) made `run_attempts` report "not started": the action was sealed `denied`/`stopped`
/// (or `cancelled`/`schedule_missed`) and epoch 1's attempt was forgotten.
async fn halted_recovery_is_outcome_unknown(backend: Backend) {
    let e = edge(backend, "").await;
    let admin = e.who(keys::ADMIN);
    for halt in ["stop", "deadline"] {
        let a = e.due_report().await;
        e.woken_then_dead(&a).await;
        let gate = Gate::new();
        e.store.inject(
            Matching::claim().of(a.id()),
            Fault::HoldAfter(gate.clone()),
            1,
        );
        let sweep = tokio::spawn({
            let engine = e.engine.clone();
            async move { engine.sweep().await }
        });
        gate.reached().await;
        match halt {
            "stop" => {
                e.engine.stop(&admin, Some("agent-1")).await.unwrap();
            }
            _ => e.set(a.ticket().unwrap().deadline() + SignedDuration::from_secs(1)),
        }
        gate.open();
        sweep.await.unwrap().unwrap();
        let sealed = e.load(a.id()).await;
        assert_eq!(
            (sealed.state(), sealed.reason()),
            (State::Failed, Some("outcome_unknown")),
            "{halt}: epoch 1's attempt may have reached the tool"
        );
        assert_eq!(
            e.tools.count_for(a.id()),
            1,
            "{halt}: no attempt at epoch 2"
        );
        if halt == "stop" {
            e.engine.lift_stop(&admin, "agent-1").await.unwrap();
        }
    }
}

on_every_store!(halted_recovery_is_outcome_unknown: sc_edge_11_halted_recovery_is_outcome_unknown_sqlite, sc_edge_11_halted_recovery_is_outcome_unknown_dynamodb, sc_edge_11_halted_recovery_is_outcome_unknown_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-01 at the receiver: an attempt's connect and send are over by the deadline.

/// The tool port with a record of when each attempt began (real time): the receiver's side of
/// a deadline is judged against it.
#[derive(Default)]
struct Timed {
    inner: Executors,
    began: std::sync::Mutex<Vec<Timestamp>>,
    first: tokio::sync::Notify,
}

impl Timed {
    /// When the first attempt began (waits for it).
    async fn first_began(&self) -> Timestamp {
        self.first.notified().await;
        self.began.lock().unwrap()[0]
    }
}

#[async_trait::async_trait]
impl ToolRunner for Timed {
    async fn run(&self, call: &Call<'_>) -> ToolAnswer {
        self.began.lock().unwrap().push(Timestamp::now());
        self.first.notify_one();
        self.inner.run(call).await
    }
}

/// Caught on main: the deadline was checked right before the attempt, but the request then had
/// the tool's whole timeout (2 s here). At a tool server slow to accept, the connect went
/// through when the SYN was retried a second later and the body reached the tool ≈ 1 s after
/// `not_after`, although the attempt began 1 ms before it.
async fn no_request_reaches_the_tool_after_the_deadline(backend: Backend) {
    let (tools, door) = ToolServer::start_held().await;
    let timed = Arc::new(Timed::default());
    let e = edge_with(backend, "", tools, timed.clone()).await;
    let args = json!({"to": "ops@example.com"});
    let pending = e
        .submit_in_window("mail.send", args, (10, 70), State::PendingApproval)
        .await;
    let digest = pending.approval().unwrap().context_digest.clone();
    let approved = e
        .engine
        .approve(&e.who(keys::APPROVER), pending.id(), &digest)
        .await
        .unwrap();
    let left = SignedDuration::from_millis(1);
    e.set(approved.ticket().unwrap().deadline() - left);
    let run = e.spawn_resume(&approved);
    let began = timed.first_began().await;
    // The server starts accepting before the client's SYN is retried (1 s after the first).
    tokio::time::sleep(Duration::from_millis(300)).await;
    door.open();
    run.await.unwrap().unwrap();
    // Anything still on its way (a connect under way, a request in a buffer) arrives by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let deadline = began + left;
    let late: Vec<Timestamp> = e
        .tools
        .calls_for(pending.id())
        .iter()
        .map(|r| r.at)
        .filter(|at| *at > deadline)
        .collect();
    assert!(
        late.is_empty(),
        "the attempt began at {began}, 1 ms before its deadline; bodies arrived at {late:?}"
    );
    let sealed = e.load(pending.id()).await;
    let error = sealed.outcome().and_then(|o| o.error.clone());
    assert_eq!(
        (sealed.state(), error),
        (State::Failed, Some(json!({"kind": "timeout"}))),
        "the attempt timed out at the deadline: its outcome is not known"
    );
}

on_every_store!(no_request_reaches_the_tool_after_the_deadline: sc_edge_01_no_request_reaches_the_tool_after_the_deadline_sqlite, sc_edge_01_no_request_reaches_the_tool_after_the_deadline_dynamodb, sc_edge_01_no_request_reaches_the_tool_after_the_deadline_postgres);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-06: the signature's time is the engine's, and it covers the key receivers dedupe on.

/// Caught on main: the signature's `t` was read from the wall clock (`Timestamp::now()`), not
/// from the engine's clock that decides every other instant of the run (here 11 s apart).
async fn signed_at_the_engines_clock_over_the_dedupe_key(backend: Backend) {
    let e = edge(backend, "").await;
    let a = e.due_report().await;
    e.engine.resume(&wake_of(&a)).await.unwrap();
    let calls = e.tools.calls_for(a.id());
    assert_eq!(calls.len(), 1);
    let sent = calls[0].signature.clone().unwrap();
    let t: i64 = sent
        .strip_prefix("t=")
        .and_then(|rest| rest.split(',').next())
        .and_then(|t| t.parse().ok())
        .unwrap();
    assert_eq!(t, e.clock.now().as_second(), "t is the engine's clock");
    // The key to deduplicate on is inside the signed bytes: the body's `action_id`.
    assert!(calls[0].signature_ok);
    let body: serde_json::Value = serde_json::from_slice(&calls[0].raw).unwrap();
    assert_eq!(body["action_id"], json!(a.id()));
    let other = String::from_utf8(calls[0].raw.clone())
        .unwrap()
        .replace(a.id(), "act_01J0000000000000000000000Z");
    assert_ne!(
        countersign::tools::webhook::signature(
            countersign_tests::SECRET.as_bytes(),
            t,
            other.as_bytes()
        ),
        sent,
        "another action id breaks the signature"
    );
}

on_every_store!(signed_at_the_engines_clock_over_the_dedupe_key: sc_edge_06_signed_at_the_engines_clock_over_the_dedupe_key_sqlite, sc_edge_06_signed_at_the_engines_clock_over_the_dedupe_key_dynamodb, sc_edge_06_signed_at_the_engines_clock_over_the_dedupe_key_postgres);

/// SC-EDGE-01 for the MCP executor: an attempt with no time left before `not_after` is not
/// sent. Caught on the merged tree: the MCP executor used the tool's whole timeout, not the
/// attempt's budget, so it connected and sent at the deadline (the webhook executor did not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sc_edge_01_an_mcp_attempt_with_no_time_left_is_not_sent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn({
        let accepted = accepted.clone();
        async move {
            while let Ok((_conn, _)) = listener.accept().await {
                accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let toml = format!(
        r#"
[tenants.acme]
time_zone = "Europe/Berlin"
allow_http_hosts = ["127.0.0.1"]
allow_private_hosts = ["127.0.0.1"]
keys = [{{ id = "agent-1", role = "agent", sha256 = "{hash}" }}]
policy = [{{ tool = "parcel.*", decision = "allow" }}]

[tenants.acme.tools."parcel.send"]
executor = "mcp"
url = "{url}"
secret_env = "CS_EDGE_MCP_TOKEN"
timeout = "2s"
"#,
        hash = "0".repeat(64)
    );
    std::env::set_var("CS_EDGE_MCP_TOKEN", "token");
    let config = Config::from_toml(&toml).unwrap();
    let tool = config.tenants["acme"].tools["parcel.send"].clone();
    let args = json!({"to": "ops"});
    let now = Timestamp::now();
    let call = Call {
        action_id: "act_01JZ0000000000000000000000",
        tool: &tool,
        args: &args,
        attempt: 1,
        at: now,
        not_after: now,
    };
    let answer = Executors::new().run(&call).await;
    assert_eq!(
        answer,
        ToolAnswer::Failed(json!({"kind": "deadline", "sent": false}))
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing reached the downstream"
    );
}
