//! DNSSEC validation end to end (issue 61): the real binary with `option
//! dnssec '1'` in front of the real Unbound (Debian's 1.17), which serves
//! the signed test zones of tests/data/dnssec/ (`make.sh`: `test.` and its
//! children, signed 2025–2037; expired.test. 2020–2021) as `auth-zone`s,
//! without validating (`module-config: "iterator"`): HydraDNS decides, from
//! the DS of `test.` in `anchors.conf` (its `trust_anchor_file`). Unbound
//! answers a DS query from the parent zone when it hosts both sides.
//!
//! At test time two zones are added: `insecure.test.` unsigned (its
//! parent proves it has no DS; `*.hop` is a CNAME to alg13.test.), and a copy of alg13.test. in which
//! `mail`'s address was changed after signing (its RRSIG no longer fits).
//!
//! `cargo test --test dnssec`. Skipped, with a line saying so, without unbound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{
    Gateway, KillOnDrop, TempDir, data, ede_codes, spawn_on_free_port, udp_raw, unbound, unbound_server,
    unbound_sockets,
};
use simple_dns::Packet;

const A: u16 = 1;
const AAAA: u16 = 28;
const RRSIG: u16 = 46;
const NSEC: u16 = 47;
const NSEC3: u16 = 50;
/// Header flag bits (second 16-bit word).
const AD: u16 = 0x0020;
const CD: u16 = 0x0010;

fn unbound_installed() -> bool {
    Command::new("unbound").arg("-V").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// Unbound serving the test zones on a free loopback port.
struct Zones {
    _child: KillOnDrop,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Zones {
    fn start() -> Zones {
        let dir = TempDir::new();
        for z in ["test", "alg8.test", "expired.test"] {
            std::fs::copy(data(&format!("dnssec/{z}.signed")), dir.0.join(format!("{z}.signed"))).unwrap();
        }
        // mail's address changed after signing: its RRSIG cannot verify.
        let alg13 = std::fs::read_to_string(data("dnssec/alg13.test.signed")).unwrap();
        let tampered = alg13.replace("\tA\t192.0.2.25", "\tA\t192.0.2.26");
        assert_ne!(alg13, tampered, "alg13.test.signed holds mail's A record");
        std::fs::write(dir.0.join("alg13.test.signed"), tampered).unwrap();
        std::fs::write(
            dir.0.join("insecure.test.zone"),
            "$ORIGIN insecure.test.\n$TTL 3600\n@ IN SOA ns.test. hostmaster.test. 1 7200 3600 1209600 3600\n\
             @ IN NS ns.test.\nwww IN A 192.0.2.80\n*.hop IN CNAME alg13.test.\n",
        )
        .unwrap();
        let zones = [
            ("test.", "test.signed"),
            ("alg8.test.", "alg8.test.signed"),
            ("alg13.test.", "alg13.test.signed"),
            ("expired.test.", "expired.test.signed"),
            ("insecure.test.", "insecure.test.zone"),
        ];
        let auth: String = zones
            .iter()
            .map(|(n, f)| {
                format!("auth-zone:\n\tname: \"{n}\"\n\tzonefile: \"{f}\"\n\tfor-downstream: yes\n\tfor-upstream: no\n")
            })
            .collect();
        let conf = dir.0.join("unbound.conf");
        let template = format!(
            "{server}\tverbosity: 0\n\tlocal-zone: \"test.\" nodefault\n{auth}",
            server = unbound_server(&dir.0, "port")
        );
        let (child, port) = spawn_on_free_port("unbound", unbound_sockets, |port| {
            std::fs::write(&conf, template.replace("@PORT@", &port.to_string())).unwrap();
            unbound(&conf)
        });
        Zones { _child: child, addr: SocketAddr::from(([127, 0, 0, 1], port)), _dir: dir }
    }
}

/// The gateway in front of `zones`, validating when `dnssec`.
fn gateway(zones: &Zones, dnssec: bool) -> Gateway {
    gateway_with(zones, dnssec, "")
}

/// [`gateway`] with `extra` sections after `main`.
fn gateway_with(zones: &Zones, dnssec: bool, extra: &str) -> Gateway {
    gateway_at(zones.addr, dnssec, extra)
}

/// [`gateway_with`] asking `upstream`.
fn gateway_at(upstream: SocketAddr, dnssec: bool, extra: &str) -> Gateway {
    let anchors = data("dnssec/anchors.conf");
    Gateway::start(&main_config(upstream, dnssec, &anchors, &format!("{DATES_CHECKED}{extra}")))
}

/// Signature dates checked from the start (no clock to wait for).
const DATES_CHECKED: &str = "\toption time_check '0'\n";

/// The config the tests start from: `main` asking `upstream`, validating
/// or not, with the anchors of `anchors`; `rest` follows (more of main's
/// options, then sections).
fn main_config(upstream: SocketAddr, dnssec: bool, anchors: &Path, rest: &str) -> String {
    format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '2s'\n\
         \tlist upstream '{upstream}'\n\toption dnssec '{}'\n\toption trust_anchor_file '{}'\n{rest}",
        dnssec as u8,
        anchors.display()
    )
}

/// What a test looks at in an answer.
#[derive(Debug)]
struct Got {
    rcode: u8,
    ad: bool,
    /// Types in the answer section.
    answer: Vec<u16>,
    /// Types in the authority section.
    authority: Vec<u16>,
    /// The A records' addresses.
    addrs: Vec<String>,
    /// Extended DNS Error codes.
    ede: Vec<u16>,
}

/// The query [`ask`] sends, with ID `id`.
fn query(id: u16, name: &str, qtype: u16, flags: u16, edns: bool, do_bit: bool) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&(0x0100 | flags).to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, edns as u8]);
    for label in name.trim_end_matches('.').split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    if edns {
        m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, if do_bit { 0x80 } else { 0 }, 0, 0, 0]);
    }
    m
}

/// Asks `name`/`qtype` with the header `flags` added to RD, and with EDNS
/// (DO set if `do_bit`) unless `edns` is false.
fn ask(g: &Gateway, name: &str, qtype: u16, flags: u16, edns: bool, do_bit: bool) -> Got {
    let m = query(0x1234, name, qtype, flags, edns, do_bit);
    let raw = udp_raw(g.addr, &m, Duration::from_secs(10)).unwrap_or_else(|| panic!("no answer to {name}"));
    let p = Packet::parse(&raw).unwrap();
    let ede = ede_codes(&raw);
    Got {
        rcode: raw[3] & 0x0f,
        ad: raw[3] & 0x20 != 0,
        answer: p.answers.iter().map(|r| r.rdata.type_code().into()).collect(),
        authority: p.name_servers.iter().map(|r| r.rdata.type_code().into()).collect(),
        addrs: p
            .answers
            .iter()
            .filter_map(|r| match &r.rdata {
                simple_dns::rdata::RData::A(a) => Some(std::net::Ipv4Addr::from(a.address).to_string()),
                _ => None,
            })
            .collect(),
        ede,
    }
}

fn setup(dnssec: bool) -> Option<(Zones, Gateway)> {
    if !unbound_installed() {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return None;
    }
    let zones = Zones::start();
    let g = gateway(&zones, dnssec);
    Some((zones, g))
}

/// The `dnssec:` lines `hydradns check ARGS NAME` prints for gateway `g`
/// (`--live`: the running gateway answers).
fn check_says(g: &Gateway, args: &[&str], name: &str) -> Vec<String> {
    let mut all = vec!["check", "-c", common::cfg_path(g)];
    all.extend_from_slice(args);
    all.push(name);
    let (code, out, err) = common::cli(&all);
    assert_eq!(code, 0, "check {name}: {out} {err}");
    out.lines().filter(|l| l.starts_with("dnssec")).map(str::to_string).collect()
}

#[test]
fn a_secure_answer_has_ad_for_clients_that_ask_and_rrsigs_only_with_do() {
    let Some((_z, g)) = setup(true) else { return };
    for name in ["www.alg8.test", "www.alg13.test"] {
        let with_do = ask(&g, name, A, 0, true, true);
        assert_eq!((with_do.rcode, with_do.ad), (0, true), "{name} with DO: {with_do:?}");
        assert!(with_do.answer.contains(&RRSIG), "{name}: DO gets the RRSIG: {with_do:?}");
        let ad_only = ask(&g, name, A, AD, true, false);
        assert_eq!((ad_only.rcode, ad_only.ad), (0, true), "{name} with AD: {ad_only:?}");
        assert_eq!(ad_only.answer, vec![A], "{name}: no RRSIG without DO");
        let plain = ask(&g, name, A, 0, false, false);
        assert_eq!((plain.rcode, plain.ad), (0, false), "{name} asked plainly: {plain:?}");
        assert_eq!(plain.addrs, vec!["192.0.2.1".to_string()]);
    }
    // A CNAME in the zone, and wildcard answers with their proofs that the
    // name itself does not exist: NSEC3, and NSEC, which Unbound's
    // auth-zone sends under the query name (*.wild's NSEC, expanded).
    for name in ["cname.alg8.test", "x.wild.alg13.test", "x.wild.alg8.test"] {
        let r = ask(&g, name, A, 0, true, true);
        assert_eq!((r.rcode, r.ad), (0, true), "{name}: {r:?}");
        assert!(r.addrs.iter().all(|a| a.starts_with("192.0.2.")) && !r.addrs.is_empty(), "{name}: {r:?}");
    }
    // Asked first without DO, then with: the DO client still gets the RRSIG.
    let first = ask(&g, "mail.alg8.test", A, 0, true, false);
    assert_eq!((first.rcode, first.answer.clone()), (0, vec![A]), "{first:?}");
    let then = ask(&g, "mail.alg8.test", A, 0, true, true);
    assert!(then.ad && then.answer.contains(&RRSIG), "{then:?}");
    let s = g.log();
    assert!(!s.contains("panicked"), "{s}");
}

#[test]
fn a_bad_signature_is_servfail_with_ede_6_and_an_expired_one_with_ede_7() {
    let Some((_z, g)) = setup(true) else { return };
    for _ in 0..2 {
        // The second time from the cache: still SERVFAIL, with its EDE.
        let bad = ask(&g, "mail.alg13.test", A, 0, true, true);
        assert_eq!((bad.rcode, bad.ede.clone(), bad.answer.len()), (2, vec![6], 0), "{bad:?}");
    }
    // The same zone's well-signed names are still secure.
    assert!(ask(&g, "www.alg13.test", A, 0, true, true).ad);
    let expired = ask(&g, "www.expired.test", A, 0, true, true);
    assert_eq!((expired.rcode, expired.ede.clone()), (2, vec![7]), "{expired:?}");
    // Three bogus answers given: the second mail.alg13.test, from the
    // cache, counts as the first did.
    let stats = g.stats();
    assert_eq!((stats["dnssec_bogus"], stats["dnssec_secure"]), (3, 1), "{stats:?}");
}

#[test]
fn check_live_validates_the_name_and_says_why_it_is_bogus() {
    let Some(zones) = (if unbound_installed() { Some(Zones::start()) } else { None }) else {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    };
    let anchors = data("dnssec/anchors.conf");
    let g = Gateway::start(&main_config(
        zones.addr,
        true,
        &anchors,
        &format!(
            "{DATES_CHECKED}config record\n\toption name 'nas.alg8.test'\n\tlist ip '192.0.2.9'\n\
             config forward\n\tlist domain 'alg13.test'\n\toption server '{up}'\n\
             config blocklist\n\tlist domain 'ads.alg8.test'\n",
            up = zones.addr
        ),
    ));
    let live = |name: &str| check_says(&g, &["--live"], name);
    assert_eq!(live("www.alg8.test"), ["dnssec: secure"]);
    // An NXDOMAIN proven by NSEC is secure too.
    assert_eq!(live("nope.alg8.test"), ["dnssec: secure"]);
    assert_eq!(live("www.expired.test"), ["dnssec: bogus (EDE 7: the signature has expired)"]);
    assert_eq!(live("www.insecure.test"), ["dnssec: insecure (a delegation on the way has no DS)"]);
    // What the gateway answers without its upstreams is not validated.
    assert_eq!(live("nas.alg8.test"), ["dnssec: not validated (a local record answers it)"]);
    // LuCI's lookup of a device's groups asks for x.invalid: nothing goes upstream for it.
    assert_eq!(live("x.INVALID."), ["dnssec: not validated (a special-use name, never asked upstream)"]);
    assert_eq!(
        live("mail.alg13.test"),
        [
            "dnssec: not validated (a config forward rule sends it to its own servers, and no trust anchor of its own covers it)"
        ]
    );
    assert_eq!(live("use-application-dns.net"), ["dnssec: not validated (block_bypass answers it)"]);
    assert_eq!(live("x.ads.alg8.test"), ["dnssec: not validated (it is blocked)"]);
    let (code, out, err) =
        common::cli(&["block", "-c", common::cfg_path(&g), "--client", "127.0.0.1", "www.alg8.test", "--for", "10m"]);
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(
        check_says(&g, &["--live", "--client", "127.0.0.1"], "www.alg8.test"),
        ["dnssec: not validated (an exception blocks it)"]
    );
    // Without the gateway the check cannot validate, and says so.
    assert_eq!(
        check_says(&g, &[], "www.alg8.test"),
        ["dnssec: not validated here (the running gateway validates: check --live)"]
    );
    // The checks were not clients' answers: not counted.
    let stats = g.stats();
    assert_eq!((stats["dnssec_secure"], stats["dnssec_bogus"]), (0, 0), "{stats:?}");
    // The clients' answers agree with what check said.
    let expired = ask(&g, "www.expired.test", A, 0, true, true);
    assert_eq!((expired.rcode, expired.ede.clone()), (2, vec![7]), "{expired:?}");
    assert!(ask(&g, "mail.alg8.test", A, 0, true, true).ad);
}

#[test]
fn the_query_log_records_each_validated_answers_state() {
    if !unbound_installed() {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    }
    let zones = Zones::start();
    let g = gateway_with(&zones, true, &common::log_section("\toption batch_interval '50ms'\n"));
    assert!(ask(&g, "www.alg8.test", A, 0, true, true).ad);
    assert_eq!(ask(&g, "www.insecure.test", A, 0, true, true).rcode, 0);
    // The tampered and the expired zone: bogus.
    assert_eq!(ask(&g, "mail.alg13.test", A, 0, true, true).rcode, 2);
    assert_eq!(ask(&g, "www.expired.test", A, 0, true, true).rcode, 2);
    // Not validated: a CD client's answer. A hit keeps its miss's state.
    assert_eq!(ask(&g, "mail.alg8.test", A, CD, true, true).rcode, 0);
    assert_eq!(ask(&g, "www.alg8.test", A, 0, true, true).rcode, 0);
    let rows = || common::log_rows(&g, &["--domain", "test"]);
    common::wait_for("the log rows", Duration::from_secs(30), || rows().len() == 6);
    let mut got: Vec<(String, String, Option<String>)> =
        rows().into_iter().map(|r| (r.name, r.outcome, r.dnssec)).collect();
    got.sort();
    let row = |n: &str, o: &str, d: Option<&str>| (n.to_string(), o.to_string(), d.map(str::to_string));
    assert_eq!(
        got,
        [
            row("mail.alg13.test", "forwarded", Some("bogus")),
            row("mail.alg8.test", "forwarded", None),
            row("www.alg8.test", "cached", Some("secure")),
            row("www.alg8.test", "forwarded", Some("secure")),
            row("www.expired.test", "forwarded", Some("bogus")),
            row("www.insecure.test", "forwarded", Some("insecure")),
        ]
    );
    // The text view says it after the rest of the line.
    let (code, out, err) = common::cli(&["log", "-c", common::cfg_path(&g), "--domain", "expired.test"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.trim_end().ends_with(" dnssec bogus"), "{out}");
}

#[test]
fn an_insecure_delegation_is_answered_without_ad() {
    let Some((_z, g)) = setup(true) else { return };
    let r = ask(&g, "www.insecure.test", A, AD, true, true);
    assert_eq!((r.rcode, r.ad, r.addrs.clone()), (0, false, vec!["192.0.2.80".to_string()]), "{r:?}");
    // Validated and found insecure, not merely passed on.
    let stats = g.stats();
    assert_eq!((stats["dnssec_insecure"], stats["dnssec_secure"], stats["dnssec_bogus"]), (1, 0, 0), "{stats:?}");
    // With time_check 0 the dates are checked from the start: no status line.
    let (code, out, err) = common::cli(&["status", "-c", common::cfg_path(&g)]);
    assert!(code == 0 && !out.contains("clock is known good"), "{out} {err}");
}

#[test]
fn nxdomain_is_proven_with_nsec_and_with_nsec3() {
    let Some((_z, g)) = setup(true) else { return };
    for (name, proof) in [("nope.alg8.test", NSEC), ("nope.alg13.test", NSEC3)] {
        let r = ask(&g, name, A, 0, true, true);
        assert_eq!((r.rcode, r.ad), (3, true), "{name}: {r:?}");
        assert!(r.authority.contains(&proof), "{name}: the proof goes to a DO client: {r:?}");
        let plain = ask(&g, name, A, AD, true, false);
        assert_eq!((plain.rcode, plain.ad), (3, true), "{name} with AD: {plain:?}");
        assert!(!plain.authority.iter().any(|t| [RRSIG, NSEC, NSEC3].contains(t)), "{name}: {plain:?}");
    }
    // NODATA, in both.
    for name in ["www.alg8.test", "www.alg13.test"] {
        let r = ask(&g, name, 15, 0, true, true);
        assert_eq!((r.rcode, r.ad, r.answer.len()), (0, true, 0), "{name} MX: {r:?}");
    }
}

#[test]
fn cd_gets_the_data_unvalidated_and_it_is_never_served_without_cd() {
    let Some((_z, g)) = setup(true) else { return };
    let cd = ask(&g, "mail.alg13.test", A, CD | AD, true, true);
    assert_eq!((cd.rcode, cd.ad, cd.addrs.clone()), (0, false, vec!["192.0.2.26".to_string()]), "{cd:?}");
    let without = ask(&g, "mail.alg13.test", A, 0, true, true);
    assert_eq!((without.rcode, without.ede.clone()), (2, vec![6]), "{without:?}");
}

#[test]
fn with_dnssec_off_answers_are_passed_on_as_before() {
    let Some((_z, g)) = setup(false) else { return };
    let r = ask(&g, "mail.alg13.test", A, AD, true, true);
    assert_eq!((r.rcode, r.ad, r.addrs.clone()), (0, false, vec!["192.0.2.26".to_string()]), "{r:?}");
    let r = ask(&g, "www.expired.test", A, 0, true, true);
    assert_eq!(r.rcode, 0, "{r:?}");
    // check has nothing to say of DNSSEC where nothing validates.
    assert!(check_says(&g, &["--live"], "mail.alg13.test").is_empty());
}

#[test]
fn a_trust_anchor_file_that_cannot_be_read_stops_the_start() {
    if !unbound_installed() {
        println!("skipped: unbound is not installed");
        return;
    }
    let dir = TempDir::new();
    let bad = dir.file("anchors.conf", "test. IN A 192.0.2.1\n");
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\tlist upstream '127.0.0.1:9'\n\toption dnssec '1'\n\
             \toption trust_anchor_file '{}'\n\toption control_socket '{}/c.sock'\n",
            bad.display(),
            dir.0.display()
        ),
    );
    let out = common::hydradns().args(["run", "--log", "stderr", "-c"]).arg(&conf).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trust_anchor_file") && err.contains(&*bad.to_string_lossy()), "{err}");
}

#[test]
fn a_group_with_its_own_upstreams_validates_when_it_says_so() {
    if !unbound_installed() {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    }
    let zones = Zones::start();
    let anchors = data("dnssec/anchors.conf");
    // The main set does not validate; this machine's queries are the
    // group's, whose set (the same upstream) does.
    let g = Gateway::start(&format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '2s'\n\
         \tlist upstream '{up}'\n\toption trust_anchor_file '{a}'\n\toption time_check '0'\n\
         config group 'checked'\n\tlist upstream '{up}'\n\toption dnssec '1'\n\
         config client 'here'\n\tlist match '127.0.0.1'\n\tlist group 'checked'\n",
        up = zones.addr,
        a = anchors.display()
    ));
    let r = ask(&g, "www.alg8.test", A, 0, true, true);
    assert_eq!((r.rcode, r.ad), (0, true), "{r:?}");
    let bad = ask(&g, "mail.alg13.test", A, 0, true, true);
    assert_eq!((bad.rcode, bad.ede.clone()), (2, vec![6]), "{bad:?}");
    // check validates with the set of the client it is asked for, and only there.
    let for_here = check_says(&g, &["--live", "--client", "127.0.0.1"], "mail.alg13.test");
    assert_eq!(for_here, ["dnssec: bogus (EDE 6: a signature does not verify)"]);
    assert!(check_says(&g, &["--live"], "mail.alg13.test").is_empty());
}

#[test]
fn signature_dates_wait_for_the_clock_and_are_enforced_once_it_is_good() {
    let Some(zones) = (if unbound_installed() { Some(Zones::start()) } else { None }) else {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    };
    let anchors = data("dnssec/anchors.conf");
    let dir = TempDir::new();
    let marker = dir.0.join("synced");
    let clock = format!("\toption time_check '1'\n\toption time_synced_file '{}'\n", marker.display());
    let g = Gateway::start(&main_config(zones.addr, true, &anchors, &clock));
    assert!(g.log().contains("signature dates are not checked"), "{}", g.log());
    // `status` says so while it lasts, in text and JSON.
    let wait_line = |out: &str| out.lines().any(|l| l.starts_with("dnssec ") && l.contains("clock is known good"));
    let json_field = format!(r#""dnssec_clock_wait":"{}""#, marker.display());
    let (code, out, err) = common::cli(&["status", "-c", common::cfg_path(&g)]);
    assert!(code == 0 && wait_line(&out) && out.contains(&marker.display().to_string()), "{out} {err}");
    let (_, json, _) = common::cli(&["status", "-c", common::cfg_path(&g), "--json"]);
    assert!(json.contains(&json_field), "{json}");
    // Only its dates are wrong: answered while the clock is not known good.
    let r = ask(&g, "www.expired.test", A, 0, true, true);
    assert_eq!((r.rcode, r.addrs.clone()), (0, vec!["192.0.2.1".to_string()]), "{r:?}");
    std::fs::write(&marker, b"").unwrap();
    // Without a restart, the cached answer included, it turns bogus.
    common::wait_for("the expired signature to be refused", Duration::from_secs(60), || {
        let r = ask(&g, "www.expired.test", A, 0, true, true);
        r.rcode == 2 && r.ede == vec![7]
    });
    assert!(ask(&g, "www.alg8.test", A, 0, true, true).ad);
    // And the status line is gone.
    let (code, out, err) = common::cli(&["status", "-c", common::cfg_path(&g)]);
    assert!(code == 0 && !wait_line(&out), "{out} {err}");
    let (_, json, _) = common::cli(&["status", "-c", common::cfg_path(&g), "--json"]);
    assert!(json.contains(r#""dnssec_clock_wait":"""#) && !json.contains(&json_field), "{json}");
}

#[test]
fn a_reload_that_switches_validation_never_serves_the_old_settings_answers() {
    if !unbound_installed() {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    }
    let zones = Zones::start();
    let anchors = data("dnssec/anchors.conf");
    let config = |dnssec: bool| main_config(zones.addr, dnssec, &anchors, DATES_CHECKED);
    let g = Gateway::start(&config(true));
    // Validated and cached: secure, and the bogus name SERVFAIL.
    assert!(ask(&g, "www.alg8.test", A, AD, true, false).ad);
    assert_eq!(ask(&g, "mail.alg13.test", A, 0, true, false).rcode, 2);
    // Switched off: the cached verdicts are not the answer any more.
    g.reload(&config(false));
    let r = ask(&g, "www.alg8.test", A, AD, true, false);
    assert_eq!((r.rcode, r.ad), (0, false), "secure from the cache after dnssec went off: {r:?}");
    let r = ask(&g, "mail.alg13.test", A, 0, true, false);
    assert_eq!(r.rcode, 0, "bogus from the cache after dnssec went off: {r:?}");
    // And on again: validated again, not the unvalidated copies.
    g.reload(&config(true));
    assert_eq!(ask(&g, "mail.alg13.test", A, 0, true, false).rcode, 2);
    let stats = g.stats();
    assert!(stats["dnssec_bogus"] >= 2, "{stats:?}");
}

#[test]
fn dnssec_turned_on_by_a_reload_says_that_signature_dates_wait_for_the_clock() {
    // LuCI's Save & Apply reloads the running gateway; the owner who turns
    // validation on there reads in the log what it does until NTP has run.
    let Some(zones) = (if unbound_installed() { Some(Zones::start()) } else { None }) else {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    };
    let anchors = data("dnssec/anchors.conf");
    let dir = TempDir::new();
    let clock = format!("\toption time_check '1'\n\toption time_synced_file '{}'\n", dir.0.join("synced").display());
    let conf = |dnssec: bool| main_config(zones.addr, dnssec, &anchors, &clock);
    let g = Gateway::start(&conf(false));
    assert!(!g.log().contains("DNSSEC"), "{}", g.log());
    g.reload(&conf(true));
    assert!(ask(&g, "www.alg8.test", A, 0, true, true).ad);
    let log = g.log();
    assert!(log.contains("DNSSEC: validating, 1 trust anchors from"), "{log}");
    assert_eq!(log.matches("signature dates are not checked").count(), 1, "{log}");
    // A reload that changes nothing of it says nothing again.
    g.reload(&conf(true));
    let log = g.log();
    assert_eq!(log.matches("signature dates are not checked").count(), 1, "{log}");
    assert_eq!(log.matches("DNSSEC: validating").count(), 1, "{log}");
}

#[test]
fn a_trust_anchor_file_edited_in_place_is_in_force_after_a_reload() {
    // The root's key change, or a key the owner no longer trusts: the file
    // at the same path is edited and the gateway reloaded.
    let Some(zones) = (if unbound_installed() { Some(Zones::start()) } else { None }) else {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    };
    let dir = TempDir::new();
    let good = std::fs::read_to_string(data("dnssec/anchors.conf")).unwrap();
    let path = dir.file("anchors.conf", &good);
    let conf = main_config(zones.addr, true, &path, DATES_CHECKED);
    let g = Gateway::start(&conf);
    let r = ask(&g, "www.alg8.test", A, 0, true, true);
    assert_eq!((r.rcode, r.ad), (0, true), "{r:?}");
    // The same key tag and algorithm, another digest: no key of test. matches.
    let wrong = good.replace("a81ff17873057818", "0000000000000000");
    assert_ne!(good, wrong, "anchors.conf holds test.'s DS");
    std::fs::write(&path, wrong).unwrap();
    g.reload(&conf);
    // A name not asked before, so the cache has no say.
    let r = ask(&g, "mail.alg8.test", A, 0, true, true);
    assert_eq!(r.rcode, 2, "validated with the anchors the file no longer holds: {r:?}");
    // And back: secure again.
    std::fs::write(&path, good).unwrap();
    g.reload(&conf);
    let r = ask(&g, "www.alg8.test", AAAA, 0, true, true);
    assert_eq!((r.rcode, r.ad), (0, true), "{r:?}");
}

#[test]
fn a_forwarded_domain_is_validated_only_below_a_trust_anchor_of_its_own() {
    if !unbound_installed() {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    }
    let zones = Zones::start();
    let dir = TempDir::new();
    let anchors = dir.0.join("anchors.conf");
    let root = std::fs::read_to_string(data("dnssec/anchors.conf")).unwrap();
    let forward =
        format!("{DATES_CHECKED}config forward\n\tlist domain 'alg13.test'\n\toption server '{}'\n", zones.addr);
    let config = |path: &Path| main_config(zones.addr, true, path, &forward);
    // The test tree's anchor is above the rule's domain: its names are the
    // forward servers' answers, passed on as they are (a private zone has
    // no chain from the public root).
    std::fs::write(&anchors, &root).unwrap();
    let g = Gateway::start(&config(&anchors));
    let bad = ask(&g, "mail.alg13.test", A, 0, true, true);
    assert_eq!((bad.rcode, bad.ad), (0, false), "{bad:?}");
    assert!(!ask(&g, "www.alg13.test", A, AD, true, false).ad);
    // An anchor of its own: validated, the chain from its servers.
    std::fs::write(
        &anchors,
        format!("{root}alg13.test.\t3600\tIN\tDS\t43161 13 2 33c03339f0eb6cf303043516fb5eece54fcc5dd6b99a8e5fd72cb69fbfbf031d\n"),
    )
    .unwrap();
    g.reload(&config(&anchors));
    let bad = ask(&g, "mail.alg13.test", A, 0, true, true);
    assert_eq!((bad.rcode, bad.ede.clone()), (2, vec![6]), "{bad:?}");
    let good = ask(&g, "www.alg13.test", A, AD, true, false);
    assert_eq!((good.rcode, good.ad), (0, true), "{good:?}");
    assert_eq!(check_says(&g, &["--live"], "www.alg13.test"), ["dnssec: secure"]);
    // Names outside the rule are validated from the test tree's anchor, as before.
    assert!(ask(&g, "www.alg8.test", A, AD, true, false).ad);
}

/// A UDP relay in front of the zones that holds each DS and DNSKEY query
/// `delay` before passing it on, as a slow ISP resolver would, and counts
/// them: the chain queries the gateway sends.
struct SlowChain {
    addr: SocketAddr,
    chain: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl SlowChain {
    fn start(to: SocketAddr, delay: Duration) -> SlowChain {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let addr = sock.local_addr().unwrap();
        let chain = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (counted, stopped) = (chain.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65535];
            while !stopped.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
                let msg = buf[..n].to_vec();
                let is_chain = matches!(qtype(&msg), Some(43 | 48));
                if is_chain {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                let back = sock.try_clone().unwrap();
                std::thread::spawn(move || {
                    if is_chain {
                        std::thread::sleep(delay);
                    }
                    let up = UdpSocket::bind("127.0.0.1:0").unwrap();
                    up.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    up.send_to(&msg, to).unwrap();
                    let mut reply = vec![0u8; 65535];
                    if let Ok((n, _)) = up.recv_from(&mut reply) {
                        let _ = back.send_to(&reply[..n], from);
                    }
                });
            }
        });
        SlowChain { addr, chain, stop }
    }

    fn chain_queries(&self) -> usize {
        self.chain.load(Ordering::Relaxed)
    }
}

impl Drop for SlowChain {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The question type of query `msg` (its name uncompressed, as a query's is).
fn qtype(msg: &[u8]) -> Option<u16> {
    let mut at = 12;
    loop {
        let len = usize::from(*msg.get(at)?);
        at += 1 + len;
        if len == 0 {
            break;
        }
    }
    Some(u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]))
}

/// Sends `names` (A, with DO) to `g` all at once, then gathers the
/// replies: (rcode, AD, A records) per name, in order.
fn burst(g: &Gateway, names: &[String]) -> Vec<(u8, bool, usize)> {
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for (i, name) in names.iter().enumerate() {
        client.send_to(&query(i as u16, name, A, 0, true, true), g.addr).unwrap();
    }
    let mut got = vec![(255, false, 0); names.len()];
    let mut buf = vec![0u8; 65535];
    for _ in 0..names.len() {
        let Ok((n, _)) = client.recv_from(&mut buf) else { break };
        let Ok(p) = Packet::parse(&buf[..n]) else { continue };
        let a = p.answers.iter().filter(|r| matches!(r.rdata, simple_dns::rdata::RData::A(_))).count();
        if let Some(slot) = got.get_mut(usize::from(p.id())) {
            *slot = (buf[3] & 0x0f, buf[3] & 0x20 != 0, a);
        }
    }
    got
}

#[test]
fn a_burst_of_names_in_one_cold_zone_fetches_its_chain_once() {
    if !unbound_installed() {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    }
    let zones = Zones::start();
    let relay = SlowChain::start(zones.addr, Duration::from_millis(50));
    let g = gateway_at(relay.addr, true, "");
    // 50 distinct names (wildcard answers) of alg8.test. at once, before
    // any of its chain is known: each miss needs the DNSKEY of test., the
    // DS of alg8.test. and its DNSKEY. Before misses shared the fetches,
    // this sent 150 of them.
    let names: Vec<String> = (0..50).map(|i| format!("n{i}.wild.alg8.test")).collect();
    for (name, got) in names.iter().zip(burst(&g, &names)) {
        assert_eq!(got, (0, true, 1), "{name}: (rcode, AD, A records)");
    }
    let chain = relay.chain_queries();
    assert!(chain <= 4, "{chain} DS and DNSKEY queries for a burst of 50 names in one zone (3 needed)");

    // A CNAME through two cold zones (unsigned insecure.test. to
    // alg13.test.) beside names of the second zone alone: no miss waits
    // forever on another, and each zone is fetched once (the DS of
    // insecure.test. proven absent, alg13.test.'s DS and DNSKEY).
    let names: Vec<String> = (0..50)
        .map(|i| if i % 2 == 0 { format!("n{i}.hop.insecure.test") } else { format!("n{i}.wild.alg13.test") })
        .collect();
    for (i, (name, got)) in names.iter().zip(burst(&g, &names)).enumerate() {
        // Unbound's auth-zone does not follow the CNAME out of its zone,
        // and a target with neither data nor a proof of none is bogus
        // (SERVFAIL), once both zones' chains are known.
        let want = if i % 2 == 0 { (2, false, 0) } else { (0, true, 1) };
        assert_eq!(got, want, "{name}: (rcode, AD, A records)");
    }
    assert_eq!(ask(&g, "n0.hop.insecure.test", A, 0, true, true).ede, [12], "as asked alone");
    let chain = relay.chain_queries() - chain;
    assert!(chain <= 4, "{chain} DS and DNSKEY queries for a burst of 50 names in two zones (3 needed)");
}

#[test]
fn an_any_answer_is_validated_rrset_by_rrset() {
    let Some(zones) = (if unbound_installed() { Some(Zones::start()) } else { None }) else {
        println!("skipped: unbound is not installed (Debian package unbound)");
        return;
    };
    let anchors = data("dnssec/anchors.conf");
    let g = Gateway::start(&main_config(
        zones.addr,
        true,
        &anchors,
        &format!("{DATES_CHECKED}\toption any_mode 'forward'\n"),
    ));
    const ANY: u16 = 255;
    let r = ask(&g, "alg8.test", ANY, 0, true, true);
    assert_eq!((r.rcode, r.ad), (0, true), "{r:?}");
    let sigs = r.answer.iter().filter(|&&t| t == RRSIG).count();
    assert!(sigs >= 2 && r.answer.len() == 2 * sigs, "each RRset with its RRSIG: {r:?}");
    // One bad RRset makes the whole answer bogus.
    let bad = ask(&g, "mail.alg13.test", ANY, 0, true, true);
    assert_eq!((bad.rcode, bad.ede.clone()), (2, vec![6]), "{bad:?}");
}
