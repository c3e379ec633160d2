//! DNS messages as bytes: header offsets, bounded name and record walks, the
//! zero-copy view of a client query, and the pieces answers are built from.
//!
//! The hot path never builds a message tree: it reads the few fields it needs
//! in place and writes answers straight into a reused buffer. simple-dns is the
//! judge of whether a query is well formed ([`parse_query`]); these helpers
//! only read what it has already accepted, and every walk is bounded by the
//! message length and the 127-label limit, so a hostile packet costs no more
//! than a normal one. Answers are built by [`build`].

pub mod build;

/// Bytes in a DNS header.
pub const HEADER_LEN: usize = 12;
/// UDP payload size we advertise and answer up to: the DNS Flag Day 2020 value,
/// which fits a 1280-byte IPv6 minimum MTU without fragments.
pub const EDNS_UDP_SIZE: u16 = 1232;
/// Classic DNS limit for UDP answers to clients without EDNS.
pub const PLAIN_UDP_SIZE: u16 = 512;
/// Longest name on the wire, length bytes included (RFC 1035 2.3.4).
pub const MAX_NAME_LEN: usize = 255;

/// Header flag bits.
pub mod flags {
    /// Message is a response.
    pub const QR: u16 = 0x8000;
    /// Opcode field.
    pub const OPCODE_MASK: u16 = 0x7800;
    /// Authoritative answer.
    pub const AA: u16 = 0x0400;
    /// Truncated.
    pub const TC: u16 = 0x0200;
    /// Recursion desired.
    pub const RD: u16 = 0x0100;
    /// Recursion available.
    pub const RA: u16 = 0x0080;
    /// Authentic data.
    pub const AD: u16 = 0x0020;
    /// Checking disabled.
    pub const CD: u16 = 0x0010;
    /// Response code field.
    pub const RCODE_MASK: u16 = 0x000f;
}

/// Response codes.
pub mod rcode {
    /// No error.
    pub const NOERROR: u8 = 0;
    /// Format error.
    pub const FORMERR: u8 = 1;
    /// Server failure.
    pub const SERVFAIL: u8 = 2;
    /// Name does not exist.
    pub const NXDOMAIN: u8 = 3;
    /// Not implemented.
    pub const NOTIMP: u8 = 4;
    /// Refused.
    pub const REFUSED: u8 = 5;
}

/// Record types the gateway itself looks at.
pub mod rtype {
    /// IPv4 address.
    pub const A: u16 = 1;
    /// Host information (RFC 8482 answers ANY with one).
    pub const HINFO: u16 = 13;
    /// Any type (a query type only).
    pub const ANY: u16 = 255;
    /// Alias.
    pub const CNAME: u16 = 5;
    /// Start of authority.
    pub const SOA: u16 = 6;
    /// IPv6 address.
    pub const AAAA: u16 = 28;
    /// EDNS pseudo-record.
    pub const OPT: u16 = 41;
    /// Service binding (RFC 9460).
    pub const SVCB: u16 = 64;
    /// Service binding for HTTPS (RFC 9460).
    pub const HTTPS: u16 = 65;
}

/// Calls `f` with each address of the `ipv4hint` (key 4) and `ipv6hint`
/// (key 6) parameters in SVCB or HTTPS RDATA `rdata` (RFC 9460 §7.3):
/// priority, target name (never compressed, §2.2), then parameters as key,
/// length, value. Stops at the first malformed part.
pub fn svcb_hints(rdata: &[u8], mut f: impl FnMut(std::net::IpAddr)) {
    let Some(mut p) = skip_name(rdata, 2) else { return };
    while let (Some(key), Some(len)) = (u16_at(rdata, p), u16_at(rdata, p + 2)) {
        let Some(value) = rdata.get(p + 4..p + 4 + len as usize) else { return };
        match key {
            4 => value.chunks_exact(4).for_each(|a| f(std::net::IpAddr::from([a[0], a[1], a[2], a[3]]))),
            6 => value.chunks_exact(16).filter_map(|a| <[u8; 16]>::try_from(a).ok()).for_each(|a| f(a.into())),
            _ => {}
        }
        p += 4 + len as usize;
    }
}

/// The Internet class.
pub const CLASS_IN: u16 = 1;

#[inline]
pub fn u16_at(b: &[u8], pos: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(pos)?, *b.get(pos + 1)?]))
}

#[inline]
pub fn u32_at(b: &[u8], pos: usize) -> Option<u32> {
    let s = b.get(pos..pos + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

#[inline]
pub fn put_u16(b: &mut [u8], pos: usize, v: u16) {
    b[pos..pos + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub fn put_u32(b: &mut [u8], pos: usize, v: u32) {
    b[pos..pos + 4].copy_from_slice(&v.to_be_bytes());
}

/// Header accessors; callers guarantee `msg.len() >= HEADER_LEN`.
pub mod header {
    use super::{put_u16, u16_at};

    #[inline]
    pub fn id(msg: &[u8]) -> u16 {
        u16_at(msg, 0).unwrap_or(0)
    }
    #[inline]
    pub fn set_id(msg: &mut [u8], id: u16) {
        put_u16(msg, 0, id)
    }
    #[inline]
    pub fn flags(msg: &[u8]) -> u16 {
        u16_at(msg, 2).unwrap_or(0)
    }
    #[inline]
    pub fn set_flags(msg: &mut [u8], f: u16) {
        put_u16(msg, 2, f)
    }
    #[inline]
    pub fn rcode(msg: &[u8]) -> u8 {
        (flags(msg) & super::flags::RCODE_MASK) as u8
    }
    /// QDCOUNT, ANCOUNT, NSCOUNT, ARCOUNT.
    #[inline]
    pub fn counts(msg: &[u8]) -> [u16; 4] {
        [4, 6, 8, 10].map(|p| u16_at(msg, p).unwrap_or(0))
    }
    #[inline]
    pub fn set_counts(msg: &mut [u8], c: [u16; 4]) {
        for (i, v) in c.into_iter().enumerate() {
            put_u16(msg, 4 + 2 * i, v);
        }
    }
}

/// Position just past the name at `pos`, following no pointers (a pointer ends
/// a name). `None` for a name running off the message or over 127 labels.
pub fn skip_name(msg: &[u8], mut pos: usize) -> Option<usize> {
    for _ in 0..128 {
        let len = *msg.get(pos)?;
        match len & 0xC0 {
            0x00 if len == 0 => return Some(pos + 1),
            0x00 => pos += 1 + len as usize,
            0xC0 => return msg.get(pos + 1).map(|_| pos + 2),
            _ => return None,
        }
    }
    None
}

/// Length of an uncompressed name at `pos` (final zero included), or `None` if
/// it is compressed, too long or cut off.
pub fn plain_name_len(msg: &[u8], pos: usize) -> Option<usize> {
    let mut p = pos;
    loop {
        let len = *msg.get(p)? as usize;
        if len == 0 {
            let total = p + 1 - pos;
            return (total <= MAX_NAME_LEN).then_some(total);
        }
        if len > 63 {
            return None;
        }
        p += 1 + len;
        if p - pos >= MAX_NAME_LEN {
            return None;
        }
    }
}

/// Compares two uncompressed wire names ignoring ASCII case.
pub fn names_equal(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// One resource record located in a message.
#[derive(Debug, Clone, Copy)]
pub struct Rr {
    /// Record type.
    pub rtype: u16,
    /// Record class (for OPT: the UDP payload size).
    pub class: u16,
    /// Offset of the 4-byte TTL field.
    pub ttl_pos: usize,
    /// Offset of the RDATA.
    pub rdata_pos: usize,
    /// Offset just past the record.
    pub end: usize,
}

impl Rr {
    /// The record's TTL.
    pub fn ttl(&self, msg: &[u8]) -> u32 {
        u32_at(msg, self.ttl_pos).unwrap_or(0)
    }
}

/// Reads the record starting at `pos`.
pub fn read_rr(msg: &[u8], pos: usize) -> Option<Rr> {
    rr_after_name(msg, skip_name(msg, pos)?)
}

/// Reads the rest of a record whose owner name ends at `p`.
pub fn rr_after_name(msg: &[u8], p: usize) -> Option<Rr> {
    let rtype = u16_at(msg, p)?;
    let class = u16_at(msg, p + 2)?;
    let rdlen = u16_at(msg, p + 8)? as usize;
    let rdata_pos = p + 10;
    let end = rdata_pos + rdlen;
    (end <= msg.len()).then_some(Rr { rtype, class, ttl_pos: p + 4, rdata_pos, end })
}

/// EDNS(0) information from a query's OPT record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edns {
    /// Requestor's UDP payload size.
    pub udp_size: u16,
    /// EDNS version; we speak 0.
    pub version: u8,
    /// DNSSEC OK bit.
    pub dnssec_ok: bool,
    /// Where the OPT's options start in the message (its RDATA)…
    pub options_at: u16,
    /// …and end: equal when it has none.
    pub options_end: u16,
}

impl Edns {
    /// What the OPT record `rr` of `msg` says: UDP size (its class), version
    /// and DO bit (its TTL field).
    fn of_opt(msg: &[u8], rr: &Rr) -> Edns {
        let ttl = rr.ttl(msg);
        Edns {
            udp_size: rr.class,
            version: (ttl >> 16) as u8,
            dnssec_ok: ttl & 0x8000 != 0,
            options_at: rr.rdata_pos as u16,
            options_end: rr.end as u16,
        }
    }

    /// Whether the OPT carries any option.
    #[inline]
    pub fn has_options(&self) -> bool {
        self.options_end > self.options_at
    }
}

/// A client query, viewed in place.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The whole message.
    pub msg: &'a [u8],
    /// Message ID.
    pub id: u16,
    /// Header flags.
    pub flags: u16,
    /// Question name on the wire, uncompressed, final zero included.
    pub qname: &'a [u8],
    /// Question type.
    pub qtype: u16,
    /// Question class.
    pub qclass: u16,
    /// Offset just past the question section.
    pub question_end: usize,
    /// The client's EDNS, if it sent an OPT record.
    pub edns: Option<Edns>,
}

/// What [`parse_query`] found, without the borrow: a miss keeps it beside
/// its own copy of the message and rebuilds the [`Query`] from it with
/// [`Layout::over`] instead of parsing it again at each step (start, each
/// reply, the end); see [`crate::query::Miss`] for what that saved.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    id: u16,
    flags: u16,
    name_len: usize,
    qtype: u16,
    qclass: u16,
    question_end: usize,
    edns: Option<Edns>,
}

impl Layout {
    /// The query over `msg`, the bytes this layout was taken from (None if
    /// they are too short to be: a programming error, answered as FORMERR).
    pub fn over<'a>(&self, msg: &'a [u8]) -> Option<Query<'a>> {
        let qname = msg.get(HEADER_LEN..HEADER_LEN + self.name_len)?;
        (self.question_end <= msg.len()).then_some(Query {
            msg,
            id: self.id,
            flags: self.flags,
            qname,
            qtype: self.qtype,
            qclass: self.qclass,
            question_end: self.question_end,
            edns: self.edns,
        })
    }
}

impl Query<'_> {
    /// This query's fields, to rebuild it over a copy of its message.
    pub fn layout(&self) -> Layout {
        Layout {
            id: self.id,
            flags: self.flags,
            name_len: self.qname.len(),
            qtype: self.qtype,
            qclass: self.qclass,
            question_end: self.question_end,
            edns: self.edns,
        }
    }

    /// The question section as sent (name in the client's case).
    pub fn question(&self) -> &[u8] {
        &self.msg[HEADER_LEN..self.question_end]
    }

    /// Largest UDP answer this client accepts: 512 without EDNS, else its
    /// advertised size, capped at what we advertise.
    pub fn udp_limit(&self) -> usize {
        self.edns.map_or(PLAIN_UDP_SIZE, |e| e.udp_size.clamp(PLAIN_UDP_SIZE, EDNS_UDP_SIZE)) as usize
    }
}

/// Why a datagram gets no normal answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Not worth an answer: shorter than a header, or a response (answering
    /// responses invites loops and reflection).
    Drop,
    /// Answer FORMERR.
    FormErr,
    /// Answer NOTIMP (opcode other than QUERY).
    NotImp,
}

/// Does simple-dns know this record type? It refuses messages whose
/// question has a type it does not know, which RFC 3597 says a resolver must
/// pass on, so it judges only messages about types it knows.
pub fn simple_dns_knows(t: u16) -> bool {
    matches!(t, 251..=255) || !matches!(simple_dns::TYPE::from(t), simple_dns::TYPE::Unknown(_))
}

/// Do the options of an OPT record (RDATA at `rdata..end`) tile it exactly?
pub fn opt_options_ok(msg: &[u8], rdata: usize, end: usize) -> bool {
    let mut p = rdata;
    while p < end {
        match u16_at(msg, p + 2) {
            Some(len) if p + 4 + len as usize <= end => p += 4 + len as usize,
            _ => return false,
        }
    }
    p == end
}

/// Checks a client message and views its question and EDNS. An EDNS version
/// above 0 is accepted here; the caller answers it BADVERS.
///
/// A plain query (one question, at most an OPT record) is checked here in
/// full without allocating: header, labels, lengths, the OPT's owner,
/// position and option framing. Anything else a query might carry goes to
/// simple-dns as well, which must accept the whole message.
pub fn parse_query(msg: &[u8]) -> Result<Query<'_>, Reject> {
    if msg.len() < HEADER_LEN {
        return Err(Reject::Drop);
    }
    let f = header::flags(msg);
    if f & flags::QR != 0 {
        return Err(Reject::Drop);
    }
    if f & flags::OPCODE_MASK != 0 {
        return Err(Reject::NotImp);
    }
    let [qd, an, ns, ar] = header::counts(msg);
    if qd != 1 {
        return Err(Reject::FormErr);
    }
    let name_len = plain_name_len(msg, HEADER_LEN).ok_or(Reject::FormErr)?;
    let qname = &msg[HEADER_LEN..HEADER_LEN + name_len];
    let p = HEADER_LEN + name_len;
    let qtype = u16_at(msg, p).ok_or(Reject::FormErr)?;
    let qclass = u16_at(msg, p + 2).ok_or(Reject::FormErr)?;
    let question_end = p + 4;
    let mut edns = None;
    let mut pos = question_end;
    for i in 0..(an as usize + ns as usize + ar as usize) {
        let rr = read_rr(msg, pos).ok_or(Reject::FormErr)?;
        if rr.rtype == rtype::OPT {
            // RFC 6891: one OPT, owned by the root, in the additional section.
            if edns.is_some()
                || i < an as usize + ns as usize
                || msg[pos] != 0
                || !opt_options_ok(msg, rr.rdata_pos, rr.end)
            {
                return Err(Reject::FormErr);
            }
            edns = Some(Edns::of_opt(msg, &rr));
        }
        pos = rr.end;
    }
    let plain = an == 0 && ns == 0 && ar as usize == usize::from(edns.is_some());
    if !plain && simple_dns_knows(qtype) && simple_dns::Packet::parse(msg).is_err() {
        return Err(Reject::FormErr);
    }
    Ok(Query { msg, id: header::id(msg), flags: f, qname, qtype, qclass, question_end, edns })
}

/// Writes the lowercase blocklist key of a wire name into `buf`: labels in
/// reverse order joined by [`crate::domain::SEP`]. Returns the key
/// length; 0 for the root, or for bytes that are not one whole uncompressed
/// name ending in the root label, as [`parse_query`]'s `qname` always is.
///
/// One forward pass: the key is as long as the dotted name, `len - 2`, and
/// the label whose length byte is at `p` lands at `len - 2 - p - its
/// length`, its separator right after it. The two passes this replaced (label
/// starts, then labels in reverse) were 12 % of a blocked answer's
/// instructions (`bench/instructions.py --by-function`).
pub fn reversed_key(qname: &[u8], buf: &mut [u8; MAX_NAME_LEN]) -> usize {
    reversed::<true>(qname, buf)
}

/// [`reversed_key`] of a name already lowercase, such as the head of a cache
/// key ([`crate::cache::key`]): the same pass without folding each byte again.
pub fn reversed_key_folded(qname: &[u8], buf: &mut [u8; MAX_NAME_LEN]) -> usize {
    reversed::<false>(qname, buf)
}

#[inline]
fn reversed<const FOLD: bool>(qname: &[u8], buf: &mut [u8; MAX_NAME_LEN]) -> usize {
    let Some(d) = qname.len().checked_sub(2).filter(|&d| d <= buf.len()) else { return 0 };
    let mut p = 0;
    while p <= d {
        let len = qname[p] as usize;
        // A label must end before the root's zero, the last byte.
        if len == 0 || p + len > d {
            return 0;
        }
        let at = d - p - len;
        let (dst, src) = (&mut buf[at..at + len], &qname[p + 1..p + 1 + len]);
        if FOLD {
            for (dst, b) in dst.iter_mut().zip(src) {
                *dst = b.to_ascii_lowercase();
            }
        } else {
            dst.copy_from_slice(src);
        }
        if p > 0 {
            buf[d - p] = crate::domain::SEP;
        }
        p += 1 + len;
    }
    if qname[d + 1] != 0 {
        return 0;
    }
    d
}

/// Walks the name at `pos` in `msg` through its compression pointers,
/// calling `label(start, len)` for each label in wire order. Returns the
/// position just past the name where it starts (as [`skip_name`] does), or
/// `None` if it is malformed: cut off, over 255 bytes, or with a pointer that
/// does not lead backwards (RFC 1035 4.1.4; simple-dns requires the same,
/// and it makes a pointer loop impossible).
pub fn walk_name(msg: &[u8], mut pos: usize, mut label: impl FnMut(usize, u8)) -> Option<usize> {
    let mut end = None;
    let mut total = 0;
    for _ in 0..128 {
        let len = *msg.get(pos)?;
        match len & 0xC0 {
            0x00 if len == 0 => return Some(end.unwrap_or(pos + 1)),
            0x00 => {
                total += len as usize + 1;
                if total > MAX_NAME_LEN - 1 || msg.len() < pos + 1 + len as usize {
                    return None;
                }
                label(pos + 1, len);
                pos += 1 + len as usize;
            }
            0xC0 => {
                let target = ((len as usize & 0x3F) << 8) | *msg.get(pos + 1)? as usize;
                if target >= pos {
                    return None;
                }
                end.get_or_insert(pos + 2);
                pos = target;
            }
            _ => return None,
        }
    }
    None
}

/// Writes the lowercase blocklist key of the name at `pos` in `msg`,
/// following compression pointers (see [`walk_name`]). Returns the key
/// length, or `None` if the name is malformed.
pub fn name_key_at(msg: &[u8], pos: usize, buf: &mut [u8; MAX_NAME_LEN]) -> Option<usize> {
    // Label positions in wire order; the key wants them reversed. At most
    // 127 labels fit in 255 bytes.
    let mut labels = [(0usize, 0u8); 128];
    let mut n = 0;
    walk_name(msg, pos, |start, len| {
        labels[n] = (start, len);
        n += 1;
    })?;
    let mut out = 0;
    for (i, &(start, len)) in labels[..n].iter().rev().enumerate() {
        if i > 0 {
            buf[out] = crate::domain::SEP;
            out += 1;
        }
        for (dst, b) in buf[out..out + len as usize].iter_mut().zip(&msg[start..start + len as usize]) {
            *dst = b.to_ascii_lowercase();
        }
        out += len as usize;
    }
    Some(out)
}

/// The EDNS record of a message that may be malformed elsewhere (for the
/// OPT of an error answer): the one OPT owned by the root at the end of
/// its records, if its records walk that far. Bounded by the message.
pub fn find_edns(msg: &[u8]) -> Option<Edns> {
    let [qd, an, ns, ar] = header::counts(msg);
    let mut pos = HEADER_LEN;
    for _ in 0..qd {
        pos = skip_name(msg, pos)? + 4;
    }
    let mut found = None;
    for i in 0..(an as usize + ns as usize + ar as usize) {
        let rr = read_rr(msg, pos)?;
        if rr.rtype == rtype::OPT {
            if found.is_some() || i < an as usize + ns as usize || msg.get(pos) != Some(&0) {
                return None;
            }
            found = Some(Edns::of_opt(msg, &rr));
        }
        pos = rr.end;
    }
    found
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// [`build::query`] for names the tests know are valid.
    pub(crate) fn query(id: u16, name: &str, qtype: u16, edns: Option<(u16, bool)>) -> Vec<u8> {
        build::query(id, name, qtype, edns).expect("a valid test name")
    }

    #[test]
    fn a_layout_rebuilds_the_query_over_a_copy_and_refuses_bytes_too_short() {
        for m in [query(9, "Www.Example.org", 28, Some((1232, true))), query(3, "a.b", 1, None)] {
            let q = parse_query(&m).unwrap();
            let copy = m.clone();
            let r = q.layout().over(&copy).unwrap();
            assert_eq!((r.id, r.flags, r.qname, r.qtype, r.qclass), (q.id, q.flags, q.qname, q.qtype, q.qclass));
            assert_eq!((r.question_end, r.edns, r.question()), (q.question_end, q.edns, q.question()));
            assert!(std::ptr::eq(r.msg, &copy[..]), "the rebuilt query borrows the copy");
            assert!(q.layout().over(&m[..q.question_end - 1]).is_none());
            assert!(q.layout().over(&m[..5]).is_none());
        }
    }

    #[test]
    fn built_queries_parse_and_bad_names_build_nothing() {
        let m = build::query(7, "Ads.Example.com.", 65, Some((1232, true))).unwrap();
        let q = parse_query(&m).unwrap();
        assert_eq!((q.id, q.qtype, q.qname), (7, 65, &b"\x03Ads\x07Example\x03com\x00"[..]));
        assert_eq!(q.edns.map(|e| (e.udp_size, e.dnssec_ok)), Some((1232, true)));
        assert_eq!(parse_query(&build::query(1, ".", 2, None).unwrap()).unwrap().qname, b"\x00");
        let long = "a".repeat(64);
        for bad in ["a..b", ".a", long.as_str()] {
            assert_eq!(build::query(1, bad, rtype::A, None), None, "{bad}");
        }
        let ok = ["a".repeat(63).as_str(); 3].join(".") + "." + &"b".repeat(61);
        assert!(build::query(1, &ok, rtype::A, None).is_some(), "253 characters, 255 bytes on the wire");
        assert_eq!(build::query(1, &(ok + "b"), rtype::A, None), None);
    }

    #[test]
    fn parses_plain_and_edns_queries() {
        let m = query(0x1234, "WWW.Example.com", rtype::AAAA, None);
        let q = parse_query(&m).unwrap();
        assert_eq!(q.id, 0x1234);
        assert_eq!(q.qname, b"\x03WWW\x07Example\x03com\x00");
        assert_eq!(q.qtype, rtype::AAAA);
        assert_eq!(q.edns, None);
        assert_eq!(q.udp_limit(), 512);
        let m = query(1, "a.b", rtype::A, Some((4096, true)));
        let q = parse_query(&m).unwrap();
        let end = m.len() as u16;
        assert_eq!(
            q.edns,
            Some(Edns { udp_size: 4096, version: 0, dnssec_ok: true, options_at: end, options_end: end })
        );
        assert_eq!(q.udp_limit(), 1232);
        let m = query(1, "a.b", rtype::A, Some((100, false)));
        assert_eq!(parse_query(&m).unwrap().udp_limit(), 512);
    }

    #[test]
    fn rejects() {
        assert_eq!(parse_query(&[0; 11]).unwrap_err(), Reject::Drop);
        let mut m = query(1, "a.b", rtype::A, None);
        m[2] |= 0x80;
        assert_eq!(parse_query(&m).unwrap_err(), Reject::Drop);
        let mut m = query(1, "a.b", rtype::A, None);
        m[2] |= 0x28; // opcode 5 (UPDATE)
        assert_eq!(parse_query(&m).unwrap_err(), Reject::NotImp);
        let m = query(1, "a.b", rtype::A, None);
        assert_eq!(parse_query(&m[..m.len() - 1]).unwrap_err(), Reject::FormErr);
        let mut m = query(1, "a.b", rtype::A, None);
        m[5] = 2; // qdcount 2 with one question present
        assert_eq!(parse_query(&m).unwrap_err(), Reject::FormErr);
        let mut m = query(1, "a.b", rtype::A, None);
        m[5] = 0;
        m.truncate(HEADER_LEN);
        assert_eq!(parse_query(&m).unwrap_err(), Reject::FormErr);
        let mut m = query(1, "a.b", rtype::A, Some((1232, false)));
        let opt_ttl = m.len() - 6;
        m[opt_ttl + 1] = 1; // EDNS version 1
        assert_eq!(parse_query(&m).unwrap().edns.map(|e| e.version), Some(1));
        let mut m = query(1, "a.b", rtype::A, Some((1232, false)));
        let opt = m[m.len() - 11..].to_vec();
        m.extend_from_slice(&opt);
        m[11] = 2; // two OPT records
        assert_eq!(parse_query(&m).unwrap_err(), Reject::FormErr);
    }

    #[test]
    fn unknown_types_and_opt_framing() {
        // RFC 3597: a type nobody knows is still a query to forward.
        for t in [99u16, 1000, 65280] {
            assert!(!simple_dns_knows(t));
            assert_eq!(parse_query(&query(1, "a.example", t, Some((1232, false)))).unwrap().qtype, t);
        }
        assert!(simple_dns_knows(rtype::A) && simple_dns_knows(255));
        // An OPT whose option length runs past its RDATA.
        let mut m = query(1, "a.example", rtype::A, Some((1232, false)));
        let rdlen = m.len() - 2;
        m[rdlen + 1] = 4;
        m.extend_from_slice(&[0, 10, 0, 9]);
        assert_eq!(parse_query(&m).unwrap_err(), Reject::FormErr);
        // A well-formed option (a cookie, 8 bytes) is fine.
        let mut m = query(1, "a.example", rtype::A, Some((1232, false)));
        let rdlen = m.len() - 2;
        m[rdlen + 1] = 12;
        m.extend_from_slice(&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(parse_query(&m).is_ok());
        // A query carrying an answer record goes to simple-dns, which wants valid RDATA.
        let mut m = query(1, "a.example", rtype::A, None);
        m[7] = 1;
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 3, 1, 2, 3]);
        assert_eq!(parse_query(&m).unwrap_err(), Reject::FormErr, "an A record with 3 bytes of address");
    }

    #[test]
    fn reversed_keys() {
        let mut buf = [0u8; MAX_NAME_LEN];
        let n = reversed_key(b"\x03Ads\x07example\x03COM\x00", &mut buf);
        assert_eq!(&buf[..n], b"com\0example\0ads");
        let n = reversed_key(b"\x00", &mut buf);
        assert_eq!(n, 0);
        let n = reversed_key(b"\x02xY\x00", &mut buf);
        assert_eq!(&buf[..n], b"xy");
        let n = reversed_key_folded(b"\x03ads\x07example\x03com\x00", &mut buf);
        assert_eq!(&buf[..n], b"com\0example\0ads");
        // Not one whole name ending in the root label: no key.
        for bad in [&b""[..], b"\x03ads\x03com", b"\x03ads\x04com\x00", b"\x03ads\x02com\x00", b"\x03ads\x03com\x01"] {
            assert_eq!(reversed_key(bad, &mut buf), 0, "{bad:?}");
        }
    }

    #[test]
    fn keys_of_compressed_names() {
        let mut buf = [0u8; MAX_NAME_LEN];
        // "example.com" at 0, then "WWW" + pointer to it at 13.
        let msg = b"\x07example\x03com\x00\x03WWW\xc0\x00";
        let n = name_key_at(msg, 13, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"com\0example\0www");
        assert_eq!(name_key_at(b"\xc0\x00", 0, &mut buf), None, "pointer loop");
        assert_eq!(name_key_at(b"\x05ab", 0, &mut buf), None);
    }

    #[test]
    fn name_walks_follow_pointers_backwards_only() {
        // "example.com" at 0, "WWW" + pointer to it at 13, then a pointer forwards.
        let msg = b"\x07example\x03com\x00\x03WWW\xc0\x00\xc0\x16\x00";
        let mut labels = Vec::new();
        assert_eq!(walk_name(msg, 13, |start, len| labels.push(&msg[start..start + len as usize])), Some(19));
        assert_eq!(labels, [&b"WWW"[..], b"example", b"com"]);
        assert_eq!(walk_name(msg, 0, |_, _| {}), Some(13), "an uncompressed name ends at its zero");
        assert_eq!(walk_name(msg, 19, |_, _| {}), None, "pointer forwards");
        assert_eq!(walk_name(b"\x01a\xc0\x02", 0, |_, _| {}), None, "pointer to itself");
        assert_eq!(walk_name(b"\x01a\xc0", 0, |_, _| {}), None, "cut-off pointer");
        let long = [[63u8].as_slice(), &[b'a'; 63]].concat().repeat(4);
        assert_eq!(walk_name(&[long.as_slice(), &[0]].concat(), 0, |_, _| {}), None, "256 bytes");
        let mut buf = [0u8; MAX_NAME_LEN];
        assert_eq!(name_key_at(msg, 19, &mut buf), None);
    }

    #[test]
    fn name_walks_are_bounded() {
        assert_eq!(skip_name(b"\x01a\x00", 0), Some(3));
        assert_eq!(skip_name(b"\x01a\xc0\x00", 0), Some(4));
        assert_eq!(skip_name(b"\x01a\xc0", 0), None);
        assert_eq!(skip_name(b"\x05a", 0), None);
        assert_eq!(skip_name(&[0x40, 0], 0), None);
        let long = [1u8, b'a'].repeat(200);
        assert_eq!(skip_name(&long, 0), None);
        assert_eq!(plain_name_len(b"\x01a\xc0\x00", 0), None);
        let mut name = vec![63u8];
        for _ in 0..4 {
            name = [&name[..], &[b'a'; 63], &[63]].concat();
        }
        assert_eq!(plain_name_len(&name, 0), None);
    }

    #[test]
    fn truncation_keeps_question_and_opt() {
        let m = query(7, "big.example", rtype::A, Some((512, false)));
        let q = parse_query(&m).unwrap();
        let mut out = Vec::new();
        build::start(&mut out, &q, rcode::NOERROR);
        for _ in 0..40 {
            build::record(&mut out, rtype::A, 60, &[1, 2, 3, 4]);
        }
        build::finish(&mut out, q.edns, [40, 0, 0], false);
        assert!(out.len() > 512);
        assert!(build::fit(&mut out, &q, q.udp_limit()));
        let p = simple_dns::Packet::parse(&out).unwrap();
        assert!(p.has_flags(simple_dns::PacketFlag::TRUNCATION));
        assert_eq!(p.questions.len(), 1);
        assert!(p.answers.is_empty());
        assert_eq!(p.opt().map(|o| o.udp_packet_size), Some(EDNS_UDP_SIZE));
    }
}
