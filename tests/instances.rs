//! Many instances on one Postgres store, over real HTTP: three servers share one database (the
//! schema of scripts/postgres.sh's server), each learning of the tickets the others commit
//! (LISTEN/NOTIFY and the due-index poll) and claiming with the same fenced conditional write.
//!
//! Sizes scale down by environment for CI time: `COUNTERSIGN_TEST_PAIRS` (the cancel/run race,
//! default 1,000) and `COUNTERSIGN_TEST_DUE` (the burst due in one second, default 1,000).

use countersign::{
    boot::embedded::{Database, Parts, Server},
    config::Config,
    store::postgres::Options,
};
use countersign_tests::{config_toml, keys, postgres, Api, Behaviour, ToolServer};
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};
use std::{collections::HashMap, sync::Arc, time::Duration};

const INSTANCES: usize = 3;

fn size(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Cluster {
    servers: Vec<Server>,
    apis: Vec<Api>,
    tools: ToolServer,
}

/// Three servers on one fresh schema, one tool server behind them all.
async fn cluster(label: &str) -> Cluster {
    let tools = ToolServer::start().await;
    let config = Arc::new(Config::from_toml(&config_toml(&tools, "10s", "5s")).unwrap());
    let database = Database::Postgres {
        url: postgres::fresh_url(label).await,
        options: Options {
            pool_size: 8,
            ca_file: None,
        },
    };
    let mut servers = Vec::new();
    for _ in 0..INSTANCES {
        let listen = "127.0.0.1:0".parse().unwrap();
        let server = Server::start_on(config.clone(), &database, listen, Parts::default())
            .await
            .unwrap();
        servers.push(server);
    }
    let apis = servers.iter().map(|s| Api::new(s.addr)).collect();
    Cluster {
        servers,
        apis,
        tools,
    }
}

impl Cluster {
    /// A pseudo-random instance for request `i` (spread, not round-robin).
    fn api(&self, i: usize) -> &Api {
        postgres::spread(&self.apis, i)
    }

    /// Commit `n` scheduled tickets through random instances, due at `due(i)`; their ids.
    async fn commit(&self, n: usize, due: impl Fn(usize) -> Timestamp) -> Vec<String> {
        postgres::commit_scheduled(&self.apis, n, due, SignedDuration::from_secs(120)).await
    }

    async fn state(&self, id: &str) -> Value {
        let (status, v) = self.apis[0]
            .get(&format!("/v1/actions/{id}"), keys::AGENT)
            .await;
        assert_eq!(status, 200, "{v}");
        v
    }

    /// Wait until none of `ids` is approved or executing (or the time is up).
    async fn settle(&self, ids: &[String], within: Duration) {
        let end = std::time::Instant::now() + within;
        for id in ids {
            loop {
                let s = self.state(id).await["state"].as_str().unwrap().to_owned();
                if !matches!(s.as_str(), "approved" | "executing") {
                    break;
                }
                assert!(std::time::Instant::now() < end, "{id} still {s}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn shutdown(self) {
        for s in self.servers {
            s.shutdown().await.unwrap();
        }
    }
}

/// How long until `t` (zero if it passed).
fn until(t: Timestamp) -> Duration {
    Duration::try_from(t.duration_since(Timestamp::now()).max(SignedDuration::ZERO)).unwrap()
}

fn at(v: &Value, field: &str) -> Timestamp {
    v["schedule"][field].as_str().unwrap().parse().unwrap()
}

/// SC-CAN-03 across instances: a ticket due now, its cancel sent to a random instance while
/// the committing instance's timer fires for it (and the others' stand-ins a grace later). Exactly one outcome each; the tool runs at most once
/// and never after a winning cancel; both sides win sometimes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_can_03_three_instances_on_postgres_cancel_races_the_run() {
    let pairs = size("COUNTERSIGN_TEST_PAIRS", 1_000);
    let c = cluster("race").await;
    c.tools.behave(Behaviour {
        delay_ms: 20,
        ..Behaviour::default()
    });
    // Due one after another, each after every commit has been announced; each cancel is sent
    // around its ticket's due instant (a little before or after), when every instance's timer
    // for it fires.
    let start = Timestamp::now() + SignedDuration::from_millis(5_000 + 20 * pairs as i64);
    let due = |i: usize| start + SignedDuration::from_millis(5 * i as i64);
    let ids = c.commit(pairs, due).await;
    assert!(
        Timestamp::now() < start,
        "the commits took longer than planned"
    );
    let mut cancels = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let (api, id) = (c.api(i + 1).clone(), id.clone());
        let send_at = due(i) + SignedDuration::from_millis([-30, -10, 0, 10, 30][i % 5]);
        cancels.push(tokio::spawn(async move {
            tokio::time::sleep(until(send_at)).await;
            api.cancel(&id, keys::AGENT).await
        }));
    }
    let mut answers = Vec::new();
    for cancel in cancels {
        answers.push(cancel.await.unwrap());
    }
    c.settle(&ids, Duration::from_secs(60)).await;

    let (mut cancels_won, mut runs_won) = (0, 0);
    for (id, (status, answer)) in ids.iter().zip(&answers) {
        let end = c.state(id).await;
        let ran = c.tools.count_for(id);
        match (*status, end["state"].as_str().unwrap()) {
            (200, "cancelled") => {
                assert_eq!(ran, 0, "the tool ran after a winning cancel: {id}");
                cancels_won += 1;
            }
            (409, "succeeded") => {
                assert_eq!(ran, 1, "the run won and ran exactly once: {id}");
                runs_won += 1;
            }
            other => panic!("not exactly one outcome for {id}: {other:?} {answer} {end}"),
        }
    }
    println!(
        "SC-CAN-03 on 3 instances: {pairs} pairs — cancel won {cancels_won}, run won {runs_won}"
    );
    assert!(cancels_won > 0 && runs_won > 0, "both sides won sometimes");
    assert_eq!(
        c.tools.received().len(),
        runs_won,
        "no call outside the winners"
    );
    c.shutdown().await;
}

/// `n` tickets due within one second, committed through random instances and run by whichever
/// instance claims each: none early, none twice, every one run; the claim delay (tool call
/// received − due) reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_instances_on_postgres_run_a_burst_due_in_one_second_none_early_none_twice() {
    let n = size("COUNTERSIGN_TEST_DUE", 1_000);
    let c = cluster("burst").await;
    // After every commit has been announced: what is measured is the wake, not the intake.
    let start = Timestamp::now() + SignedDuration::from_millis(5_000 + 20 * n as i64);
    let ids = c
        .commit(n, |i| {
            start + SignedDuration::from_micros((i * 1_000_000 / n) as i64)
        })
        .await;
    assert!(
        Timestamp::now() < start,
        "the commits took longer than planned"
    );
    tokio::time::sleep(until(start) + Duration::from_secs(1)).await;
    c.settle(&ids, Duration::from_secs(60)).await;

    let mut by_action: HashMap<String, Vec<Timestamp>> = HashMap::new();
    for r in c.tools.received() {
        by_action.entry(r.action_id.clone()).or_default().push(r.at);
    }
    let mut delays = Vec::new();
    for id in &ids {
        let end = c.state(id).await;
        assert_eq!(end["state"], "succeeded", "{end}");
        let calls = &by_action[id];
        assert_eq!(calls.len(), 1, "run exactly once: {id}");
        let not_before = at(&end, "not_before");
        assert!(
            calls[0] >= not_before,
            "{id} ran early: {} < {not_before}",
            calls[0]
        );
        delays.push(calls[0].duration_since(not_before).as_secs_f64() * 1000.0);
    }
    delays.sort_by(f64::total_cmp);
    let p = |q: f64| delays[((delays.len() as f64 * q) as usize).min(delays.len() - 1)];
    println!(
        "3 instances, {n} due in 1 s: claim delay p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        p(0.5),
        p(0.99),
        p(1.0)
    );
    c.shutdown().await;
}

/// A server process on the shared database (the chaos binary's `serve`, without store faults),
/// so it can be killed with SIGKILL: nothing of it runs on, not even its drain.
struct Process {
    child: std::process::Child,
    api: Api,
    /// The owner prefix of the leases it holds.
    worker: String,
}

impl Process {
    fn start(url: &str, config: &std::path::Path) -> Process {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args(["serve", "--no-faults", "--database-url", url, "--config"])
            .arg(config)
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn a server process");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut worker = String::new();
        let addr = loop {
            let line = lines
                .next()
                .expect("the server prints its address")
                .unwrap();
            if let Some(id) = line.strip_prefix("WORKER ") {
                worker = format!("{id}/");
            }
            if let Some(addr) = line.strip_prefix("ADDR ") {
                break addr.parse().unwrap();
            }
        };
        // Keep reading, so the process never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Process {
            child,
            api: Api::new(addr),
            worker,
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait until `ids` are all sealed (or panic after `within`); their last views.
async fn sealed(api: &Api, ids: &[String], within: Duration) -> Vec<Value> {
    let mut views = Vec::new();
    for id in ids {
        let v = api.wait_sealed(id, within.as_secs()).await;
        assert!(v["sealed_at"].is_string(), "{id} not sealed: {v}");
        views.push(v);
    }
    views
}

/// SC-REC-02 across instances, over real HTTP: three server processes on one database; one,
/// holding the leases of the tickets it committed and claimed (their attempts in flight at the
/// tool), is killed with SIGKILL. The others recover its leases under each tool's policy once
/// they lapse — the `retry` tool runs again, the `fail` tool is sealed `outcome_unknown` — and
/// its tickets due after its death still run, once, on time give or take the stand-ins' grace.
/// Then the store holds every invariant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sc_rec_02_three_instances_on_postgres_recover_a_killed_instances_leases() {
    let tools = ToolServer::start().await;
    let config_path = std::env::temp_dir().join(format!("cs-sigkill-{}.toml", ulid::Ulid::new()));
    std::fs::write(&config_path, config_toml(&tools, "10s", "5s")).unwrap();
    let url = postgres::fresh_url("sigkill").await;
    let mut processes: Vec<Process> = (0..INSTANCES)
        .map(|_| Process::start(&url, &config_path))
        .collect();
    let victim = processes[0].api.clone();

    // Through the victim: retry-tool and fail-tool tickets due soon, which it will claim, and
    // retry-tool tickets due after it is gone.
    let soon = Timestamp::now() + SignedDuration::from_secs(8);
    let later = soon + SignedDuration::from_secs(15);
    let window = |at: Timestamp| json!({"not_before": at.to_string(), "not_after": (at + SignedDuration::from_secs(180)).to_string()});
    let (mut retried, mut unknown, mut after) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..10 {
        let (status, v) = victim
            .submit(
                keys::AGENT,
                json!({"tool": "report.build", "args": {"n": i}, "schedule": window(soon)}),
            )
            .await;
        assert_eq!(status, 201, "{v}");
        retried.push(v["id"].as_str().unwrap().to_owned());
        let (status, v) = victim
            .submit(keys::AGENT, json!({"tool": "mail.send", "args": {"to": format!("{i}@example.com")}, "schedule": window(soon)}))
            .await;
        assert_eq!(status, 202, "{v}");
        let id = v["id"].as_str().unwrap().to_owned();
        let (status, a) = victim
            .approve(&id, v["approval"]["context_digest"].as_str().unwrap())
            .await;
        assert_eq!(status, 200, "{a}");
        unknown.push(id);
        let (status, v) = victim
            .submit(
                keys::AGENT,
                json!({"tool": "report.build", "args": {"n": 100 + i}, "schedule": window(later)}),
            )
            .await;
        assert_eq!(status, 201, "{v}");
        after.push(v["id"].as_str().unwrap().to_owned());
    }
    assert!(
        Timestamp::now() < soon,
        "the commits took longer than planned"
    );

    // The tool holds every request: the first attempts stay in flight.
    tools.hold();
    let claimed: Vec<&String> = retried.iter().chain(&unknown).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while claimed.iter().any(|id| tools.count_for(id) == 0) {
        assert!(
            std::time::Instant::now() < deadline,
            "the tickets were never claimed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Whose leases they are: the victim's timers claim its tickets at their due instant, but a
    // survivor's sweep may take one first (a due ticket is the sweep's too, SC-REC-01).
    let store = Database::Postgres {
        url,
        options: Options::default(),
    }
    .open()
    .await
    .unwrap();
    let mut held_by_victim = std::collections::HashSet::new();
    for id in &claimed {
        let a = store.load("acme", id).await.unwrap().unwrap();
        let owner = &a.lease().expect("claimed").owner;
        if owner.starts_with(&processes[0].worker) {
            held_by_victim.insert(id.to_string());
        }
    }
    let mut gone = processes.remove(0);
    gone.child.kill().unwrap(); // SIGKILL
    gone.child.wait().unwrap();
    let killed_at = Timestamp::now();
    tools.release();
    let victims = |ids: &[String]| ids.iter().filter(|id| held_by_victim.contains(*id)).count();
    assert!(
        victims(&retried) > 0 && victims(&unknown) > 0,
        "the victim held leases of both tools: {} retry, {} fail",
        victims(&retried),
        victims(&unknown)
    );

    println!(
        "SIGKILL: the victim held {} of {} retry-tool and {} of {} fail-tool leases",
        victims(&retried),
        retried.len(),
        victims(&unknown),
        unknown.len()
    );
    let api = &processes[1].api;
    // The leases lapse ≈ 48 s (retry) and 35 s (fail) after the claims.
    let within = Duration::from_secs(120);
    for v in sealed(api, &retried, within).await {
        let id = v["id"].as_str().unwrap();
        assert_eq!(v["state"], "succeeded", "{v}");
        let calls = tools.calls_for(id);
        if !held_by_victim.contains(id) {
            assert_eq!(calls.len(), 1, "{id}: a survivor's claim runs once");
            continue;
        }
        // A retry tool's lapsed lease is run again, by a survivor, only once it lapsed.
        assert!(
            calls.len() >= 2,
            "{id}: the victim's attempt and the re-run: {}",
            calls.len()
        );
        assert!(
            calls[0].at < killed_at,
            "{id}: the first attempt was the victim's"
        );
        assert!(
            calls[1..]
                .iter()
                .all(|c| c.at >= calls[0].at + SignedDuration::from_secs(30)),
            "{id}: re-run only after the victim's lease lapsed"
        );
    }
    for v in sealed(api, &unknown, within).await {
        let id = v["id"].as_str().unwrap();
        assert_eq!(tools.count_for(id), 1, "a fail tool never runs twice: {id}");
        if held_by_victim.contains(id) {
            assert_eq!(v["state"], "failed", "{v}");
            assert_eq!(v["outcome"]["reason"], "outcome_unknown", "{v}");
        } else {
            assert_eq!(v["state"], "succeeded", "{v}");
        }
    }
    for v in sealed(api, &after, within).await {
        let id = v["id"].as_str().unwrap();
        assert_eq!(v["state"], "succeeded", "{v}");
        let calls = tools.calls_for(id);
        assert_eq!(calls.len(), 1, "run exactly once: {id}");
        assert!(calls[0].at >= at(&v, "not_before"), "{id} ran early");
    }

    let report = countersign::operate::invariants::check(
        store.as_ref(),
        &["acme".to_owned()],
        Timestamp::now(),
    )
    .await
    .unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    for p in &mut processes {
        std::process::Command::new("kill")
            .args(["-TERM", &p.child.id().to_string()])
            .status()
            .unwrap();
        p.child.wait().unwrap();
    }
}
