//! The config loader (SPEC §5): any TOML text. Never a panic: an error names the entry.
#![no_main]

use countersign::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(config) = Config::from_toml(text) {
        assert!(!config.tenants.is_empty());
    }
});
