//! Encrypted upstreams through the real binary: DNS over TLS to the real
//! Unbound and dnsdist (servers no one here wrote) in front of the tests'
//! fake upstream, and to a scripted DoT server for what they cannot be
//! made to do on demand; DNS over HTTPS to Unbound (HTTP/2 only), dnsdist
//! (h2o) and nginx in front of dnsdist (HTTP/1.1 or HTTP/2, ending
//! connections after a few requests, and paths that answer with HTML or 404).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/dot.rs"]
mod dot;
#[path = "common/nginx.rs"]
mod nginx;

use std::net::Ipv4Addr;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use common::*;
use dot::{Dnsdist, EndlessDoh, ScriptedDot, Unbound, mode};
use nginx::{Front, Nginx};
use simple_dns::RCODE;

/// A gateway whose one upstream is `upstream`, trusting the test CA. A
/// 5 s upstream timeout: a handshake and an answer on a busy machine fit
/// in it, and no test here waits for it but the silent server's.
fn gateway(upstream: &str, extra: &str) -> Gateway {
    Gateway::start(&format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '5s'\n\
         \tlist upstream '{upstream}'\n\toption ca_file '{ca}'\n{extra}",
        ca = tls_dir().join("ca.pem").display()
    ))
}

/// The first encrypted upstream in `stats`.
fn upstream_report(g: &Gateway) -> hydradns::stats::UpstreamReport {
    g.report().upstreams.into_iter().find(|u| u.transport != "udp").expect("an encrypted upstream in stats")
}

/// 20 names one after another (every fourth over TCP), each answered with
/// `ip` and seen once by `backend` (through the server under test).
fn one_by_one(g: &Gateway, backend: &Upstream, label: &str, ip: &str) {
    for i in 0..20 {
        let name = format!("n{i}.{label}.example");
        let r = if i % 4 == 0 { tcp(g.addr, &name, A) } else { udp(g.addr, &name, A) };
        assert_eq!((r.rcode, r.ips()), (RCODE::NoError, vec![ip.to_string()]), "{name}");
        assert_eq!(backend.seen(&name), 1, "{name} went through the server to the backend");
    }
}

/// `threads` clients at once, `each` names apiece (every fifth over TCP),
/// all answered with `ip`.
fn many_at_once(g: &Gateway, prefix: &str, threads: usize, each: usize, ip: &'static str) {
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let (addr, prefix) = (g.addr, prefix.to_string());
            std::thread::spawn(move || {
                for i in 0..each {
                    let name = format!("{prefix}{t}-{i}.example");
                    let r = if i % 5 == 0 { tcp(addr, &name, A) } else { udp(addr, &name, A) };
                    assert_eq!(r.ips(), [ip], "{name}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn unbound_over_tls_answers_on_one_connection() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 3));
    let unbound = Unbound::start(backend.addr, "");
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", unbound.addr.port()), "");
    one_by_one(&g, &backend, "dot", "192.0.2.3");
    // Many at once: pipelined on the one connection.
    many_at_once(&g, "p", 16, 10, "192.0.2.3");
    let u = upstream_report(&g);
    assert_eq!(u.addr, format!("tls://localhost:{}", unbound.addr.port()));
    assert_eq!((u.state.as_str(), u.handshakes, u.answers), ("connected", 1, 180), "{u:?}");
    assert_eq!((u.timeouts, u.errors), (0, 0));
    let text = g.log();
    assert!(!text.contains("WARN"), "{text}");
}

#[test]
fn dnsdist_over_tls_answers_on_one_connection() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 9));
    let dnsdist = Dnsdist::start(backend.addr);
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", dnsdist.addr.port()), "");
    many_at_once(&g, "dd", 8, 10, "192.0.2.9");
    assert_eq!(backend.seen("dd3-7.example"), 1, "went through dnsdist to the backend");
    let u = upstream_report(&g);
    assert_eq!((u.state.as_str(), u.handshakes, u.answers, u.errors), ("connected", 1, 80, 0), "{u:?}");
}

/// An encrypted upstream's AD bit is passed on by default: its channel
/// is authenticated (a plain one's is cleared: `tests/upstream.rs`).
#[test]
fn the_ad_bit_of_an_encrypted_upstream_is_passed_on() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 9));
    let dnsdist = Dnsdist::start(backend.addr);
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", dnsdist.addr.port()), "");
    assert!(answered_with_ad(g.addr, "secure.example"));
    assert!(!answered_with_ad(g.addr, "plain.example"));
}

#[test]
fn the_name_is_found_through_bootstrap_only() {
    // The bootstrap resolver says localhost is 127.0.0.1; no client query goes to it.
    let bootstrap = Upstream::start(Ipv4Addr::LOCALHOST);
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 4));
    let unbound = Unbound::start(backend.addr, "");
    let g = gateway(
        &format!("tls://localhost:{}", unbound.addr.port()),
        &format!("\tlist bootstrap '{}'\n", bootstrap.addr),
    );
    assert_eq!(udp(g.addr, "via-bootstrap.example", A).ips(), ["192.0.2.4"]);
    assert!(bootstrap.seen("localhost") >= 1);
    assert_eq!(bootstrap.seen("via-bootstrap.example"), 0, "a client's name never goes to bootstrap");
    assert!(g.log().contains("bootstrap resolvers"), "{}", g.log());
}

#[test]
fn a_certificate_for_another_name_is_refused_and_fallback_only_when_configured() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 5));
    let unbound = Unbound::start(backend.addr, "");
    let spec = format!("tls://wrong.example:{}#127.0.0.1", unbound.addr.port());
    let g = gateway(&spec, "");
    assert_eq!(udp(g.addr, "refused.example", A).rcode, RCODE::ServerFailure);
    assert_eq!(backend.seen("refused.example"), 0);
    assert!(g.wait_log("certificate refused", Duration::from_secs(30)), "{}", g.log());
    let u = upstream_report(&g);
    assert_eq!((u.state.as_str(), u.handshakes), ("failed", 0), "{u:?}");
    assert!(u.errors >= 1);
    drop(g);

    let fallback = Upstream::start(Ipv4Addr::new(198, 51, 100, 7));
    let g = gateway(&spec, &format!("\tlist fallback '{}'\n", fallback.addr));
    assert_eq!(udp(g.addr, "falls-back.example", A).ips(), ["198.51.100.7"]);
    assert_eq!(fallback.seen("falls-back.example"), 1);
    assert!(g.wait_log("answered by fallback", Duration::from_secs(30)), "{}", g.log());
}

#[test]
fn a_killed_server_fails_over_and_is_used_again_when_back() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 6));
    let fallback = Upstream::start(Ipv4Addr::new(198, 51, 100, 8));
    let mut unbound = Unbound::start(backend.addr, "");
    let g = gateway(
        &format!("tls://localhost:{}#127.0.0.1", unbound.addr.port()),
        &format!("\tlist fallback '{}'\n", fallback.addr),
    );
    assert_eq!(udp(g.addr, "before.example", A).ips(), ["192.0.2.6"]);
    unbound.kill();
    // The connection breaks under the query: retried once on a new
    // connection, which is refused; the fallback answers.
    assert_eq!(udp(g.addr, "while-down.example", A).ips(), ["198.51.100.8"]);
    unbound.launch();
    // The only upstream is tried even while down (no other is up), so it
    // is back at the first query.
    assert_eq!(udp(g.addr, "after.example", A).ips(), ["192.0.2.6"]);
    let u = upstream_report(&g);
    assert_eq!(u.handshakes, 2, "{u:?}");
    assert_eq!(fallback.seen("before.example") + fallback.seen("after.example"), 0);
}

#[test]
fn a_connection_the_server_closed_while_idle_is_made_again() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 7));
    let unbound = Unbound::start(backend.addr, "\ttcp-idle-timeout: 300\n");
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", unbound.addr.port()), "");
    assert_eq!(udp(g.addr, "first.example", A).ips(), ["192.0.2.7"]);
    wait_for("the idle connection to close", Duration::from_secs(30), || upstream_report(&g).state == "idle");
    assert_eq!(udp(g.addr, "second.example", A).ips(), ["192.0.2.7"]);
    let u = upstream_report(&g);
    assert_eq!((u.handshakes, u.timeouts, u.errors), (2, 0, 0), "{u:?}");
}

#[test]
fn replies_out_of_order_ids_and_padding() {
    let server = ScriptedDot::start();
    server.mode.store(mode::REVERSE_FOURS, std::sync::atomic::Ordering::SeqCst);
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", server.addr.port()), "");
    // Four clients at once: the server holds their queries and answers the
    // last first. Each gets its own answer, with its own ID (udp() checks).
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let addr = g.addr;
            std::thread::spawn(move || udp(addr, &format!("order{i}.example"), A))
        })
        .collect();
    for (i, t) in threads.into_iter().enumerate() {
        let r = t.join().unwrap();
        assert_eq!(
            (r.qname.as_deref(), r.ips()),
            (Some(&*format!("order{i}.example")), vec!["203.0.113.9".to_string()])
        );
    }
    let seen = server.queries.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(seen.iter().all(|(len, _)| len % 128 == 0), "padded to 128: {seen:?}");
    let mut ids: Vec<u16> = seen.iter().map(|q| q.1).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4, "one wire ID per outstanding query");
    assert_eq!(server.connections.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_query_on_a_connection_that_ends_is_retried_once() {
    use std::sync::atomic::Ordering::SeqCst;
    let server = ScriptedDot::start();
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", server.addr.port()), "");
    assert_eq!(udp(g.addr, "warm.example", A).ips(), ["203.0.113.9"]);
    server.mode.store(mode::CLOSE_ONCE, SeqCst);
    assert_eq!(udp(g.addr, "retried.example", A).ips(), ["203.0.113.9"], "answered on the new connection");
    assert_eq!(server.connections.load(SeqCst), 2);
    let names: Vec<usize> = server.queries.lock().unwrap().iter().map(|q| q.0).collect();
    assert_eq!(names.len(), 3, "the query was written twice");
    let u = upstream_report(&g);
    assert_eq!((u.handshakes, u.timeouts, u.errors), (2, 0, 0), "{u:?}");
}

#[test]
fn a_connection_without_replies_is_dropped_after_15_seconds() {
    use std::sync::atomic::Ordering::SeqCst;
    let server = ScriptedDot::start();
    let g = gateway(&format!("tls://localhost:{}#127.0.0.1", server.addr.port()), "");
    assert_eq!(udp(g.addr, "alive.example", A).ips(), ["203.0.113.9"]);
    server.mode.store(mode::SILENT, SeqCst);
    assert_eq!(udp(g.addr, "swallowed.example", A).rcode, RCODE::ServerFailure);
    // Half-open, as after a WAN change: the gateway gives the connection up itself.
    wait_for("the silent connection to be dropped", Duration::from_secs(60), || server.closed.load(SeqCst) >= 1);
    server.mode.store(mode::ANSWER, SeqCst);
    assert_eq!(udp(g.addr, "fresh.example", A).ips(), ["203.0.113.9"]);
    assert_eq!(server.connections.load(SeqCst), 2);
}

#[test]
fn before_the_clock_is_set_ntp_names_go_plain_to_bootstrap() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 8));
    let bootstrap = Upstream::start(Ipv4Addr::new(198, 51, 100, 20));
    let dir = TempDir::new();
    let (future_ca, future_cert, future_key) = dot::not_valid_until_tomorrow(&dir.0);
    // One bundle trusting both CAs: the server's certificate is replaced below.
    let bundle = format!(
        "{}{}",
        std::fs::read_to_string(&future_ca).unwrap(),
        std::fs::read_to_string(tls_dir().join("ca.pem")).unwrap()
    );
    let bundle = dir.file("bundle.pem", &bundle);
    let marker = dir.0.join("ntpd-synced");
    let mut unbound = Unbound::start_with(backend.addr, "", &future_cert, &future_key);
    let g = Gateway::start(&format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '5s'\n\
         \tlist upstream 'tls://localhost:{port}#127.0.0.1'\n\toption ca_file '{bundle}'\n\
         \tlist bootstrap '{boot}'\n\tlist plain_domain 'pool.ntp.example'\n\
         \toption time_synced_file '{marker}'\n",
        port = unbound.addr.port(),
        bundle = bundle.display(),
        boot = bootstrap.addr,
        marker = marker.display(),
    ));
    assert!(g.log().contains("the clock is not known good yet"), "{}", g.log());
    // NTP's names resolve, in plain, through the bootstrap resolvers.
    assert_eq!(udp(g.addr, "0.pool.ntp.example", A).ips(), ["198.51.100.20"]);
    assert_eq!(bootstrap.seen("0.pool.ntp.example"), 1);
    // Everything else is refused by the certificate's dates and nothing
    // goes out in plain (no fallback is configured).
    assert_eq!(udp(g.addr, "private.example", A).rcode, RCODE::ServerFailure);
    assert_eq!(bootstrap.seen("private.example") + backend.seen("private.example"), 0);
    assert!(g.wait_log("clock is not synchronised yet", Duration::from_secs(30)), "{}", g.log());

    // NTP set the clock (the server's certificate is valid now, as it would
    // be with the right time): every name goes encrypted.
    std::fs::write(&marker, "").unwrap();
    unbound.relaunch_with(&tls_dir().join("server.pem"), &tls_dir().join("server.key"));
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(udp(g.addr, "1.pool.ntp.example", A).ips(), ["192.0.2.8"]);
    assert_eq!(bootstrap.seen("1.pool.ntp.example"), 0);
    assert_eq!(udp(g.addr, "private2.example", A).ips(), ["192.0.2.8"]);
    assert!(g.log().contains("the clock is synchronised"), "{}", g.log());
}

#[test]
fn unbound_over_https_http2_only_answers_on_one_connection() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 21));
    let unbound = Unbound::start_doh(backend.addr);
    let g = gateway(&format!("https://localhost:{}/dns-query#127.0.0.1", unbound.addr.port()), "");
    one_by_one(&g, &backend, "doh", "192.0.2.21");
    // Many at once: concurrent streams on the one connection.
    many_at_once(&g, "h2-", 16, 10, "192.0.2.21");
    let u = upstream_report(&g);
    assert_eq!(
        (u.transport.as_str(), u.addr.as_str()),
        ("https", &*format!("https://localhost:{}/dns-query", unbound.addr.port()))
    );
    assert_eq!((u.state.as_str(), u.handshakes, u.answers), ("connected", 1, 180), "{u:?}");
    assert_eq!((u.timeouts, u.errors), (0, 0));
    let text = g.log();
    assert!(!text.contains("WARN"), "{text}");
}

#[test]
fn dnsdist_over_https_answers_on_one_connection() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 22));
    let dnsdist = Dnsdist::start_doh(backend.addr);
    let g = gateway(&format!("https://localhost:{}#127.0.0.1", dnsdist.addr.port()), "");
    many_at_once(&g, "dd-", 8, 10, "192.0.2.22");
    assert_eq!(backend.seen("dd-3-7.example"), 1, "went through dnsdist to the backend");
    let u = upstream_report(&g);
    assert_eq!((u.state.as_str(), u.handshakes, u.answers, u.errors), ("connected", 1, 80, 0), "{u:?}");
}

#[test]
fn over_http1_a_server_ending_connections_loses_nothing_and_sees_id_0_padded() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 23));
    let dnsdist = Dnsdist::start_plain_doh(backend.addr);
    let front = Nginx::start(dnsdist.addr, Front { http2: false, keepalive_requests: 5, keepalive_timeout: 60 });
    let g = gateway(&format!("https://localhost:{}#127.0.0.1", front.addr.port()), "");
    for i in 0..12 {
        let name = format!("h1-{i}.example");
        assert_eq!(udp(g.addr, &name, A).ips(), ["192.0.2.23"], "{name}");
    }
    // nginx says "Connection: close" on every fifth response: 5 + 5 + 2.
    let u = upstream_report(&g);
    assert_eq!((u.handshakes, u.answers, u.timeouts, u.errors), (3, 12, 0, 0), "{u:?}");
    let requests = front.requests();
    assert_eq!(requests.len(), 12, "{requests:?}");
    for uri in &requests {
        assert!(uri.starts_with("/dns-query?dns="), "{uri}");
        let query = nginx::dns_param(uri).unwrap();
        assert_eq!(&query[..2], [0, 0], "message ID 0 on the wire: {uri}");
        assert_eq!(query.len() % 128, 0, "padded to 128: {uri}");
    }
    // Concurrent clients queue for the one request in flight.
    many_at_once(&g, "h1q-", 4, 5, "192.0.2.23");
    assert!(!g.log().contains("WARN"), "{}", g.log());
}

#[test]
fn over_http2_goaway_and_idle_closes_lose_nothing() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 24));
    let dnsdist = Dnsdist::start_plain_doh(backend.addr);
    let front = Nginx::start(dnsdist.addr, Front { http2: true, keepalive_requests: 5, keepalive_timeout: 1 });
    let g = gateway(&format!("https://localhost:{}#127.0.0.1", front.addr.port()), "");
    for i in 0..12 {
        assert_eq!(udp(g.addr, &format!("goaway-{i}.example"), A).ips(), ["192.0.2.24"]);
    }
    // nginx sends GOAWAY after every fifth request: the rest go on a new connection.
    let u = upstream_report(&g);
    assert_eq!((u.handshakes, u.answers, u.timeouts, u.errors), (3, 12, 0, 0), "{u:?}");
    // Many at once: streams nginx will not take after its GOAWAY go again elsewhere.
    many_at_once(&g, "burst-", 8, 5, "192.0.2.24");
    let u = upstream_report(&g);
    assert_eq!((u.answers, u.timeouts, u.errors), (52, 0, 0), "{u:?}");
    assert_eq!(front.requests().len(), 52, "each request processed once");
    // Idle for longer than nginx keeps a connection: made again at the next query.
    wait_for("nginx to close the idle connection", Duration::from_secs(30), || upstream_report(&g).state == "idle");
    let before = upstream_report(&g).handshakes;
    assert_eq!(udp(g.addr, "after-idle.example", A).ips(), ["192.0.2.24"]);
    let u = upstream_report(&g);
    assert_eq!((u.handshakes, u.timeouts, u.errors), (before + 1, 0, 0), "{u:?}");
}

#[test]
fn a_reply_that_is_not_a_dns_message_is_refused_and_fallback_only_when_configured() {
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 25));
    let dnsdist = Dnsdist::start_plain_doh(backend.addr);
    let h2 = Nginx::start(dnsdist.addr, Front { http2: true, keepalive_requests: 1000, keepalive_timeout: 60 });
    let h1 = Nginx::start(dnsdist.addr, Front { http2: false, keepalive_requests: 1000, keepalive_timeout: 60 });
    // A 200 with an HTML page (a captive portal, a proxy's error page), over HTTP/2.
    let g = gateway(&format!("https://localhost:{}/wrong-type#127.0.0.1", h2.addr.port()), "");
    assert_eq!(udp(g.addr, "html.example", A).rcode, RCODE::ServerFailure);
    assert!(g.wait_log("a reply that is not application/dns-message", Duration::from_secs(30)), "{}", g.log());
    let u = upstream_report(&g);
    assert!(u.errors >= 1 && u.answers == 0, "{u:?}");
    assert_eq!(u.handshakes, 1, "the connection stays: the server is fine, its answer is not");
    drop(g);
    // A 404 over HTTP/1.1.
    let g = gateway(&format!("https://localhost:{}/no-such-path#127.0.0.1", h1.addr.port()), "");
    assert_eq!(udp(g.addr, "missing.example", A).rcode, RCODE::ServerFailure);
    assert!(g.wait_log("HTTP status 404", Duration::from_secs(30)), "{}", g.log());
    drop(g);
    // With a fallback, it answers instead.
    let fallback = Upstream::start(Ipv4Addr::new(198, 51, 100, 25));
    let g = gateway(
        &format!("https://localhost:{}/wrong-type#127.0.0.1", h2.addr.port()),
        &format!("\tlist fallback '{}'\n", fallback.addr),
    );
    assert_eq!(udp(g.addr, "html-fallback.example", A).ips(), ["198.51.100.25"]);
    assert_eq!(backend.seen("html-fallback.example") + backend.seen("html.example"), 0);
}

#[test]
fn a_server_refusing_every_stream_gets_each_query_four_times_at_most() {
    let server = dot::RefusingDoh::start();
    let g = gateway(&format!("https://localhost:{}#127.0.0.1", server.port), "");
    // REFUSED_STREAM means "not processed": sent again, three times at most.
    assert_eq!(udp(g.addr, "refused-stream.example", A).rcode, RCODE::ServerFailure);
    wait_for("four requests", Duration::from_secs(30), || server.requests() >= 4);
    // (No more come: half a second to show it, less on a busy machine.)
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(server.requests(), 4, "no more after the third re-send");
    assert_eq!(udp(g.addr, "refused-again.example", A).rcode, RCODE::ServerFailure);
    wait_for("four more", Duration::from_secs(30), || server.requests() >= 8);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(server.requests(), 8);
    assert_eq!(upstream_report(&g).handshakes, 1, "the connection itself is fine");
}

/// Peak resident memory of process `pid` in KiB (VmHWM).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A DoH server over HTTP/1.1 whose response never ends, wherever it
/// leaves the reader (a chunk-size line without CRLF, endless trailers,
/// a head without end): the connection holds one response's worth and is
/// dropped. Each of these once grew the buffer by ~60 MB a second until
/// the 15-second no-reply drop, and again for the query's second chance.
#[test]
fn a_doh_response_without_end_costs_a_bounded_amount_of_memory() {
    const CHUNKED: &[u8] =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\nTransfer-Encoding: chunked\r\n\r\n";
    const TRAILERS: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\n\
                              Transfer-Encoding: chunked\r\n\r\n0\r\n";
    for (what, head, unit) in [
        ("a chunk-size line", CHUNKED, &b"0000000000000000"[..]),
        ("trailers", TRAILERS, b"X-Trailer: more\r\n"),
        ("a head", b"HTTP/1.1 200 OK\r\n", b"X-Header: more\r\n"),
    ] {
        let server = EndlessDoh::start(head, unit, 3);
        let g = gateway(&format!("https://localhost:{}#127.0.0.1", server.addr.port()), "");
        let before = peak_kib(g.pid());
        assert_eq!(udp(g.addr, "endless.example", A).rcode, RCODE::ServerFailure, "{what}");
        // The server sends for 3 s a connection; the gateway hangs up first.
        std::thread::sleep(Duration::from_secs(3));
        let grown = peak_kib(g.pid()).saturating_sub(before);
        assert!(grown < 16 * 1024, "{what}: peak memory grew {grown} KiB ({} bytes sent)", server.sent.load(SeqCst));
        assert!(server.connections.load(SeqCst) <= 2, "{what}: the query's two chances, no more");
        assert!(g.log().contains("HTTP: "), "{what}: {}", g.log());
    }
}

/// SETTINGS_MAX_CONCURRENT_STREAMS 0: the server cannot serve us now.
/// Each query moves on to the next server at once; it used to wait out
/// its timeout for a stream, every query, until the idle close.
#[test]
fn a_server_allowing_no_streams_is_passed_over_at_once() {
    let server = dot::RefusingDoh::start_with(&["zero-streams"]);
    let fallback = Upstream::start(Ipv4Addr::new(198, 51, 100, 26));
    let g = Gateway::start(&format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '10s'\n\
         \tlist upstream 'https://localhost:{}#127.0.0.1'\n\toption ca_file '{}'\n\tlist fallback '{}'\n",
        server.port,
        tls_dir().join("ca.pem").display(),
        fallback.addr
    ));
    for i in 0..3 {
        let started = std::time::Instant::now();
        assert_eq!(udp(g.addr, &format!("no-streams-{i}.example"), A).ips(), ["198.51.100.26"]);
        // Within a fifth of the timeout it would otherwise have waited out.
        assert!(started.elapsed() < Duration::from_secs(2), "query {i} took {:?}", started.elapsed());
    }
    assert!(g.log().contains("allows no streams"), "{}", g.log());
}

/// A group's own encrypted upstream (issue 60): its clients' queries, many
/// at once, go over one kept connection, one handshake in all, not one per
/// query; a client outside the group goes to the main (plain) upstream.
#[test]
fn a_groups_encrypted_upstream_keeps_one_connection_for_its_clients() {
    let main = Upstream::start(Ipv4Addr::new(192, 0, 2, 1));
    let backend = Upstream::start(Ipv4Addr::new(192, 0, 2, 7));
    let unbound = Unbound::start(backend.addr, "");
    let g = gateway(
        &main.addr.to_string(),
        &format!(
            "config client\n\tlist match '127.0.0.2'\n\tlist group 'kids'\n\
             config group 'kids'\n\tlist upstream 'tls://localhost:{}#127.0.0.1'\n",
            unbound.addr.port()
        ),
    );
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let addr = g.addr;
            std::thread::spawn(move || {
                let s = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                for i in 0..10u16 {
                    s.send_to(&build_query(i, &format!("k{t}-{i}.example"), A, None), addr).unwrap();
                    let mut buf = [0u8; 1500];
                    let n = s.recv(&mut buf).unwrap();
                    assert_eq!(Reply::parse(buf[..n].to_vec()).ips(), ["192.0.2.7"], "k{t}-{i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(udp(g.addr, "parent.example", A).ips(), ["192.0.2.1"]);
    assert_eq!(backend.seen("parent.example"), 0);
    let u = upstream_report(&g);
    assert_eq!((u.state.as_str(), u.handshakes, u.answers, u.errors), ("connected", 1, 80, 0), "{u:?}");
    let r = g.report();
    let kids = r.upstream_sets.iter().find(|s| s.name == "kids").unwrap();
    assert_eq!((kids.queries, kids.failed), (80, 0));
}
