//! An upstream's reply through validation, TTL clamping, the CNAME-cloaking
//! and rebinding checks, the cache, and replay to a client.
#![no_main]

mod common;

use hydradns::cache::{self, MAX_KEY_LEN};
use hydradns::stats::Counters;
use hydradns::upstream::is_reply_to;
use hydradns::wire::{self, header, rtype};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|reply: &[u8]| {
    let engine = common::engine();
    let stats = Counters::default();
    let snap = engine.snapshot.load();
    let mut out = Vec::with_capacity(4096);
    // The reply's own question picks which of our queries it answers, so the
    // fuzzer can reach the checks past the question match.
    for (name, qtype) in [("www.example", rtype::A), ("app.example", rtype::AAAA), ("x.lan", rtype::A)] {
        let msg = common::query(name, qtype);
        let Ok(q) = wire::parse_query(&msg) else { continue };
        if reply.len() < wire::HEADER_LEN || !is_reply_to(reply, header::id(reply), &q) {
            continue;
        }
        let mut asked = [0u8; wire::MAX_NAME_LEN];
        let n = wire::reversed_key(q.qname, &mut asked);
        let Some(r) = engine.vet_reply(&q, &asked[..n], &snap, reply, "127.0.0.1:53".parse().unwrap(), &stats) else {
            continue;
        };
        let mut key = [0u8; MAX_KEY_LEN];
        let n = cache::key(&q, &mut key);
        let hash = snap.cache.hash(&key[..n]);
        snap.cache.insert(&key[..n], hash, &r.stored, snap.generation << 1);
        r.stored.write_answer(&q, 0, &mut out);
        assert_eq!(out[..2], msg[..2], "replayed with the client's ID");
        if let Some(hit) = snap.cache.find(&key[..n], hash, std::time::Instant::now(), 0) {
            hit.write_answer(&q, &mut out);
            assert_eq!(out[..2], msg[..2], "answered from the cache with the client's ID");
        }
    }
});
