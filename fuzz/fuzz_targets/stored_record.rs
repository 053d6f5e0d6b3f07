//! The stored-record loader (SPEC §1.2, SC-EDGE-08): any bytes as an action record. Never a
//! panic; a record that loads stores and loads again, equal.
#![no_main]

use countersign::domain::Action;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(action) = Action::from_stored(bytes) {
        let again = Action::from_stored(&action.to_stored()).expect("its own form loads");
        assert_eq!(action, again);
    }
});
