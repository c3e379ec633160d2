//! Refreshing the cache, against the scripted upstream: serve-stale (RFC
//! 8767), where answers with TTLs of 1-2 s stand in for time passing and a
//! silent upstream for a WAN that dropped, and prefetch.
//!
//! A slow upstream is one that holds its answer until the test lets it go
//! (`Behaviour::hold`), not one that answers after some time: what a
//! client got while it was held shows it was not waited for, on any
//! machine. Where a bound on time remains, it is a fifth of the timeout it
//! shows was not waited out.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::UdpSocket;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use common::*;
use simple_dns::RCODE;

fn gateway(up: &Upstream, extra: &str) -> Gateway {
    Gateway::start(&config(&[up], &format!("\toption upstream_timeout '3s'\n{extra}")))
}

/// Caches `name` (TTL 1) and waits until it has expired.
fn cached_then_expired(gw: &Gateway, name: &str) {
    let r = udp_edns(gw.addr, name, A, Some(1232));
    assert_eq!(r.rcode, RCODE::NoError);
    assert_eq!(r.answers.len(), 1);
    std::thread::sleep(Duration::from_millis(2100));
}

/// Asks `name` (over TCP if `tcp`) until the answer is no longer the
/// stale one (TTL 30) a refresh in flight gives; the fresh answer and how
/// many stale ones the asking got.
fn until_fresh(gw: &Gateway, name: &str, tcp: bool) -> (Reply, u64) {
    let mut stale = 0;
    let mut fresh = None;
    wait_for("the refreshed answer", Duration::from_secs(10), || {
        let r = if tcp { common::tcp(gw.addr, name, A) } else { udp_edns(gw.addr, name, A, Some(1232)) };
        if r.answers.first().is_some_and(|a| a.1 == 30) {
            stale += 1;
            return false;
        }
        fresh = Some(r);
        true
    });
    (fresh.unwrap(), stale)
}

#[test]
fn an_expired_answer_is_served_stale_once_the_client_has_waited() {
    let up = Upstream::start("192.0.2.7".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n\toption upstream_timeout '10s'\n");
    cached_then_expired(&gw, "ttl1.wan.example");
    up.behaviour.silent.store(true, SeqCst);
    let t = Instant::now();
    let r = udp_edns(gw.addr, "ttl1.wan.example", A, Some(1232));
    let waited = t.elapsed();
    assert_eq!(r.rcode, RCODE::NoError, "{r:?}");
    assert_eq!(r.answers, vec![(A, 30, "192.0.2.7".to_string())], "stale answer, TTL 30");
    assert_eq!(ede_codes(&r.raw), vec![3], "EDE 3, Stale Answer");
    // Not before the client's wait, and within a fifth of the upstream timeout.
    assert!(waited >= Duration::from_millis(450) && waited < Duration::from_secs(2), "{waited:?}");
    // Without EDNS: the same answer, no OPT.
    let plain = udp(gw.addr, "ttl1.wan.example", A);
    assert_eq!(plain.answers, vec![(A, 30, "192.0.2.7".to_string())]);
    assert_eq!(plain.opt_size, None);
    assert_eq!(gw.report().counters.stale_served, 2);
}

#[test]
fn with_no_client_wait_it_answers_stale_at_once_and_refreshes_behind() {
    let up = Upstream::start("192.0.2.8".parse().unwrap());
    // A held refresh must not time out while the test looks: 10 s.
    let gw = gateway(&up, "\toption stale_client_timeout '0'\n\toption upstream_timeout '10s'\n");
    cached_then_expired(&gw, "ttl1.now.example");
    up.behaviour.hold.store(true, SeqCst);
    // Answered while the upstream holds its answer: it did not wait for it.
    let r = udp_edns(gw.addr, "ttl1.now.example", A, Some(1232));
    assert_eq!(r.answers[0].1, 30);
    assert_eq!(ede_codes(&r.raw), vec![3]);
    // The refresh went upstream behind the answer; once it is back the
    // name is fresh again (now with a TTL that outlives the asking).
    wait_for("the refresh", Duration::from_secs(10), || up.seen("ttl1.now.example") >= 2);
    assert_eq!(up.seen("ttl1.now.example"), 2);
    up.behaviour.ttl.store(300, SeqCst);
    up.behaviour.hold.store(false, SeqCst);
    let (fresh, _) = until_fresh(&gw, "ttl1.now.example", false);
    assert_eq!(fresh.answers[0].1, 300, "{fresh:?}");
    assert!(ede_codes(&fresh.raw).is_empty());
    assert_eq!(up.seen("ttl1.now.example"), 2, "one refresh");
}

#[test]
fn past_stale_max_age_the_client_gets_servfail() {
    let up = Upstream::start("192.0.2.9".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '200ms'\n\toption stale_max_age '1'\n");
    cached_then_expired(&gw, "ttl1.old.example");
    std::thread::sleep(Duration::from_millis(1100));
    up.behaviour.silent.store(true, SeqCst);
    let r = udp(gw.addr, "ttl1.old.example", A);
    assert_eq!(r.rcode, RCODE::ServerFailure);
    assert_eq!(gw.report().counters.stale_served, 0);
}

#[test]
fn serve_stale_off_gives_servfail() {
    let up = Upstream::start("192.0.2.10".parse().unwrap());
    let gw = gateway(&up, "\toption serve_stale '0'\n");
    cached_then_expired(&gw, "ttl1.off.example");
    up.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "ttl1.off.example", A).rcode, RCODE::ServerFailure);
}

#[test]
fn a_servfail_is_never_served_stale_and_never_replaces_a_good_answer() {
    let up = Upstream::start("192.0.2.11".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '1s'\n");
    // A SERVFAIL is not cached, so there is nothing stale to serve for it.
    // (Its miss left the in-flight table before the client had its answer.)
    assert_eq!(udp(gw.addr, "servfail.x.example", A).rcode, RCODE::ServerFailure);
    up.behaviour.silent.store(true, SeqCst);
    let t = Instant::now();
    let r = udp_raw(gw.addr, &build_query(9, "servfail.x.example", A, None), Duration::from_secs(5)).unwrap();
    assert_eq!(Reply::parse(r).rcode, RCODE::ServerFailure);
    assert!(t.elapsed() >= Duration::from_secs(2), "it waited for the upstream, nothing stale to give");
    assert_eq!(up.asked("servfail.x.example"), 2, "its own try, not the first one's outcome");
    // An upstream that answers SERVFAIL for a cached name: the stale answer.
    up.behaviour.silent.store(false, SeqCst);
    cached_then_expired(&gw, "ttl1.good.example");
    up.behaviour.rcode.store(2, SeqCst);
    let r = udp(gw.addr, "ttl1.good.example", A);
    assert_eq!(r.rcode, RCODE::NoError);
    assert_eq!(r.answers, vec![(A, 30, "192.0.2.11".to_string())]);
    // And again (held off the upstream now): still the good answer.
    assert_eq!(udp(gw.addr, "ttl1.good.example", A).answers[0].2, "192.0.2.11");
}

#[test]
fn nxdomain_after_an_outage_replaces_the_stale_answer() {
    let up = Upstream::start("192.0.2.12".parse().unwrap());
    // The NXDOMAIN comes at once: long before the client's 2 s wait.
    let gw = gateway(&up, "\toption stale_client_timeout '2s'\n");
    cached_then_expired(&gw, "ttl1.gone.example");
    up.behaviour.rcode.store(3, SeqCst);
    let r = udp(gw.addr, "ttl1.gone.example", A);
    assert_eq!(r.rcode, RCODE::NameError, "the upstream's answer, not the stale one");
    up.behaviour.silent.store(true, SeqCst);
    let again = udp(gw.addr, "ttl1.gone.example", A);
    assert_eq!(again.rcode, RCODE::NameError, "the NXDOMAIN is what is cached now");
    assert_eq!(gw.report().counters.stale_served, 0);
}

#[test]
fn many_clients_on_one_expired_name_make_one_upstream_query() {
    let up = Upstream::start("192.0.2.13".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n\toption upstream_timeout '10s'\n");
    cached_then_expired(&gw, "ttl1.busy.example");
    // Held until every client has its answer.
    up.behaviour.hold.store(true, SeqCst);
    let before = up.seen("ttl1.busy.example");
    let socks: Vec<UdpSocket> = (0..100).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
    for (i, s) in socks.iter().enumerate() {
        s.send_to(&build_query(1000 + i as u16, "ttl1.busy.example", A, None), gw.addr).unwrap();
    }
    let mut stale = 0;
    for s in &socks {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 1500];
        let n = s.recv(&mut buf).expect("every client is answered");
        let r = Reply::parse(buf[..n].to_vec());
        assert_eq!(r.rcode, RCODE::NoError);
        stale += (r.answers[0].1 == 30) as usize;
    }
    assert_eq!(stale, 100, "every client got the stale answer");
    assert_eq!(up.seen("ttl1.busy.example") - before, 1, "one refresh for them all");
    up.behaviour.hold.store(false, SeqCst);
}

#[test]
fn after_a_failed_refresh_the_name_is_answered_stale_at_once_without_a_try() {
    let up = Upstream::start("192.0.2.14".parse().unwrap());
    // The refresh fails (2 s) before the client's 5 s wait is up.
    let gw = gateway(&up, "\toption stale_client_timeout '5s'\n\toption upstream_timeout '2s'\n");
    cached_then_expired(&gw, "ttl1.down.example");
    up.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "ttl1.down.example", A).answers[0].1, 30);
    // The refresh timed out (the client had its answer as it did).
    wait_for("the refresh to time out", Duration::from_secs(10), || gw.report().upstreams[0].timeouts >= 1);
    let tries = up.asked("ttl1.down.example");
    assert_eq!(tries, 2, "the first answer and the refresh");
    for _ in 0..5 {
        // Not after the client's 5 s wait: within a fifth of it.
        let t = Instant::now();
        assert_eq!(udp(gw.addr, "ttl1.down.example", A).answers[0].1, 30);
        assert!(t.elapsed() < Duration::from_secs(1), "answered without waiting: {:?}", t.elapsed());
    }
    assert_eq!(up.asked("ttl1.down.example"), tries, "no upstream query while the name is held");
}

#[test]
fn a_tcp_client_gets_the_stale_answer_at_its_timeout_too() {
    let up = Upstream::start("192.0.2.15".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n\toption upstream_timeout '10s'\n");
    cached_then_expired(&gw, "ttl1.tcp.example");
    up.behaviour.hold.store(true, SeqCst);
    let t = Instant::now();
    let r = tcp(gw.addr, "ttl1.tcp.example", A);
    let waited = t.elapsed();
    assert_eq!(r.rcode, RCODE::NoError);
    // At the client's timeout, not the slow upstream's (it holds its answer still).
    assert_eq!(r.answers, vec![(A, 30, "192.0.2.15".to_string())]);
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
    // The refresh went on behind the answer and stored the upstream's
    // (with a TTL that outlives the asking); the upstream is then silent,
    // so what answers is the cache.
    wait_for("the refresh", Duration::from_secs(10), || gw.report().counters.forwarded >= 2);
    up.behaviour.ttl.store(300, SeqCst);
    up.behaviour.hold.store(false, SeqCst);
    up.behaviour.silent.store(true, SeqCst);
    let (fresh, stale_meanwhile) = until_fresh(&gw, "ttl1.tcp.example", true);
    assert_eq!(fresh.answers[0].1, 300, "the refreshed answer, from the cache: {fresh:?}");
    let c = gw.report().counters;
    assert_eq!((c.stale_served, c.failed, c.cached), (1 + stale_meanwhile, 0, 1));
}

/// With TTL 40 the last tenth is four ticks of the cache's one-second
/// clock: asked 36.5 s after it was stored, a name is surely in it (36 s
/// at least, since the entry went in before the first answer came), and
/// the query has 2.5 s to arrive before the entry could expire (39 s at
/// the earliest, the clock ticking at unlucky moments).
#[test]
fn a_name_in_use_is_refreshed_once_before_it_expires_and_one_asked_once_is_not() {
    let up = Upstream::start("192.0.2.16".parse().unwrap());
    let gw = gateway(&up, "");
    for name in ["ttl40.popular.example", "ttl40.once.example"] {
        assert_eq!(udp(gw.addr, name, A).answers.len(), 1);
    }
    let stored = Instant::now();
    // Asked again early in its TTL: a name in use.
    assert_eq!(udp(gw.addr, "ttl40.popular.example", A).answers.len(), 1);
    assert_eq!(gw.report().counters.prefetched, 0, "not before the last tenth of the TTL");
    std::thread::sleep(Duration::from_millis(36_500).saturating_sub(stored.elapsed()));
    for name in ["ttl40.popular.example", "ttl40.once.example"] {
        let r = udp(gw.addr, name, A);
        assert!(r.answers[0].1 <= 4, "answered from the cache: {r:?}");
    }
    wait_for("the prefetch", Duration::from_secs(10), || up.seen("ttl40.popular.example") >= 2);
    assert_eq!(up.seen("ttl40.popular.example"), 2, "one refresh of the name in use");
    // Fresh once the reply is in (the upstream counts the query before it
    // answers), and refreshed once only.
    let mut fresh = udp(gw.addr, "ttl40.popular.example", A);
    wait_for("the fresh answer", Duration::from_secs(10), || {
        fresh = udp(gw.addr, "ttl40.popular.example", A);
        fresh.answers[0].1 >= 36
    });
    assert!(fresh.answers[0].1 >= 36, "{fresh:?}");
    assert_eq!(udp(gw.addr, "ttl40.popular.example", A).answers.len(), 1);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(up.seen("ttl40.popular.example"), 2);
    assert_eq!(up.seen("ttl40.once.example"), 1, "a name asked once is not prefetched");
    let stats = gw.report().counters;
    assert_eq!((stats.prefetched, stats.prefetch_skipped), (1, 0));
}
