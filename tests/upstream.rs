//! Forwarding through the real binary: failover, all upstreams down,
//! TCP retry on truncation, conditional forwarding, forged replies,
//! following resolv_file.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/http.rs"]
mod http;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use common::*;
use simple_dns::RCODE;

/// A plain upstream's AD bit was passed on to clients, though anyone on
/// the path can set it. Cleared unless `trust_upstream_ad` (dnsmasq's
/// `proxy-dnssec`); cached answers too.
#[test]
fn the_ad_bit_of_a_plain_upstream_is_passed_on_only_when_trusted() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    assert!(!answered_with_ad(gw.addr, "secure.example"), "from the upstream");
    assert!(!answered_with_ad(gw.addr, "secure.example"), "from the cache");
    drop(gw);
    let gw = Gateway::start(&config(&[&up], "\toption trust_upstream_ad '1'\n"));
    assert!(answered_with_ad(gw.addr, "secure.example"), "from the upstream");
    assert!(answered_with_ad(gw.addr, "secure.example"), "from the cache");
    assert!(!answered_with_ad(gw.addr, "plain.example"), "not set where the upstream did not");
}

#[test]
fn fails_over_to_the_next_upstream_and_sticks_with_it() {
    let dead = Upstream::start("192.0.2.1".parse().unwrap());
    dead.behaviour.silent.store(true, SeqCst);
    let live = Upstream::start("192.0.2.2".parse().unwrap());
    let gw = Gateway::start(&config(&[&dead, &live], "\toption upstream_timeout '1s'\n"));
    let t = Instant::now();
    assert_eq!(udp(gw.addr, "one.example", A).ips(), ["192.0.2.2"]);
    assert!(t.elapsed() >= Duration::from_millis(950), "first try waited for the silent server's timeout");
    assert_eq!((dead.asked("one.example"), gw.report().upstreams[0].timeouts), (1, 1));
    // The server that answered is tried first from now on: no more timeouts.
    assert_eq!(udp(gw.addr, "two.example", A).ips(), ["192.0.2.2"]);
    assert_eq!(dead.asked("two.example"), 0, "second query went straight to the live server");
    assert_eq!(gw.report().upstreams[0].timeouts, 1);
    assert_eq!(live.total(), 2);
}

#[test]
fn refused_port_fails_over_at_once() {
    // A port nobody listens on: ICMP port unreachable, no need to wait for a timeout.
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let live = Upstream::start("192.0.2.2".parse().unwrap());
    let gw = Gateway::start(&format!(
        "config hydradns\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '10s'\n\tlist upstream '{closed}'\n\tlist upstream '{}'\n",
        live.addr
    ));
    let t = Instant::now();
    assert_eq!(udp(gw.addr, "fast.example", A).ips(), ["192.0.2.2"]);
    // A fifth of the timeout: no scheduler delay comes near it.
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let closed = &gw.report().upstreams[0];
    assert_eq!((closed.errors, closed.timeouts), (1, 0), "the refusal ended the try: {closed:?}");
}

#[test]
fn all_upstreams_down_gives_servfail_in_bounded_time() {
    let a = Upstream::start("192.0.2.1".parse().unwrap());
    let b = Upstream::start("192.0.2.2".parse().unwrap());
    a.behaviour.silent.store(true, SeqCst);
    b.behaviour.silent.store(true, SeqCst);
    let gw = Gateway::start(&config(&[&a, &b], "\toption upstream_timeout '1s'\n"));
    let t = Instant::now();
    let r = udp(gw.addr, "down.example", A);
    assert_eq!(r.rcode, RCODE::ServerFailure);
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(1900), "2 × 1 s tries, took {took:?}");
    // Bounded: one try each, each ended by its timeout, and nothing more.
    assert_eq!((a.asked("down.example"), b.asked("down.example")), (1, 1));
    let timeouts: Vec<u64> = gw.report().upstreams.iter().map(|u| u.timeouts).collect();
    assert_eq!(timeouts, [1, 1]);
    // Back up: answers again, and the SERVFAIL was not cached.
    a.behaviour.silent.store(false, SeqCst);
    b.behaviour.silent.store(false, SeqCst);
    let r = udp(gw.addr, "down.example", A);
    assert_eq!(r.rcode, RCODE::NoError);
    assert_eq!(gw.stats()["failed"], 1);
}

#[test]
fn a_dead_upstream_is_skipped_once_down_while_another_answers() {
    let a = Upstream::start("192.0.2.1".parse().unwrap());
    let b = Upstream::start("192.0.2.2".parse().unwrap());
    a.behaviour.silent.store(true, SeqCst);
    b.behaviour.silent.store(true, SeqCst);
    let gw = Gateway::start(&config(&[&a, &b], "\toption upstream_timeout '1s'\n"));
    // Three misses in a row, each trying both: both down.
    for name in ["d1.example", "d2.example", "d3.example"] {
        assert_eq!(udp(gw.addr, name, A).rcode, RCODE::ServerFailure);
    }
    let r = gw.report();
    assert!(r.upstreams.iter().all(|u| u.down), "{:?}", r.upstreams);
    // Everything down: all are still tried, and the one that answers is up again.
    b.behaviour.silent.store(false, SeqCst);
    assert_eq!(udp(gw.addr, "d4.example", A).ips(), ["192.0.2.2"]);
    let r = gw.report();
    assert_eq!((r.upstreams[0].down, r.upstreams[1].down), (true, false));
    let a_timeouts = r.upstreams[0].timeouts;
    // The live one misses a reply: the down one is not tried behind it.
    b.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "d5.example", A).rcode, RCODE::ServerFailure);
    assert_eq!((a.asked("d5.example"), b.asked("d5.example")), (0, 1), "one try, not two");
    assert_eq!(gw.report().upstreams[0].timeouts, a_timeouts, "the down server was skipped");
}

#[test]
fn random_strategy_spreads_misses_over_the_upstreams() {
    let a = Upstream::start("192.0.2.1".parse().unwrap());
    let b = Upstream::start("192.0.2.2".parse().unwrap());
    let gw = Gateway::start(&config(&[&a, &b], "\toption upstream_strategy 'random'\n"));
    for i in 0..40 {
        assert_eq!(udp(gw.addr, &format!("r{i}.example"), A).rcode, RCODE::NoError);
    }
    assert_eq!(a.total() + b.total(), 40);
    assert!(a.total() >= 5 && b.total() >= 5, "{} / {}", a.total(), b.total());
}

#[test]
fn parallel_strategy_answers_as_fast_as_the_live_upstream_beside_a_dead_one() {
    let dead = Upstream::start("192.0.2.1".parse().unwrap());
    dead.behaviour.silent.store(true, SeqCst);
    let live = Upstream::start("192.0.2.2".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&dead, &live],
        "\toption upstream_strategy 'parallel'\n\toption upstream_timeout '5s'\n",
    ));
    // Each answer within a fifth of the dead one's timeout, and that try
    // dropped, not waited out (a try waited out counts a timeout).
    for i in 0..10 {
        let t = Instant::now();
        assert_eq!(udp(gw.addr, &format!("p{i}.example"), A).ips(), ["192.0.2.2"]);
        assert!(t.elapsed() < Duration::from_secs(1), "query {i} waited for the dead one: {:?}", t.elapsed());
    }
    // The async path (TCP clients) races the two the same way.
    let t = Instant::now();
    assert_eq!(tcp(gw.addr, "p-tcp.example", A).ips(), ["192.0.2.2"]);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(live.total(), 11);
    // Both were asked for every UDP client's name (one flush sends both;
    // the dead one may read its last a moment after the answer). The async
    // path sends the second try when it first polls it, after the first:
    // on a busy machine the live one's answer may be in by then, and the
    // dead one is rightly never asked.
    let asked = |dead: &Upstream| (0..10).map(|i| dead.asked(&format!("p{i}.example"))).collect::<Vec<_>>();
    wait_for("the dead upstream's count", Duration::from_secs(10), || asked(&dead) == [1; 10]);
    assert_eq!(gw.report().upstreams[0].timeouts, 0, "no try of the dead one was waited out");
}

#[test]
fn parallel_strategy_asks_both_upstreams_and_takes_the_first_answer() {
    let a = Upstream::start("192.0.2.1".parse().unwrap());
    let b = Upstream::start("192.0.2.2".parse().unwrap());
    // The slower one answers after 3 s: the first answer comes within a fifth of that.
    b.behaviour.delay_ms.store(3000, SeqCst);
    let gw =
        Gateway::start(&config(&[&a, &b], "\toption upstream_strategy 'parallel'\n\toption upstream_timeout '5s'\n"));
    for i in 0..5 {
        let t = Instant::now();
        assert_eq!(udp(gw.addr, &format!("both{i}.example"), A).ips(), ["192.0.2.1"]);
        assert!(t.elapsed() < Duration::from_millis(600), "{:?}", t.elapsed());
    }
    assert_eq!(a.total(), 5);
    // Both were sent at once, but the slower one may count its last a moment after the answer.
    wait_for("the slower upstream's count", Duration::from_secs(10), || b.total() >= 5);
    assert_eq!(b.total(), 5, "the slower one was asked too");
}

#[test]
fn truncated_upstream_reply_is_retried_over_tcp() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    // 100 A records: the fake upstream sets TC over UDP and sends all over TCP.
    let r = tcp(gw.addr, "huge.example", A);
    assert_eq!(r.answers.len(), 100);
    assert_eq!(up.seen_tcp("huge.example"), 1);
    // Over UDP the client gets TC and no records (too big for 1232)...
    let r = udp_edns(gw.addr, "huge.example", A, Some(1232));
    assert!(r.truncated && r.answers.is_empty());
    // ...and its TCP retry is served from the cache.
    assert_eq!(tcp(gw.addr, "huge.example", A).answers.len(), 100);
    assert_eq!(up.seen("huge.example"), 2, "one UDP try, one TCP retry, then cached");
}

#[test]
fn conditional_forwarding_by_domain() {
    let general = Upstream::start("192.0.2.1".parse().unwrap());
    let lan = Upstream::start("10.0.0.1".parse().unwrap());
    let rev = Upstream::start("10.0.0.2".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&general],
        &format!(
            "config forward\n\toption domain 'lan'\n\tlist server '{}'\n\
             config forward\n\tlist domain '168.192.in-addr.arpa'\n\tlist domain 'special.lan'\n\tlist server '{}'\n",
            lan.addr, rev.addr
        ),
    ));
    assert_eq!(udp(gw.addr, "nas.lan", A).ips(), ["10.0.0.1"]);
    assert_eq!(udp(gw.addr, "LAN", A).ips(), ["10.0.0.1"]);
    assert_eq!(udp(gw.addr, "x.special.lan", A).ips(), ["10.0.0.2"], "most specific rule wins");
    assert_eq!(udp(gw.addr, "5.1.168.192.in-addr.arpa", A).ips(), ["10.0.0.2"]);
    assert_eq!(udp(gw.addr, "notlan", A).ips(), ["192.0.2.1"]);
    assert_eq!(udp(gw.addr, "example.com", A).ips(), ["192.0.2.1"]);
    assert_eq!((general.total(), lan.total(), rev.total()), (2, 2, 2));
}

#[test]
fn forged_and_stray_replies_are_ignored() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    // The fake upstream first sends a wrong-ID reply, a reply to another
    // question (6.6.6.6) and garbage, then the real answer.
    let r = udp(gw.addr, "spoof.example", A);
    assert_eq!(r.ips(), ["192.0.2.1"]);
    gw.signal("USR1");
    assert!(gw.wait_log("mismatched=3", Duration::from_secs(30)), "{}", gw.log());
}

/// Misses beyond `forward_max` are answered SERVFAIL at once and counted,
/// not queued: the server's counters account for every query sent.
#[test]
fn misses_beyond_forward_max_are_refused_and_counted() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    up.behaviour.silent.store(true, SeqCst);
    let gw = Gateway::start(&config(&[&up], "\toption forward_max '5'\n\toption upstream_timeout '5s'\n"));
    let addr = gw.addr;
    let ask = move |i: usize| {
        std::thread::spawn(move || {
            let id = 0x4d00 + i as u16;
            let r = udp_raw(addr, &build_query(id, &format!("m{i}.example"), A, None), Duration::from_secs(20));
            (i, Reply::parse(r.unwrap_or_else(|| panic!("no answer for m{i}"))).rcode, Instant::now())
        })
    };
    let first: Vec<_> = (0..5).map(ask).collect();
    // The first five are in flight (the upstream has them) before the rest arrive.
    wait_for("the first five upstream", Duration::from_secs(10), || up.asked_total() == 5);
    let rest: Vec<_> = (5..20).map(ask).collect();
    let rest: Vec<_> = rest.into_iter().map(|c| c.join().unwrap()).collect();
    let first: Vec<_> = first.into_iter().map(|c| c.join().unwrap()).collect();
    // Refused at once, not queued: every one of the rest was answered
    // before any of the first five timed out and freed a place.
    let first_freed = first.iter().map(|r| r.2).min().unwrap();
    for (i, rcode, at) in first.iter().chain(&rest) {
        assert_eq!(*rcode, RCODE::ServerFailure, "m{i}");
        if *i >= 5 {
            assert!(*at < first_freed, "m{i} refused at once, not queued");
        }
    }
    let s = gw.stats();
    assert_eq!((s["forwarded"], s["overloaded"], s["failed"]), (5, 15, 5), "{s:?}");
    assert_eq!(s["udp_queries"], 20);
}

/// RFC 3597: a type the gateway has never heard of is still forwarded and answered.
#[test]
fn unknown_record_types_are_forwarded() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    for t in [99u16, 65280] {
        // simple-dns cannot parse these either, so check the answer's bytes.
        let mut q = build_query(0x7777, "private-type.example", A, None);
        let at = q.len() - 4;
        q[at..at + 2].copy_from_slice(&t.to_be_bytes());
        let r = udp_raw(gw.addr, &q, Duration::from_secs(3)).expect("an answer");
        assert_eq!((r[0], r[1], r[2] & 0x80, r[3] & 0x0f), (0x77, 0x77, 0x80, 0), "type {t}: NOERROR");
        assert_eq!(&r[r.len() - 4..r.len() - 2], &t.to_be_bytes(), "question echoed");
    }
    assert_eq!(up.seen("private-type.example"), 2);
}

/// Replaces `path` as netifd does: a temporary file renamed over it.
fn write_like_netifd(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn a_rewritten_resolv_file_brings_its_upstreams_and_retries_only_failed_downloads() {
    use http::{HttpServer, Route, list_body};
    if !is_root() {
        eprintln!("skipped: needs root, for upstreams on port 53 (a resolv.conf names no port)");
        return;
    }
    // Two "WAN resolvers" on port 53 of addresses of 127/8 nobody else uses.
    let net = 100 + std::process::id() % 100;
    let wan1 = Upstream::start_on(format!("127.1.{net}.1:53").parse().unwrap(), "192.0.2.1".parse().unwrap());
    let wan2 = Upstream::start_on(format!("127.1.{net}.2:53").parse().unwrap(), "192.0.2.2".parse().unwrap());
    let web = HttpServer::start();
    web.set("/good.txt", Route::List { body: list_body(50, "good.example"), etag: "\"g\"".into() });
    web.set("/late.txt", Route::Status(503));
    web.set("/later.txt", Route::Status(503));
    let lists: String = ["good", "late", "later"]
        .iter()
        .map(|n| format!("config blocklist\n\toption name '{n}'\n\toption url '{}'\n", web.url(&format!("/{n}.txt"))))
        .collect();
    // As on a router at boot: the WAN's file exists and is empty.
    let text = format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '500ms'\n\
         \toption resolv_file '@DIR@/resolv.conf.d/resolv.conf.auto'\n\toption list_dir '@DIR@/lists'\n{lists}"
    );
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("resolv.conf.d")).unwrap();
    let resolv = dir.file("resolv.conf.d/resolv.conf.auto", "");
    let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let g = Gateway::start_with(dir, config);
    assert!(g.log().contains("(from built-in fallback)"), "{}", g.log());
    wait_for("the first downloads", Duration::from_secs(10), || g.log().matches("download failed").count() == 2);
    assert!(g.log().contains("list 'good': updated"), "{}", g.log());
    let good_hits = web.hits("/good.txt");

    // The WAN comes up: its resolvers are used at once, the list that
    // failed is fetched, the good one is left alone.
    web.set("/late.txt", Route::List { body: list_body(50, "late.example"), etag: "\"l\"".into() });
    write_like_netifd(&resolv, &format!("# Interface wan\nnameserver 127.1.{net}.1\n"));
    wait_for("the new upstreams", Duration::from_secs(10), || {
        g.log().contains(&format!("upstreams now 127.1.{net}.1:53 (from "))
    });
    wait_for("the late list", Duration::from_secs(10), || udp(g.addr, "h1.late.example", 1).ips() == ["0.0.0.0"]);
    assert_eq!(udp(g.addr, "one.example", 1).ips(), ["192.0.2.1"]);
    assert_eq!(wan1.seen("one.example"), 1);
    assert_eq!(web.hits("/good.txt"), good_hits, "a good list is not downloaded again");

    // A new lease with other resolvers.
    write_like_netifd(&resolv, &format!("nameserver 127.1.{net}.2\n"));
    wait_for("the second upstreams", Duration::from_secs(10), || {
        g.log().contains(&format!("upstreams now 127.1.{net}.2:53 (from "))
    });
    assert_eq!(udp(g.addr, "two.example", 1).ips(), ["192.0.2.2"]);
    assert_eq!((wan1.seen("two.example"), wan2.seen("two.example")), (0, 1));

    // SIGUSR2 (the WAN's interface trigger) retries what still failed, and only that.
    let later_hits = web.hits("/later.txt");
    web.set("/later.txt", Route::List { body: list_body(50, "later.example"), etag: "\"x\"".into() });
    g.signal("USR2");
    wait_for("the later list", Duration::from_secs(10), || udp(g.addr, "h1.later.example", 1).ips() == ["0.0.0.0"]);
    assert_eq!(web.hits("/later.txt"), later_hits + 1);
    assert_eq!(web.hits("/good.txt"), good_hits);
    assert_eq!(web.hits("/late.txt"), 2, "one failure, one success");
}

/// `list fallback`: asked only when every upstream failed (silent, or
/// SERVFAIL), in order; while an upstream answers, never; a warning says
/// so, and the fallback's answers are counted under its address.
#[test]
fn a_fallback_is_asked_only_when_every_upstream_failed() {
    let up1 = Upstream::start("192.0.2.1".parse().unwrap());
    let up2 = Upstream::start("192.0.2.2".parse().unwrap());
    let fb = Upstream::start("192.0.2.9".parse().unwrap());
    let gw = Gateway::start(&config(&[&up1, &up2], &format!("\tlist fallback '{}'\n", fb.addr)));
    assert_eq!(udp(gw.addr, "a.example", A).ips(), ["192.0.2.1"]);
    up1.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "b.example", A).ips(), ["192.0.2.2"]);
    assert_eq!(fb.total(), 0, "an upstream answered: the fallback is not asked");

    // (A silent server logs nothing; a SERVFAIL one shows it was asked.)
    up1.behaviour.silent.store(false, SeqCst);
    up1.behaviour.rcode.store(2, SeqCst);
    up2.behaviour.rcode.store(2, SeqCst);
    assert_eq!(udp(gw.addr, "c.example", A).ips(), ["192.0.2.9"]);
    assert_eq!((up1.seen("c.example"), up2.seen("c.example"), fb.seen("c.example")), (1, 1, 1));
    // The TCP clients' path (the async driver) alike.
    assert_eq!(tcp(gw.addr, "c2.example", A).ips(), ["192.0.2.9"]);
    assert!(gw.wait_log("answered by fallback", Duration::from_secs(30)), "{}", gw.log());
    let r = gw.report();
    let fallback = r.upstreams.iter().find(|u| u.addr == fb.addr.to_string()).unwrap();
    assert_eq!(fallback.answers, 2);

    // Upstreams back: the fallback rests.
    up1.behaviour.rcode.store(0, SeqCst);
    up2.behaviour.rcode.store(0, SeqCst);
    for i in 0..5 {
        assert_eq!(udp(gw.addr, &format!("d{i}.example"), A).ips().len(), 1);
    }
    assert_eq!(fb.total(), 2);

    // Without one, every upstream failing is SERVFAIL, as before.
    let gw = Gateway::start(&config(&[&up2], ""));
    up2.behaviour.rcode.store(2, SeqCst);
    assert_eq!(udp(gw.addr, "e.example", A).rcode, RCODE::ServerFailure);
}

/// A silent upstream and one that refuses us were never logged: the user
/// saw SERVFAIL and nothing in the log. Going down (three tries in a row
/// without an answer) and coming back are logged once each; a refusal at
/// most once a minute.
#[test]
fn a_silent_or_refusing_upstream_is_logged() {
    let up = Upstream::start("192.0.2.7".parse().unwrap());
    up.behaviour.silent.store(true, SeqCst);
    let gw = Gateway::start(&config(&[&up], ""));
    for i in 0..3 {
        assert_eq!(udp(gw.addr, &format!("silent-{i}.example"), A).rcode, RCODE::ServerFailure);
    }
    let down = format!("upstream {}: no answer to 3 tries in a row (timed out)", up.addr);
    assert!(gw.wait_log(&down, Duration::from_secs(10)), "{}", gw.log());
    up.behaviour.silent.store(false, SeqCst);
    // Every server down: the resolution tries them anyway, and the answer brings it back.
    assert_eq!(udp(gw.addr, "back.example", A).ips(), ["192.0.2.7"]);
    assert!(gw.wait_log(&format!("upstream {}: answers again", up.addr), Duration::from_secs(10)), "{}", gw.log());
    up.behaviour.rcode.store(5, SeqCst); // REFUSED
    for i in 0..3 {
        let _ = udp(gw.addr, &format!("refused-{i}.example"), A);
    }
    let refused = format!("upstream {}: answered REFUSED", up.addr);
    assert!(gw.wait_log(&refused, Duration::from_secs(10)), "{}", gw.log());
    assert_eq!(gw.log().matches(&refused).count(), 1, "once a minute at most");
    assert_eq!(gw.log().matches(&down).count(), 1, "once per outage");
}
