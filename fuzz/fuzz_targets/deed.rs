//! Deed verification (SC-SEC-07): any bytes as a deed file, checked with a fixed key. Never a
//! panic, and nothing but a deed this key signed verifies.
#![no_main]

use countersign::domain::deed::{Deed, DeedKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let key = DeedKey::from_seed("fuzz", &[3; 32]).verifying_key();
    assert!(Deed::verify(bytes, &key).is_err(), "a forged deed verified");
});
