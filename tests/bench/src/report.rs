//! The one table: every figure beside its goal (✓ met, ✗ missed, – no goal).

use crate::{
    cost::CostReport, embedded::Throughput, functions::Shipped, lateness::Lateness, prices,
    stats::Summary,
};

struct Row {
    figure: String,
    measured: String,
    goal: String,
    met: Option<bool>,
}

pub struct Report {
    quick: bool,
    rows: Vec<Row>,
}

fn ms(s: &Summary) -> String {
    format!("p50 {:.1} / p99 {:.1} / max {:.1} ms", s.p50, s.p99, s.max)
}

fn mb(bytes: u64) -> String {
    format!("{:.2} MB", bytes as f64 / 1e6)
}

impl Report {
    pub fn new(quick: bool) -> Report {
        Report {
            quick,
            rows: Vec::new(),
        }
    }

    fn row(
        &mut self,
        figure: impl Into<String>,
        measured: impl Into<String>,
        goal: &str,
        met: Option<bool>,
    ) {
        self.rows.push(Row {
            figure: figure.into(),
            measured: measured.into(),
            goal: goal.into(),
            met,
        });
    }

    pub fn cost(&mut self, c: &CostReport) {
        for p in &c.paths {
            let d = p.dollars(&c.memory);
            let calls: Vec<String> = p
                .invocations
                .iter()
                .map(|(f, ms)| format!("{} {ms:.0} ms @ {} MB", f.name(), c.memory[f]))
                .collect();
            let goal = if p.name == "lifecycle" { "≤ $8" } else { "" };
            self.row(
                format!("cost per million: {} ({})", p.name, p.what),
                format!(
                    "**${:.2}** = DynamoDB ${:.2} ({:.1} WRU + {:.1} RRU) + Lambda ${:.2} ({}) + API ${:.2} ({} req) + Scheduler ${:.2} ({} inv)",
                    d.total,
                    d.dynamodb,
                    p.units.write,
                    p.units.read,
                    d.lambda,
                    calls.join(", "),
                    d.api,
                    p.api_requests,
                    d.scheduler,
                    p.scheduler_invocations
                ),
                goal,
                (p.name == "lifecycle").then_some(d.total <= 8.0),
            );
            if p.name == "lifecycle" {
                self.row(
                    "  DynamoDB units per lifecycle (index writes included)",
                    format!("{:.1} WRU, {:.1} RRU", p.units.write, p.units.read),
                    "≤ 8 WRU, ≤ 4 RRU",
                    Some(p.units.write <= 8.0 && p.units.read <= 4.0),
                );
            }
            self.row(
                format!("  Step Functions Standard, same {} flow", p.name),
                format!(
                    "${:.2} ({} transitions × $25/M; its API, Lambda and store not added)",
                    d.step_functions, p.sfn_transitions
                ),
                "",
                None,
            );
        }
        self.row(
            "prices",
            format!(
                "DynamoDB ${:.3}/M WRU, ${:.3}/M RRU; HTTP API ${:.2}/M; Scheduler ${:.2}/M; Lambda arm64 ${:.2}/M req + ${}/GB-s; Step Functions ${:.0}/M transitions — as of {}",
                prices::DYNAMODB_WRU * 1e6,
                prices::DYNAMODB_RRU * 1e6,
                prices::HTTP_API_REQUEST * 1e6,
                prices::SCHEDULER_INVOCATION * 1e6,
                prices::LAMBDA_REQUEST * 1e6,
                prices::LAMBDA_GB_SECOND,
                prices::STEP_FUNCTIONS_TRANSITION * 1e6,
                prices::AS_OF
            ),
            "",
            None,
        );
        for (label, s) in &c.warm {
            self.row(
                format!("warm handler against LocalStack: {label}"),
                format!("p50 {:.1} / p99 {:.1} ms (n={})", s.p50, s.p99, s.n),
                "",
                None,
            );
        }
    }

    pub fn disk(&mut self, d: &crate::disk::Disk) {
        let kb = |b: f64| b / 1024.0;
        let measured = |b: &crate::disk::Bytes| {
            format!(
                "**{:.1} KB** (log frames {:.1}, checkpoints {:.1})",
                kb(b.total),
                kb(b.log),
                kb(b.checkpoints)
            )
        };
        self.row(
            format!(
                "disk bytes written per lifecycle, embedded, submit → approve → run ({} lifecycles, {} clients, synchronous=FULL)",
                d.lifecycles, d.concurrency
            ),
            measured(&d.approve),
            "≤ 32 KB",
            Some(kb(d.approve.total) <= 32.0),
        );
        self.row(
            format!(
                "disk bytes written per lifecycle, embedded, allow → run ({} lifecycles, {} clients)",
                d.lifecycles, d.concurrency
            ),
            measured(&d.allow),
            "≤ 8 KB",
            Some(kb(d.allow.total) <= 8.0),
        );
    }

    pub fn embedded(&mut self, t: &Throughput) {
        self.row(
            format!(
                "embedded allow → run over HTTP (synchronous={}, {} lifecycles, {} clients)",
                t.synchronous, t.lifecycles, t.concurrency
            ),
            format!(
                "**{:.0} lifecycles/s** (request {})",
                t.lifecycles_per_s,
                ms(&t.latency)
            ),
            "≥ 1,500/s",
            Some(t.lifecycles_per_s >= 1500.0),
        );
        self.row(
            format!(
                "raw SQLite ceiling (synchronous={}, one thread, one transaction per transition)",
                t.synchronous
            ),
            format!("{:.0} transitions/s", t.raw_per_s),
            "",
            None,
        );
        self.row(
            format!(
                "the same over MCP (`tools/call` at /mcp, {} clients)",
                t.concurrency
            ),
            format!(
                "**{:.0} lifecycles/s** (request {}), {:.0} % of the REST path",
                t.mcp_per_s,
                ms(&t.mcp_latency),
                t.mcp_ratio() * 100.0
            ),
            "≥ 90 % of REST",
            Some(t.mcp_ratio() >= 0.9),
        );
        self.row(
            "engine lifecycles/s ÷ raw transitions/s",
            format!("**{:.0} %**", t.ratio() * 100.0),
            "≥ 50 %",
            Some(t.ratio() >= 0.5),
        );
    }

    pub fn gate(&mut self, g: &crate::gate::Gate) {
        let rounds: Vec<String> = g
            .round_ratios()
            .iter()
            .map(|r| format!("{:.0} %", r * 100.0))
            .collect();
        self.row(
            format!(
                "allow → run with 10 conditional rules ÷ 10 glob-only rules ahead of the allow (embedded, {} lifecycles a run, {} clients, {} rounds alternated after a warm-up round)",
                g.lifecycles,
                g.concurrency,
                g.glob.len()
            ),
            format!(
                "**{:.1} %** (median of the rounds; {:.0} vs {:.0} lifecycles/s, medians; rounds {}; conditional request {})",
                g.ratio() * 100.0,
                Summary::of(g.conditional.clone()).p50,
                Summary::of(g.glob.clone()).p50,
                rounds.join(", "),
                ms(&g.conditional_latency)
            ),
            "≥ 95 %",
            Some(g.ratio() >= 0.95),
        );
        self.row(
            "  CPU per lifecycle, the same runs (the bench process: server, tool server, clients)",
            format!(
                "conditional {:.0} µs vs glob-only {:.0} µs (medians): **{:+.1} %** (median of the rounds)",
                Summary::of(g.conditional_cpu.clone()).p50,
                Summary::of(g.glob_cpu.clone()).p50,
                (g.cpu_ratio() - 1.0) * 100.0
            ),
            "",
            None,
        );
    }

    pub fn identity(&mut self, i: &crate::identity::Identity) {
        let (throughput, cpu) = i.ratios();
        let rounds: Vec<String> = i
            .token
            .per_s
            .iter()
            .zip(&i.key.per_s)
            .map(|(t, k)| format!("{:.0} %", t / k * 100.0))
            .collect();
        self.row(
            format!(
                "allow → run as an agent with an RS256 access token ÷ with a key (embedded, provider's keys cached; {} lifecycles a run, {} clients, {} rounds alternated after a warm-up round)",
                i.lifecycles,
                i.concurrency,
                i.key.per_s.len()
            ),
            format!(
                "**{:.1} %** (median of the rounds; {:.0} vs {:.0} lifecycles/s, medians; rounds {}; CPU per lifecycle {:+.1} %; token request {})",
                throughput * 100.0,
                Summary::of(i.token.per_s.clone()).p50,
                Summary::of(i.key.per_s.clone()).p50,
                rounds.join(", "),
                (cpu - 1.0) * 100.0,
                ms(&Summary::of(i.token.ms.clone()))
            ),
            "≥ 90 %",
            Some(throughput >= 0.90),
        );
        for (credential, per_request) in &i.alone {
            let again = if credential.ends_with("token") {
                ", the same token again: its signature remembered"
            } else {
                ""
            };
            let figure = format!(
                "  authenticating one request in process, with {credential} (median of 5 batches of {}; keys cached{again})",
                i.calls
            );
            self.micros(figure, *per_request, "");
        }
        for (credential, per_request) in &i.first {
            let figure = format!(
                "  authenticating one request in process, with {credential} seen the first time (mean of {}; its signature checked)",
                crate::identity::FRESH
            );
            self.micros(figure, *per_request, "");
        }
    }

    pub fn grants(&mut self, g: &crate::grants::GrantsBench) {
        use crate::grants::{GRANTS, PER_PAIR, RECIPIENTS, STRANGERS};
        let median = |r: &crate::gate::Runs| Summary::of(r.per_s.clone()).p50;
        let crowd = STRANGERS + RECIPIENTS;
        for (held, spread, goal) in [
            (
                &g.held_even,
                format!("{PER_PAIR} of them, as every pair's, its agent and tool's"),
                "≥ 90 %",
            ),
            (
                &g.held_concentrated,
                format!("{crowd} of them its agent and tool's"),
                "",
            ),
        ] {
            let (throughput, cpu) = g.ratios(held);
            let rounds: Vec<String> = (held.per_s.iter().zip(&g.held_none.per_s))
                .map(|(t, n)| format!("{:.0} %", t / n * 100.0))
                .collect();
            self.row(
                format!(
                    "a call held for a person, {GRANTS} live grants in the tenant ({spread}, none allowing it) ÷ none (embedded, {} calls a run, {} clients, {} rounds alternated after a warm-up round)",
                    g.calls,
                    g.concurrency,
                    g.held_none.per_s.len()
                ),
                format!(
                    "**{:.1} %** (median of the rounds; {:.0} vs {:.0} submits/s, medians; rounds {}; CPU per submit {:+.1} %; request with grants {}, without {})",
                    throughput * 100.0,
                    median(held),
                    median(&g.held_none),
                    rounds.join(", "),
                    (cpu - 1.0) * 100.0,
                    ms(&Summary::of(held.ms.clone())),
                    ms(&Summary::of(g.held_none.ms.clone())),
                ),
                goal,
                (!goal.is_empty()).then_some(throughput >= 0.90),
            );
        }
        self.row(
            format!(
                "  a call a grant allows ({crowd} grants of its agent and tool; its use, then allow → run) ÷ a call the policy allows, the same runs"
            ),
            format!(
                "{:.1} % ({:.0} vs {:.0} lifecycles/s, medians; granted request {})",
                g.granted_ratio() * 100.0,
                median(&g.granted),
                median(&g.allowed),
                ms(&Summary::of(g.granted.ms.clone())),
            ),
            "",
            None,
        );
        let figure = |what: &str| {
            format!("  in process, per held call: {what} its agent and tool's {crowd} grants (median of 5 batches)")
        };
        self.micros(figure("decoding (JSON, digests checked)"), g.decode, "");
        let remembered = "reading, every one remembered by the store's memo (id and version),";
        self.micros(figure(remembered), g.remembered, "");
        self.micros(figure("matching it against"), g.matching, "");
        let [none, even, crowded] = g.store_read.map(|d| d.as_secs_f64() * 1e6);
        self.row(
            "  in process, the SQLite store's read of the agent and tool's live grants (`grants_for`, every one remembered; median of 5 batches)",
            format!("{even:.2} µs with {PER_PAIR}, {crowded:.2} µs with {crowd} (no grant in the tenant: {none:.2} µs)"),
            "",
            None,
        );
    }

    /// A row of a time in µs, without a goal.
    fn micros(&mut self, figure: String, took: std::time::Duration, per: &str) {
        let measured = format!("{:.2} µs{per}", took.as_secs_f64() * 1e6);
        self.row(figure, measured, "", None);
    }

    pub fn gate_alone(&mut self, g: &crate::gate_alone::GateAlone) {
        for (policy, per_gate) in &g.policies {
            let figure = format!(
                "the gate alone, in process: {policy} ahead of the allow (median of 5 batches of {} calls)",
                g.calls
            );
            self.micros(figure, *per_gate, " per gate");
        }
    }

    pub fn load(&mut self, l: &crate::load::Load) {
        let ms = |d: std::time::Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        self.row(
            "loading config/local.toml, first in the process: no conditions / conditions deferred (approve, cancel, resume) / compiled (intake)",
            format!(
                "{} / {} / {}",
                ms(l.first_without),
                ms(l.first_deferred),
                ms(l.first_compiled)
            ),
            "",
            None,
        );
        self.row(
            "  later loads, no conditions / conditions compiled (least of 20)",
            format!("{} / {}", ms(l.later_without), ms(l.later_compiled)),
            "",
            None,
        );
    }

    pub fn lateness(&mut self, l: &Lateness) {
        let tool = match l.tool {
            crate::lateness::Tool::Builtin => "builtin tool",
            crate::lateness::Tool::Webhook => "HTTP tool server",
        };
        let check = l.n >= 1000 || self.quick;
        self.row(
            format!("wake lateness, {} due in one second ({tool}): claims", l.n),
            ms(&l.claims),
            "p99 ≤ 100 ms",
            check.then_some(l.claims.p99 <= 100.0),
        );
        if let Some(calls) = &l.calls {
            self.row(
                format!(
                    "wake lateness, {} due in one second: tool calls received",
                    l.n
                ),
                ms(calls),
                "p99 ≤ 150 ms",
                check.then_some(calls.p99 <= 150.0),
            );
        }
        self.row(
            format!("  early / duplicate claims or calls ({} due, {tool})", l.n),
            format!("{} / {}", l.early, l.duplicates),
            "0 / 0",
            Some(l.early == 0 && l.duplicates == 0),
        );
    }

    pub fn postgres(&mut self, p: &crate::postgres::Figures) {
        for t in &p.throughput {
            self.row(
                format!(
                    "Postgres allow → run over HTTP, {} instance(s) (fsync={}, synchronous_commit={}, {} lifecycles, {} clients)",
                    t.instances, p.fsync, p.synchronous_commit, p.lifecycles, p.concurrency
                ),
                format!("**{:.0} lifecycles/s** (request {})", t.per_s, ms(&t.latency)),
                "",
                None,
            );
        }
        let b = &p.burst;
        let check = b.n >= 1000 || self.quick;
        self.row(
            format!("Postgres, 3 instances, {} due in one second: claims", b.n),
            ms(&b.claims),
            "p99 ≤ 100 ms",
            check.then_some(b.claims.p99 <= 100.0),
        );
        self.row(
            format!(
                "Postgres, 3 instances, {} due in one second: tool calls received",
                b.n
            ),
            ms(&b.calls),
            "",
            None,
        );
        self.row(
            format!(
                "  early / duplicate claims or calls ({} due, 3 instances)",
                b.n
            ),
            format!("{} / {}", b.early, b.duplicates),
            "0 / 0",
            Some(b.early == 0 && b.duplicates == 0 && b.not_succeeded == 0),
        );
    }

    pub fn functions(&mut self, profile: &str, shipped: &[Shipped]) {
        for s in shipped {
            self.row(
                format!("Lambda zip: {} ({profile} build)", s.function.name()),
                format!("**{}** (binary {})", mb(s.zip_bytes), mb(s.binary_bytes)),
                "≤ 3 MB",
                Some(s.zip_bytes <= 3_000_000),
            );
            self.row(
                format!(
                    "init to first /next: {} (median of {})",
                    s.function.name(),
                    s.init.n
                ),
                format!(
                    "{:.1} ms (min {:.1}, max {:.1})",
                    s.init.p50, s.init.min, s.init.max
                ),
                "≤ 15 ms",
                Some(s.init.p50 <= 15.0),
            );
        }
    }

    /// The table with its heading line (date, machine, load, build).
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        // The load average when the table is rendered (the run's last minutes): a shared
        // machine's figures say so.
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| "unknown".into());
        let mut out = String::new();
        let _ = writeln!(
            out,
            "countersign bench — {} — {cores} cores ({cpu}), load average {load} at the end — {} build{}",
            jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "optimized"
            },
            if self.quick {
                " — QUICK (small N: not the figures)"
            } else {
                ""
            }
        );
        let _ = writeln!(out);
        let _ = writeln!(out, "| figure | measured | goal | |");
        let _ = writeln!(out, "|---|---|---|---|");
        for r in &self.rows {
            let mark = match r.met {
                // A quick run's figures are not the goals' (debug build, small N).
                _ if self.quick => "",
                Some(true) => "✓",
                Some(false) => "✗",
                None => "",
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {mark} |",
                r.figure, r.measured, r.goal
            );
        }
        out
    }

    pub fn print(&self) {
        println!();
        print!("{}", self.render());
    }

    /// Put the table into `file` between its `<!-- bench:begin -->` and `<!-- bench:end -->`
    /// lines (BENCHMARKS.md), so the document holds exactly what the run printed.
    pub fn write_into(&self, file: &std::path::Path) -> Result<(), String> {
        const BEGIN: &str = "<!-- bench:begin -->";
        const END: &str = "<!-- bench:end -->";
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
            return Err(format!("{} has no {BEGIN} … {END} lines", file.display()));
        };
        if end < begin {
            return Err(format!("{}: {END} comes before {BEGIN}", file.display()));
        }
        let updated = format!(
            "{}{BEGIN}\n{}{}",
            &text[..begin],
            self.render(),
            &text[end..]
        );
        std::fs::write(file, updated).map_err(|e| format!("{}: {e}", file.display()))
    }
}
