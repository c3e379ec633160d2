//! Builds answers in a reused buffer: questions, records, negative
//! answers, OPT (with EDNS options) and truncation to the client's size.

use super::*;

/// A query for `name` (dotted, a trailing dot optional; "" or "." is the
/// root) and `qtype`, class IN, RD set, with an OPT record when `edns`
/// gives (UDP size, DO). `None` if a label is empty or over 63 bytes, or
/// the name over 255. The benchmark's load, the examples, the fuzz
/// targets and the unit tests all send these.
pub fn query(id: u16, name: &str, qtype: u16, edns: Option<(u16, bool)>) -> Option<Vec<u8>> {
    let mut m = Vec::with_capacity(HEADER_LEN + name.len() + 2 + 4 + 11);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&flags::RD.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, edns.is_some() as u8]);
    push_name(&mut m, name)?;
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&CLASS_IN.to_be_bytes());
    if let Some((size, dnssec_ok)) = edns {
        m.push(0);
        m.extend_from_slice(&rtype::OPT.to_be_bytes());
        m.extend_from_slice(&size.to_be_bytes());
        m.extend_from_slice(&(if dnssec_ok { 0x8000u32 } else { 0 }).to_be_bytes());
        m.extend_from_slice(&[0, 0]);
    }
    Some(m)
}

/// Appends `name` (dotted, a trailing dot optional; "" or "." is the
/// root) in wire format, as written; `None` (with `out` partly written)
/// for an empty or over-long label or a name over 255 bytes.
pub fn push_name(out: &mut Vec<u8>, name: &str) -> Option<()> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let start = out.len();
    if !name.is_empty() {
        for label in name.split('.') {
            if label.is_empty() || label.len() > 63 {
                return None;
            }
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
    }
    out.push(0);
    (out.len() - start <= MAX_NAME_LEN).then_some(())
}

/// Starts a response to `q`: its ID, opcode, RD and CD, plus QR, RA and
/// `rc`, and its question as sent. Counts are set by [`finish`].
pub fn start(out: &mut Vec<u8>, q: &Query, rc: u8) {
    out.clear();
    out.extend_from_slice(&q.msg[..HEADER_LEN]);
    let f = flags::QR | flags::RA | (q.flags & (flags::RD | flags::CD)) | rc as u16;
    header::set_flags(out, f);
    header::set_counts(out, [1, 0, 0, 0]);
    out.extend_from_slice(q.question());
}

/// A header-only error answer (FORMERR, NOTIMP, REFUSED) for a message
/// whose question cannot be trusted. `msg` must hold at least a header.
pub fn header_only(out: &mut Vec<u8>, msg: &[u8], rc: u8) {
    out.clear();
    out.extend_from_slice(&msg[..HEADER_LEN]);
    let f = header::flags(msg);
    header::set_flags(out, flags::QR | flags::RA | (f & (flags::OPCODE_MASK | flags::RD | flags::CD)) | rc as u16);
    header::set_counts(out, [0; 4]);
}

/// [`header_only`], plus our OPT when `msg` carries one EDNS record we
/// can find (RFC 6891 §6.1.1: a responder answers an OPT with an OPT,
/// errors included; without it dig warns and retries without EDNS).
pub fn rejection(out: &mut Vec<u8>, msg: &[u8], rc: u8) {
    header_only(out, msg, rc);
    if let Some(e) = find_edns(msg) {
        finish(out, Some(e), [0, 0, 0], false);
    }
}

/// Appends a record owned by the question name (a pointer to offset 12).
pub fn record(out: &mut Vec<u8>, rtype: u16, ttl: u32, rdata: &[u8]) {
    record_at(out, HEADER_LEN as u16, rtype, ttl, rdata);
}

/// Appends a record owned by the name at offset `owner` (below 0x4000) of `out`.
pub fn record_at(out: &mut Vec<u8>, owner: u16, rtype: u16, ttl: u32, rdata: &[u8]) {
    out.extend_from_slice(&(0xC000 | owner).to_be_bytes());
    out.extend_from_slice(&rtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
}

/// Appends a synthetic SOA for the question name so clients can cache a
/// negative answer for `ttl` (RFC 2308: the SOA minimum bounds it).
pub fn negative_soa(out: &mut Vec<u8>, ttl: u32) {
    let mut rdata = [0u8; 2 + 20];
    // MNAME and RNAME: the root. Serial 1, then refresh/retry/expire/minimum.
    put_u32(&mut rdata, 2, 1);
    for i in 0..4 {
        put_u32(&mut rdata, 6 + 4 * i, ttl);
    }
    record(out, rtype::SOA, ttl, &rdata);
}

/// Sets the section counts and appends our OPT when the client used EDNS
/// (echoing its DO bit; `badvers` sets the extended rcode 16).
pub fn finish(out: &mut Vec<u8>, edns: Option<Edns>, counts: [u16; 3], badvers: bool) {
    finish_with(out, edns, counts, badvers, &[]);
}

/// [`finish`], with `options` (whole EDNS options, e.g. Extended DNS
/// Errors) in the OPT record when there is one.
pub fn finish_with(out: &mut Vec<u8>, edns: Option<Edns>, counts: [u16; 3], badvers: bool, options: &[u8]) {
    let mut ar = counts[2];
    if let Some(e) = edns {
        push_opt(out, e.dnssec_ok, badvers, options);
        ar += 1;
    }
    let qd = header::counts(out)[0];
    header::set_counts(out, [qd, counts[0], counts[1], ar]);
}

fn push_opt(out: &mut Vec<u8>, dnssec_ok: bool, badvers: bool, options: &[u8]) {
    let ext_rcode: u32 = if badvers { 1 << 24 } else { 0 };
    let do_bit: u32 = if dnssec_ok { 0x8000 } else { 0 };
    out.push(0);
    out.extend_from_slice(&rtype::OPT.to_be_bytes());
    out.extend_from_slice(&EDNS_UDP_SIZE.to_be_bytes());
    out.extend_from_slice(&(ext_rcode | do_bit).to_be_bytes());
    out.extend_from_slice(&(options.len() as u16).to_be_bytes());
    out.extend_from_slice(options);
}

/// If `out` is longer than `limit`, cuts it to the answer's first whole
/// RRsets that fit (none, if the first does not), drops the authority
/// and additional sections, sets TC and puts the OPT back. A client that
/// can retry over TCP does; one that cannot (busybox nslookup, OpenWrt's
/// own) still gets what fits, as dnsmasq gives it (RFC 2181 §9: never
/// part of an RRset). Returns whether it truncated.
pub fn fit(out: &mut Vec<u8>, q: &Query, limit: usize) -> bool {
    fit_after(out, q.question_end, q.edns, limit)
}

/// [`fit`] for an answer whose question ends at `question_end`.
pub fn fit_after(out: &mut Vec<u8>, question_end: usize, edns: Option<Edns>, limit: usize) -> bool {
    if out.len() <= limit {
        return false;
    }
    // Our OPT (11 bytes, no options) goes back after the cut.
    let room = limit.saturating_sub(if edns.is_some() { 11 } else { 0 });
    let (keep, kept) = whole_rrsets_within(out, question_end, room);
    let f = header::flags(out);
    out.truncate(keep);
    header::set_flags(out, f | flags::TC);
    header::set_counts(out, [1, 0, 0, 0]);
    finish(out, edns, [kept, 0, 0], false);
    true
}

/// Where to cut an answer so that it keeps its first whole RRsets (same
/// owner, type and class) ending within `room` bytes, and how many
/// records that keeps. Every name in them must point before the cut, as
/// compression in a well-formed message does.
fn whole_rrsets_within(msg: &[u8], question_end: usize, room: usize) -> (usize, u16) {
    let an = header::counts(msg)[1];
    let (mut cut, mut kept) = (question_end, 0u16);
    let (mut pos, mut n) = (question_end, 0u16);
    let mut owner = [0u8; MAX_NAME_LEN];
    let mut next = [0u8; MAX_NAME_LEN];
    let mut set: Option<(usize, u16, u16)> = None;
    while n < an {
        let Some(rr) = read_rr(msg, pos) else { break };
        let Some(len) = name_key_at(msg, pos, &mut next) else { break };
        let same = set.is_some_and(|(l, t, c)| l == len && t == rr.rtype && c == rr.class && owner[..l] == next[..l]);
        if !same {
            // The RRset before this record is whole: cut after it if it fits.
            if pos > room {
                break;
            }
            (cut, kept) = (pos, n);
            owner[..len].copy_from_slice(&next[..len]);
            set = Some((len, rr.rtype, rr.class));
        }
        pos = rr.end;
        n += 1;
    }
    if n == an && pos <= room {
        (cut, kept) = (pos, n);
    }
    if points_within(msg, question_end, cut, kept) { (cut, kept) } else { (question_end, 0) }
}

/// Do the `count` records from `start` refer only to names before `end`?
/// Owner names were walked already (for the RRset keys); names in RDATA
/// (the types that hold one first) are walked here. [`walk_name`] takes
/// only pointers that lead backwards, so a name that walks in the kept
/// part stays whole.
fn points_within(msg: &[u8], start: usize, end: usize, count: u16) -> bool {
    let Some(head) = msg.get(..end) else { return false };
    let mut pos = start;
    for _ in 0..count {
        let Some(rr) = read_rr(head, pos) else { return false };
        // CNAME, NS, PTR, DNAME.
        if matches!(rr.rtype, rtype::CNAME | 2 | 12 | 39) && walk_name(head, rr.rdata_pos, |_, _| {}).is_none() {
            return false;
        }
        pos = rr.end;
    }
    true
}
