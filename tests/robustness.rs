//! Hostile and odd input against the real binary: short datagrams, broken
//! headers, unknown opcodes, responses, EDNS versions, random garbage, and
//! real captured queries (UDP and TCP streams) from tests/data/pcaps.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/pcap.rs"]
mod pcap;

use std::collections::HashSet;
use std::io::Write;
use std::net::UdpSocket;
use std::time::Duration;

use common::*;
use simple_dns::RCODE;

const NO_ANSWER_WAIT: Duration = Duration::from_millis(300);

#[test]
fn malformed_queries_get_formerr_notimp_or_nothing() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    for len in 0..12 {
        assert!(udp_raw(gw.addr, &vec![0xab; len], NO_ANSWER_WAIT).is_none(), "{len}-byte datagram dropped");
    }
    // A header promising a question that is not there.
    let mut bad = build_query(0x5151, "x.example", A, None);
    bad.truncate(15);
    let r = Reply::parse(udp_raw(gw.addr, &bad, Duration::from_secs(10)).unwrap());
    assert_eq!((r.id, r.rcode), (0x5151, RCODE::FormatError));
    // Two questions announced, one present; a compression loop in the name.
    let mut two = build_query(0x5252, "x.example", A, None);
    two[5] = 2;
    assert_eq!(Reply::parse(udp_raw(gw.addr, &two, Duration::from_secs(10)).unwrap()).rcode, RCODE::FormatError);
    let mut looped = build_query(0x5353, "x", A, None);
    looped.splice(12..15, [0xc0, 12]);
    assert_eq!(Reply::parse(udp_raw(gw.addr, &looped, Duration::from_secs(10)).unwrap()).rcode, RCODE::FormatError);
    // NOTIFY (opcode 4) and UPDATE (5) are not implemented.
    for opcode in [4u8, 5] {
        let mut q = build_query(0x5454, "x.example", A, None);
        q[2] = (q[2] & 0x87) | (opcode << 3);
        let r = Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap());
        assert_eq!((r.id, r.rcode), (0x5454, RCODE::NotImplemented));
    }
    // A response is never answered (no loops, no reflection).
    let mut resp = build_query(0x5555, "x.example", A, None);
    resp[2] |= 0x80;
    assert!(udp_raw(gw.addr, &resp, NO_ANSWER_WAIT).is_none());
    // EDNS version 1: BADVERS, extended rcode 16 in our OPT.
    let mut v1 = build_query(0x5656, "x.example", A, Some(1232));
    let opt_ttl = v1.len() - 6;
    v1[opt_ttl + 1] = 1;
    let raw = udp_raw(gw.addr, &v1, Duration::from_secs(10)).unwrap();
    // Our OPT is the last record; its TTL's top byte is the extended rcode (RFC 6891 §6.1.3).
    // (simple-dns reads that byte from the wrong end, so check the bytes.)
    let opt = &raw[raw.len() - 11..];
    assert_eq!(&opt[..3], &[0, 0, 41], "OPT present");
    assert_eq!((opt[5], opt[6]), (1, 0), "extended rcode 1 (BADVERS = 16), version 0");
    assert_eq!(up.total(), 0, "nothing malformed went upstream");
    assert_eq!(udp(gw.addr, "still.example", A).ips(), ["192.0.2.1"]);
    let s = gw.stats();
    assert_eq!((s["dropped"], s["formerr"], s["notimp"], s["badvers"]), (13, 3, 2, 1), "{s:?}");
}

/// A response whose records all walk; simple-dns must also accept it when it
/// knows the question's type (it refuses unknown types, which fuzzing makes).
fn well_formed(m: &[u8]) -> bool {
    use hydradns::wire::{HEADER_LEN, header, read_rr, simple_dns_knows, skip_name, u16_at};
    if m.len() < HEADER_LEN || header::flags(m) & 0x8000 == 0 {
        return false;
    }
    let [qd, an, ns, ar] = header::counts(m);
    let mut pos = HEADER_LEN;
    let mut qtype = 1;
    for _ in 0..qd {
        let Some(p) = skip_name(m, pos) else { return false };
        qtype = u16_at(m, p).unwrap_or(0);
        pos = p + 4;
    }
    for _ in 0..(an as usize + ns as usize + ar as usize) {
        match read_rr(m, pos) {
            Some(rr) => pos = rr.end,
            None => return false,
        }
    }
    pos <= m.len() && (qd == 0 || !simple_dns_knows(qtype) || simple_dns::Packet::parse(m).is_ok())
}

#[test]
fn random_garbage_never_stops_the_server() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "config blocklist\n\tlist domain 'blocked.example'\n"));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let valid = build_query(1, "blocked.example", A, Some(1232));
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut sent = 0u64;
    let mut answers = 0;
    let mut buf = [0u8; 4096];
    for round in 0..40 {
        for i in 0..50 {
            // Half pure noise, half a valid query with a few bytes flipped or cut.
            let pkt: Vec<u8> = if (round + i) % 2 == 0 {
                (0..rnd() % 300).map(|_| rnd() as u8).collect()
            } else {
                let mut p = valid.clone();
                for _ in 0..1 + rnd() % 4 {
                    let at = (rnd() as usize) % p.len();
                    p[at] = rnd() as u8;
                }
                p.truncate(12 + (rnd() as usize) % (p.len() - 11));
                p
            };
            sock.send_to(&pkt, gw.addr).unwrap();
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            assert!(well_formed(&buf[..n]), "malformed answer {:?}", &buf[..n]);
            answers += 1;
        }
    }
    // The rest of the answers, once the gateway has read every datagram
    // (on a busy machine most may come after the sending is over).
    wait_for("every datagram read", Duration::from_secs(60), || gw.stats()["udp_queries"] >= sent);
    sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    while let Ok((n, _)) = sock.recv_from(&mut buf) {
        assert!(well_formed(&buf[..n]), "malformed answer {:?}", &buf[..n]);
        answers += 1;
    }
    assert!(answers > 0);
    assert_eq!(udp(gw.addr, "blocked.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(udp(gw.addr, "fine.example", A).ips(), ["192.0.2.1"]);
    // The server's own count proves it saw every datagram, not just survived.
    assert_eq!(gw.stats()["udp_queries"], sent + 2);
}

#[test]
fn tcp_garbage_closes_only_that_connection() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let mut s = tcp_connect(gw.addr);
    // Opcode 0, one question whose name starts with an impossible label length.
    write_frame(&mut s, b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xffgarbage").unwrap();
    let r = Reply::parse(read_frame(&mut s).unwrap());
    assert_eq!((r.id, r.rcode), (0x1234, RCODE::FormatError));
    write_frame(&mut s, &[]).unwrap();
    assert!(read_frame(&mut s).is_none(), "an empty frame ends the connection");
    assert_eq!(tcp(gw.addr, "ok.example", A).rcode, RCODE::NoError);
}

/// Real client queries captured on the wire, replayed over UDP: each gets an
/// answer carrying its ID.
#[test]
fn real_captured_udp_queries() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let mut replayed = 0;
    for file in [
        "pcaps/dnsjit/pellets.pcap",
        "pcaps/dnsjit/dns.pcap",
        "pcaps/dnsjit/ip6-udp-padd.pcap",
        "pcaps/bad-packets/dnspad.pcap",
    ] {
        for seg in pcap::segments(&data(file)) {
            if seg.tcp || seg.dst_port != 53 || seg.payload.len() < 12 || seg.payload[2] & 0x80 != 0 {
                continue;
            }
            let id = u16::from_be_bytes([seg.payload[0], seg.payload[1]]);
            let raw =
                udp_raw(gw.addr, &seg.payload, Duration::from_secs(10)).unwrap_or_else(|| panic!("{file}: no answer"));
            let r = Reply::parse(raw);
            assert_eq!(r.id, id, "{file}");
            replayed += 1;
        }
    }
    assert!(replayed >= 120, "replayed {replayed} captured queries");
}

/// Captured DNS-over-TCP client streams, written segment by segment as they
/// were captured (several queries in one segment, one query split over two):
/// every query in the stream is answered.
#[test]
fn real_captured_tcp_streams() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    for file in [
        "pcaps/bad-packets/dnso1tcp.pcap",
        "pcaps/bad-packets/dnsotcp-many1pkt.pcap",
        "pcaps/bad-packets/dnsotcp-manyopkts.pcap",
    ] {
        let mut seen_seq = HashSet::new();
        let segments: Vec<Vec<u8>> = pcap::segments(&data(file))
            .into_iter()
            .filter(|s| s.tcp && s.dst_port == 53 && !s.payload.is_empty() && seen_seq.insert(s.seq))
            .map(|s| s.payload)
            .collect();
        let stream: Vec<u8> = segments.concat();
        let mut ids = Vec::new();
        let mut p = 0;
        while p + 2 <= stream.len() {
            let len = u16::from_be_bytes([stream[p], stream[p + 1]]) as usize;
            ids.push(u16::from_be_bytes([stream[p + 2], stream[p + 3]]));
            p += 2 + len;
        }
        assert!(ids.len() >= 2, "{file}: {} queries", ids.len());
        let mut s = tcp_connect(gw.addr);
        for seg in &segments {
            s.write_all(seg).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut got: Vec<u16> = (0..ids.len()).map(|_| Reply::parse(read_frame(&mut s).expect(file)).id).collect();
        got.sort_unstable();
        ids.sort_unstable();
        assert_eq!(got, ids, "{file}");
    }
}
