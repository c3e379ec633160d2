//! A config file through the UCI parser and the option checks: an error
//! names a line, never a panic.
#![no_main]

use hydradns::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = Config::parse("fuzz.conf", text) {
        assert!(e.to_string().starts_with("fuzz.conf:"), "{e}");
    }
});
