//! The EDNS options of a query from a trusted forwarder (dnsmasq's Client
//! Subnet and MAC options, RFC 7871): any option bytes, from any start.
//! A client named, none, or the query turned away as repeated; never a
//! panic, and a MAC is only ever six bytes read from the options.
#![no_main]

use hydradns::client::edns::{MAC_RAW, MAC_TEXT, named};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&start, rest)) = data.split_first() else { return };
    let start = usize::from(start).min(rest.len());
    if let Ok(n) = named(rest, start, rest.len()) {
        if n.mac.is_some() {
            let codes = rest[start..].windows(2).any(|w| {
                let c = u16::from_be_bytes([w[0], w[1]]);
                c == MAC_RAW || c == MAC_TEXT
            });
            assert!(codes, "a MAC without a MAC option");
        }
    }
    let _ = named(rest, 0, rest.len());
});
