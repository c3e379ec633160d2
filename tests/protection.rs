//! What protects the LAN and the internet from the resolver's misuse:
//! `allow_client` and `deny_action` over UDP and TCP, RFC 8482 answers to
//! ANY, and DNS rebinding protection, with the server's own counters. Every
//! client is on loopback; the access tests make some of them outsiders by
//! allowing only another loopback address.
#![allow(clippy::unwrap_used)]

mod common;
use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use common::*;
use simple_dns::RCODE;

/// How long a query that must go unanswered is given to be answered
/// anyway: a busy machine can only make such a check see less.
const NO_ANSWER: Duration = Duration::from_millis(500);

/// Sends one query from `from` and returns the raw answer, if any within
/// 10 s (for a query that must be answered).
fn ask_from(from: &str, server: SocketAddr, name: &str) -> Option<Vec<u8>> {
    ask_within(from, server, name, Duration::from_secs(10))
}

/// As [`ask_from`], waiting `wait` for the answer.
fn ask_within(from: &str, server: SocketAddr, name: &str, wait: Duration) -> Option<Vec<u8>> {
    let s = UdpSocket::bind(from).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    s.send_to(&build_query(77, name, A, None), server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).ok()?;
    Some(buf[..n].to_vec())
}

#[test]
fn clients_outside_allow_client_are_refused_and_counted() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "\tlist allow_client '127.0.0.2'\n\tlist allow_client '10.0.0.0/8'\n"));
    // 127.0.0.1 is not in the list: REFUSED, header only, nothing forwarded.
    let refused = ask_from("127.0.0.1:0", gw.addr, "outside.example").expect("an answer");
    assert_eq!(refused.len(), 12, "no bigger than a header: nothing to amplify");
    let r = Reply::parse(refused);
    assert_eq!((r.id, r.rcode), (77, RCODE::Refused));
    // 127.0.0.2 is: a normal answer.
    let ok = Reply::parse(ask_from("127.0.0.2:0", gw.addr, "inside.example").expect("an answer"));
    assert_eq!(ok.rcode, RCODE::NoError);
    assert_eq!(ok.ips(), vec!["192.0.2.1"]);
    assert_eq!(up.seen("outside.example"), 0);
    // TCP from an outsider: closed without an answer.
    let mut t = TcpStream::connect(gw.addr).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = write_frame(&mut t, &build_query(5, "tcp-outside.example", A, None));
    let mut buf = [0u8; 64];
    assert!(matches!(t.read(&mut buf), Ok(0) | Err(_)), "connection closed unanswered");
    let s = gw.stats();
    assert_eq!(s["denied"], 2, "{s:?}");
    assert_eq!(up.seen("tcp-outside.example"), 0);
}

#[test]
fn deny_action_drop_sends_nothing() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "\tlist allow_client '127.0.0.2'\n\toption deny_action 'drop'\n"));
    assert!(ask_within("127.0.0.1:0", gw.addr, "outside.example", NO_ANSWER).is_none());
    assert!(ask_from("127.0.0.2:0", gw.addr, "inside.example").is_some());
    assert_eq!(gw.stats()["denied"], 1);
}

#[test]
fn default_allows_loopback_and_a_bad_range_names_its_line() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    assert_eq!(udp(gw.addr, "default.example", A).rcode, RCODE::NoError);
    let dir = TempDir::new();
    let bad = dir.file("bad.conf", "config hydradns 'main'\n\tlist allow_client '10.0.0.0/33'\n");
    let out = hydradns().args(["check-config", "-c"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("bad.conf:2") && text.contains("allow_client"), "{text}");
}

#[test]
fn any_gets_one_small_hinfo_unless_forwarded() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let raw = udp_raw(gw.addr, &build_query(9, "big.example", 255, None), Duration::from_secs(5)).unwrap();
    let p = simple_dns::Packet::parse(&raw).unwrap();
    assert_eq!(p.answers.len(), 1);
    assert!(matches!(p.answers[0].rdata, simple_dns::rdata::RData::HINFO(_)), "{:?}", p.answers[0]);
    assert!(raw.len() < 64, "{} bytes", raw.len());
    assert_eq!(up.seen("big.example"), 0, "not forwarded");
    let gw = Gateway::start(&config(&[&up], "\toption any_mode 'forward'\n"));
    let _ = udp_raw(gw.addr, &build_query(9, "fwd.example", 255, None), Duration::from_secs(5)).unwrap();
    assert_eq!(up.seen("fwd.example"), 1);
}

#[test]
fn private_answers_for_public_names_are_blocked() {
    // This upstream answers every A query with a LAN address.
    let up = Upstream::start("192.168.1.10".parse().unwrap());
    let lan = Upstream::start("10.0.0.5".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "\tlist rebind_allow 'plex.direct'\nconfig forward\n\toption domain 'lan'\n\tlist server '{}'\n",
            lan.addr
        ),
    ));
    let r = udp(gw.addr, "evil.example", A);
    assert_eq!((r.rcode, r.ips()), (RCODE::NoError, vec!["0.0.0.0".to_string()]), "answered as blocked");
    assert_eq!(udp(gw.addr, "evil.example", A).ips(), ["0.0.0.0"], "and cached so");
    assert_eq!(up.seen("evil.example"), 1);
    // The AAAA answer (2001:db8::1) is public: untouched.
    assert_eq!(udp(gw.addr, "evil.example", AAAA).ips(), ["2001:db8::1"]);
    assert_eq!(udp(gw.addr, "x.plex.direct", A).ips(), ["192.168.1.10"], "rebind_allow");
    assert_eq!(udp(gw.addr, "nas.lan", A).ips(), ["10.0.0.5"], "a forward rule's names are local by design");
    let s = gw.stats();
    assert_eq!(s["rebind_blocked"], 1, "{s:?}");
    // The query log names the reason (the writer commits every 500 ms).
    wait_for("the query log to name rebind-protection", Duration::from_secs(60), || {
        let out = hydradns().args(["log", "-c"]).arg(&gw.config).args(["--blocked", "--json"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).contains("rebind-protection")
    });
    let off = Gateway::start(&config(&[&up], "\toption rebind_protection '0'\n"));
    assert_eq!(udp(off.addr, "evil.example", A).ips(), ["192.168.1.10"]);
}

#[test]
fn a_client_over_its_rate_is_refused_and_counted() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption ratelimit '1'\n\toption ratelimit_burst '5'\n\toption ratelimit_action 'refuse'\nconfig blocklist\n\tlist domain 'blocked.example'\n",
    ));
    // 127.0.0.2 sends 20 at once: the burst of 5 passes, the rest is
    // refused; less one for each whole second the 20 took (the bucket
    // refills at 1 a second), which on an idle machine is none.
    let started = std::time::Instant::now();
    let answers: Vec<RCODE> = (0..20)
        .map(|i| Reply::parse(ask_from("127.0.0.2:0", gw.addr, &format!("b{i}.blocked.example")).unwrap()).rcode)
        .collect();
    let refills = started.elapsed().as_secs() as usize;
    let refused = answers.iter().filter(|r| **r == RCODE::Refused).count();
    assert!((15 - refills.min(15)..=15).contains(&refused), "{refused} refused in {refills} s: {answers:?}");
    // Another client has its own bucket; 127.0.0.1 (dnsmasq in front) is never limited.
    assert!(
        ask_from("127.0.0.3:0", gw.addr, "x.blocked.example").is_some_and(|r| Reply::parse(r).rcode != RCODE::Refused)
    );
    for _ in 0..20 {
        assert_ne!(udp(gw.addr, "y.blocked.example", A).rcode, RCODE::Refused);
    }
    assert_eq!(gw.stats()["ratelimited"], refused as u64);
    // Dropping instead: nothing comes back (for the second of two sent
    // within the same second, one after the other from one socket).
    let gw = Gateway::start(&config(&[&up], "\toption ratelimit '1'\n\toption ratelimit_burst '1'\n"));
    let s = UdpSocket::bind("127.0.0.2:0").unwrap();
    let started = std::time::Instant::now();
    s.send_to(&build_query(1, "first.example", A, None), gw.addr).unwrap();
    s.send_to(&build_query(2, "second.example", A, None), gw.addr).unwrap();
    let mut buf = [0u8; 1500];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(Reply::parse(s.recv(&mut buf).map(|n| buf[..n].to_vec()).unwrap()).id, 1, "the first is answered");
    s.set_read_timeout(Some(NO_ANSWER)).unwrap();
    let second = s.recv(&mut buf);
    // Both were handled within what the test saw: the second is dropped
    // unless a whole second passed, and the bucket had refilled.
    assert!(second.is_err() || started.elapsed() >= Duration::from_secs(1), "the second is dropped");
}

/// Two network namespaces of the test's own joined by a veth pair: the
/// gateway's (`srv`) and a LAN client's (`cli`). Deleted when dropped.
struct Lan {
    srv: String,
    cli: String,
    /// The gateway's end of the link.
    link: String,
}

impl Lan {
    /// The link and addresses below, or `None` without root and `ip`.
    /// `srv`: 192.0.2.1/24 and 2001:db8:1::1/64 (a LAN on a global prefix).
    /// `cli`: .2 and ::2 on them, and two addresses on no network of the
    /// gateway's, routed back to it: 10.9.9.2 (private) and 2001:db8:2::2.
    fn new() -> Option<Lan> {
        if !is_root() {
            return None;
        }
        let tag = std::process::id();
        let lan = Lan { srv: format!("hd-srv-{tag}"), cli: format!("hd-cli-{tag}"), link: format!("hdv0-{tag}") };
        let (s, c) = (&lan.srv, &lan.cli);
        let script = format!(
            "ip netns add {s} && ip netns add {c} && \
             ip -n {s} link set lo up && ip -n {c} link set lo up && \
             ip link add hdv0-{tag} netns {s} type veth peer name hdv1-{tag} netns {c} && \
             ip -n {s} link set hdv0-{tag} up && ip -n {c} link set hdv1-{tag} up && \
             ip -n {s} addr add 192.0.2.1/24 dev hdv0-{tag} && \
             ip -n {s} addr add 2001:db8:1::1/64 dev hdv0-{tag} nodad && \
             ip -n {c} addr add 192.0.2.2/24 dev hdv1-{tag} && \
             ip -n {c} addr add 10.9.9.2/32 dev hdv1-{tag} && \
             ip -n {c} addr add 2001:db8:1::2/64 dev hdv1-{tag} nodad && \
             ip -n {c} addr add 2001:db8:2::2/128 dev hdv1-{tag} nodad && \
             ip -n {s} route add 10.9.9.2/32 dev hdv0-{tag} && \
             ip -n {s} route add 2001:db8:2::2/128 dev hdv0-{tag}"
        );
        let ok = std::process::Command::new("sh").args(["-c", &script]).status().is_ok_and(|s| s.success());
        ok.then_some(lan)
    }

    /// Runs `ip …` in the gateway's namespace.
    fn srv_ip(&self, args: &str) {
        let ok = std::process::Command::new("sh")
            .args(["-c", &format!("ip -n {} {args}", self.srv)])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip {args}");
    }

    /// The gateway in `srv`, listening on `listen`, answering `nas.home`
    /// itself (192.0.2.10) and forwarding nothing.
    fn gateway(&self, listen: &[&str]) -> Gateway {
        let mut text = String::from("config hydradns 'main'\n\tlist upstream '127.0.0.1:9'\n");
        for l in listen {
            text.push_str(&format!("\tlist listen '{l}'\n"));
        }
        text.push_str("config record\n\toption name 'nas.home'\n\tlist ip '192.0.2.10'\n");
        let dir = TempDir::new();
        let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
        let mut cmd = std::process::Command::new("ip");
        let bin = hydradns();
        cmd.args(["netns", "exec", &self.srv]).arg(bin.get_program()).args(bin.get_args());
        Gateway::start_command(dir, config, cmd)
    }

    /// Sends one query to `server` from `from` (an address of the client's)
    /// and returns the answer's rcode, if one came.
    fn ask_from(&self, from: &str, server: SocketAddr, name: &str) -> Option<RCODE> {
        self.ask(from, server, name, false)
    }

    /// As [`Lan::ask_from`], from a connected socket: the kernel drops an
    /// answer from any address but `server`'s, as many clients' stub
    /// resolvers do.
    fn ask_connected(&self, from: &str, server: SocketAddr, name: &str) -> Option<RCODE> {
        self.ask(from, server, name, true)
    }

    fn ask(&self, from: &str, server: SocketAddr, name: &str, connected: bool) -> Option<RCODE> {
        let (ns, from, name) = (format!("/run/netns/{}", self.cli), from.to_string(), name.to_string());
        // A thread of its own moves into the client's namespace; its sockets stay there.
        std::thread::spawn(move || {
            let fd = std::fs::File::open(ns).unwrap();
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&fd),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap();
            let s = UdpSocket::bind(SocketAddr::new(from.parse().unwrap(), 0)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let query = build_query(78, &name, A, None);
            if connected {
                s.connect(server).unwrap();
                s.send(&query).unwrap();
            } else {
                s.send_to(&query, server).unwrap();
            }
            let mut buf = [0u8; 1500];
            let n = s.recv(&mut buf).ok()?;
            Some(Reply::parse(buf[..n].to_vec()).rcode)
        })
        .join()
        .unwrap()
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for ns in [&self.srv, &self.cli] {
            let _ = std::process::Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[test]
fn by_default_the_networks_of_the_gateways_interfaces_are_served_and_followed() {
    let Some(lan) = Lan::new() else {
        eprintln!("skipped: needs root and ip");
        return;
    };
    let gw = lan.gateway(&["192.0.2.1:53", "[2001:db8:1::1]:53"]);
    let (v4, v6): (SocketAddr, SocketAddr) = ("192.0.2.1:53".parse().unwrap(), "[2001:db8:1::1]:53".parse().unwrap());

    // On the gateway's networks: served, a global IPv6 prefix as much as RFC 1918.
    assert_eq!(lan.ask_from("192.0.2.2", v4, "nas.home"), Some(RCODE::NoError), "{}", gw.log());
    assert_eq!(lan.ask_from("2001:db8:1::2", v6, "nas.home"), Some(RCODE::NoError), "{}", gw.log());
    // From networks it is not on: refused, a private address too.
    assert_eq!(lan.ask_from("10.9.9.2", v4, "nas.home"), Some(RCODE::Refused));
    assert_eq!(lan.ask_from("2001:db8:2::2", v6, "nas.home"), Some(RCODE::Refused));
    assert_eq!(gw.stats()["denied"], 2);

    // A new prefix on the gateway's link is served without a reload.
    lan.srv_ip(&format!("addr add 2001:db8:2::1/64 dev {} nodad", lan.link));
    assert!(gw.wait_log("networks changed", Duration::from_secs(30)), "{}", gw.log());
    assert_eq!(lan.ask_from("2001:db8:2::2", v6, "nas.home"), Some(RCODE::NoError), "{}", gw.log());
}

/// Listening on `0.0.0.0:53` and `[::]:53` (the docs' replace-mode recipe),
/// answers left from the route's preferred source, not the address asked:
/// a client asking the gateway's second address on a link (a ULA beside a
/// GUA, an alias) with a connected socket dropped them. Each answer leaves
/// from the address its query was sent to.
#[test]
fn wildcard_listeners_answer_from_the_address_asked() {
    let Some(lan) = Lan::new() else {
        eprintln!("skipped: needs root and ip");
        return;
    };
    lan.srv_ip(&format!("addr add 192.0.2.3/24 dev {}", lan.link));
    lan.srv_ip(&format!("addr add 2001:db8:1::3/64 dev {} nodad", lan.link));
    let gw = lan.gateway(&["0.0.0.0:53", "[::]:53"]);
    // Every address of the gateway's on the link, the preferred source and
    // the other alike, each asked twice (a fresh answer and its batch path).
    for (from, server) in [
        ("192.0.2.2", "192.0.2.1:53"),
        ("192.0.2.2", "192.0.2.3:53"),
        ("2001:db8:1::2", "[2001:db8:1::1]:53"),
        ("2001:db8:1::2", "[2001:db8:1::3]:53"),
    ] {
        let server: SocketAddr = server.parse().unwrap();
        for _ in 0..2 {
            assert_eq!(lan.ask_connected(from, server, "nas.home"), Some(RCODE::NoError), "{server}\n{}", gw.log());
        }
    }
}
