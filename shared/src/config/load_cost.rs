//! What loading the configuration costs a cold start (the Lambda functions' init figure in
//! BENCHMARKS.md), with and without the example policy's conditions. Not a test of behaviour;
//! run optimized: `cargo test -p countersign --profile bench --lib load_cost -- --ignored --nocapture`

use super::{Conditions, Config};
use std::time::Instant;

#[test]
#[ignore = "a measurement: run it optimized, by hand"]
fn config_load_cost() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/local.toml");
    let with = std::fs::read_to_string(path).expect("config/local.toml");
    let without: String = with
        .lines()
        .filter(|l| !l.trim_start().starts_with("when = "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(without.len() < with.len(), "the example has conditions");
    let time_with = |text: &str, conditions| {
        let started = Instant::now();
        Config::from_toml_with(text, conditions).expect("the example loads");
        started.elapsed()
    };
    let time = |text: &str| time_with(text, Conditions::Compile);
    // The first load in the process pays every one-time initialisation it reaches.
    println!("first load, no conditions: {:?}", time(&without));
    let deferred = time_with(&with, Conditions::Defer);
    println!("first load with the conditions deferred (approve, cancel, resume): {deferred:?}");
    println!(
        "first load with the conditions compiled (intake): {:?}",
        time(&with)
    );
    let repeat = |text: &str| (0..20).map(|_| time(text)).min().unwrap();
    println!(
        "later loads, no conditions (min of 20): {:?}",
        repeat(&without)
    );
    println!(
        "later loads with the conditions (min of 20): {:?}",
        repeat(&with)
    );
}
