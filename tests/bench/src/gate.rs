//! The gate's cost end to end (issue 18, SC-POL-01): allow → run throughput on the embedded
//! server with ten conditional rules ahead of the allow beside ten glob-only ones, each run on a
//! server and database of its own. The ten conditions are those of the section `gate-alone`
//! (`gate_alone.rs`, the gate in process) and every one of them is evaluated (their globs match
//! every tool) and false for the call, so the call is allowed by the same last rule on both sides;
//! the glob-only rules name other tools. The two sides alternate, a round each, so a drift of the
//! machine's disk or load falls on both.

use crate::embedded::{self, Answer};
use crate::{stats::Summary, world};
use countersign::domain::grant::Grant;
use countersign::{boot::embedded::Server, config::Config};
use serde_json::json;
use std::{sync::Arc, time::Instant};

/// Conditions that read the arguments, the agent, the kind, the window and the clock, one a
/// line (the section `gate-alone` runs the same ten).
pub const CONDITIONS: &str = include_str!("../ten-conditions.txt");

pub struct Gate {
    /// Lifecycles per second of each round, glob-only and conditional.
    pub glob: Vec<f64>,
    pub conditional: Vec<f64>,
    /// CPU time per lifecycle of each round (µs), glob-only and conditional: the whole bench
    /// process — server, tool and clients, the same work on both sides but the gate.
    pub glob_cpu: Vec<f64>,
    pub conditional_cpu: Vec<f64>,
    pub conditional_latency: Summary,
    pub lifecycles: usize,
    pub concurrency: usize,
}

impl Gate {
    /// Each round's conditional ÷ glob-only.
    pub fn round_ratios(&self) -> Vec<f64> {
        self.glob
            .iter()
            .zip(&self.conditional)
            .map(|(g, c)| c / g)
            .collect()
    }

    /// The median of the rounds' ratios: each round pairs two runs taken back to back, so a
    /// drift of the machine between rounds cancels out.
    pub fn ratio(&self) -> f64 {
        Summary::of(self.round_ratios()).p50
    }

    /// The median of the rounds' CPU per lifecycle, conditional ÷ glob-only: what the gate
    /// costs without the disk's run-to-run spread, which throughput carries.
    pub fn cpu_ratio(&self) -> f64 {
        let ratios = self.glob_cpu.iter().zip(&self.conditional_cpu);
        Summary::of(ratios.map(|(g, c)| c / g).collect()).p50
    }
}

/// CPU seconds this process has used, all threads (`/proc/self/stat` utime + stime, in the
/// kernel's fixed 100 ticks a second).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat (Linux)");
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let ticks: f64 = after
        .split(' ')
        .skip(11)
        .take(2)
        .map(|t| t.parse::<f64>().expect("a tick count"))
        .sum();
    ticks / 100.0
}

fn rules(conditional: bool) -> String {
    CONDITIONS
        .lines()
        .enumerate()
        .map(|(i, when)| match conditional {
            true => format!(
                "\n  {{ tool = \"*\", decision = \"require_approval\", when = {:?} }},",
                when
            ),
            false => format!("\n  {{ tool = \"tool{i}.*\", decision = \"require_approval\" }},"),
        })
        .collect()
}

pub async fn measure(lifecycles: usize, concurrency: usize, rounds: usize) -> Gate {
    let mut configs = Vec::new();
    let mut tools = Vec::new();
    for conditional in [false, true] {
        let (toml, tool_server) = world::config_with_rules(&rules(conditional)).await;
        let config = Config::from_toml(&toml).expect("the gate bench's config");
        // The arguments the conditions read, as in the gate's own measurement.
        let body = json!({"tool": "search.instant",
            "args": {"query": "quarterly revenue", "currency": "EUR", "amount": 20, "limit": 10}});
        configs.push(Side::new(Arc::new(config), world::BENCH_AGENT, body));
        tools.push(tool_server);
    }
    let configs: [Side; 2] = configs.try_into().ok().expect("two sides");
    let [glob, conditional] = alternate(&configs, lifecycles, concurrency, rounds).await;
    Gate {
        glob: glob.per_s,
        conditional: conditional.per_s,
        glob_cpu: glob.cpu,
        conditional_cpu: conditional.cpu,
        conditional_latency: Summary::of(conditional.ms),
        lifecycles,
        concurrency,
    }
}

/// One side of an alternated run: a configuration, the calls its clients make and the answer
/// each must get, and what its store holds before its server starts.
pub struct Side {
    pub config: Arc<Config>,
    pub bearer: String,
    /// Call `i` sends `bodies[i % len]`.
    pub bodies: Vec<serde_json::Value>,
    pub answer: Answer,
    /// Put in the side's store before its server starts, every run (`grants.rs`).
    pub grants: Vec<Grant>,
}

impl Side {
    /// allow → run of `body` as the holder of `bearer`, on an empty store.
    pub fn new(config: Arc<Config>, bearer: &str, body: serde_json::Value) -> Side {
        Side {
            config,
            bearer: bearer.to_owned(),
            bodies: vec![body],
            answer: Answer::Ran,
            grants: Vec::new(),
        }
    }
}

/// What one side measured, a value a round.
#[derive(Default)]
pub struct Runs {
    /// Calls (lifecycles, or held submits) per second.
    pub per_s: Vec<f64>,
    /// CPU time per call (µs): the whole bench process.
    pub cpu: Vec<f64>,
    /// Every request's latency (ms).
    pub ms: Vec<f64>,
}

/// The sides' calls on the embedded server, alternating a round each and each round starting
/// one side later (each run on a server and database of its own), so a drift of the machine's
/// disk or load falls on every side. Round 0 warms the process, the disk's cache and the
/// allocator and is not counted (in one run the process's first run was ≈ 10 % faster than any
/// later one).
pub async fn alternate<const N: usize>(
    sides: &[Side; N],
    lifecycles: usize,
    concurrency: usize,
    rounds: usize,
) -> [Runs; N] {
    let http = reqwest::Client::new();
    let mut runs: [Runs; N] = std::array::from_fn(|_| Runs::default());
    for round in 0..=rounds {
        for side in (0..N).map(|k| (round + k) % N) {
            let s = &sides[side];
            let db = world::TempDb::new("alternate");
            crate::grants::seed(&db.path, &s.grants).await;
            let server = Server::start(s.config.clone(), &db.path, "127.0.0.1:0".parse().unwrap())
                .await
                .expect("start the embedded server");
            let via = embedded::Via::Rest;
            let url = [format!("http://{}{}", server.addr, via.path())];
            let calls = embedded::Calls {
                via,
                bodies: &s.bodies,
                bearer: &s.bearer,
                answer: s.answer,
            };
            let load = |n| embedded::load_as(&http, &url, n, concurrency, &calls);
            let _ = load(lifecycles / 10 + 1).await;
            let started = Instant::now();
            let cpu_before = cpu_seconds();
            let ms = load(lifecycles).await;
            let cpu_used = cpu_seconds() - cpu_before;
            let elapsed = started.elapsed().as_secs_f64();
            server.shutdown().await.unwrap();
            if round == 0 {
                continue;
            }
            let r = &mut runs[side];
            r.per_s.push(lifecycles as f64 / elapsed);
            r.cpu.push(cpu_used * 1e6 / lifecycles as f64);
            r.ms.extend(ms);
        }
    }
    runs
}
