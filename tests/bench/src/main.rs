//! `countersign-bench`: every figure of the performance goals in one run, printed as one table
//! (BENCHMARKS.md explains each figure and what limits it).
//!
//!   cargo run --profile bench -p countersign-bench -- all --write BENCHMARKS.md   # the figures
//!   cargo run -p countersign-bench -- quick              # small N, debug build: CI's smoke run
//!
//! Reported figures, never assertions on time: a missed goal prints ✗, and the run still
//! succeeds. It fails only when the product misbehaves (a wrong answer, an early or
//! duplicate run) or a measurement cannot be made.

mod cost;
mod disk;
mod embedded;
mod functions;
mod gate;
mod gate_alone;
mod grants;
mod identity;
mod lateness;
mod load;
mod postgres;
mod prices;
mod report;
mod stats;
mod world;

use clap::{Parser, ValueEnum};

#[derive(Parser)]
#[command(
    name = "countersign-bench",
    about = "countersign's performance figures in one table"
)]
struct Args {
    /// `all`: the full run; `quick`: small N (minutes), for CI.
    mode: Mode,
    /// Run only these sections (default: every one).
    #[arg(long, value_enum)]
    only: Vec<Section>,
    /// Cargo profile the Lambda functions are built with for sizes and init (default: release
    /// for `all`, dev for `quick`).
    #[arg(long)]
    functions_profile: Option<String>,
    /// Also write the table into this Markdown file, between its `<!-- bench:begin -->` and
    /// `<!-- bench:end -->` lines (`bash scripts/bench.sh all` writes BENCHMARKS.md). Only for a
    /// whole run: a partial table must not replace the whole one.
    #[arg(long, conflicts_with = "only")]
    write: Option<std::path::PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    All,
    Quick,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Section {
    Cost,
    Embedded,
    Disk,
    Lateness,
    Functions,
    Postgres,
    Gate,
    /// The gate alone, in process: no server, no store.
    GateAlone,
    /// Loading the configuration, in process (the init figure's share).
    Load,
    /// An access token beside a key: in process, and allow → run alternated.
    Identity,
    /// The gate with 1,000 scoped grants in the tenant beside none, alternated.
    Grants,
}

/// How big each measurement is.
struct Sizes {
    cost_runs: usize,
    lifecycles: usize,
    raw_transitions: usize,
    concurrency: usize,
    due: [usize; 2],
    init_runs: usize,
    disk_lifecycles: usize,
    /// Rounds of the gate section, each a glob-only and a conditional run.
    gate_rounds: usize,
    /// Calls to the gate per batch, in the section `gate-alone`.
    gate_calls: usize,
    /// Credentials authenticated per batch, in the section `identity`.
    identity_calls: usize,
    /// Calls per run of each side, in the section `grants`.
    grants_calls: usize,
}

impl Mode {
    fn sizes(self) -> Sizes {
        match self {
            Mode::All => Sizes {
                cost_runs: 20,
                lifecycles: 20_000,
                raw_transitions: 20_000,
                concurrency: 64,
                due: [100, 1_000],
                init_runs: 11,
                disk_lifecycles: 2_000,
                gate_rounds: 9,
                gate_calls: 20_000,
                identity_calls: 5_000,
                grants_calls: 5_000,
            },
            Mode::Quick => Sizes {
                cost_runs: 2,
                lifecycles: 300,
                raw_transitions: 600,
                concurrency: 16,
                due: [10, 50],
                init_runs: 3,
                disk_lifecycles: 400,
                gate_rounds: 1,
                gate_calls: 200,
                identity_calls: 50,
                grants_calls: 200,
            },
        }
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let sizes = args.mode.sizes();
    let wants = |s: Section| args.only.is_empty() || args.only.contains(&s);
    let mut report = report::Report::new(args.mode == Mode::Quick);

    if wants(Section::Load) {
        // Before anything else loads a configuration: a first load pays the one-time set-up.
        eprintln!("bench: loading the configuration…");
        report.load(&load::measure());
    }
    if wants(Section::Functions) {
        // First: it builds, and a build would disturb the timings below.
        let profile = args.functions_profile.clone().unwrap_or_else(|| {
            match args.mode {
                Mode::All => "release",
                Mode::Quick => "dev",
            }
            .to_owned()
        });
        let built = functions::build(&profile);
        report.functions(&profile, &functions::measure(&built, sizes.init_runs).await);
    }
    if wants(Section::Cost) {
        eprintln!(
            "bench: cost paths against LocalStack ({} runs each)…",
            sizes.cost_runs
        );
        report.cost(&cost::measure(sizes.cost_runs).await);
    }
    if wants(Section::Embedded) {
        eprintln!("bench: embedded throughput and the raw SQLite ceiling…");
        report.embedded(
            &embedded::measure(sizes.lifecycles, sizes.raw_transitions, sizes.concurrency).await,
        );
    }
    if wants(Section::Gate) {
        eprintln!("bench: the gate, ten conditions beside ten globs…");
        report.gate(&gate::measure(sizes.lifecycles, sizes.concurrency, sizes.gate_rounds).await);
    }
    if wants(Section::GateAlone) {
        eprintln!("bench: the gate alone, in process…");
        report.gate_alone(&gate_alone::measure(sizes.gate_calls));
    }
    if wants(Section::Identity) {
        eprintln!("bench: an access token beside a key…");
        report.identity(
            &identity::measure(
                sizes.identity_calls,
                sizes.lifecycles,
                sizes.concurrency,
                sizes.gate_rounds,
            )
            .await,
        );
    }
    if wants(Section::Grants) {
        eprintln!("bench: the gate beside 1,000 scoped grants…");
        report.grants(
            &grants::measure(sizes.grants_calls, sizes.concurrency, sizes.gate_rounds).await,
        );
    }
    if wants(Section::Disk) {
        eprintln!("bench: bytes written to disk per lifecycle…");
        report.disk(&disk::measure(sizes.disk_lifecycles, sizes.concurrency).await);
    }
    if wants(Section::Lateness) {
        for n in sizes.due {
            for tool in [lateness::Tool::Builtin, lateness::Tool::Webhook] {
                eprintln!("bench: {n} due in the same second ({tool:?})…");
                let l = lateness::measure(n, tool).await;
                assert_eq!(
                    (l.early, l.duplicates, l.not_succeeded),
                    (0, 0, 0),
                    "no early or duplicate claim or call, and every action succeeds"
                );
                report.lateness(&l);
            }
        }
    }
    if wants(Section::Postgres) {
        report.postgres(&postgres::measure(args.mode == Mode::Quick).await);
    }
    report.print();
    if let Some(file) = &args.write {
        if let Err(e) = report.write_into(file) {
            eprintln!("bench: could not write the table: {e}");
            std::process::exit(1);
        }
        eprintln!("bench: the table is in {}", file.display());
    }
}
