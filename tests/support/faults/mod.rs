//! Fault injection for the tests and the chaos run, in the tests crate: the product carries no
//! test branch and no test code. The engine sees an ordinary [`Store`] and [`Clock`]; these
//! decorators wrap the real ones.
//!
//! - [`FaultyStore`] fails chosen writes before they are sent (a transient error: throttling,
//!   `TransactionConflict`), applies them and then reports an error (ambiguous: the answer was
//!   lost after sending), or holds them at a [`Gate`] — before the write (the tool has answered,
//!   the result commit is next) or after it (the ticket / the claim has committed) — or stops
//!   there for good (a process that died at that boundary).
//! - [`SkewedClock`] runs a waker's or a worker's clock ahead of or behind another clock.

mod ports;

use countersign::{
    domain::{Change, Creation, State, Transition},
    store::{Store, StoreError, StoreResult},
    Clock,
};
use jiff::{SignedDuration, Timestamp};
use std::sync::{
    atomic::{AtomicI64, AtomicUsize, Ordering},
    Arc, Mutex,
};
use tokio::sync::watch;

/// The kinds of store write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Create,
    Commit,
    PutStop,
    LiftStop,
}

/// Which writes a rule applies to; `None` fields match anything.
#[derive(Debug, Clone, Default)]
pub struct Matching {
    pub write: Option<Write>,
    /// The state the transition moves from (`expected`).
    pub from: Option<State>,
    /// The state the transition moves to.
    pub to: Option<State>,
    pub action_id: Option<String>,
}

impl Matching {
    /// Every write.
    pub fn any() -> Self {
        Self::default()
    }
    /// A ticket commit: intake creating an `approved` action, or an approval.
    pub fn ticket() -> Self {
        Self {
            to: Some(State::Approved),
            ..Self::default()
        }
    }
    /// A claim (fresh or a recovery re-claim).
    pub fn claim() -> Self {
        Self {
            write: Some(Write::Commit),
            to: Some(State::Executing),
            ..Self::default()
        }
    }
    /// The commit that moves an executing action on: its result (or a seal).
    pub fn result() -> Self {
        Self {
            write: Some(Write::Commit),
            from: Some(State::Executing),
            ..Self::default()
        }
    }
    /// Only writes of this action.
    pub fn of(mut self, action_id: &str) -> Self {
        self.action_id = Some(action_id.to_owned());
        self
    }

    fn matches(&self, write: Write, t: Option<Written<'_>>) -> bool {
        let from = t.and_then(|t| t.from);
        let to = t.map(|t| t.change.action.state());
        let id = t.map(|t| t.change.action.id());
        self.write.is_none_or(|w| w == write)
            && self.from.is_none_or(|f| Some(f) == from)
            && self.to.is_none_or(|s| Some(s) == to)
            && self.action_id.as_deref().is_none_or(|a| Some(a) == id)
    }
}

/// The write a rule is matched against: the state it moves from (none for a creation) and
/// what it commits.
#[derive(Clone, Copy)]
struct Written<'a> {
    from: Option<State>,
    change: &'a Change,
}

impl<'a> From<&'a Creation> for Written<'a> {
    fn from(c: &'a Creation) -> Self {
        Written {
            from: None,
            change: c,
        }
    }
}

impl<'a> From<&'a Transition> for Written<'a> {
    fn from(t: &'a Transition) -> Self {
        Written {
            from: Some(t.expected.0),
            change: t,
        }
    }
}

/// What happens to a matching write.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Refuse before sending: nothing applied, `Unavailable` returned.
    Fail,
    /// Apply, then return `Unavailable`: the write happened but its answer was lost.
    Ambiguous,
    /// Apply, then return `Conflict`: the SDK re-sent a write whose first send applied and
    /// whose answer was lost, and the re-send's condition failed against our own write.
    AppliedConflict,
    /// Wait at the gate before sending the write, then send it.
    HoldBefore(Gate),
    /// Send the write, then wait at the gate before answering.
    HoldAfter(Gate),
    /// Never send, never answer: the process stopped before this write.
    StopBefore,
    /// Send, never answer: the process stopped right after this write.
    StopAfter,
}

/// A pause point: a write reaches it and waits until the test opens it.
#[derive(Debug, Clone)]
pub struct Gate {
    reached: Arc<watch::Sender<usize>>,
    open: Arc<watch::Sender<bool>>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    pub fn new() -> Self {
        Gate {
            reached: Arc::new(watch::channel(0).0),
            open: Arc::new(watch::channel(false).0),
        }
    }
    /// Wait until a write has reached the gate.
    pub async fn reached(&self) {
        let mut rx = self.reached.subscribe();
        let _ = rx.wait_for(|n| *n > 0).await;
    }
    /// Let every write waiting here (and every later one) through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }
    async fn pass(&self) {
        self.reached.send_modify(|n| *n += 1);
        let mut rx = self.open.subscribe();
        let _ = rx.wait_for(|o| *o).await;
    }
}

/// Random transient and ambiguous failures of every write, for the chaos run.
#[derive(Debug, Clone, Copy)]
pub struct Chaos {
    /// Chance (0..=1) that a write fails before it is sent.
    pub fail: f64,
    /// Chance (0..=1) that a write applies and then reports an error.
    pub ambiguous: f64,
    pub seed: u64,
}

/// How many faults were injected, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    pub failed: usize,
    pub ambiguous: usize,
    pub held: usize,
    pub stopped: usize,
}

struct Rule {
    matching: Matching,
    fault: Fault,
    times: usize,
}

#[derive(Default)]
struct Counters {
    failed: AtomicUsize,
    ambiguous: AtomicUsize,
    held: AtomicUsize,
    stopped: AtomicUsize,
}

/// A [`Store`] that injects faults into chosen writes; reads pass through, unless told to
/// fail ([`FaultyStore::fail_reads`]), and the sizes of list reads are recorded.
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    rules: Mutex<Vec<Rule>>,
    chaos: Mutex<Option<(Chaos, u64)>>,
    counters: Counters,
    /// While set, reads of actions fail with this text.
    read_failure: Mutex<Option<String>>,
    /// While set, each `load` takes this long before it reads (a slow store).
    read_delay: Mutex<Option<std::time::Duration>>,
    /// How many records each `list` returned, in order.
    list_sizes: Mutex<Vec<usize>>,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        FaultyStore {
            inner,
            rules: Mutex::default(),
            chaos: Mutex::default(),
            counters: Counters::default(),
            read_failure: Mutex::default(),
            read_delay: Mutex::default(),
            list_sizes: Mutex::default(),
        }
    }

    /// While `Some`, `load` and `list` fail as `Unavailable` with this text (what an SDK error
    /// such as AccessDenied becomes); `None` lets them through again.
    pub fn fail_reads(&self, text: Option<&str>) {
        *self.read_failure.lock().expect("read failure lock") = text.map(str::to_owned);
    }

    /// While `Some`, every `load` of an action waits this long first; `None` reads at once.
    pub fn slow_loads(&self, delay: Option<std::time::Duration>) {
        *self.read_delay.lock().expect("read delay lock") = delay;
    }

    /// How many records each `list` returned since the last call, in order (then forgotten).
    pub fn take_list_sizes(&self) -> Vec<usize> {
        std::mem::take(&mut *self.list_sizes.lock().expect("list sizes lock"))
    }

    fn read_allowed(&self) -> StoreResult<()> {
        match self.read_failure.lock().expect("read failure lock").clone() {
            Some(text) => Err(StoreError::Unavailable(text)),
            None => Ok(()),
        }
    }

    /// Apply `fault` to the next `times` writes that match.
    pub fn inject(&self, matching: Matching, fault: Fault, times: usize) {
        self.rules.lock().expect("rules lock").push(Rule {
            matching,
            fault,
            times,
        });
    }

    /// Random faults on every write from now on (`None` to stop).
    pub fn chaos(&self, chaos: Option<Chaos>) {
        *self.chaos.lock().expect("chaos lock") = chaos.map(|c| (c, c.seed | 1));
    }

    /// Forget every rule (gates already reached stay as they are).
    pub fn clear(&self) {
        self.rules.lock().expect("rules lock").clear();
    }

    pub fn injected(&self) -> Injected {
        let c = &self.counters;
        Injected {
            failed: c.failed.load(Ordering::Relaxed),
            ambiguous: c.ambiguous.load(Ordering::Relaxed),
            held: c.held.load(Ordering::Relaxed),
            stopped: c.stopped.load(Ordering::Relaxed),
        }
    }

    fn fault_for(&self, write: Write, t: Option<Written<'_>>) -> Option<Fault> {
        let mut rules = self.rules.lock().expect("rules lock");
        if let Some(rule) = rules
            .iter_mut()
            .find(|r| r.times > 0 && r.matching.matches(write, t))
        {
            rule.times -= 1;
            return Some(rule.fault.clone());
        }
        let mut chaos = self.chaos.lock().expect("chaos lock");
        let (c, state) = chaos.as_mut()?;
        let roll = next_unit(state);
        if roll < c.fail {
            Some(Fault::Fail)
        } else if roll < c.fail + c.ambiguous {
            Some(Fault::Ambiguous)
        } else {
            None
        }
    }

    /// Run `send` (the real write) under the fault chosen for it.
    async fn write<T, F>(&self, write: Write, t: Option<Written<'_>>, send: F) -> StoreResult<T>
    where
        F: std::future::Future<Output = StoreResult<T>>,
    {
        let c = &self.counters;
        let injected = |what: &str| StoreError::Unavailable(format!("injected: {what}"));
        match self.fault_for(write, t) {
            None => send.await,
            Some(Fault::Fail) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
                Err(injected("the write failed before it was sent"))
            }
            Some(Fault::Ambiguous) => {
                c.ambiguous.fetch_add(1, Ordering::Relaxed);
                send.await?;
                Err(injected("the write applied but its answer was lost"))
            }
            Some(Fault::AppliedConflict) => {
                c.ambiguous.fetch_add(1, Ordering::Relaxed);
                send.await?;
                Err(StoreError::Conflict)
            }
            Some(Fault::HoldBefore(gate)) => {
                c.held.fetch_add(1, Ordering::Relaxed);
                gate.pass().await;
                send.await
            }
            Some(Fault::HoldAfter(gate)) => {
                c.held.fetch_add(1, Ordering::Relaxed);
                let result = send.await;
                gate.pass().await;
                result
            }
            Some(Fault::StopBefore) => {
                c.stopped.fetch_add(1, Ordering::Relaxed);
                std::future::pending().await
            }
            Some(Fault::StopAfter) => {
                c.stopped.fetch_add(1, Ordering::Relaxed);
                let _ = send.await;
                std::future::pending().await
            }
        }
    }
}

/// SplitMix64 → [0, 1): enough randomness for fault rolls, reproducible from the seed.
fn next_unit(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A clock running `skew` ahead of (or, negative, behind) another clock.
pub struct SkewedClock {
    inner: Arc<dyn Clock>,
    skew_ns: AtomicI64,
}

impl SkewedClock {
    pub fn new(inner: Arc<dyn Clock>, skew: SignedDuration) -> Self {
        let c = SkewedClock {
            inner,
            skew_ns: AtomicI64::new(0),
        };
        c.set_skew(skew);
        c
    }
    pub fn set_skew(&self, skew: SignedDuration) {
        let ns = i64::try_from(skew.as_nanos()).expect("a skew within ±292 years");
        self.skew_ns.store(ns, Ordering::SeqCst);
    }
}

impl Clock for SkewedClock {
    fn now(&self) -> Timestamp {
        let skew = SignedDuration::from_nanos(self.skew_ns.load(Ordering::SeqCst));
        let skewed = self
            .inner
            .now()
            .saturating_add(skew)
            .expect("a skewed instant in range");
        countersign::domain::time::micros(skewed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaos_rolls_are_uniform_enough_and_reproducible() {
        let (mut a, mut b) = (7u64, 7u64);
        let rolls: Vec<f64> = (0..10_000).map(|_| next_unit(&mut a)).collect();
        assert!(rolls.iter().all(|r| (0.0..1.0).contains(r)));
        let low = rolls.iter().filter(|r| **r < 0.1).count();
        assert!((800..1200).contains(&low), "{low}");
        assert_eq!(next_unit(&mut b), rolls[0]);
    }
}
