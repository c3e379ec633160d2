//! Local names (`config record`): answers the gateway gives itself, before
//! the blocklists, the cache and the upstreams.
//!
//! What router owners expect from dnsmasq's host records, Unbound's
//! local-data and AdGuard's rewrites, with the surprises their users hit
//! taken out:
//! - a name with addresses answers A and AAAA from them; any other type, or
//!   the family it has none of, gets NODATA with an SOA (Unbound's
//!   `transparent`): never NXDOMAIN, which would tell a client the name does
//!   not exist at all, and never the upstream's idea of a name it does not know;
//! - `*.dev.home` answers every name under `dev.home` (not `dev.home`
//!   itself); an exact name beats a wildcard, a deeper wildcard a shallower one;
//! - every address answers its PTR query with the record's name (the first
//!   record to claim an address keeps it);
//! - an alias answers its CNAME and, while the target is a local name too,
//!   that name's records after it, at most [`MAX_CHAIN`] steps. A target the
//!   gateway does not hold is asked like any query (the cache, the lists, the
//!   upstream), and its answer follows the chain ([`Alias::splice`]);
//! - local names beat block and allow lists and rebind protection, and stay
//!   while blocking is paused: they are the owner's own data.
//!
//! Names are kept as lowercase wire-format names in a hash map, so a query
//! costs one hash of its name, plus one per label for the wildcards when there
//! are any; with no records configured the engine does not look at all.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

use crate::config::{LocalRecord, RecordData};
use crate::wire::{self, HEADER_LEN, Query, flags, header, rcode, rtype};

/// Most CNAME records one answer follows (AdGuard and Blocky stop loops the
/// same way; aliases that loop are refused at config load).
pub const MAX_CHAIN: usize = 8;

const PTR: u16 = 12;

/// What one name holds.
#[derive(Debug)]
enum Data {
    Addresses {
        v4: Vec<[u8; 4]>,
        v6: Vec<[u8; 16]>,
    },
    /// A wire-format name.
    Alias(Box<[u8]>),
    /// The wire-format name an address belongs to.
    Pointer(Box<[u8]>),
}

#[derive(Debug)]
struct Record {
    data: Data,
    ttl: u32,
    /// Index of the `config record` section it came from.
    section: usize,
}

/// Every local name of one config, ready to answer.
#[derive(Debug, Default)]
pub struct Records {
    /// Folded wire-format name → its record.
    exact: FxHashMap<Box<[u8]>, Record>,
    /// Folded wire-format name under which every name is answered.
    wildcard: FxHashMap<Box<[u8]>, Record>,
}

impl Records {
    /// The records of `config`, with a PTR for every address.
    pub fn new(config: &[LocalRecord]) -> Records {
        let mut r = Records::default();
        for (section, rec) in config.iter().enumerate() {
            let Some(name) = wire_name(&rec.name) else { continue };
            let data = match &rec.data {
                RecordData::Addresses(ips) => {
                    let (mut v4, mut v6) = (Vec::new(), Vec::new());
                    for ip in ips {
                        match ip {
                            IpAddr::V4(a) => v4.push(a.octets()),
                            IpAddr::V6(a) => v6.push(a.octets()),
                        }
                    }
                    Data::Addresses { v4, v6 }
                }
                RecordData::Alias(target) => match wire_name(target) {
                    Some(t) => Data::Alias(t.into()),
                    None => continue,
                },
            };
            let map = if rec.wildcard { &mut r.wildcard } else { &mut r.exact };
            map.insert(name.into(), Record { data, ttl: rec.ttl, section });
        }
        // Pointers last, so a configured name that looks like one wins.
        for (section, rec) in config.iter().enumerate().filter(|(_, rec)| !rec.wildcard) {
            let (RecordData::Addresses(ips), Some(name)) = (&rec.data, wire_name(&rec.name)) else { continue };
            for ip in ips {
                if let Some(rev) = wire_name(&reverse_name(ip)) {
                    let data = Data::Pointer(name.clone().into());
                    r.exact.entry(rev.into()).or_insert(Record { data, ttl: rec.ttl, section });
                }
            }
        }
        r
    }

    /// Whether there are none: the engine then skips the lookup.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty()
    }

    /// The record answering `name` (folded wire format): its own, else the
    /// deepest wildcard above it.
    fn find(&self, name: &[u8]) -> Option<&Record> {
        if let Some(r) = self.exact.get(name) {
            return Some(r);
        }
        if self.wildcard.is_empty() {
            return None;
        }
        let mut pos = 0;
        while let Some(&len) = name.get(pos).filter(|&&l| l != 0) {
            pos += 1 + len as usize;
            if let Some(r) = name.get(pos..).and_then(|rest| self.wildcard.get(rest)) {
                return Some(r);
            }
        }
        None
    }

    /// Writes the answer to `q` into `out` if `name` (its folded wire-format
    /// name) is a local one. The UDP size is not yet enforced.
    pub fn answer(&self, q: &Query, name: &[u8], out: &mut Vec<u8>) -> Local {
        let Some(mut rec) = self.find(name) else { return Local::No };
        wire::build::start(out, q, rcode::NOERROR);
        let f = header::flags(out);
        header::set_flags(out, f | flags::AA);
        let in_class = q.qclass == wire::CLASS_IN;
        // Where the name the current record answers for starts in `out`.
        let mut owner = HEADER_LEN as u16;
        let mut answers = 0u16;
        for _ in 0..=MAX_CHAIN {
            let before = answers;
            match &rec.data {
                Data::Addresses { v4, v6 } if in_class => match q.qtype {
                    rtype::A => v4.iter().for_each(|a| answers += record(out, owner, rtype::A, rec.ttl, a)),
                    rtype::AAAA => v6.iter().for_each(|a| answers += record(out, owner, rtype::AAAA, rec.ttl, a)),
                    _ => {}
                },
                Data::Pointer(target) if in_class && q.qtype == PTR => {
                    answers += record(out, owner, PTR, rec.ttl, target);
                }
                Data::Alias(target) => {
                    let at = out.len() + 12;
                    answers += record(out, owner, rtype::CNAME, rec.ttl, target);
                    if q.qtype != rtype::CNAME && at < 0x3FFF {
                        if let Some(next) = self.find(target) {
                            (owner, rec) = (at as u16, next);
                            continue;
                        }
                        // The rest of the chain is the upstream's to answer.
                        let [qd, _, ns, ar] = header::counts(out);
                        header::set_counts(out, [qd, answers, ns, ar]);
                        return Local::Outside(Alias {
                            prefix: out.clone(),
                            question_end: q.question_end,
                            target_at: at as u16,
                            target: target.clone(),
                            safe_search: false,
                        });
                    }
                }
                _ => {}
            }
            if answers == before && !matches!(rec.data, Data::Alias(_)) {
                // NODATA: the name is ours, the type is not (RFC 2308 §2.2).
                wire::build::negative_soa(out, rec.ttl);
                wire::build::finish(out, q.edns, [answers, 1, 0], false);
                return Local::Answered;
            }
            break;
        }
        wire::build::finish(out, q.edns, [answers, 0, 0], false);
        Local::Answered
    }
}

/// What [`Records::answer`] made of a query.
#[derive(Debug)]
pub enum Local {
    /// Not a local name.
    No,
    /// Answered in full.
    Answered,
    /// An alias whose chain leaves the local names: the target is resolved
    /// like any query, then [`Alias::splice`] puts the chain before its answer.
    Outside(Alias),
}

/// The local half of an answer whose chain ends at a name the gateway does
/// not hold.
#[derive(Debug, Clone)]
pub struct Alias {
    /// Header, the client's question and the CNAME records so far (answer count set).
    prefix: Vec<u8>,
    /// Where the client's question ends (in `prefix`, and in the answer).
    pub question_end: usize,
    /// Where in `prefix` the last CNAME's target name starts (uncompressed).
    target_at: u16,
    /// That name, folded wire format.
    pub target: Box<[u8]>,
    /// A safe search answer: counted and logged as one when spliced, and
    /// SERVFAIL, never a partial answer, when the safe host does not resolve.
    pub safe_search: bool,
}

impl Alias {
    /// The CNAME from `q`'s name to `target` (wire format, folded) that
    /// safe search answers with, its addresses to follow.
    pub fn safe_search(q: &Query, target: &[u8], ttl: u32) -> Alias {
        let mut prefix = Vec::with_capacity(q.question_end + 12 + target.len());
        wire::build::start(&mut prefix, q, rcode::NOERROR);
        let at = prefix.len() + 12;
        record(&mut prefix, HEADER_LEN as u16, rtype::CNAME, ttl, target);
        header::set_counts(&mut prefix, [1, 1, 0, 0]);
        Alias { prefix, question_end: q.question_end, target_at: at as u16, target: target.into(), safe_search: true }
    }

    /// The client's question name (wire format) and type.
    pub fn question(&self) -> (&[u8], u16) {
        let end = self.question_end.min(self.prefix.len());
        let name = self.prefix.get(HEADER_LEN..end.saturating_sub(4)).unwrap_or_default();
        let qtype = self.prefix.get(end.saturating_sub(4)..end).map_or(0, |t| u16::from_be_bytes([t[0], t[1]]));
        (name, qtype)
    }

    /// Writes into `out` the chain followed by `inner`'s answer and authority
    /// records: `inner` is the whole answer for the target, as sent for a
    /// query for it. Its names are copied with every compression pointer
    /// moved to where the same bytes now are (the question's name to the
    /// last CNAME's target, its records' names to their copies), in the
    /// owner names and in the RDATA of the types whose names may be
    /// compressed (RFC 3597 §4). Its rcode is the answer's; AA goes, since
    /// part of it is not ours. `edns`: the client's, for our OPT.
    pub fn splice(&self, inner: &[u8], edns: Option<wire::Edns>, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.prefix);
        let chain = header::counts(&self.prefix)[1];
        let rc = if inner.len() >= HEADER_LEN { header::rcode(inner) } else { rcode::SERVFAIL };
        let f = header::flags(out) & !(flags::AA | flags::RCODE_MASK);
        if self.safe_search && rc != rcode::NOERROR {
            // The safe host does not resolve: the client must not fall back
            // on the unrestricted one, nor cache a name error for it.
            out.truncate(self.question_end);
            header::set_flags(out, f | rcode::SERVFAIL as u16);
            wire::build::finish(out, edns, [0, 0, 0], false);
            return;
        }
        header::set_flags(out, f | rc as u16);
        let copied = self.copy_records(inner, out);
        let (an, ns) = copied.unwrap_or_else(|| {
            // Names we cannot place: the chain alone, and SERVFAIL.
            out.truncate(self.prefix.len());
            header::set_flags(out, f | rcode::SERVFAIL as u16);
            (0, 0)
        });
        wire::build::finish(out, edns, [chain + an, ns, 0], false);
    }

    fn copy_records(&self, inner: &[u8], out: &mut Vec<u8>) -> Option<(u16, u16)> {
        let [qd, an, ns, _] = header::counts(inner);
        if qd != 1 {
            return Some((0, 0));
        }
        let qname_end = wire::skip_name(inner, HEADER_LEN)?;
        let records = qname_end + 4;
        // Where the copied records end in `inner`: a pointer beyond points at nothing we copy.
        let mut end = records;
        for _ in 0..an + ns {
            end = wire::read_rr(inner, end)?.end;
        }
        let base = out.len();
        let target_at = self.target_at as usize;
        let mut starts = LabelStarts::default();
        let mut q = HEADER_LEN;
        while let Some(&len) = inner.get(q).filter(|_| q < qname_end) {
            starts.mark(q);
            q += 1 + len as usize;
        }
        let place = |p: usize| match p {
            p if (HEADER_LEN..qname_end).contains(&p) => Some(target_at + p - HEADER_LEN),
            p if (records..end).contains(&p) => Some(base + p - records),
            _ => None,
        };
        let mut pos = records;
        for _ in 0..an + ns {
            let rr = wire::read_rr(inner, pos)?;
            let after_owner = copy_name(inner, pos, out, &mut starts, &place)?;
            out.extend_from_slice(inner.get(after_owner..rr.rdata_pos)?);
            let mut p = rr.rdata_pos;
            match rr.rtype {
                rtype::CNAME | NS | PTR => p = copy_name(inner, p, out, &mut starts, &place)?,
                MX => {
                    out.extend_from_slice(inner.get(p..p + 2)?);
                    p = copy_name(inner, p + 2, out, &mut starts, &place)?;
                }
                rtype::SOA => {
                    p = copy_name(inner, p, out, &mut starts, &place)?;
                    p = copy_name(inner, p, out, &mut starts, &place)?;
                }
                _ => {}
            }
            out.extend_from_slice(inner.get(p..rr.end)?);
            pos = rr.end;
        }
        (out.len() < 0xFFFF).then_some((an, ns))
    }
}

const NS: u16 = 2;
const MX: u16 = 15;

/// The offsets of an upstream answer where a label (or a name's final zero)
/// of a name already copied as a name starts: the only places a moved
/// pointer may lead. A pointer into anything else (a TTL, RDATA copied as
/// bytes) read those bytes as labels, which could take in a pointer that
/// the move rewrote, and so name something else after it (found by the
/// `upstream_reply` fuzz target). Pointers reach 0x3FFF at most: one bit
/// per offset, 2 KiB on the stack, no allocation.
struct LabelStarts([u64; 256]);

impl Default for LabelStarts {
    fn default() -> LabelStarts {
        LabelStarts([0; 256])
    }
}

impl LabelStarts {
    fn mark(&mut self, p: usize) {
        if let Some(w) = self.0.get_mut(p / 64) {
            *w |= 1 << (p % 64);
        }
    }

    fn has(&self, p: usize) -> bool {
        self.0.get(p / 64).is_some_and(|w| w & (1 << (p % 64)) != 0)
    }
}

/// Copies the name at `pos` of `msg` into `out`, a pointer as a pointer to
/// where `place` says its target now is; returns where the name ended.
/// Marks its labels in `starts`, and follows only pointers to labels
/// marked there before (so backwards, to bytes copied unchanged as labels).
fn copy_name(
    msg: &[u8],
    mut pos: usize,
    out: &mut Vec<u8>,
    starts: &mut LabelStarts,
    place: &impl Fn(usize) -> Option<usize>,
) -> Option<usize> {
    for _ in 0..128 {
        let len = *msg.get(pos)?;
        match len & 0xC0 {
            0x00 if len == 0 => {
                starts.mark(pos);
                out.push(0);
                return Some(pos + 1);
            }
            0x00 => {
                starts.mark(pos);
                out.extend_from_slice(msg.get(pos..pos + 1 + len as usize)?);
                pos += 1 + len as usize;
            }
            0xC0 => {
                let target = ((len as usize & 0x3F) << 8) | *msg.get(pos + 1)? as usize;
                if !starts.has(target) {
                    return None;
                }
                let to = place(target)?;
                let to = u16::try_from(to).ok().filter(|&t| t < 0x4000)?;
                out.extend_from_slice(&(0xC000 | to).to_be_bytes());
                return Some(pos + 2);
            }
            _ => return None,
        }
    }
    None
}

/// The section that answers `name` (dotted, normalized), for `hydradns
/// check`: found by the same lookup [`Records::answer`] makes.
pub fn explain<'a>(config: &'a [LocalRecord], name: &str) -> Option<&'a LocalRecord> {
    let rec = Records::new(config).find(&wire_name(name)?)?.section;
    config.get(rec)
}

/// Appends one record owned by the name at offset `owner`; returns 1.
fn record(out: &mut Vec<u8>, owner: u16, rtype: u16, ttl: u32, rdata: &[u8]) -> u16 {
    wire::build::record_at(out, owner, rtype, ttl, rdata);
    1
}

/// `name` (dotted, lowercase) in wire format.
fn wire_name(name: &str) -> Option<Vec<u8>> {
    let mut w = Vec::with_capacity(name.len() + 2);
    wire::build::push_name(&mut w, name)?;
    Some(w)
}

/// The name a PTR query for `ip` asks (RFC 1035 §3.5, RFC 3596 §2.5).
fn reverse_name(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
        }
        IpAddr::V6(a) => {
            let mut s = String::with_capacity(72);
            for b in a.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
            }
            s + "ip6.arpa"
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::Config;
    use crate::wire::parse_query;
    use simple_dns::{Packet, RCODE, rdata::RData};

    fn records(uci: &str) -> Records {
        Records::new(&Config::parse("test", uci).unwrap().records)
    }

    /// The answer to `name`/`qtype`; None when the name is not local.
    fn ask(r: &Records, name: &str, qtype: u16) -> Option<Vec<u8>> {
        let q = wire::build::query(7, name, qtype, None).unwrap();
        let parsed = parse_query(&q).unwrap();
        let folded = wire_name(&name.to_ascii_lowercase()).unwrap();
        let mut out = Vec::new();
        match r.answer(&parsed, &folded, &mut out) {
            Local::No => None,
            Local::Answered => Some(out),
            // The test upstream: the target's A is 198.51.100.7, with a CNAME
            // on the way whose target points back into its own record.
            Local::Outside(alias) => {
                let inner = outside_answer(&alias.target, qtype);
                alias.splice(&inner, parsed.edns, &mut out);
                Some(out)
            }
        }
    }

    fn parse(raw: &[u8]) -> Packet<'_> {
        Packet::parse(raw).unwrap()
    }

    /// An upstream's answer for `target`: `target` CNAME `www.` + target
    /// (compressed against the question), then its A record, compressed
    /// against the CNAME's RDATA.
    fn outside_answer(target: &[u8], qtype: u16) -> Vec<u8> {
        let mut m = vec![0, 7, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(target);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        if qtype != rtype::A {
            return m;
        }
        let cname_rdata = m.len() + 12;
        m.extend_from_slice(&[0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 6, 3, b'w', b'w', b'w', 0xC0, 12]);
        m.extend_from_slice(&[0xC0 | (cname_rdata >> 8) as u8, cname_rdata as u8]);
        m.extend_from_slice(&[0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 51, 100, 7]);
        m[7] = 2;
        m
    }

    fn rdata(p: &Packet) -> Vec<String> {
        p.answers
            .iter()
            .map(|rr| match &rr.rdata {
                RData::A(a) => std::net::Ipv4Addr::from(a.address).to_string(),
                RData::AAAA(a) => std::net::Ipv6Addr::from(a.address).to_string(),
                RData::CNAME(c) => format!("{}>{}", rr.name, c.0),
                RData::PTR(c) => c.0.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    const NAS: &str = "config record\n\toption name 'nas.home'\n\tlist ip '192.168.1.10'\n\tlist ip 'fd00::10'\n";

    #[test]
    fn addresses_by_family_and_nodata_for_the_rest() {
        let r = records(NAS);
        let a_raw = ask(&r, "NAS.home", rtype::A).unwrap();
        let a = parse(&a_raw);
        assert_eq!(rdata(&a), ["192.168.1.10"]);
        assert_eq!(a.answers[0].ttl, 300);
        assert!(a.has_flags(simple_dns::PacketFlag::AUTHORITATIVE_ANSWER));
        assert_eq!(rdata(&parse(&ask(&r, "nas.home", rtype::AAAA).unwrap())), ["fd00::10"]);
        let mx_raw = ask(&r, "nas.home", 15).unwrap();
        let mx = parse(&mx_raw);
        assert_eq!((mx.rcode(), mx.answers.len(), mx.name_servers.len()), (RCODE::NoError, 0, 1));
        assert!(ask(&r, "other.home", rtype::A).is_none());
        assert!(ask(&r, "x.nas.home", rtype::A).is_none(), "an exact name covers no subdomain");
    }

    #[test]
    fn exact_beats_wildcard_and_the_deepest_wildcard_wins() {
        let r = records(
            "config record\n\toption name '*.dev.home'\n\tlist ip '10.0.0.1'\n\
             config record\n\toption name '*.api.dev.home'\n\tlist ip '10.0.0.2'\n\
             config record\n\toption name 'www.dev.home'\n\tlist ip '10.0.0.3'\n\toption ttl '60'\n",
        );
        assert_eq!(rdata(&parse(&ask(&r, "a.b.dev.home", rtype::A).unwrap())), ["10.0.0.1"]);
        assert_eq!(rdata(&parse(&ask(&r, "x.api.dev.home", rtype::A).unwrap())), ["10.0.0.2"]);
        let www_raw = ask(&r, "www.dev.home", rtype::A).unwrap();
        let www = parse(&www_raw);
        assert_eq!((rdata(&www), www.answers[0].ttl), (vec!["10.0.0.3".to_string()], 60));
        assert!(ask(&r, "dev.home", rtype::A).is_none(), "a wildcard covers names under it only");
    }

    #[test]
    fn every_address_answers_its_ptr() {
        let r = records(NAS);
        assert_eq!(rdata(&parse(&ask(&r, "10.1.168.192.in-addr.arpa", PTR).unwrap())), ["nas.home"]);
        let v6 = format!("0.1{}.d.f.ip6.arpa", ".0".repeat(28));
        assert_eq!(rdata(&parse(&ask(&r, &v6, PTR).unwrap())), ["nas.home"]);
        let a_raw = ask(&r, "10.1.168.192.in-addr.arpa", rtype::A).unwrap();
        let a = parse(&a_raw);
        assert_eq!((a.answers.len(), a.name_servers.len()), (0, 1), "NODATA for other types");
    }

    #[test]
    fn an_alias_answers_its_chain_of_local_names() {
        let r = records(&format!(
            "{NAS}config record\n\toption name 'media.home'\n\toption cname 'files.home'\n\
             config record\n\toption name 'files.home'\n\toption cname 'nas.home'\n\
             config record\n\toption name 'web.home'\n\toption cname 'example.org'\n"
        ));
        let a_raw = ask(&r, "media.home", rtype::A).unwrap();
        let a = parse(&a_raw);
        assert_eq!(rdata(&a), ["media.home>files.home", "files.home>nas.home", "192.168.1.10"]);
        assert_eq!(a.answers[2].name.to_string(), "nas.home");
        let mx_raw = ask(&r, "media.home", 15).unwrap();
        let mx = parse(&mx_raw);
        assert_eq!((mx.answers.len(), mx.name_servers.len()), (2, 1), "the chain, then NODATA");
        let cname_raw = ask(&r, "media.home", rtype::CNAME).unwrap();
        let cname = parse(&cname_raw);
        assert_eq!(rdata(&cname), ["media.home>files.home"]);
        // A target the gateway does not hold: the upstream's answer for it
        // follows the chain, its compressed names placed anew.
        let web_raw = ask(&r, "web.home", rtype::A).unwrap();
        let web = parse(&web_raw);
        assert_eq!(rdata(&web), ["web.home>example.org", "example.org>www.example.org", "198.51.100.7"]);
        assert_eq!(web.answers[2].name.to_string(), "www.example.org");
        assert!(!web.has_flags(simple_dns::PacketFlag::AUTHORITATIVE_ANSWER), "part of it is not ours");
    }

    /// The `upstream_reply` fuzz target's find: an owner name pointing into
    /// the previous record's TTL, read as a 44-byte label that took in the
    /// pointer itself; moved, the pointer changed and so did the name the
    /// client saw. Such an answer is refused whole (the chain and SERVFAIL).
    #[test]
    fn a_pointer_to_anything_but_a_copied_name_is_not_placed() {
        let r = records("config record\n\toption name 'web.home'\n\toption cname 'www.example'\n");
        let q = wire::build::query(7, "web.home", rtype::A, None).unwrap();
        let parsed = parse_query(&q).unwrap();
        let Local::Outside(alias) = r.answer(&parsed, &wire_name("web.home").unwrap(), &mut Vec::new()) else {
            panic!("an alias")
        };
        let mut inner = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0];
        inner.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
        // Type 109 (unknown: RDATA copied as bytes), TTL 300, a name as RDATA.
        inner.extend_from_slice(&[0xC0, 12, 0, 109, 0, 1, 0, 0, 1, 44, 0, 17]);
        inner.extend_from_slice(b"\x03www\x07example\x00\x00\x01\x00\x01");
        // Owned by the name at 38: the TTL's last byte, read as a label length.
        inner.extend_from_slice(&[0xC0, 38, 0, 109, 0, 1, 0, 0, 1, 44, 0, 17]);
        inner.extend_from_slice(b"\x07\xff\x01\xc0\x0c\x00\x6d\x00\x01\x00\x00\x01\x2c\x00\x11\x07\xff");
        let mut out = Vec::new();
        alias.splice(&inner, None, &mut out);
        assert_eq!((header::rcode(&out), header::counts(&out)[1]), (rcode::SERVFAIL, 1), "{out:?}");
        // Pointers to names copied before (the question, a CNAME's target) are placed.
        let good = ask(
            &records("config record\n\toption name 'web.home'\n\toption cname 'example.org'\n"),
            "web.home",
            rtype::A,
        );
        assert_eq!(header::rcode(&good.unwrap()), rcode::NOERROR);
    }

    #[test]
    fn bad_records_name_their_line() {
        for (uci, line, what) in [
            ("config record\n\toption name 'a.home'\n\tlist ip '10.0.0.1'\n\toption cname 'b.home'\n", 4, "both"),
            ("config record\n\toption name 'a.home'\n", 1, "needs an ip"),
            ("config record\n\tlist ip '10.0.0.1'\n", 1, "needs a name"),
            ("config record\n\toption name 'a.home'\n\tlist ip '10.0.0.300'\n", 3, "address"),
            (
                "config record\n\toption name 'a.home'\n\toption cname 'b.home'\n\
                 config record\n\toption name 'b.home'\n\toption cname 'a.home'\n",
                1,
                "back to itself",
            ),
            (
                "config record\n\toption name 'a.home'\n\tlist ip '10.0.0.1'\n\
                 config record\n\toption name 'a.home'\n\toption cname 'b.home'\n",
                4,
                "already",
            ),
        ] {
            let e = Config::parse("test", uci).unwrap_err();
            assert_eq!(e.line, line, "{uci}: {e}");
            assert!(e.message.contains(what), "{uci}: {e}");
        }
    }

    #[test]
    fn explain_names_the_section_that_answers() {
        let cfg = Config::parse("test", &format!("{NAS}config record\n\toption name '*.home'\n\tlist ip '10.0.0.9'\n"))
            .unwrap();
        let origin = |name: &str| explain(&cfg.records, name).map(|r| r.origin.clone());
        assert_eq!(origin("nas.home").as_deref(), Some("test:1"));
        assert_eq!(origin("x.y.home").as_deref(), Some("test:5"));
        assert_eq!(origin("10.1.168.192.in-addr.arpa").as_deref(), Some("test:1"));
        assert_eq!(origin("home"), None);
        // An address's pointer beats a wildcard over the reverse zone, in
        // what check says as in what answer sends.
        let cfg = Config::parse(
            "test",
            &format!("{NAS}config record\n\toption name '*.in-addr.arpa'\n\tlist ip '10.0.0.9'\n"),
        )
        .unwrap();
        let ptr = "10.1.168.192.in-addr.arpa";
        assert_eq!(explain(&cfg.records, ptr).map(|r| r.origin.as_str()), Some("test:1"));
        let answer = ask(&Records::new(&cfg.records), ptr, PTR).unwrap();
        assert_eq!(rdata(&parse(&answer)), ["nas.home"]);
    }

    #[test]
    fn two_sections_for_one_name_add_up() {
        let r = records(
            "config record\n\toption name 'nas.home'\n\tlist ip '192.168.1.10'\n\
             config record\n\toption name 'nas.home'\n\tlist ip '192.168.1.11'\n",
        );
        assert_eq!(rdata(&parse(&ask(&r, "nas.home", rtype::A).unwrap())), ["192.168.1.10", "192.168.1.11"]);
    }
}
