//! What loading the configuration costs a cold start (the functions' init figure), with and
//! without the example policy's conditions, in process. The first load in a process pays every
//! one-time set-up it reaches (the CEL parser's among them), so this section runs before any
//! other that loads a configuration.

use countersign::config::{Conditions, Config};
use std::time::{Duration, Instant};

/// Later loads: the figure is the least of these many.
const REPEATS: usize = 20;

pub struct Load {
    pub first_without: Duration,
    /// Deferred: as the approve, cancel and resume functions load it.
    pub first_deferred: Duration,
    /// Compiled: as intake loads it.
    pub first_compiled: Duration,
    pub later_without: Duration,
    pub later_compiled: Duration,
}

pub fn measure() -> Load {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/local.toml");
    let with = std::fs::read_to_string(path).expect("config/local.toml");
    let without: String = with
        .lines()
        .filter(|l| !l.trim_start().starts_with("when = "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(without.len() < with.len(), "the example has conditions");
    let time = |text: &str, conditions| {
        let started = Instant::now();
        Config::from_toml_with(text, conditions).expect("the example loads");
        started.elapsed()
    };
    let least = |text: &str| {
        (0..REPEATS)
            .map(|_| time(text, Conditions::Compile))
            .min()
            .unwrap()
    };
    // In this order: each first load pays what the one before it had not reached.
    Load {
        first_without: time(&without, Conditions::Compile),
        first_deferred: time(&with, Conditions::Defer),
        first_compiled: time(&with, Conditions::Compile),
        later_without: least(&without),
        later_compiled: least(&with),
    }
}
