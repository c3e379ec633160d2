//! What a scraper (or anyone allowed to connect) sends the metrics
//! listener: any bytes as the request head. Routed, never a panic; only a
//! GET of /metrics is served.
#![no_main]

use hydradns::metrics::http::{Route, route};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|head: &[u8]| {
    if route(head) == Route::Metrics {
        assert!(head.starts_with(b"GET /metrics"), "{:?}", String::from_utf8_lossy(head));
    }
});
