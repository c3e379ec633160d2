//! Protocol conformance through the real binary: the EDNS compliance tests
//! of RFC 8906 §8 (as ISC's genreport runs them), and what a forwarder
//! must relay and must not: AD for clients that ask (RFC 6840 §5.7–5.8), no
//! AA, an OPT in error answers (RFC 6891 §6.1.1), whole RRsets in a
//! truncated answer (RFC 2181 §9), the upstream's Extended DNS Errors (RFC
//! 8914). The upstream is scripted byte by byte here, so every flag and
//! option it sends is known.
#![allow(clippy::unwrap_used)]

mod common;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

const QR: u16 = 0x8000;
const AA: u16 = 0x0400;
const TC: u16 = 0x0200;
const RD: u16 = 0x0100;
const AD: u16 = 0x0020;
const CD: u16 = 0x0010;
const Z: u16 = 0x0040;
const EDE: u16 = 15;
/// What the scripted upstream says in its Extended DNS Error (code 0, Other).
const UPSTREAM_EDE: &[u8] = b"\x00\x00from upstream";

/// A query as a client writes it: `flags` in the header, an OPT when
/// `edns` gives (version, DO, extra flag bits, options).
fn query(id: u16, name: &str, qtype: u16, flags: u16, edns: Option<(u8, bool, u16, &[u8])>) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, edns.is_some() as u8]);
    for label in name.split('.') {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    if let Some((version, dnssec_ok, extra, options)) = edns {
        m.push(0);
        m.extend_from_slice(&41u16.to_be_bytes());
        m.extend_from_slice(&1232u16.to_be_bytes());
        m.extend_from_slice(&[0, version]);
        m.extend_from_slice(&(if dnssec_ok { 0x8000 } else { 0 } | extra).to_be_bytes());
        m.extend_from_slice(&(options.len() as u16).to_be_bytes());
        m.extend_from_slice(options);
    }
    m
}

fn u16_at(m: &[u8], p: usize) -> u16 {
    u16::from_be_bytes([m[p], m[p + 1]])
}

fn skip_name(m: &[u8], mut p: usize) -> usize {
    loop {
        match m[p] {
            0 => return p + 1,
            l if l & 0xC0 == 0xC0 => return p + 2,
            l => p += 1 + l as usize,
        }
    }
}

/// A reply, read by hand: flags, counts, each record's type and where the
/// OPT is.
#[derive(Debug)]
struct Msg {
    flags: u16,
    counts: [u16; 4],
    /// (section index, type) of every record.
    types: Vec<(usize, u16)>,
    /// The OPT record: (version, DO, flags, its options' bytes).
    opt: Option<(u8, bool, u16, Vec<u8>)>,
    /// Extended rcode bits from the OPT.
    ext_rcode: u8,
}

impl Msg {
    fn parse(m: &[u8]) -> Msg {
        let counts = [u16_at(m, 4), u16_at(m, 6), u16_at(m, 8), u16_at(m, 10)];
        let mut p = 12;
        for _ in 0..counts[0] {
            p = skip_name(m, p) + 4;
        }
        let (mut types, mut opt, mut ext_rcode) = (Vec::new(), None, 0);
        for i in 0..(counts[1] + counts[2] + counts[3]) as usize {
            let section = if i < counts[1] as usize {
                1
            } else if i < (counts[1] + counts[2]) as usize {
                2
            } else {
                3
            };
            p = skip_name(m, p);
            let t = u16_at(m, p);
            let rdlen = u16_at(m, p + 8) as usize;
            if t == 41 {
                ext_rcode = m[p + 4];
                let fl = u16_at(m, p + 6);
                opt = Some((m[p + 5], fl & 0x8000 != 0, fl, m[p + 10..p + 10 + rdlen].to_vec()));
            }
            types.push((section, t));
            p += 10 + rdlen;
        }
        assert_eq!(p, m.len(), "the message ends where its records do");
        Msg { flags: u16_at(m, 2), counts, types, opt, ext_rcode }
    }

    fn rcode(&self) -> u16 {
        self.flags & 0xF
    }

    fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// (code, data) of every option in the OPT.
    fn options(&self) -> Vec<(u16, Vec<u8>)> {
        let Some((_, _, _, o)) = &self.opt else { return Vec::new() };
        let mut out = Vec::new();
        let mut p = 0;
        while p + 4 <= o.len() {
            let len = u16_at(o, p + 2) as usize;
            out.push((u16_at(o, p), o[p + 4..p + 4 + len].to_vec()));
            p += 4 + len;
        }
        out
    }
}

/// An upstream resolver written byte by byte (UDP and TCP on one port).
/// Names: `signed.*` answers with AD when the query has AD or DO, as a
/// validating resolver does (RFC 6840 §5.7); `auth.*` sets AA; `ede.*`
/// carries an Extended DNS Error; `glue.*` is 3 A records with 13 NS and
/// 13 glue records, over 512 bytes; `huge.*` is one RRset of 100 A records;
/// anything else one A record, and other types NODATA. Every query's flags
/// are kept.
struct Scripted {
    addr: SocketAddr,
    seen_flags: Arc<Mutex<Vec<u16>>>,
    stop: Arc<AtomicBool>,
}

impl Scripted {
    fn start() -> Scripted {
        let (udp, tcp) = udp_and_tcp_on("127.0.0.1:0".parse().unwrap());
        udp.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        tcp.set_nonblocking(true).unwrap();
        let s = Scripted { addr: udp.local_addr().unwrap(), seen_flags: Arc::default(), stop: Arc::default() };
        let (seen, stop) = (s.seen_flags.clone(), s.stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop.load(SeqCst) {
                if let Ok((n, peer)) = udp.recv_from(&mut buf) {
                    seen.lock().unwrap().push(u16_at(&buf, 2));
                    let _ = udp.send_to(&Scripted::answer(&buf[..n]), peer);
                }
                if let Ok((mut c, _)) = tcp.accept() {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    while let Some(m) = read_frame(&mut c) {
                        seen.lock().unwrap().push(u16_at(&m, 2));
                        let _ = write_frame(&mut c, &Scripted::answer(&m));
                    }
                }
            }
        });
        s
    }

    fn answer(q: &[u8]) -> Vec<u8> {
        let qflags = u16_at(q, 2);
        let qend = skip_name(q, 12) + 4;
        let name = String::from_utf8_lossy(&q[13..qend - 5]).to_ascii_lowercase();
        let qtype = u16_at(q, qend - 4);
        // The client's OPT is the last record, when there is one.
        let dnssec_ok = u16_at(q, 10) > 0 && q.len() >= qend + 11 && q[qend + 7] & 0x80 != 0;
        let mut flags = QR | RD | 0x0080 | (qflags & CD);
        let (mut an, mut ns, mut ar) = (Vec::<Vec<u8>>::new(), Vec::<Vec<u8>>::new(), Vec::<Vec<u8>>::new());
        let a = |owner: &[u8], ip: [u8; 4]| {
            let mut r = owner.to_vec();
            r.extend_from_slice(&[0, 1, 0, 1, 0, 0, 1, 44, 0, 4]);
            r.extend_from_slice(&ip);
            r
        };
        let question_name: &[u8] = &[0xC0, 12];
        if qtype == 1 {
            if name.starts_with("glue") {
                for i in 0..3 {
                    an.push(a(question_name, [192, 0, 2, 20 + i]));
                }
                for i in 0..13u8 {
                    let host = format!("a-rather-long-name-server-{i:02}.nameservers.example");
                    let mut wire = Vec::new();
                    for l in host.split('.') {
                        wire.push(l.len() as u8);
                        wire.extend_from_slice(l.as_bytes());
                    }
                    wire.push(0);
                    let mut r = question_name.to_vec();
                    r.extend_from_slice(&[0, 2, 0, 1, 0, 0, 1, 44]);
                    r.extend_from_slice(&(wire.len() as u16).to_be_bytes());
                    r.extend_from_slice(&wire);
                    ns.push(r);
                    ar.push(a(&wire, [198, 51, 100, i]));
                }
            } else if name.starts_with("huge") {
                for i in 0..100 {
                    an.push(a(question_name, [192, 0, 2, i]));
                }
            } else {
                an.push(a(question_name, [192, 0, 2, 1]));
            }
        }
        if name.starts_with("signed") && (qflags & AD != 0 || dnssec_ok) {
            flags |= AD;
        }
        if name.starts_with("auth") {
            flags |= AA;
        }
        let mut r = q[..2].to_vec();
        r.extend_from_slice(&flags.to_be_bytes());
        let has_opt = u16_at(q, 10) > 0;
        for c in [1, an.len(), ns.len(), ar.len() + has_opt as usize] {
            r.extend_from_slice(&(c as u16).to_be_bytes());
        }
        r.extend_from_slice(&q[12..qend]);
        for rec in an.iter().chain(&ns).chain(&ar) {
            r.extend_from_slice(rec);
        }
        if has_opt {
            let mut options = Vec::new();
            if name.starts_with("ede") {
                options.extend_from_slice(&EDE.to_be_bytes());
                options.extend_from_slice(&(UPSTREAM_EDE.len() as u16).to_be_bytes());
                options.extend_from_slice(UPSTREAM_EDE);
            }
            r.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, if dnssec_ok { 0x80 } else { 0 }, 0]);
            r.extend_from_slice(&(options.len() as u16).to_be_bytes());
            r.extend_from_slice(&options);
        }
        r
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
    }
}

fn gateway(up: &Scripted) -> Gateway {
    gateway_with(up, "")
}

fn gateway_with(up: &Scripted, extra: &str) -> Gateway {
    Gateway::start(&format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption upstream_timeout '1s'\n\tlist upstream '{}'\n{extra}",
        up.addr
    ))
}

fn ask(gw: &Gateway, q: &[u8]) -> Msg {
    let Some(raw) = udp_raw(gw.addr, q, Duration::from_secs(10)) else { panic!("no answer") };
    Msg::parse(&raw)
}

/// RFC 8906 §8, the tests genreport runs, against a forwarder.
#[test]
fn rfc8906_edns_compliance() {
    let up = Scripted::start();
    let gw = gateway(&up);
    let plain = ask(&gw, &query(1, "plain.example", 1, RD, None));
    assert_eq!((plain.rcode(), plain.counts[1], plain.opt.is_none()), (0, 1, true), "plain: {plain:?}");

    let edns = ask(&gw, &query(2, "edns.example", 1, RD, Some((0, false, 0, &[]))));
    assert_eq!((edns.rcode(), edns.counts[1]), (0, 1), "edns: {edns:?}");
    assert!(matches!(edns.opt, Some((0, false, 0, _))), "edns: an OPT of version 0: {edns:?}");

    let v1 = ask(&gw, &query(3, "edns1.example", 1, RD, Some((1, false, 0, &[]))));
    assert_eq!((v1.ext_rcode, v1.rcode(), v1.counts[1]), (1, 0, 0), "edns1: BADVERS: {v1:?}");
    assert!(matches!(v1.opt, Some((0, ..))), "edns1: our version is 0: {v1:?}");

    let unknown_option = ask(&gw, &query(4, "optlist.example", 1, RD, Some((0, false, 0, &[0, 100, 0, 2, 1, 2]))));
    assert_eq!((unknown_option.rcode(), unknown_option.counts[1]), (0, 1), "ednsopt: {unknown_option:?}");
    assert!(unknown_option.options().iter().all(|(c, _)| *c != 100), "an unknown option is not echoed");

    let unknown_flag = ask(&gw, &query(5, "ednsflags.example", 1, RD, Some((0, false, 0x4000, &[]))));
    assert_eq!((unknown_flag.rcode(), unknown_flag.counts[1]), (0, 1), "ednsflags: {unknown_flag:?}");
    assert!(matches!(unknown_flag.opt, Some((0, false, 0, _))), "unknown EDNS flags are cleared: {unknown_flag:?}");

    let mut tcp_conn = tcp_connect(gw.addr);
    write_frame(&mut tcp_conn, &query(6, "ednstcp.example", 1, RD, Some((0, false, 0, &[])))).unwrap();
    let over_tcp = Msg::parse(&read_frame(&mut tcp_conn).unwrap());
    assert_eq!((over_tcp.rcode(), over_tcp.counts[1], over_tcp.opt.is_some()), (0, 1, true), "ednstcp: {over_tcp:?}");

    let dnssec = ask(&gw, &query(7, "do.example", 1, RD, Some((0, true, 0, &[]))));
    assert!(matches!(dnssec.opt, Some((0, true, _, _))), "do: DO echoed: {dnssec:?}");

    let cd = ask(&gw, &query(8, "cd.example", 1, RD | CD, None));
    assert!(cd.has(CD) && cd.rcode() == 0, "cd: CD echoed: {cd:?}");

    let zflag = ask(&gw, &query(9, "zflag.example", 1, RD | Z, Some((0, false, 0, &[]))));
    assert!(!zflag.has(Z) && zflag.rcode() == 0 && zflag.counts[1] == 1, "zflag: answered, Z clear: {zflag:?}");

    let opcode = ask(&gw, &query(10, "opcode.example", 1, RD | (15 << 11), Some((0, false, 0, &[]))));
    assert_eq!(opcode.rcode(), 4, "opcode: NOTIMP: {opcode:?}");
    assert!(opcode.opt.is_some(), "opcode: an OPT in the NOTIMP (RFC 6891 §6.1.1): {opcode:?}");
    let opcode_plain = ask(&gw, &query(11, "opcode.example", 1, RD | (15 << 11), None));
    assert!(opcode_plain.rcode() == 4 && opcode_plain.opt.is_none(), "no OPT asked, none sent: {opcode_plain:?}");

    let tcflag = ask(&gw, &query(12, "tcflag.example", 1, RD | TC, Some((0, false, 0, &[]))));
    assert!(tcflag.rcode() == 0 && tcflag.counts[1] == 1 && !tcflag.has(TC), "tcflag: answered: {tcflag:?}");

    let unknown_type = ask(&gw, &query(13, "type1000.example", 1000, RD, Some((0, false, 0, &[]))));
    assert!(unknown_type.rcode() == 0 && unknown_type.opt.is_some(), "type1000: relayed: {unknown_type:?}");
    assert!(gw.stop().success());
}

/// From an upstream it trusts (`trust_upstream_ad`; a plain one's AD is
/// cleared otherwise, `tests/upstream.rs`), AD reaches every client that
/// asks for it, by AD (RFC 6840 §5.7, dig and glibc with trust-ad) or by
/// DO, fresh and from the cache, whatever CD; never a client that asked by
/// neither. The upstream is always asked with AD, so one cached answer
/// serves both kinds.
#[test]
fn ad_is_relayed_to_clients_that_ask_and_only_to_them() {
    let up = Scripted::start();
    let gw = gateway_with(&up, "\toption trust_upstream_ad '1'\n");
    for round in ["fresh", "cached"] {
        for (i, (ad, dnssec_ok, cd)) in [false, true]
            .into_iter()
            .flat_map(|ad| [false, true].into_iter().flat_map(move |d| [false, true].map(|cd| (ad, d, cd))))
            .enumerate()
        {
            let flags = RD | if ad { AD } else { 0 } | if cd { CD } else { 0 };
            let edns = dnssec_ok.then_some((0, true, 0, &[][..]));
            let r = ask(&gw, &query(i as u16, "signed.example", 1, flags, edns));
            assert_eq!(r.has(AD), ad || dnssec_ok, "{round}: AD={ad} DO={dnssec_ok} CD={cd}: {r:?}");
            assert_eq!(r.has(CD), cd, "{round}: CD echoed");
            assert_eq!(r.counts[1], 1);
        }
    }
    assert!(up.seen_flags.lock().unwrap().iter().all(|f| f & AD != 0), "every upstream query asks with AD");
    assert!(gw.stop().success());
}

/// A forwarder is no authority: AA from the upstream is not passed on,
/// fresh or cached.
#[test]
fn aa_is_never_relayed() {
    let up = Scripted::start();
    let gw = gateway(&up);
    for round in ["fresh", "cached"] {
        let r = ask(&gw, &query(1, "auth.example", 1, RD, None));
        assert!(!r.has(AA) && r.counts[1] == 1, "{round}: {r:?}");
    }
    assert!(gw.stop().success());
}

/// A FORMERR to a query with a well-formed OPT carries one too.
#[test]
fn formerr_answers_an_opt_with_an_opt() {
    let up = Scripted::start();
    let gw = gateway(&up);
    // Two questions, then the OPT.
    let mut q = query(1, "a.example", 1, RD, Some((0, false, 0, &[])));
    let opt = q.split_off(q.len() - 11);
    let question = q[12..].to_vec();
    q.extend_from_slice(&question);
    q.extend_from_slice(&opt);
    q[5] = 2;
    let r = ask(&gw, &q);
    assert!(r.rcode() == 1 && r.opt.is_some(), "{r:?}");
    assert!(gw.stop().success());
}

/// Too big for the client: whole RRsets that fit, TC set, so a client that
/// cannot retry over TCP still gets the addresses (busybox nslookup); never
/// part of an RRset.
#[test]
fn truncated_answers_keep_the_whole_rrsets_that_fit() {
    let up = Scripted::start();
    let gw = gateway(&up);
    for edns in [None, Some((0, false, 0, &[][..]))] {
        let raw = udp_raw(gw.addr, &query(1, "glue.example", 1, RD, edns), Duration::from_secs(10)).unwrap();
        assert!(raw.len() <= 512, "{} bytes", raw.len());
        let r = Msg::parse(&raw);
        assert!(r.has(TC), "{r:?}");
        assert_eq!((r.counts[1], r.counts[2]), (3, 0), "the A RRset, no authority: {r:?}");
        assert_eq!(r.opt.is_some(), edns.is_some(), "{r:?}");
        assert!(r.types.iter().filter(|(s, _)| *s == 1).all(|(_, t)| *t == 1));
    }
    // One RRset of 100 records fits nowhere: none of it.
    let r = ask(&gw, &query(2, "huge.example", 1, RD, None));
    assert!(r.has(TC) && r.counts[1] == 0, "{r:?}");
    // Over TCP, all of it.
    let mut c = tcp_connect(gw.addr);
    write_frame(&mut c, &query(3, "glue.example", 1, RD, None)).unwrap();
    let whole = Msg::parse(&read_frame(&mut c).unwrap());
    assert_eq!((whole.counts[1], whole.counts[2], whole.counts[3], whole.has(TC)), (3, 13, 13, false));
    assert!(gw.stop().success());
}

/// The upstream's Extended DNS Errors reach clients that use EDNS, fresh
/// and from the cache; the rest of its OPT does not.
#[test]
fn upstream_extended_errors_are_relayed() {
    let up = Scripted::start();
    let gw = gateway(&up);
    for round in ["fresh", "cached"] {
        let r = ask(&gw, &query(1, "ede.example", 1, RD, Some((0, false, 0, &[]))));
        assert_eq!(r.options(), [(EDE, UPSTREAM_EDE.to_vec())], "{round}: {r:?}");
        assert_eq!(r.counts[1], 1);
    }
    let plain = ask(&gw, &query(2, "ede.example", 1, RD, None));
    assert!(plain.opt.is_none(), "no EDNS asked, none sent: {plain:?}");
    let other = ask(&gw, &query(3, "other.example", 1, RD, Some((0, false, 0, &[]))));
    assert!(other.options().is_empty(), "{other:?}");
    assert!(gw.stop().success());
}
