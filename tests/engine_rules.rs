//! The engine's resume, recovery and race rules on the SQLite store (the recovery rules,
//! SC-REC-*, on every store, each test named by its store), with an injected clock, a recording
//! wake port and tools over real HTTP. Each test names its scenario.

use countersign::{
    config::Config,
    domain::{
        resume::{Rejection, Wake},
        Action, State, Transition,
    },
    engine::ResumeOutcome,
    store::{Store, StoreError},
    tools::Executors,
    Error,
};
use countersign_tests::{
    config_toml, keys, on_every_store, stores::Backend, submission, ToolServer,
};
use jiff::SignedDuration;
use serde_json::json;
use std::sync::{atomic::Ordering, Arc};

/// The shared rig, with this file's helpers.
struct Rig(countersign_tests::rig::Rig);

impl std::ops::Deref for Rig {
    type Target = countersign_tests::rig::Rig;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

async fn rig() -> Rig {
    rig_with(Backend::Sqlite).await
}

async fn rig_with(backend: Backend) -> Rig {
    let config = |tools: &ToolServer| config_toml(tools, "5m", "2s");
    Rig(countersign_tests::rig::Rig::start(backend, "rules", config).await)
}

fn rig_on(tools: ToolServer, config: Arc<Config>, store: Arc<dyn Store>) -> Rig {
    let runner = Arc::new(Executors::new());
    Rig(countersign_tests::rig::Rig::on(
        tools, config, store, runner,
    ))
}

impl Rig {
    /// Submit `tool` with a window [now+nb, now+na]; approve it if it needs approval.
    async fn committed(&self, tool: &str, nb: i64, na: i64) -> Action {
        let req = submission(json!({
            "tool": tool,
            "args": {"n": 1},
            "schedule": {"not_before": self.at(nb).to_string(), "not_after": self.at(na).to_string()},
        }));
        let submitted = self
            .engine
            .submit(&self.who(keys::AGENT), req, None)
            .await
            .unwrap()
            .action;
        match submitted.state() {
            State::PendingApproval => {
                let digest = submitted.approval().unwrap().context_digest.clone();
                self.engine
                    .approve(&self.who(keys::APPROVER), submitted.id(), &digest)
                    .await
                    .unwrap()
            }
            _ => submitted,
        }
    }

    /// A worker claims `a` with a lease of `lease_secs` and dies before committing a result
    /// (SC-REC-02). Returns the record as that worker left it.
    async fn crash_after_claim(&self, a: &Action, lease_secs: i64) -> Action {
        let claim = Transition::claim(a, "wrk_dead", self.at(lease_secs), self.at(0)).unwrap();
        self.store.commit(&claim).await.unwrap();
        claim.action.clone()
    }

    async fn load(&self, id: &str) -> Action {
        self.store.load("acme", id).await.unwrap().unwrap()
    }

    fn advance(&self, secs: i64) {
        self.clock.advance(SignedDuration::from_secs(secs));
    }
}

fn wake_of(a: &Action) -> Wake {
    Wake {
        tenant: a.tenant().to_owned(),
        action_id: a.id().to_owned(),
        correlation_id: a
            .ticket()
            .as_ref()
            .expect("a committed ticket")
            .correlation_id()
            .to_owned(),
    }
}

#[tokio::test]
async fn sc_res_01_no_waiting_ticket_is_rejected_and_changes_nothing() {
    let r = rig().await;
    let unknown = Wake {
        tenant: "acme".into(),
        action_id: "act_01NOPE".into(),
        correlation_id: "cor_x".into(),
    };
    assert!(matches!(
        r.engine.resume(&unknown).await.unwrap(),
        ResumeOutcome::Rejected {
            reason: Rejection::NoWaitingTicket
        }
    ));

    // Another tenant's wake for a real action finds nothing either.
    let a = r.committed("mail.send", 60, 600).await;
    let mut foreign = wake_of(&a);
    foreign.tenant = "globex".into();
    assert!(matches!(
        r.engine.resume(&foreign).await.unwrap(),
        ResumeOutcome::Rejected {
            reason: Rejection::NoWaitingTicket
        }
    ));

    // A second wake after success: rejected before the tool runs.
    let wake = wake_of(&a);
    r.advance(60);
    assert!(matches!(
        r.engine.resume(&wake).await.unwrap(),
        ResumeOutcome::Ran {
            state: State::Succeeded
        }
    ));
    let done = r.load(a.id()).await;
    assert!(matches!(
        r.engine.resume(&wake).await.unwrap(),
        ResumeOutcome::Rejected {
            reason: Rejection::NoWaitingTicket
        }
    ));
    assert_eq!(r.load(a.id()).await.version(), done.version());
    assert_eq!(r.tools.count_for(a.id()), 1);

    // A wake after cancel.
    let b = r.committed("mail.send", 60, 600).await;
    r.engine.cancel(&r.who(keys::AGENT), b.id()).await.unwrap();
    assert_eq!(
        r.waker.disarmed.lock().unwrap().last().unwrap(),
        &wake_of(&b),
        "cancel deletes the wake"
    );
    r.advance(60);
    assert!(matches!(
        r.engine.resume(&wake_of(&b)).await.unwrap(),
        ResumeOutcome::Rejected {
            reason: Rejection::NoWaitingTicket
        }
    ));
    assert_eq!(r.tools.count_for(b.id()), 0);
}

#[tokio::test]
async fn sc_res_02_stale_correlation_is_rejected() {
    let r = rig().await;
    let a = r.committed("mail.send", 0, 600).await;
    assert_eq!(a.state(), State::Succeeded, "due now: ran on approval");
    let b = r.committed("mail.send", 60, 600).await;
    r.advance(60);
    let mut stale = wake_of(&b);
    stale.correlation_id = "cor_01OLDERCOMMIT".into();
    assert!(matches!(
        r.engine.resume(&stale).await.unwrap(),
        ResumeOutcome::Rejected {
            reason: Rejection::CorrelationMismatch
        }
    ));
    assert_eq!(r.load(b.id()).await, b, "nothing changed");
    assert_eq!(r.tools.count_for(b.id()), 0);
    assert!(matches!(
        r.engine.resume(&wake_of(&b)).await.unwrap(),
        ResumeOutcome::Ran { .. }
    ));
}

#[tokio::test]
async fn sc_res_03_a_stop_seals_denied_without_running() {
    let r = rig().await;
    let a = r.committed("mail.send", 60, 600).await;
    r.engine
        .stop(&r.who(keys::ADMIN), Some("agent-1"))
        .await
        .unwrap();
    r.advance(60);
    let out = r.engine.resume(&wake_of(&a)).await.unwrap();
    assert!(
        matches!(
            out,
            ResumeOutcome::Sealed {
                state: State::Denied,
                ..
            }
        ),
        "{out:?}"
    );
    let sealed = r.load(a.id()).await;
    assert_eq!(sealed.reason(), Some("stopped"));
    assert_eq!(r.tools.count_for(a.id()), 0);
    // SC-STOP-01: lifting does not revive it.
    r.engine
        .lift_stop(&r.who(keys::ADMIN), "agent-1")
        .await
        .unwrap();
    assert!(matches!(
        r.engine.resume(&wake_of(&a)).await.unwrap(),
        ResumeOutcome::Rejected { .. }
    ));
    r.engine.sweep().await.unwrap();
    assert_eq!(r.load(a.id()).await.state(), State::Denied);
}

#[tokio::test]
async fn sc_res_04_a_changed_catalog_entry_cancels() {
    let r = rig().await;
    let a = r.committed("mail.send", 60, 600).await;
    // The same store, redeployed with mail.send pointing elsewhere.
    let changed = config_toml(&r.tools, "5m", "2s").replace("/mail\"", "/mail-v2\"");
    let r2 = rig_on(
        r.tools.clone(),
        Arc::new(Config::from_toml(&changed).unwrap()),
        r.store.clone(),
    );
    r2.clock.set(r.at(60));
    let out = r2.engine.resume(&wake_of(&a)).await.unwrap();
    assert!(
        matches!(
            out,
            ResumeOutcome::Sealed {
                state: State::Cancelled,
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(r.load(a.id()).await.reason(), Some("catalog_changed"));
    assert!(r.tools.received().is_empty());
}

#[tokio::test]
async fn sc_res_05_an_early_wake_re_arms_and_changes_nothing() {
    let r = rig().await;
    let a = r.committed("mail.send", 120, 900).await;
    r.advance(119);
    let out = r.engine.resume(&wake_of(&a)).await.unwrap();
    let due = a.ticket().unwrap().due_at();
    assert!(
        matches!(out, ResumeOutcome::Waiting { until } if until == due),
        "{out:?}"
    );
    assert_eq!(r.load(a.id()).await, a);
    assert_eq!(
        r.waker.armed.lock().unwrap().last().unwrap(),
        &(wake_of(&a), due),
        "re-armed for not_before"
    );
    assert!(r.tools.received().is_empty());
    r.advance(1);
    assert!(matches!(
        r.engine.resume(&wake_of(&a)).await.unwrap(),
        ResumeOutcome::Ran { .. }
    ));
    assert_eq!(r.tools.count_for(a.id()), 1);
}

#[tokio::test]
async fn sc_res_06_a_missed_window_is_sealed_never_burst_run() {
    let r = rig().await;
    let a = r.committed("mail.send", 60, 600).await;
    r.advance(601);
    let out = r.engine.resume(&wake_of(&a)).await.unwrap();
    assert!(
        matches!(
            out,
            ResumeOutcome::Sealed {
                state: State::Cancelled,
                ..
            }
        ),
        "{out:?}"
    );
    let sealed = r.load(a.id()).await;
    assert_eq!(sealed.reason(), Some("schedule_missed"));
    assert_eq!(*sealed.actor(), countersign::domain::Actor::system());
    assert_eq!(
        sealed.approval().unwrap().approver.as_deref(),
        Some("approver-1"),
        "the approval stays recorded"
    );
    let events = r.store.events("acme", a.id()).await.unwrap();
    let path: Vec<State> = events.iter().map(|e| e.to).collect();
    assert_eq!(
        path,
        [State::PendingApproval, State::Approved, State::Cancelled]
    );
    // The sweep does not catch up on it either.
    r.engine.sweep().await.unwrap();
    assert!(r.tools.received().is_empty());
}

#[tokio::test]
async fn sc_res_07_claim_run_commit_and_a_fenced_owner_is_refused() {
    let r = rig().await;
    let a = r.committed("report.build", 60, 600).await;
    r.advance(60);
    // A worker claims and dies before committing (SC-REC-02 crash after claim).
    let dead_claim = r.crash_after_claim(&a, 30).await;
    // Its lease expires; the sweep re-claims (recovery = retry) with a new epoch and runs.
    r.advance(31);
    let report = r.engine.sweep().await.unwrap();
    assert_eq!(report.recovered, 1);
    let done = r.load(a.id()).await;
    assert_eq!(done.state(), State::Succeeded);
    let calls = r.tools.calls_for(a.id());
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].attempt, 4,
        "first attempt of the second claim (3 per claim)"
    );
    assert_eq!(
        calls[0].idempotency_key.as_deref(),
        Some(a.id()),
        "same operation identity"
    );
    // The dead worker comes back and tries to commit its result: fenced.
    let late = Transition::finish(&dead_claim, Ok(json!({"late": true})), r.at(0));
    assert!(matches!(
        r.store.commit(&late).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(r.load(a.id()).await, done);
}

async fn a_lost_wake_is_found_by_the_sweep(backend: Backend) {
    let r = rig_with(backend).await;
    r.waker.fail.store(true, Ordering::SeqCst);
    let a = r.committed("mail.send", 60, 600).await;
    assert_eq!(
        a.state(),
        State::Approved,
        "the ticket committed although arming failed"
    );
    assert!(r.waker.armed.lock().unwrap().is_empty());
    r.advance(30);
    assert_eq!(r.engine.sweep().await.unwrap().resumed, 0, "not due yet");
    r.advance(30);
    assert_eq!(r.engine.sweep().await.unwrap().resumed, 1);
    assert_eq!(r.load(a.id()).await.state(), State::Succeeded);
    assert_eq!(r.tools.count_for(a.id()), 1);
}

on_every_store!(a_lost_wake_is_found_by_the_sweep: sc_rec_01_a_lost_wake_is_found_by_the_sweep_sqlite, sc_rec_01_a_lost_wake_is_found_by_the_sweep_dynamodb, sc_rec_01_a_lost_wake_is_found_by_the_sweep_postgres);

async fn an_expired_lease_follows_the_tools_recovery_policy(backend: Backend) {
    let r = rig_with(backend).await;
    // recovery = fail (mail.send): sealed failed, outcome_unknown, for reconciliation.
    let a = r.committed("mail.send", 60, 600).await;
    r.advance(60);
    r.crash_after_claim(&a, 30).await;
    r.advance(29);
    assert_eq!(
        r.engine.sweep().await.unwrap().recovered,
        0,
        "lease still held"
    );
    r.advance(2);
    r.engine.sweep().await.unwrap();
    let failed = r.load(a.id()).await;
    assert_eq!(
        (failed.state(), failed.reason()),
        (State::Failed, Some("outcome_unknown"))
    );
    assert_eq!(r.tools.count_for(a.id()), 0);

    // recovery = retry but the window has closed: not retried.
    let b = r.committed("report.build", 60, 400).await;
    r.advance(60);
    r.crash_after_claim(&b, 400).await;
    r.advance(401);
    r.engine.sweep().await.unwrap();
    let failed = r.load(b.id()).await;
    assert_eq!(
        (failed.state(), failed.reason()),
        (State::Failed, Some("outcome_unknown"))
    );
    assert_eq!(r.tools.count_for(b.id()), 0);
}

on_every_store!(an_expired_lease_follows_the_tools_recovery_policy: sc_rec_02_an_expired_lease_follows_the_tools_recovery_policy_sqlite, sc_rec_02_an_expired_lease_follows_the_tools_recovery_policy_dynamodb, sc_rec_02_an_expired_lease_follows_the_tools_recovery_policy_postgres);

async fn duplicate_wakes_never_run_twice(backend: Backend) {
    let r = rig_with(backend).await;
    let a = r.committed("mail.send", 60, 600).await;
    r.advance(60);
    let wake = wake_of(&a);
    let runs = (0..8).map(|_| {
        let (engine, wake) = (r.engine.clone(), wake.clone());
        tokio::spawn(async move { engine.resume(&wake).await.unwrap() })
    });
    let outcomes: Vec<ResumeOutcome> = futures_join(runs).await;
    let ran = outcomes
        .iter()
        .filter(|o| matches!(o, ResumeOutcome::Ran { .. }))
        .count();
    assert_eq!(ran, 1, "{outcomes:?}");
    r.engine.resume(&wake).await.unwrap();
    r.engine.sweep().await.unwrap();
    assert_eq!(r.tools.count_for(a.id()), 1);
}

on_every_store!(duplicate_wakes_never_run_twice: sc_rec_03_duplicate_wakes_never_run_twice_sqlite, sc_rec_03_duplicate_wakes_never_run_twice_dynamodb, sc_rec_03_duplicate_wakes_never_run_twice_postgres);

async fn futures_join<T: Send + 'static>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for t in tasks.collect::<Vec<_>>() {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn sc_app_04_pending_approvals_expire() {
    let r = rig().await;
    let req = submission;
    let scheduled = r
        .engine
        .submit(
            &r.who(keys::AGENT),
            req(json!({"tool": "mail.send", "args": {}, "schedule": {"not_before": r.at(60).to_string(), "not_after": r.at(600).to_string()}})),
            None,
        )
        .await
        .unwrap()
        .action;
    let open = r
        .engine
        .submit(
            &r.who(keys::AGENT),
            req(json!({"tool": "mail.send", "args": {}})),
            None,
        )
        .await
        .unwrap()
        .action;
    r.advance(600);
    assert_eq!(
        r.engine.sweep().await.unwrap().expired,
        1,
        "the scheduled one lapses at not_after"
    );
    let s = r.load(scheduled.id()).await;
    assert_eq!(
        (s.state(), s.reason(), s.actor().clone()),
        (
            State::Cancelled,
            Some("approval_expired"),
            countersign::domain::Actor::system()
        )
    );
    assert_eq!(
        r.load(open.id()).await.state(),
        State::PendingApproval,
        "the other waits for the 1 h TTL"
    );
    r.advance(3000);
    // Approving after the TTL is refused and seals it, even before a sweep.
    let digest = open.approval().unwrap().context_digest.clone();
    let err = r
        .engine
        .approve(&r.who(keys::APPROVER), open.id(), &digest)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ActionSealed {
                state: State::Cancelled
            }
        ),
        "{err:?}"
    );
    assert_eq!(r.load(open.id()).await.reason(), Some("approval_expired"));
    assert!(r.tools.received().is_empty());
}

/// SC-CAN-03: cancel racing the worker, 1,000 pairs (the issue asks ≥ 1,000 on SQLite); exactly one outcome each, the tool runs at
/// most once and never after a winning cancel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_can_03_cancel_races_the_worker_1000_pairs() {
    let r = rig().await;
    const PAIRS: usize = 1_000;
    let mut actions = Vec::new();
    for _ in 0..PAIRS {
        actions.push(r.committed("report.build", 60, 600).await);
    }
    r.advance(60);
    let (mut cancels_won, mut runs_won) = (0, 0);
    for (i, batch) in actions.chunks(20).enumerate() {
        let mut pairs = Vec::new();
        for (j, a) in batch.iter().enumerate() {
            let (engine, who, wake, id) = (
                r.engine.clone(),
                r.who(keys::AGENT),
                wake_of(a),
                a.id().to_owned(),
            );
            let cancel = {
                let (engine, id) = (engine.clone(), id.clone());
                async move { engine.cancel(&who, &id).await }
            };
            let resume = async move { engine.resume(&wake).await };
            // Alternate who starts first so both orders are exercised.
            pairs.push(tokio::spawn(async move {
                if (i + j) % 2 == 0 {
                    let (c, w) = tokio::join!(tokio::spawn(cancel), tokio::spawn(resume));
                    (c.unwrap(), w.unwrap())
                } else {
                    let (w, c) = tokio::join!(tokio::spawn(resume), tokio::spawn(cancel));
                    (c.unwrap(), w.unwrap())
                }
            }));
        }
        for (a, pair) in batch.iter().zip(pairs) {
            let (cancelled, resumed) = pair.await.unwrap();
            let end = r.load(a.id()).await;
            let ran = r.tools.count_for(a.id());
            match (&cancelled, end.state()) {
                (Ok(c), State::Cancelled) => {
                    assert_eq!(c.state(), State::Cancelled);
                    assert_eq!(
                        ran,
                        0,
                        "the tool never runs after a winning cancel ({})",
                        a.id()
                    );
                    assert!(!matches!(
                        resumed.as_ref().unwrap(),
                        ResumeOutcome::Ran { .. }
                    ));
                    cancels_won += 1;
                }
                (Err(Error::ActionExecuting | Error::ActionSealed { .. }), State::Succeeded) => {
                    assert_eq!(ran, 1, "the worker won and ran exactly once ({})", a.id());
                    assert!(matches!(
                        resumed.as_ref().unwrap(),
                        ResumeOutcome::Ran { .. }
                    ));
                    runs_won += 1;
                }
                other => panic!(
                    "not exactly one outcome for {}: {other:?} / {resumed:?}",
                    a.id()
                ),
            }
        }
    }
    println!("SC-CAN-03: {PAIRS} pairs — cancel won {cancels_won}, worker won {runs_won}");
    assert_eq!(cancels_won + runs_won, PAIRS);
    assert!(
        cancels_won > 0 && runs_won > 0,
        "both orders of the race were exercised"
    );
    assert_eq!(
        r.tools.received().len(),
        runs_won,
        "no tool call outside the winners"
    );
    // Later wakes and sweeps change nothing.
    for a in &actions {
        r.engine.resume(&wake_of(a)).await.unwrap();
    }
    r.engine.sweep().await.unwrap();
    assert_eq!(r.tools.received().len(), runs_won);
}

/// SPEC §5 webhook classification, through allowed calls that run at once.
#[tokio::test]
async fn webhook_answers_are_classified_and_capped() {
    use countersign_tests::Behaviour;
    let r = rig().await;
    let run = |tool: &'static str| {
        let (engine, who) = (r.engine.clone(), r.who(keys::AGENT));
        async move {
            let req = submission(json!({"tool": tool, "args": {}}));
            engine.submit(&who, req, None).await.unwrap().action
        }
    };
    // 4xx → failed, not retried.
    r.tools.behave(Behaviour {
        status: 422,
        answer: json!({"why": "bad address"}),
        ..Behaviour::default()
    });
    let a = run("search.web").await;
    assert_eq!(a.state(), State::Failed);
    assert_eq!(a.outcome().unwrap().error.as_ref().unwrap()["status"], 422);
    assert_eq!(
        a.outcome().unwrap().error.as_ref().unwrap()["body"],
        json!({"why": "bad address"})
    );
    assert_eq!(r.tools.count_for(a.id()), 1);
    // 5xx with recovery = fail → failed after one attempt.
    r.tools.behave(Behaviour {
        status: 503,
        ..Behaviour::default()
    });
    let b = run("search.web").await;
    assert_eq!((b.state(), r.tools.count_for(b.id())), (State::Failed, 1));
    // Timeout (tool timeout is 2 s in this rig) → failed with kind timeout.
    r.tools.behave(Behaviour {
        delay_ms: 3000,
        ..Behaviour::default()
    });
    let c = run("search.web").await;
    assert_eq!(c.state(), State::Failed);
    assert_eq!(
        c.outcome().unwrap().error.as_ref().unwrap()["kind"],
        "timeout"
    );
    // A result over 64 KiB is not stored; the call still succeeded.
    r.tools.behave(Behaviour {
        answer: json!({"blob": "x".repeat(70 * 1024)}),
        ..Behaviour::default()
    });
    let d = run("search.web").await;
    assert_eq!(d.state(), State::Succeeded);
    assert_eq!(
        d.outcome().unwrap().result.as_ref().unwrap()["truncated"],
        true
    );
    assert!(
        r.tools.received().iter().all(|c| c.signature_ok),
        "every call is signed"
    );
}

/// SPEC §5: 5xx on a `retry` tool is retried inside the window with the same Idempotency-Key.
#[tokio::test]
async fn webhook_5xx_on_a_retry_tool_is_retried_with_the_same_identity() {
    use countersign_tests::Behaviour;
    let r = rig().await;
    let a = r.committed("report.build", 60, 600).await;
    r.advance(60);
    r.tools.behave(Behaviour {
        status: 502,
        ..Behaviour::default()
    });
    assert!(matches!(
        r.engine.resume(&wake_of(&a)).await.unwrap(),
        ResumeOutcome::Ran {
            state: State::Failed
        }
    ));
    let calls = r.tools.calls_for(a.id());
    assert_eq!(calls.len(), 3, "three attempts per claim");
    assert!(calls
        .iter()
        .all(|c| c.idempotency_key.as_deref() == Some(a.id())));
    assert_eq!(
        calls.iter().map(|c| c.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

/// SC-REC-01/02 under a deadline: a sweep starts no tool run whose claim budget would outlast
/// it (a function killed mid-run would leave an expired lease); the next pass performs it.
#[tokio::test]
async fn a_sweep_with_a_deadline_defers_runs_that_would_not_fit() {
    let r = rig().await;
    r.waker.fail.store(true, Ordering::SeqCst);
    let a = r.committed("report.build", 60, 600).await; // retry tool, 2 s timeout: budget 9 s
    r.advance(60);
    let report = r.engine.sweep_until(Some(r.at(10))).await.unwrap();
    assert_eq!((report.deferred, report.resumed), (1, 0), "{report:?}");
    assert_eq!(r.load(a.id()).await.state(), State::Approved);
    assert_eq!(r.tools.count_for(a.id()), 0);
    let report = r.engine.sweep_until(Some(r.at(20))).await.unwrap();
    assert_eq!((report.deferred, report.resumed), (0, 1), "{report:?}");
    assert_eq!(r.load(a.id()).await.state(), State::Succeeded);
}

/// SC-REC-02 with SC-RES-03: an expired lease of a `retry` tool is not re-run for a stopped
/// agent; it is sealed as an unknown outcome.
#[tokio::test]
async fn recovery_never_re_runs_for_a_stopped_agent() {
    let r = rig().await;
    let a = r.committed("report.build", 60, 600).await;
    r.advance(60);
    r.crash_after_claim(&a, 30).await;
    r.engine
        .stop(&r.who(keys::ADMIN), Some("agent-1"))
        .await
        .unwrap();
    r.advance(31);
    r.engine.sweep().await.unwrap();
    let sealed = r.load(a.id()).await;
    assert_eq!(
        (sealed.state(), sealed.reason()),
        (State::Failed, Some("outcome_unknown"))
    );
    assert_eq!(r.tools.count_for(a.id()), 0);
}

/// A deadline defers only runs: a ticket whose window is over is sealed at once
/// (SC-RES-06), not left for a pass that has more time.
#[tokio::test]
async fn a_sweep_deadline_never_defers_sealing() {
    let r = rig().await;
    r.waker.fail.store(true, Ordering::SeqCst);
    let a = r.committed("report.build", 60, 400).await;
    r.advance(401);
    let report = r.engine.sweep_until(Some(r.at(1))).await.unwrap();
    assert_eq!((report.deferred, report.resumed), (0, 1), "{report:?}");
    assert_eq!(r.load(a.id()).await.reason(), Some("schedule_missed"));
}

/// The result cap holds for what is stored, also for a non-JSON body that grows when escaped.
#[tokio::test]
async fn a_non_json_result_is_capped_as_stored() {
    use countersign_tests::Behaviour;
    let r = rig().await;
    // 20 KiB of control bytes: 6× larger once escaped as a JSON string.
    r.tools.behave(Behaviour {
        answer: serde_json::Value::String("\u{1}".repeat(20 * 1024)),
        ..Behaviour::default()
    });
    let req = submission(json!({"tool": "search.web", "args": {}}));
    let a = r
        .engine
        .submit(&r.who(keys::AGENT), req, None)
        .await
        .unwrap()
        .action;
    assert_eq!(a.state(), State::Succeeded);
    assert_eq!(
        a.outcome().unwrap().result.as_ref().unwrap()["truncated"],
        true
    );
}
