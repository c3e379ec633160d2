//! What an upstream is asked, and which replies count: our ID, our
//! question, and records that can be walked (anything else is a forged or
//! stray reply, dropped and counted).

use super::*;

/// Our query for `q`: fresh ID, RD and AD, the client's question and CD, our
/// EDNS size and its DO bit. AD asks a validating upstream to say whether
/// it validated the answer (RFC 6840 §5.7), for every query: the answer is
/// cached for clients that want AD (they set AD or DO) and clients that do
/// not alike, and the replay shows it only to the former.
pub fn build_query(q: &Query, id: u16) -> Vec<u8> {
    let mut m = Vec::with_capacity(q.question_end + 11);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&(flags::RD | flags::AD | (q.flags & flags::CD)).to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 1]);
    m.extend_from_slice(q.question());
    m.push(0);
    m.extend_from_slice(&rtype::OPT.to_be_bytes());
    m.extend_from_slice(&EDNS_UDP_SIZE.to_be_bytes());
    let do_bit: u32 = if q.edns.is_some_and(|e| e.dnssec_ok) { 0x8000 } else { 0 };
    m.extend_from_slice(&do_bit.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m
}

/// Is `r` a well-formed reply to our query `id` for `q`'s question?
pub fn is_reply_to(r: &[u8], id: u16, q: &Query) -> bool {
    answers_question(r, id, q) && records_ok(r, q.qtype)
}

/// Does `r`'s header and question make it a reply to our query `id` for `q`?
fn answers_question(r: &[u8], id: u16, q: &Query) -> bool {
    if r.len() < HEADER_LEN || header::id(r) != id {
        return false;
    }
    let f = header::flags(r);
    if f & flags::QR == 0 || f & flags::OPCODE_MASK != 0 || header::counts(r)[0] != 1 {
        return false;
    }
    let Some(name_len) = wire::plain_name_len(r, HEADER_LEN) else {
        return false;
    };
    let end = HEADER_LEN + name_len;
    r.get(HEADER_LEN..end + 4).is_some_and(|question| {
        wire::names_equal(&question[..name_len], q.qname) && question[name_len..] == q.question()[name_len..]
    })
}

/// Is every record walkable and its RDATA well formed? The common types are
/// checked here; a reply holding any other goes through simple-dns, which
/// knows more types (and costs 2,000 instructions a reply).
fn records_ok(r: &[u8], qtype: u16) -> bool {
    match records_walk(r) {
        Walk::Bad => false,
        Walk::Checked => true,
        Walk::Unchecked => !wire::simple_dns_knows(qtype) || simple_dns::Packet::parse(r).is_ok(),
    }
}

/// What walking a reply's records found.
#[derive(Debug, PartialEq, Eq)]
enum Walk {
    /// A record is cut off, or its RDATA is malformed.
    Bad,
    /// Every record walks, and every RDATA was checked.
    Checked,
    /// Every record walks; some RDATA is of a type [`rdata_ok`] leaves to simple-dns.
    Unchecked,
}

/// Walks all records of `r`, checking the RDATA of the common types.
fn records_walk(r: &[u8]) -> Walk {
    let [_, an, ns, ar] = header::counts(r);
    let Some(mut pos) = wire::skip_name(r, HEADER_LEN).map(|p| p + 4) else { return Walk::Bad };
    let mut walk = Walk::Checked;
    let additional = an as usize + ns as usize;
    let mut opts = 0;
    for i in 0..(additional + ar as usize) {
        // The owner name walked once, for its end and its pointers together.
        let Some(rr) = wire::walk_name(r, pos, |_, _| {}).and_then(|p| wire::rr_after_name(r, p)) else {
            return Walk::Bad;
        };
        // RFC 6891 §6.1.1: at most one OPT, and only in the additional
        // section; the cache cuts it from there and nowhere else.
        if rr.rtype == rtype::OPT {
            opts += 1;
            if i < additional || opts > 1 {
                return Walk::Bad;
            }
        }
        match rdata_ok(r, &rr) {
            Some(false) => return Walk::Bad,
            Some(true) => {}
            None => walk = Walk::Unchecked,
        }
        pos = rr.end;
    }
    walk
}

/// Is the RDATA of `rr` well formed? `None` for types not checked here
/// (and for classes other than IN, which simple-dns vets).
fn rdata_ok(msg: &[u8], rr: &wire::Rr) -> Option<bool> {
    let len = rr.end - rr.rdata_pos;
    match (rr.rtype, rr.class) {
        (rtype::OPT, _) => Some(wire::opt_options_ok(msg, rr.rdata_pos, rr.end)),
        (_, c) if c != wire::CLASS_IN => None,
        (rtype::A, _) => Some(len == 4),
        (rtype::AAAA, _) => Some(len == 16),
        // One name filling the RDATA, whose compression pointers lead somewhere valid.
        (rtype::CNAME, _) => Some(wire::walk_name(msg, rr.rdata_pos, |_, _| {}) == Some(rr.end)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::cache::tests::upstream_answer;
    use crate::wire::{parse_query, tests::query};

    #[test]
    fn reply_validation() {
        let m = query(5, "Www.Example", rtype::A, None);
        let q = parse_query(&m).unwrap();
        let ours = build_query(&q, 0x4242);
        let good = upstream_answer(&ours, &[60], true);
        assert!(is_reply_to(&good, 0x4242, &q));
        assert!(!is_reply_to(&good, 0x4243, &q), "wrong ID");
        let mut lower = good.clone();
        lower[13..16].copy_from_slice(b"www");
        assert!(is_reply_to(&lower, 0x4242, &q), "case may differ");
        let other = upstream_answer(
            &build_query(&parse_query(&query(5, "other.example", rtype::A, None)).unwrap(), 0x4242),
            &[60],
            false,
        );
        assert!(!is_reply_to(&other, 0x4242, &q), "wrong question");
        let aaaa = upstream_answer(
            &build_query(&parse_query(&query(5, "Www.Example", rtype::AAAA, None)).unwrap(), 0x4242),
            &[],
            false,
        );
        assert!(!is_reply_to(&aaaa, 0x4242, &q), "wrong type");
        assert!(!is_reply_to(&ours, 0x4242, &q), "a query is not a reply");
        assert!(!is_reply_to(&good[..good.len() - 3], 0x4242, &q), "cut off");
        assert!(!is_reply_to(&[0x42, 0x42, 0x80], 0x4242, &q));
    }

    /// RFC 6891 §6.1.1: one OPT, in the additional section. An OPT among
    /// the answers once reached the cache, which took one from ARCOUNT 0.
    #[test]
    fn an_opt_only_as_the_one_additional_record() {
        let m = query(5, "www.example", rtype::A, None);
        let q = parse_query(&m).unwrap();
        let ours = build_query(&q, 0x4242);
        let good = upstream_answer(&ours, &[60], true);
        assert!(is_reply_to(&good, 0x4242, &q));
        let mut in_answer = good.clone();
        header::set_counts(&mut in_answer, [1, 2, 0, 0]);
        assert!(!is_reply_to(&in_answer, 0x4242, &q), "OPT in the answer section");
        let mut in_authority = good.clone();
        header::set_counts(&mut in_authority, [1, 1, 1, 0]);
        assert!(!is_reply_to(&in_authority, 0x4242, &q), "OPT in the authority section");
        let opt_at = good.len() - 11;
        assert_eq!(u16::from_be_bytes([good[opt_at + 1], good[opt_at + 2]]), rtype::OPT);
        let mut two = good.clone();
        two.extend_from_slice(&good[opt_at..]);
        header::set_counts(&mut two, [1, 1, 0, 2]);
        assert!(!is_reply_to(&two, 0x4242, &q), "two OPTs");
    }

    /// The checks before this fast path: every record walks, then simple-dns parses it all.
    fn full_parse(r: &[u8], q: &Query) -> bool {
        let [_, an, ns, ar] = header::counts(r);
        let Some(mut pos) = wire::skip_name(r, HEADER_LEN).map(|p| p + 4) else { return false };
        for _ in 0..(an as usize + ns as usize + ar as usize) {
            match wire::read_rr(r, pos) {
                Some(rr) => pos = rr.end,
                None => return false,
            }
        }
        !wire::simple_dns_knows(q.qtype) || simple_dns::Packet::parse(r).is_ok()
    }

    /// A CNAME chain with compression, A and AAAA records, an OPT: every
    /// one-byte change must be judged as simple-dns judges it, except where
    /// this check is stricter (RDATA longer than its content: simple-dns stops
    /// reading where the content ends).
    #[test]
    fn fast_rdata_checks_agree_with_simple_dns() {
        use simple_dns::{CLASS, Name, Packet, ResourceRecord, rdata::RData};
        let m = query(5, "www.example", rtype::A, None);
        let q = parse_query(&m).unwrap();
        let ours = build_query(&q, 0x4242);
        let mut p = Packet::new_reply(0x4242);
        p.questions = Packet::parse(&ours).unwrap().questions;
        let (www, cdn) = (Name::new_unchecked("www.example"), Name::new_unchecked("cdn.example"));
        p.answers.push(ResourceRecord::new(www, CLASS::IN, 60, RData::CNAME(cdn.clone().into())));
        p.answers.push(ResourceRecord::new(
            cdn.clone(),
            CLASS::IN,
            60,
            RData::A(simple_dns::rdata::A { address: 0x0a000001 }),
        ));
        p.answers.push(ResourceRecord::new(cdn, CLASS::IN, 60, RData::AAAA(simple_dns::rdata::AAAA { address: 1 })));
        *p.opt_mut() = Some(simple_dns::rdata::OPT { opt_codes: vec![], udp_packet_size: 1232, version: 0 });
        let good = p.build_bytes_vec_compressed().unwrap();
        assert!(good.windows(2).any(|w| w[0] == 0xC0), "the reply uses compression");
        assert_eq!(records_walk(&good), Walk::Checked);
        assert!(is_reply_to(&good, 0x4242, &q));
        let mut stricter = 0;
        for i in HEADER_LEN..good.len() {
            for v in [0x00, 0x01, 0x03, 0x04, 0x05, 0x0f, 0x10, 0x1c, 0x29, 0x3f, 0x40, 0xc0, 0xc1, 0xff, good[i] ^ 1] {
                let mut r = good.clone();
                r[i] = v;
                if !answers_question(&r, 0x4242, &q) {
                    continue;
                }
                let (fast, full) = (records_ok(&r, q.qtype), full_parse(&r, &q));
                if full && !fast {
                    stricter += 1;
                    continue;
                }
                assert_eq!(fast, full, "byte {i} set to {v:#x}");
            }
        }
        assert!(stricter < 20, "{stricter} replies simple-dns takes are refused");
        // Types left to simple-dns still go through it: the AAAA turned
        // HINFO (its 16 bytes read as two 7-byte strings).
        let mut hinfo = good.clone();
        let at = hinfo.windows(4).position(|w| w == [0, 28, 0, 1]).unwrap();
        hinfo[at + 1] = rtype::HINFO as u8;
        hinfo[at + 10] = 7;
        hinfo[at + 18] = 7;
        assert_eq!(records_walk(&hinfo), Walk::Unchecked);
        assert!(full_parse(&hinfo, &q), "simple-dns takes it");
        assert!(is_reply_to(&hinfo, 0x4242, &q));
        hinfo[at + 18] = 8;
        assert!(!full_parse(&hinfo, &q) && !is_reply_to(&hinfo, 0x4242, &q), "a string past the RDATA");
    }
}
