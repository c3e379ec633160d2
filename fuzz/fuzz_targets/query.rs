//! A client's message through the whole answer path: access check, parse,
//! policy, cache lookup, answer building and the size limit, from a LAN
//! client and from a trusted forwarder (loopback), whose EDNS Client Subnet
//! and MAC options name the client.
#![no_main]

mod common;

use std::time::Instant;

use hydradns::query::{Origin, Step, Transport};
use hydradns::stats::Counters;
use hydradns::wire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|msg: &[u8]| {
    let engine = common::engine();
    let stats = Counters::default();
    let mut out = Vec::with_capacity(4096);
    let proxy = std::net::IpAddr::from([127, 0, 0, 1]);
    for (client, transport) in
        [(common::CLIENT, Transport::Udp), (common::CLIENT, Transport::Tcp), (proxy, Transport::Udp)]
    {
        let origin = Origin { client, mac: None, received: Instant::now(), transport, safe_search: false };
        match engine.handle(msg, &origin, &mut out, &stats) {
            Step::Drop => continue,
            Step::Reply => {}
            // No network here: take the path an overloaded server takes.
            Step::Resolve(miss) => assert!(engine.refuse_miss(&miss, &mut out, &stats), "a client's miss is answered"),
            // The answer (stale or cached) is written already; the refresh answers no one.
            Step::Refresh(miss) => assert!(!engine.refuse_miss(&miss, &mut Vec::new(), &stats)),
        }
        assert!(out.len() >= wire::HEADER_LEN, "an answer shorter than a header");
        assert_eq!(out[..2], msg[..2], "the answer carries the query's ID");
        if transport == Transport::Udp {
            // A small query never becomes a large UDP answer.
            let limit = wire::parse_query(msg).map_or(wire::PLAIN_UDP_SIZE as usize, |q| q.udp_limit());
            assert!(out.len() <= limit, "{} bytes over UDP, limit {limit}", out.len());
        }
    }
});
