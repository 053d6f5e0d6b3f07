//! The one clock abstraction. The domain takes `now` as an argument; the engine asks a `Clock`.

use jiff::{SignedDuration, Timestamp};
use std::sync::Mutex;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// Wall-clock time.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// In whole microseconds: every time is written with six fraction digits (`domain::time`).
    fn now(&self) -> Timestamp {
        crate::domain::time::micros(Timestamp::now())
    }
}

/// A clock that moves only when told to: tests reach window edges without sleeping.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self(Mutex::new(start))
    }
    pub fn set(&self, at: Timestamp) {
        *self.0.lock().expect("clock lock") = at;
    }
    pub fn advance(&self, by: SignedDuration) {
        let mut now = self.0.lock().expect("clock lock");
        *now = now.saturating_add(by).expect("clock in range");
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().expect("clock lock")
    }
}
