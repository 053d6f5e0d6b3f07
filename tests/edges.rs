//! Guarantees at the edges (SPEC SC-EDGE-01, -02, -04, -05, -06, -07), each proven on SQLite and
//! on DynamoDB (LocalStack): the engine with a fault-injecting store decorator (feature
//! `faults`), an injected clock and tools over real HTTP. Every scenario below failed on the
//! main branch before the fix it names; its comment says what it caught.

#[path = "aws_support/mod.rs"]
mod aws_support;

use countersign::{
    clock::ManualClock,
    config::{Config, Principal},
    domain::{resume::Wake, Action, State},
    engine::ResumeOutcome,
    faults::{Fault, FaultyStore, Gate, Matching, Write},
    store::{dynamodb::DynamoStore, sqlite::SqliteStore, Store},
    tools::Executors,
    Clock, Engine,
};
use countersign_tests::{config_toml, keys, temp_db, Behaviour, RecordingWaker, ToolServer};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::{sync::Arc, time::Duration};

/// One engine over a fault-injecting store, a manual clock and a recording wake port.
struct Edge {
    engine: Arc<Engine>,
    store: Arc<FaultyStore>,
    clock: Arc<ManualClock>,
    waker: Arc<RecordingWaker>,
    tools: ToolServer,
    config: Arc<Config>,
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Sqlite,
    Dynamodb,
}

/// The two tests of one scenario, named by its SC id: on SQLite and on DynamoDB.
macro_rules! on_both_stores {
    ($scenario:ident: $sqlite:ident, $dynamodb:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $sqlite() {
            $scenario(Backend::Sqlite).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $dynamodb() {
            $scenario(Backend::Dynamodb).await;
        }
    };
}

/// `limits`: extra `[limits]` lines (e.g. a request budget).
async fn edge(backend: Backend, limits: &str) -> Edge {
    let tools = ToolServer::start().await;
    let toml =
        config_toml(&tools, "1m", "2s").replacen("[limits]\n", &format!("[limits]\n{limits}\n"), 1);
    let config = Arc::new(Config::from_toml(&toml).unwrap());
    let inner: Arc<dyn Store> = match backend {
        Backend::Sqlite => Arc::new(SqliteStore::open(&temp_db("edges")).unwrap()),
        Backend::Dynamodb => {
            let sdk = aws_support::sdk().await;
            let table = aws_support::unique("edges");
            aws_support::create_table(&sdk, &table).await;
            Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                &table,
            ))
        }
    };
    let store = Arc::new(FaultyStore::new(inner));
    let clock = Arc::new(ManualClock::new(Timestamp::now()));
    let waker = Arc::new(RecordingWaker::default());
    let engine = Arc::new(Engine::new(
        config.clone(),
        store.clone(),
        waker.clone(),
        Arc::new(Executors::new()),
        clock.clone(),
    ));
    Edge {
        engine,
        store,
        clock,
        waker,
        tools,
        config,
    }
}

impl Edge {
    fn who(&self, key: &str) -> Principal {
        self.config.principal(key).cloned().unwrap()
    }
    fn at(&self, secs: i64) -> Timestamp {
        self.clock.now() + SignedDuration::from_secs(secs)
    }
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
        let req = serde_json::from_value(json!({
            "tool": tool,
            "args": args,
            "schedule": {"not_before": self.at(nb).to_string(), "not_after": self.at(na).to_string()},
        }))
        .unwrap();
        let a = self
            .engine
            .submit(&self.who(keys::AGENT), req, None)
            .await
            .unwrap()
            .action;
        assert_eq!(a.state, expected);
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
        tenant: a.tenant.clone(),
        action_id: a.id.clone(),
        correlation_id: a.ticket.as_ref().unwrap().correlation_id().to_owned(),
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
    e.set(a.ticket.as_ref().unwrap().deadline() - SignedDuration::from_secs(1));
    let gate = Gate::new();
    e.store.inject(
        Matching::claim().of(&a.id),
        Fault::HoldAfter(gate.clone()),
        1,
    );
    let run = e.spawn_resume(&a);
    gate.reached().await;
    e.set(e.at(2));
    gate.open();
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(&a.id), 0, "no attempt after the deadline");
    let sealed = e.load(&a.id).await;
    assert_eq!(
        (sealed.state, sealed.reason()),
        (State::Cancelled, Some("schedule_missed"))
    );

    // (b) Attempt 1 answers 503 just before the deadline; the deadline passes in the backoff.
    let b = e.report(10, 70).await;
    e.set(b.ticket.as_ref().unwrap().deadline() - SignedDuration::from_millis(500));
    let run = e.spawn_resume(&b);
    e.tool_calls(&b.id, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await; // inside the 1 s backoff
    e.set(e.at(1));
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(&b.id), 1, "no retry after the deadline");
    assert_eq!(
        e.load(&b.id).await.state,
        State::Failed,
        "attempt 1's answer is the outcome"
    );
}

on_both_stores!(no_attempt_after_deadline: sc_edge_01_no_attempt_after_deadline_sqlite, sc_edge_01_no_attempt_after_deadline_dynamodb);

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
        Matching::claim().of(&a.id),
        Fault::HoldAfter(gate.clone()),
        1,
    );
    let run = e.spawn_resume(&a);
    gate.reached().await;
    e.engine.stop(&admin, Some("agent-1")).await.unwrap();
    gate.open();
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(&a.id), 0, "no attempt after the stop");
    let sealed = e.load(&a.id).await;
    assert_eq!(
        (sealed.state, sealed.reason()),
        (State::Denied, Some("stopped"))
    );
    e.engine.lift_stop(&admin, "agent-1").await.unwrap();

    // (b) Attempt 1 answers 503; the stop is answered during the backoff.
    e.tools.behave(failing_tool());
    let b = e.due_report().await;
    let run = e.spawn_resume(&b);
    e.tool_calls(&b.id, 1).await;
    e.engine.stop(&admin, None).await.unwrap();
    run.await.unwrap().unwrap();
    assert_eq!(e.tools.count_for(&b.id), 1, "no retry after the stop");
    assert_eq!(e.load(&b.id).await.state, State::Failed);
}

on_both_stores!(stop_is_final_once_answered: sc_edge_02_stop_is_final_once_answered_sqlite, sc_edge_02_stop_is_final_once_answered_dynamodb);

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
        e.store.inject(matching.of(&a.id), fault.clone(), times);
        let out = e.engine.resume(&wake_of(&a)).await.unwrap();
        let ran = matches!(
            out,
            ResumeOutcome::Ran {
                state: State::Succeeded
            }
        );
        assert!(ran, "{fault:?}: {out:?}");
        assert_eq!(e.tools.count_for(&a.id), 1, "{fault:?}");
        ids.push(a.id);
    }
    for id in &ids {
        assert_eq!(e.load(id).await.state, State::Succeeded, "{id}");
    }
    let injected = e.store.injected();
    assert_eq!((injected.failed, injected.ambiguous), (2, 4));
}

on_both_stores!(results_survive_store_faults: sc_edge_04_results_survive_store_faults_sqlite, sc_edge_04_results_survive_store_faults_dynamodb);

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
    e.tool_calls(&a.id, 1).await;
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
        e.load(&a.id).await.state,
        State::Succeeded,
        "committed before drain returned"
    );
    assert!(matches!(
        run.await.unwrap().unwrap(),
        ResumeOutcome::Ran { .. }
    ));
    assert_eq!(
        e.load(&b.id).await.state,
        State::Approved,
        "no new claim while draining"
    );
    assert_eq!(e.tools.count_for(&b.id), 0);
}

on_both_stores!(drain_lets_runs_commit: sc_edge_05_drain_lets_runs_commit_sqlite, sc_edge_05_drain_lets_runs_commit_dynamodb);

/// SC-EDGE-05 through the local server: shutdown waits for the wake's run under way and its
/// result commits before it returns. Caught on main: `shutdown` returned at once and the
/// action was still `executing`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_edge_05_local_server_shutdown_lets_runs_commit() {
    use countersign::embedded::{Parts, Server};
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "1m", "2s")).unwrap());
    let db = temp_db("edge05");
    let server = Server::start_with(
        config,
        &db,
        "127.0.0.1:0".parse().unwrap(),
        Parts::default(),
    )
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
    let store = SqliteStore::open(&db).unwrap();
    let done = store.load("acme", &id).await.unwrap().unwrap();
    assert_eq!(
        done.state,
        State::Succeeded,
        "the result committed before exit"
    );
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
    let calls = e.tools.calls_for(&a.id);
    assert_eq!(calls.len(), 3, "three attempts per claim of a retry tool");
    assert!(
        calls.iter().all(|c| c.raw == calls[0].raw),
        "byte-identical bodies"
    );
    assert!(calls.iter().all(|c| c.signature_ok));
    assert!(calls
        .iter()
        .all(|c| c.idempotency_key.as_deref() == Some(a.id.as_str())));
    assert_eq!(
        calls.iter().map(|c| c.attempt).collect::<Vec<_>>(),
        [1, 2, 3],
        "Countersign-Attempt header"
    );
    let body: serde_json::Value = serde_json::from_slice(&calls[0].raw).unwrap();
    assert_eq!(
        body,
        json!({"action_id": a.id, "tool": "report.build", "args": {"quarter": "Q3"}})
    );
}

on_both_stores!(identical_bodies_on_every_attempt: sc_edge_06_identical_bodies_on_every_attempt_sqlite, sc_edge_06_identical_bodies_on_every_attempt_dynamodb);

// ---------------------------------------------------------------------------------------------
// SC-EDGE-07: no request waits on a tool longer than its caller can.

/// Caught on main: (a) an allowed call ran inside the request whatever its tool's claim budget
/// (here 2 s against a 1 s request budget); (b) the committed, due ticket of an inline run
/// was visible to the sweep before the inline claim, and the sweep took it.
async fn inline_runs_fit_the_request(backend: Backend) {
    // (a) search.web: recovery `fail`, timeout 2 s → claim budget 2 s > request budget 1 s.
    let e = edge(backend, "request_budget = \"1s\"").await;
    let agent = e.who(keys::AGENT);
    let req = || serde_json::from_value(json!({"tool": "search.web", "args": {"q": "x"}})).unwrap();
    let a = e.engine.submit(&agent, req(), None).await.unwrap().action;
    assert_eq!(
        a.state,
        State::Approved,
        "committed, not run in the request"
    );
    assert_eq!(e.tools.count_for(&a.id), 0);
    let armed = e.waker.armed.lock().unwrap().clone();
    assert!(
        armed.iter().any(|(w, _)| w.action_id == a.id),
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
        b.state,
        State::Succeeded,
        "the request ran it and answers the result"
    );
    assert_eq!(e.tools.count_for(&b.id), 1);
}

on_both_stores!(inline_runs_fit_the_request: sc_edge_07_inline_runs_fit_the_request_sqlite, sc_edge_07_inline_runs_fit_the_request_dynamodb);

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
    let digest = timely.approval.as_ref().unwrap().context_digest.clone();
    e.engine
        .approve(&e.who(keys::APPROVER), &timely.id, &digest)
        .await
        .unwrap();

    e.set(e.at(120)); // inside the window: the timely one is due, the late one still waits
    let first = e.engine.sweep().await.unwrap();
    assert_eq!((first.resumed, first.expired), (1, 0), "{first:?}");
    assert_eq!(e.load(&timely.id).await.state, State::Succeeded);
    assert_eq!(e.load(&late.id).await.state, State::PendingApproval);
    let again = e.engine.sweep().await.unwrap();
    assert_eq!(again.due, 0, "deferred until its expiry: {again:?}");

    e.set(e.at(481)); // past its expiry (not_after)
    let lapsed = e.engine.sweep().await.unwrap();
    assert_eq!(lapsed.expired, 1, "{lapsed:?}");
    let sealed = e.load(&late.id).await;
    assert_eq!(
        (sealed.state, sealed.reason()),
        (State::Cancelled, Some("approval_expired"))
    );
}

on_both_stores!(scheduled_approval_lapses_at_its_expiry: sc_app_04_scheduled_approval_lapses_at_its_expiry_sqlite, sc_app_04_scheduled_approval_lapses_at_its_expiry_dynamodb);

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
    e.tool_calls(&a.id, 1).await;
    let lease = e.load(&a.id).await.lease.expect("claimed");
    assert!(lease.until < a.ticket.as_ref().unwrap().deadline());
    // Inside attempt 1's backoff: the lease ends before attempt 2 could time out.
    e.set(lease.until - SignedDuration::from_millis(500));
    let outcome = run.await.unwrap().unwrap();
    assert!(matches!(outcome, ResumeOutcome::Yielded), "{outcome:?}");
    assert_eq!(
        e.tools.count_for(&a.id),
        1,
        "no attempt on a lease about to lapse"
    );
    let held = e.load(&a.id).await;
    assert_eq!(
        (held.state, held.lease.map(|l| l.epoch)),
        (State::Executing, Some(lease.epoch)),
        "nothing committed"
    );

    // Once the lease has lapsed, recovery re-claims it (epoch 2) and runs its attempts.
    e.set(lease.until + SignedDuration::from_secs(1));
    let swept = e.engine.sweep().await.unwrap();
    assert_eq!(swept.recovered, 1, "{swept:?}");
    let done = e.load(&a.id).await;
    assert_eq!(
        done.state,
        State::Failed,
        "the 503s of the re-run are its outcome"
    );
    let claims = e
        .store
        .events("acme", &a.id)
        .await
        .unwrap()
        .iter()
        .filter(|ev| ev.to == State::Executing)
        .count();
    assert_eq!(claims, 2, "the worker's claim and the recovery's");
    assert!(e.tools.count_for(&a.id) > 1);
}

on_both_stores!(worker_past_its_lease_yields: sc_rec_02_a_worker_past_its_lease_yields_to_recovery_sqlite, sc_rec_02_a_worker_past_its_lease_yields_to_recovery_dynamodb);
