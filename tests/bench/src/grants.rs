//! The gate beside 1,000 scoped grants (issue 33, SC-GR-02): submits per second on the embedded
//! server (SQLite) in tenant `bench` with no grant beside the same tenant holding 1,000 live
//! ones, alternated a round each with `gate::alternate`, each run on a server and database of
//! its own. The grants belong to ten agents × five `mail.*` tools, so intake's read of one
//! agent's grants for one tool (an index prefix) passes over the rest. Two tenants of 1,000:
//!
//! - **even** (the goal's): 20 grants a pair, as a tenant whose approvers grant alike across
//!   agents and tools would hold them. The measured agent and tool (`bench-agent`,
//!   `mail.instant`) hold 20, none of which allows the measured call — half pin another
//!   recipient, half have a condition that is false for it — so the gate reads and checks all 20.
//! - **concentrated** (a stress case): the measured pair holds 164 of the 1,000, none allowing
//!   the measured call — 100 old ones as above, then 64 pinned to 64 recipients — the other
//!   836 spread over the other 49 pairs.
//!
//! The sides, alternated:
//!
//! - **held, none**, **held, even** and **held, concentrated**: a `mail.instant` call the policy
//!   holds for a person, which no grant allows: it is decided, matched against its pair's
//!   grants, and waits (`202`). Held-even ÷ held-none is the goal: ≥ 90 %.
//! - **granted** (information), on the concentrated tenant: the same calls pinned to one of the
//!   64 recipients, so a grant allows each — the 100 old ones checked first, then the
//!   recipients' until its own, one conditional write for the use, then allow → run inline.
//!   Recipients spread the uses: calls of one grant in flight at once race for its version, as
//!   they would in production.
//! - **allowed, none** (information): a call the policy allows outright, allow → run — what a
//!   granted call is beside it.
//!
//! The grants are put through the store port (`Grants::put_grant`) before each run's server
//! starts, with terms as an approval under the tenant's `mail.*` rule makes them: 1,000
//! approvals with a grant through the engine would add 1,000 actions and 4,000 writes to one
//! side's database only.

use crate::embedded::Answer;
use crate::gate::{alternate, Runs, Side};
use crate::{stats::Summary, world};
use countersign::config::Config;
use countersign::domain::grant::{self, Grant, GrantedBy, Terms, FORMAT, MAX_TTL};
use countersign::domain::{policy, Call, Decision};
use countersign::store::{sqlite::SqliteStore, GrantMemo, Grants as _};
use serde_json::{json, Map, Value};
use std::{path::Path, sync::Arc, time::Duration, time::Instant};

/// Live grants in the tenant, on the sides that have them.
pub const GRANTS: usize = 1_000;
/// The even tenant's grants of each agent and tool.
pub const PER_PAIR: usize = GRANTS / (AGENTS * TOOLS.len());
/// Of the concentrated tenant's, the measured agent and tool's that allow no measured call:
/// pin or condition.
pub const STRANGERS: usize = 100;
/// And the recipients' (one grant each), which the granted calls use.
pub const RECIPIENTS: usize = 64;
const AGENTS: usize = 10;
const TOOLS: [&str; 5] = [
    "mail.instant",
    "mail.send",
    "mail.draft",
    "mail.forward",
    "mail.archive",
];
/// The measured call's agent (the key `world::BENCH_AGENT`'s id) and tool.
const AGENT: &str = "bench-agent";
const TOOL: &str = "mail.instant";
/// The rule of `world::config` that holds `mail.*` for a person: its position and label.
const RULE: (usize, &str) = (1, "mail.*");

pub struct GrantsBench {
    /// In process, per held call (medians of 5 batches): decoding the pair's grants (JSON,
    /// their digests checked), reading them as the store's memo does once each is remembered,
    /// and matching the held call against them.
    pub decode: Duration,
    pub remembered: Duration,
    /// In process, the store's read of the pair's live grants (`grants_for`, SQLite, every one
    /// remembered), with no grant in the tenant, the even 1,000 and the concentrated 1,000
    /// (median of 5 batches).
    pub store_read: [Duration; 3],
    pub matching: Duration,
    pub held_none: Runs,
    pub held_even: Runs,
    pub held_concentrated: Runs,
    pub granted: Runs,
    pub allowed: Runs,
    pub calls: usize,
    pub concurrency: usize,
}

impl GrantsBench {
    /// The median of the rounds' ratios, held with 1,000 grants (`even` or concentrated) ÷
    /// held with none: calls per second and CPU per call (the goal's figure and its CPU).
    pub fn ratios(&self, held: &Runs) -> (f64, f64) {
        (
            ratio(&held.per_s, &self.held_none.per_s),
            ratio(&held.cpu, &self.held_none.cpu),
        )
    }

    /// The same, a granted call ÷ a call the policy allows.
    pub fn granted_ratio(&self) -> f64 {
        ratio(&self.granted.per_s, &self.allowed.per_s)
    }
}

fn ratio(a: &[f64], b: &[f64]) -> f64 {
    Summary::of(a.iter().zip(b).map(|(a, b)| a / b).collect()).p50
}

fn recipient(i: usize) -> String {
    format!("recipient-{i:02}@example.com")
}

fn call(to: &str) -> Value {
    json!({"tool": TOOL, "args": {"to": to, "amount": 20, "subject": "the weekly figures"}})
}

/// A grant of `agent` for `tool`, the `k`th granted (ids are time-ordered: the oldest is
/// matched first), with `uses`, pins and a condition.
fn grant(k: usize, agent: &str, tool: &str, uses: u32, pins: Value, when: &str) -> Grant {
    let granted_ms = jiff::Timestamp::now().as_millisecond() as u64 - 3_600_000 + k as u64;
    let ulid = ulid::Ulid::from_parts(granted_ms, k as u128).to_string();
    let granted_at = jiff::Timestamp::from_millisecond(granted_ms as i64).unwrap();
    let Value::Object(pins) = pins else {
        unreachable!("pins are an object")
    };
    Grant::new(Terms {
        format: FORMAT.to_owned(),
        id: format!("grt_{ulid}"),
        tenant: "bench".into(),
        agent_id: agent.into(),
        tool: tool.into(),
        rule: RULE.0,
        rule_label: RULE.1.into(),
        approvals: 1,
        from_action: format!("act_{ulid}"),
        granted_by: GrantedBy {
            approver: "bench-approver".into(),
            person: None,
            groups: Vec::new(),
        },
        granted_at,
        expires_at: granted_at + MAX_TTL,
        uses,
        pins: Map::from_iter(pins),
        when: Some(when.into()),
    })
}

/// The `k`th grant, which no measured call is allowed by: another recipient pinned, or a
/// condition false for it.
fn stranger(k: usize, agent: &str, tool: &str, pinned: bool) -> Grant {
    match pinned {
        true => {
            let pins = json!({"to": format!("someone-{k}@example.com")});
            grant(k, agent, tool, 10, pins, "args.amount <= 100")
        }
        false => grant(k, agent, tool, 10, json!({}), "args.amount > 1000"),
    }
}

/// Every agent and tool of the tenant's grants, the measured pair first.
fn pairs() -> Vec<(String, &'static str)> {
    let agents = (0..AGENTS).map(|a| match a {
        0 => AGENT.to_owned(),
        _ => format!("agent-{a}"),
    });
    agents.flat_map(|a| TOOLS.map(|t| (a.clone(), t))).collect()
}

/// The even tenant's 1,000: [`PER_PAIR`] strangers for each agent and tool, granted in turn.
fn even() -> Vec<Grant> {
    let pairs = pairs();
    (0..GRANTS)
        .map(|k| {
            let (agent, tool) = &pairs[k % pairs.len()];
            stranger(k, agent, tool, (k / pairs.len()).is_multiple_of(2))
        })
        .collect()
}

/// The concentrated tenant's 1,000, oldest first: the measured pair's 100 strangers, then the
/// recipients' 64 (each with `uses`), then the other 49 pairs' 836, all alike in shape.
fn concentrated(uses: u32) -> Vec<Grant> {
    let mut all: Vec<Grant> = (0..STRANGERS)
        .map(|k| stranger(k, AGENT, TOOL, k.is_multiple_of(2)))
        .collect();
    all.extend((0..RECIPIENTS).map(|r| {
        let pins = json!({"to": recipient(r)});
        grant(STRANGERS + r, AGENT, TOOL, uses, pins, "args.amount <= 100")
    }));
    let others = &pairs()[1..];
    for k in all.len()..GRANTS {
        let (agent, tool) = &others[k % others.len()];
        all.push(stranger(k, agent, tool, k.is_multiple_of(2)));
    }
    all
}

/// Put `grants` in the SQLite store at `db` (created if new) through the store port, all at
/// once: the writer commits them in a few batches.
pub async fn seed(db: &Path, grants: &[Grant]) {
    if grants.is_empty() {
        return;
    }
    let store = SqliteStore::open(db).expect("open the store to seed it");
    let puts = grants.iter().map(|g| store.put_grant(g));
    for put in futures_util::future::join_all(puts).await {
        put.expect("a grant is stored");
    }
}

pub async fn measure(calls: usize, concurrency: usize, rounds: usize) -> GrantsBench {
    let (toml, _tools) = world::config().await;
    let config = Arc::new(Config::from_toml(&toml).expect("the grants bench's config"));
    // Every granted call of a run (the warm-up's too) finds a use left on its recipient's grant.
    let per_recipient = (calls + calls / 10 + 1).div_ceil(RECIPIENTS) + 2;
    let crowded = concentrated(per_recipient as u32);
    let held = |grants: Vec<Grant>| Side {
        bodies: vec![call("ops@example.com")],
        answer: Answer::Held,
        grants,
        ..Side::new(config.clone(), world::BENCH_AGENT, Value::Null)
    };
    let granted = Side {
        bodies: (0..RECIPIENTS).map(|r| call(&recipient(r))).collect(),
        grants: crowded.clone(),
        ..Side::new(config.clone(), world::BENCH_AGENT, Value::Null)
    };
    let allowed = json!({"tool": "search.instant", "args": {"q": "the weekly figures"}});
    let sides = [
        held(Vec::new()),
        held(even()),
        held(crowded),
        granted,
        Side::new(config.clone(), world::BENCH_AGENT, allowed),
    ];
    assert!(sides[1..4].iter().all(|s| s.grants.len() == GRANTS));
    let [held_none, held_even, held_concentrated, granted, allowed] =
        alternate(&sides, calls, concurrency, rounds).await;
    let [decode, remembered, matching] = alone(&sides[2].grants, calls / 10 + 1);
    let mut store_read = [Duration::ZERO; 3];
    for (side, read) in sides[..3].iter().zip(&mut store_read) {
        *read = read_store(&side.grants, calls / 10 + 1).await;
    }
    GrantsBench {
        store_read,
        decode,
        remembered,
        matching,
        held_none,
        held_even,
        held_concentrated,
        granted,
        allowed,
        calls,
        concurrency,
    }
}

/// `grants_for` of the measured pair on a SQLite store holding `grants`, per call: the median
/// of 5 batches of `calls`, one after the other (the reads intake makes, its grants remembered
/// after the first).
async fn read_store(grants: &[Grant], calls: usize) -> Duration {
    let db = world::TempDb::new("grants-read");
    seed(&db.path, grants).await;
    let store = SqliteStore::open(&db.path).expect("open the store");
    let now = jiff::Timestamp::now();
    let mut took = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..calls {
            let live = store.grants_for("bench", AGENT, TOOL, now).await;
            std::hint::black_box(live.expect("the store reads"));
        }
        took.push(started.elapsed() / calls as u32);
    }
    took.sort();
    took[2]
}

/// In process, per held call: the pair's stored grants decoded as the store's read does,
/// read through the store's memo with every one remembered, and the call matched against them
/// as intake does (none allows it), each the median of 5 batches of `calls`.
fn alone(grants: &[Grant], calls: usize) -> [Duration; 3] {
    let pair: Vec<(&Grant, Vec<u8>)> = (grants.iter())
        .filter(|g| (g.terms().agent_id.as_str(), g.terms().tool.as_str()) == (AGENT, TOOL))
        .map(|g| (g, serde_json::to_vec(g).unwrap()))
        .collect();
    assert_eq!(pair.len(), STRANGERS + RECIPIENTS);
    let decode = |body: &[u8]| serde_json::from_slice(body).expect("a stored grant loads");
    let memo = GrantMemo::default();
    let read = || -> Vec<Grant> {
        (pair.iter())
            .map(|(g, body)| {
                memo.grant("bench", g.id(), g.version(), || {
                    Ok::<_, String>(decode(body))
                })
            })
            .collect::<Result<_, _>>()
            .expect("a stored grant loads")
    };
    let Value::Object(args) = call("ops@example.com")["args"].clone() else {
        unreachable!()
    };
    let held = Call::hypothetical("bench", AGENT, TOOL.into(), args, None, None);
    let rules = [
        policy::Rule::new("search.*", Decision::Allow, None),
        policy::Rule::new("mail.*", Decision::RequireApproval, None),
    ];
    let now = jiff::Timestamp::now();
    let gate = policy::gate(&rules, &held.facts(now));
    let live = read();
    assert!(grant::first_admitting(&live, &held, &gate, now).is_none());
    let batches = |f: &dyn Fn()| {
        let mut took: Vec<Duration> = (0..5)
            .map(|_| {
                let started = Instant::now();
                (0..calls).for_each(|_| f());
                started.elapsed() / calls as u32
            })
            .collect();
        took.sort();
        took[2]
    };
    [
        batches(&|| {
            let all: Vec<Grant> = pair.iter().map(|(_, body)| decode(body)).collect();
            std::hint::black_box(all);
        }),
        batches(&|| {
            std::hint::black_box(read());
        }),
        batches(&|| {
            std::hint::black_box(grant::first_admitting(&live, &held, &gate, now));
        }),
    ]
}
