//! Refreshing the cache, against the scripted upstream: serve-stale (RFC
//! 8767), where answers with TTLs of 1-2 s stand in for time passing and a
//! silent upstream for a WAN that dropped, and prefetch.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::UdpSocket;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use common::*;
use simple_dns::{Packet, RCODE};

/// Extended DNS Error info codes in the answer's OPT (RFC 8914).
fn ede_codes(raw: &[u8]) -> Vec<u16> {
    let p = Packet::parse(raw).unwrap();
    p.opt()
        .map(|o| {
            o.opt_codes
                .iter()
                .filter(|c| c.code == 15 && c.data.len() >= 2)
                .map(|c| u16::from_be_bytes([c.data[0], c.data[1]]))
                .collect()
        })
        .unwrap_or_default()
}

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

#[test]
fn an_expired_answer_is_served_stale_once_the_client_has_waited() {
    let up = Upstream::start("192.0.2.7".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n");
    cached_then_expired(&gw, "ttl1.wan.example");
    up.behaviour.silent.store(true, SeqCst);
    let t = Instant::now();
    let r = udp_edns(gw.addr, "ttl1.wan.example", A, Some(1232));
    let waited = t.elapsed();
    assert_eq!(r.rcode, RCODE::NoError, "{r:?}");
    assert_eq!(r.answers, vec![(A, 30, "192.0.2.7".to_string())], "stale answer, TTL 30");
    assert_eq!(ede_codes(&r.raw), vec![3], "EDE 3, Stale Answer");
    // Not before the client's wait, and well before the upstream timeout.
    assert!(waited >= Duration::from_millis(450) && waited < Duration::from_millis(2500), "{waited:?}");
    // Without EDNS: the same answer, no OPT.
    let plain = udp(gw.addr, "ttl1.wan.example", A);
    assert_eq!(plain.answers, vec![(A, 30, "192.0.2.7".to_string())]);
    assert_eq!(plain.opt_size, None);
    assert_eq!(gw.report().counters.stale_served, 2);
}

#[test]
fn with_no_client_wait_it_answers_stale_at_once_and_refreshes_behind() {
    let up = Upstream::start("192.0.2.8".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '0'\n");
    cached_then_expired(&gw, "ttl1.now.example");
    up.behaviour.delay_ms.store(1000, SeqCst);
    let t = Instant::now();
    let r = udp_edns(gw.addr, "ttl1.now.example", A, Some(1232));
    assert!(t.elapsed() < Duration::from_millis(900), "did not wait for the delayed upstream");
    assert_eq!(r.answers[0].1, 30);
    assert_eq!(ede_codes(&r.raw), vec![3]);
    // The refresh went upstream behind the answer; once it is back the
    // name is fresh again.
    wait_for("the refresh", Duration::from_secs(5), || up.seen("ttl1.now.example") >= 2);
    assert_eq!(up.seen("ttl1.now.example"), 2);
    std::thread::sleep(Duration::from_millis(1200));
    up.behaviour.delay_ms.store(0, SeqCst);
    let fresh = udp_edns(gw.addr, "ttl1.now.example", A, Some(1232));
    assert!(fresh.answers[0].1 <= 1, "{fresh:?}");
    assert!(ede_codes(&fresh.raw).is_empty());
}

#[test]
fn past_stale_max_age_the_client_gets_servfail() {
    let up = Upstream::start("192.0.2.9".parse().unwrap());
    let gw = gateway(
        &up,
        "\toption stale_client_timeout '200ms'\n\toption stale_max_age '1'\n\toption upstream_timeout '300ms'\n",
    );
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
    let gw = gateway(&up, "\toption serve_stale '0'\n\toption upstream_timeout '300ms'\n");
    cached_then_expired(&gw, "ttl1.off.example");
    up.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "ttl1.off.example", A).rcode, RCODE::ServerFailure);
}

#[test]
fn a_servfail_is_never_served_stale_and_never_replaces_a_good_answer() {
    let up = Upstream::start("192.0.2.11".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '1s'\n");
    // A SERVFAIL is not cached, so there is nothing stale to serve for it.
    assert_eq!(udp(gw.addr, "servfail.x.example", A).rcode, RCODE::ServerFailure);
    std::thread::sleep(Duration::from_millis(100));
    up.behaviour.silent.store(true, SeqCst);
    let t = Instant::now();
    let r = udp_raw(gw.addr, &build_query(9, "servfail.x.example", A, None), Duration::from_secs(5)).unwrap();
    assert_eq!(Reply::parse(r).rcode, RCODE::ServerFailure);
    assert!(t.elapsed() >= Duration::from_secs(2), "it waited for the upstream, nothing stale to give");
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
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n");
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
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n");
    cached_then_expired(&gw, "ttl1.busy.example");
    up.behaviour.delay_ms.store(1500, SeqCst);
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
}

#[test]
fn after_a_failed_refresh_the_name_is_answered_stale_at_once_without_a_try() {
    let up = Upstream::start("192.0.2.14".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '300ms'\n\toption upstream_timeout '500ms'\n");
    cached_then_expired(&gw, "ttl1.down.example");
    up.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "ttl1.down.example", A).answers[0].1, 30);
    // Let the refresh time out.
    std::thread::sleep(Duration::from_millis(800));
    let tries = up.seen("ttl1.down.example");
    let t = Instant::now();
    for _ in 0..5 {
        assert_eq!(udp(gw.addr, "ttl1.down.example", A).answers[0].1, 30);
    }
    assert!(t.elapsed() < Duration::from_millis(1000), "answered without waiting: {:?}", t.elapsed());
    assert_eq!(up.seen("ttl1.down.example"), tries, "no upstream query while the name is held");
}

#[test]
fn a_tcp_client_gets_the_stale_answer_at_its_timeout_too() {
    let up = Upstream::start("192.0.2.15".parse().unwrap());
    let gw = gateway(&up, "\toption stale_client_timeout '500ms'\n");
    cached_then_expired(&gw, "ttl1.tcp.example");
    up.behaviour.delay_ms.store(1500, SeqCst);
    let t = Instant::now();
    let r = tcp(gw.addr, "ttl1.tcp.example", A);
    let waited = t.elapsed();
    assert_eq!(r.rcode, RCODE::NoError);
    assert_eq!(r.answers, vec![(A, 30, "192.0.2.15".to_string())]);
    // At the client's timeout, not the slow upstream's 1.5 s.
    assert!(waited >= Duration::from_millis(450) && waited < Duration::from_millis(1400), "{waited:?}");
    // The refresh went on behind the answer and stored the upstream's.
    wait_for("the refresh", Duration::from_secs(5), || gw.report().counters.forwarded >= 2);
    std::thread::sleep(Duration::from_millis(1500).saturating_sub(t.elapsed()) + Duration::from_millis(200));
    up.behaviour.silent.store(true, SeqCst);
    let fresh = tcp(gw.addr, "ttl1.tcp.example", A);
    assert_eq!(fresh.answers[0].1, 1, "the refreshed answer, from the cache: {fresh:?}");
    let c = gw.report().counters;
    assert_eq!((c.stale_served, c.failed, c.cached), (1, 0, 1));
}

#[test]
fn a_name_in_use_is_refreshed_once_before_it_expires_and_one_asked_once_is_not() {
    let up = Upstream::start("192.0.2.16".parse().unwrap());
    let gw = gateway(&up, "");
    let t0 = Instant::now();
    for name in ["ttl20.popular.example", "ttl20.once.example"] {
        assert_eq!(udp(gw.addr, name, A).answers.len(), 1);
    }
    // Asked again early in its TTL: a name in use.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(udp(gw.addr, "ttl20.popular.example", A).answers.len(), 1);
    assert_eq!(gw.report().counters.prefetched, 0, "not before the last tenth of the TTL");
    // In the last tenth (the last 2 s of 20, on a one-second clock).
    std::thread::sleep(Duration::from_millis(18_600).saturating_sub(t0.elapsed()));
    for name in ["ttl20.popular.example", "ttl20.once.example"] {
        let r = udp(gw.addr, name, A);
        assert!(r.answers[0].1 <= 2, "answered from the cache: {r:?}");
    }
    wait_for("the prefetch", Duration::from_secs(3), || up.seen("ttl20.popular.example") >= 2);
    assert_eq!(up.seen("ttl20.popular.example"), 2, "one refresh of the name in use");
    // Fresh once the reply is in (the upstream counts the query before it
    // answers), and refreshed once only.
    let mut fresh = udp(gw.addr, "ttl20.popular.example", A);
    wait_for("the fresh answer", Duration::from_secs(2), || {
        fresh = udp(gw.addr, "ttl20.popular.example", A);
        fresh.answers[0].1 >= 18
    });
    assert!(fresh.answers[0].1 >= 18, "{fresh:?}");
    assert_eq!(udp(gw.addr, "ttl20.popular.example", A).answers.len(), 1);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(up.seen("ttl20.popular.example"), 2);
    assert_eq!(up.seen("ttl20.once.example"), 1, "a name asked once is not prefetched");
    let stats = gw.report().counters;
    assert_eq!((stats.prefetched, stats.prefetch_skipped), (1, 0));
}
