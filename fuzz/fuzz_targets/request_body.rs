//! The request body reader (SC-SEC-03): strict parse, then the intake request's shape. Never a
//! panic; an accepted body re-serializes to a body that is accepted again, equal.
#![no_main]

use countersign::api::{body::SubmitRequest, json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(value) = json::parse(bytes) else {
        return;
    };
    let again = json::parse(&serde_json::to_vec(&value).unwrap()).expect("its own output parses");
    assert_eq!(value, again);
    if let Ok(request) = serde_json::from_value::<SubmitRequest>(value) {
        let _ = request.into_submission();
    }
});
