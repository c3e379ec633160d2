//! The answer cache through the real binary: hits the upstream never sees,
//! TTLs counted down, negative caching, SERVFAIL not cached, TTL clamps,
//! and identical concurrent misses sent upstream once.
#![allow(clippy::unwrap_used)]

mod common;
use std::time::{Duration, Instant};

use common::*;
use simple_dns::RCODE;

#[test]
fn hit_is_not_forwarded_and_ttl_counts_down() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let asked = Instant::now();
    let first = udp(gw.addr, "ttl100.example", A);
    assert_eq!(first.answers[0].1, 100);
    assert_eq!(up.seen("ttl100.example"), 1);
    std::thread::sleep(Duration::from_millis(2100));
    // Different case, same entry: the client's spelling comes back.
    let hit = udp(gw.addr, "TTL100.Example", A);
    let between = asked.elapsed();
    assert_eq!(up.seen("ttl100.example"), 1, "the hit never reached the upstream");
    assert_eq!(hit.qname.as_deref(), Some("TTL100.Example"));
    assert_eq!(hit.ips(), ["192.0.2.1"]);
    // Counted down on the cache's one-second clock by at least the 2.1 s
    // slept, and by no more than the whole seconds the two queries spanned
    // (97..=98 when they took under 3 s, as on an idle machine).
    let ttl = hit.answers[0].1;
    let most = between.as_secs_f64().ceil() as u32;
    assert!((100 - most..=98).contains(&ttl), "TTL counted down by ~2 s, got {ttl} after {between:?}");
    // Key includes the type: AAAA is a separate miss.
    udp(gw.addr, "ttl100.example", AAAA);
    assert_eq!(up.seen("ttl100.example"), 2);
    let stats = gw.stats();
    assert_eq!((stats["cached"], stats["forwarded"]), (1, 2));
}

#[test]
fn entries_expire() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    // TTL 4: the second query is a hit if it comes within 3 s (the clock
    // ticks in whole seconds), however busy the machine.
    udp(gw.addr, "ttl4.example", A);
    udp(gw.addr, "ttl4.example", A);
    assert_eq!(up.seen("ttl4.example"), 1);
    std::thread::sleep(Duration::from_millis(5100));
    udp(gw.addr, "ttl4.example", A);
    assert_eq!(up.seen("ttl4.example"), 2, "expired entry is fetched again");
}

#[test]
fn negative_answers_cached_from_soa_and_servfail_not() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    for _ in 0..3 {
        let r = udp(gw.addr, "nx.example", A);
        assert_eq!(r.rcode, RCODE::NameError);
        assert_eq!(r.authority.len(), 1, "SOA kept for the client's own negative caching");
        assert!(r.authority[0].1 <= 60, "SOA TTL cut to the negative TTL (min of TTL and MINIMUM)");
        let r = udp(gw.addr, "nodata.example", A);
        assert_eq!((r.rcode, r.answers.len()), (RCODE::NoError, 0));
    }
    assert_eq!(up.seen("nx.example"), 1, "NXDOMAIN cached");
    assert_eq!(up.seen("nodata.example"), 1, "NODATA cached");
    for _ in 0..3 {
        assert_eq!(udp(gw.addr, "servfail.example", A).rcode, RCODE::ServerFailure);
    }
    assert_eq!(up.seen("servfail.example"), 3, "SERVFAIL never cached");
}

#[test]
fn min_and_max_ttl_clamp() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "\toption min_ttl '50'\n\toption max_ttl '200'\n"));
    assert_eq!(udp(gw.addr, "ttl5.example", A).answers[0].1, 50);
    assert_eq!(udp(gw.addr, "ttl5000.example", A).answers[0].1, 200);
    udp(gw.addr, "ttl5.example", A);
    assert_eq!(up.seen("ttl5.example"), 1, "raised TTL keeps the entry cached");
}

#[test]
fn cache_size_zero_disables_cache() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "\toption cache_size '0'\n"));
    udp(gw.addr, "a.example", A);
    udp(gw.addr, "a.example", A);
    assert_eq!(up.seen("a.example"), 2);
}

#[test]
fn identical_concurrent_misses_go_upstream_once() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    up.behaviour.delay_ms.store(300, std::sync::atomic::Ordering::SeqCst);
    let gw = Gateway::start(&config(&[&up], ""));
    let addr = gw.addr;
    // Separate sockets, so SO_REUSEPORT spreads them over both workers.
    let clients: Vec<_> = (0..20).map(|_| std::thread::spawn(move || udp(addr, "same.example", A))).collect();
    for c in clients {
        assert_eq!(c.join().unwrap().ips(), ["192.0.2.1"]);
    }
    assert_eq!(up.seen("same.example"), 1);
    let stats = gw.stats();
    assert_eq!(stats["forwarded"] + stats["coalesced"] + stats["cached"], 20, "{stats:?}");
    assert_eq!(stats["forwarded"], 1);
}
