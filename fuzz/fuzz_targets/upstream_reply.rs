//! An upstream's reply through validation, TTL clamping, the CNAME-cloaking
//! and rebinding checks, the cache, and replay to a client.
#![no_main]

mod common;

use hydradns::cache::{self, MAX_KEY_LEN};
use hydradns::policy::records::Local;
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
        let n = cache::key(&q, 0, &mut key);
        let hash = snap.cache.hash(&key[..n]);
        snap.cache.insert(&key[..n], hash, &r.stored, snap.generation << 1, snap.cache_sweep);
        r.stored.write_answer(&q, 0, &mut out);
        assert_eq!(out[..2], msg[..2], "replayed with the client's ID");
        // The same answer after a local alias's chain (web.lan CNAME
        // www.example): every name placed anew must parse.
        if name == "www.example" {
            let alias_q = common::query("web.lan", qtype);
            let Ok(aq) = wire::parse_query(&alias_q) else { continue };
            let mut chain = Vec::new();
            let mut folded = [0u8; MAX_KEY_LEN];
            let k = cache::key(&aq, 0, &mut folded);
            if let Local::Outside(alias) = snap.records.answer(&aq, &folded[..k - 5], &mut chain) {
                let mut spliced = Vec::new();
                alias.splice(&out, aq.edns, &mut spliced);
                assert_eq!(spliced[..2], alias_q[..2], "the alias's ID");
                same_names(&out, &spliced);
            }
        }
        if let Some(hit) = snap.cache.find(&key[..n], hash, std::time::Instant::now(), 0) {
            hit.write_answer(&q, &mut out);
            assert_eq!(out[..2], msg[..2], "answered from the cache with the client's ID");
        }
    }
});

/// Every answer and authority record `splice` copied from `inner` into
/// `spliced` (after the one-CNAME chain) owns the same name there, and a
/// CNAME points at the same name: the moved compression pointers land right.
fn same_names(inner: &[u8], spliced: &[u8]) {
    let [_, an, ns, _] = header::counts(inner);
    let [_, san, sns, _] = header::counts(spliced);
    if header::rcode(spliced) == 2 && san == 1 {
        return; // names it could not place: the chain and SERVFAIL
    }
    assert_eq!((san, sns), (an + 1, ns), "the chain, then every record");
    let (Some(a), Some(b)) = (wire::skip_name(inner, wire::HEADER_LEN), wire::skip_name(spliced, wire::HEADER_LEN))
    else {
        panic!("no question")
    };
    let (mut p, mut q) = (a + 4, wire::read_rr(spliced, b + 4).expect("the chain's CNAME").end);
    let (mut x, mut y) = ([0u8; wire::MAX_NAME_LEN], [0u8; wire::MAX_NAME_LEN]);
    for _ in 0..an + ns {
        let (r, t) =
            (wire::read_rr(inner, p).expect("inner record"), wire::read_rr(spliced, q).expect("copied record"));
        assert_eq!((r.rtype, r.end - p), (t.rtype, t.end - q), "same type and length");
        let (m, n) = (wire::name_key_at(inner, p, &mut x), wire::name_key_at(spliced, q, &mut y));
        assert_eq!(m.map(|m| x[..m].to_vec()), n.map(|n| y[..n].to_vec()), "same owner");
        if r.rtype == rtype::CNAME {
            let (m, n) =
                (wire::name_key_at(inner, r.rdata_pos, &mut x), wire::name_key_at(spliced, t.rdata_pos, &mut y));
            assert_eq!(m.map(|m| x[..m].to_vec()), n.map(|n| y[..n].to_vec()), "same CNAME target");
        }
        (p, q) = (r.end, t.end);
    }
}
