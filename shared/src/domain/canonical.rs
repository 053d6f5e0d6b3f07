//! Canonical JSON and digests. serde_json's map is ordered by key (no `preserve_order`), so
//! serializing through `Value` yields one byte string per logical document.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Canonical bytes: keys sorted, no insignificant white space.
pub fn to_canonical<T: Serialize>(value: &T) -> Vec<u8> {
    let value = serde_json::to_value(value).expect("domain values serialize");
    serde_json::to_vec(&value).expect("a Value serializes")
}

/// `sha256:<hex>` of the canonical form.
pub fn digest<T: Serialize>(value: &T) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(to_canonical(value)))
    )
}

/// Plain hex sha256 of raw bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
