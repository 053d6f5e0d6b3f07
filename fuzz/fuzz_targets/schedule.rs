//! The schedule parser (SC-INT-02): `not_before` and `not_after` as any text (split at the
//! first newline). Never a panic; an accepted window respects every rule.
#![no_main]

use countersign::domain::{window::WindowRules, Window};
use jiff::Timestamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let (before, after) = text.split_once('\n').unwrap_or((text, ""));
    let now: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
    let rules = WindowRules::default();
    if let Ok(w) = Window::requested(Some(before), Some(after), now, rules) {
        assert!(w.not_after.duration_since(w.not_before) >= rules.min_width);
        assert!(w.not_after > now);
        assert!(w.not_after.duration_since(now) <= rules.max_ahead);
    }
});
