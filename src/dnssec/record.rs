//! Records as the validator reads them: owner and RDATA as uncompressed
//! wire bytes ([`Record`]), the records of a whole message with every
//! compression pointer expanded ([`Records`]), and views of the RDATA of
//! the DNSSEC types ([`Rrsig`], [`Dnskey`], [`Ds`]).
//!
//! Signatures are over names written out in full, so a message's names
//! are expanded once, here, into one buffer; everything after works on
//! slices of it.

use super::name;
use crate::wire::{self, HEADER_LEN};

/// Record types the validator knows by number.
pub mod rtype {
    pub const A: u16 = 1;
    pub const NS: u16 = 2;
    pub const MD: u16 = 3;
    pub const MF: u16 = 4;
    pub const CNAME: u16 = 5;
    pub const SOA: u16 = 6;
    pub const MB: u16 = 7;
    pub const MG: u16 = 8;
    pub const MR: u16 = 9;
    pub const PTR: u16 = 12;
    pub const MINFO: u16 = 14;
    pub const MX: u16 = 15;
    pub const TXT: u16 = 16;
    pub const RP: u16 = 17;
    pub const AFSDB: u16 = 18;
    pub const RT: u16 = 21;
    pub const SIG: u16 = 24;
    pub const PX: u16 = 26;
    pub const AAAA: u16 = 28;
    pub const NXT: u16 = 30;
    pub const SRV: u16 = 33;
    pub const NAPTR: u16 = 35;
    pub const KX: u16 = 36;
    pub const DNAME: u16 = 39;
    pub const OPT: u16 = 41;
    pub const DS: u16 = 43;
    pub const RRSIG: u16 = 46;
    pub const NSEC: u16 = 47;
    pub const DNSKEY: u16 = 48;
    pub const NSEC3: u16 = 50;
    pub const NSEC3PARAM: u16 = 51;
}

/// One resource record: owner and RDATA in uncompressed wire form, case as
/// received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The owner name.
    pub owner: &'a [u8],
    /// The record type.
    pub rtype: u16,
    /// The class (IN is 1).
    pub class: u16,
    /// The TTL as received.
    pub ttl: u32,
    /// The RDATA, names in it expanded where compression was allowed.
    pub rdata: &'a [u8],
}

/// Which part of a message a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Answer,
    Authority,
    Additional,
}

#[derive(Debug, Clone, Copy)]
struct Item {
    section: Section,
    owner: (u32, u32),
    rtype: u16,
    class: u16,
    ttl: u32,
    rdata: (u32, u32),
}

/// The records of one message (or any records pushed in), owners and
/// RDATA in one buffer. The OPT record is left out: it is not data.
#[derive(Debug, Default, Clone)]
pub struct Records {
    /// Owners and RDATA, back to back.
    bytes: Vec<u8>,
    /// Where each record's parts are in `bytes`, in message order.
    items: Vec<Item>,
}

/// Where names sit in the RDATA of the types that hold them (RFC 4034
/// §6.2 item 3 as corrected by RFC 6840 §5.1). A6 is left out: it is
/// historic (RFC 6563) and its name follows a variable-length prefix.
#[derive(Clone, Copy)]
enum Part {
    /// A name.
    Name,
    /// That many bytes of something else.
    Fixed(usize),
    /// A character string (length byte first).
    Text,
    /// The rest of the RDATA.
    Rest,
}

use Part::*;

fn layout(t: u16) -> Option<&'static [Part]> {
    Some(match t {
        rtype::NS
        | rtype::MD
        | rtype::MF
        | rtype::CNAME
        | rtype::MB
        | rtype::MG
        | rtype::MR
        | rtype::PTR
        | rtype::DNAME => &[Name],
        rtype::SOA => &[Name, Name, Fixed(20)],
        rtype::MINFO | rtype::RP => &[Name, Name],
        rtype::MX | rtype::AFSDB | rtype::RT | rtype::KX => &[Fixed(2), Name],
        rtype::PX => &[Fixed(2), Name, Name],
        rtype::SRV => &[Fixed(6), Name],
        rtype::NAPTR => &[Fixed(4), Text, Text, Text, Name],
        rtype::SIG | rtype::RRSIG => &[Fixed(18), Name, Rest],
        rtype::NSEC | rtype::NXT => &[Name, Rest],
        _ => return None,
    })
}

/// Types whose RDATA names a sender may compress: RFC 1035's, and those
/// RFC 3597 §4 says a receiver should decompress too. Other types' RDATA
/// is copied as it came; a pointer left in it fails later, as it must.
fn compressible(t: u16) -> bool {
    matches!(
        t,
        rtype::NS
            | rtype::MD
            | rtype::MF
            | rtype::CNAME
            | rtype::SOA
            | rtype::MB
            | rtype::MG
            | rtype::MR
            | rtype::PTR
            | rtype::MINFO
            | rtype::MX
            | rtype::RP
            | rtype::AFSDB
            | rtype::RT
            | rtype::SIG
            | rtype::PX
            | rtype::NXT
            | rtype::NAPTR
            | rtype::SRV
    )
}

/// Types whose RDATA names are lowercased in canonical form: RFC 4034
/// §6.2's list without NSEC and HINFO (RFC 6840 §5.1), and without A6.
pub(crate) fn lowercased(t: u16) -> bool {
    t != rtype::NSEC && layout(t).is_some()
}

/// Appends the name at `pos` of `msg`, pointers followed, to `out`;
/// returns the position after it in `msg`.
fn expand_name(msg: &[u8], pos: usize, out: &mut Vec<u8>) -> Option<usize> {
    let mut labels = [(0usize, 0u8); 128];
    let mut n = 0;
    let end = wire::walk_name(msg, pos, |start, len| {
        if n < labels.len() {
            labels[n] = (start, len);
            n += 1;
        }
    })?;
    for &(start, len) in &labels[..n] {
        out.push(len);
        out.extend_from_slice(&msg[start..start + len as usize]);
    }
    out.push(0);
    Some(end)
}

/// Calls `f(start, end)` with the span of each name in `rdata` of type
/// `t` (per [`layout`]), in order; `None` if the RDATA does not fit its
/// layout. `read_name` says where a name at a position ends.
fn walk_rdata(
    t: u16,
    rdata: &[u8],
    mut read_name: impl FnMut(usize) -> Option<usize>,
    mut f: impl FnMut(usize, usize),
) -> Option<()> {
    let Some(parts) = layout(t) else { return Some(()) };
    let mut p = 0;
    for part in parts {
        match *part {
            Name => {
                let end = read_name(p)?;
                f(p, end);
                p = end;
            }
            Fixed(n) => p += n,
            Text => p += 1 + *rdata.get(p)? as usize,
            Rest => p = rdata.len(),
        }
        if p > rdata.len() {
            return None;
        }
    }
    (p == rdata.len()).then_some(())
}

/// Writes the canonical form of `rdata` of type `t` (RFC 4034 §6.2: names
/// in it lowercased for the listed types) to `out`. `None` if RDATA of a
/// type with names does not fit its layout (a pointer left in, cut short).
pub(crate) fn canonical_rdata(t: u16, rdata: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let start = out.len();
    out.extend_from_slice(rdata);
    if !lowercased(t) {
        return Some(());
    }
    let mut spans = [(0usize, 0usize); 4];
    let mut n = 0;
    walk_rdata(
        t,
        rdata,
        |p| Some(p + name::name_len(rdata.get(p..)?)?),
        |s, e| {
            if n < spans.len() {
                spans[n] = (s, e);
                n += 1;
            }
        },
    )?;
    for &(s, e) in &spans[..n] {
        out[start + s..start + e].make_ascii_lowercase();
    }
    Some(())
}

/// Most bytes a message's records may take once their names are expanded.
/// A pointer of two bytes can stand for a name of 255, so a 64 KiB reply
/// made of pointers could grow to megabytes; real replies, DNSSEC records
/// included, stay far below this.
const MAX_EXPANDED: usize = 256 * 1024;

impl Records {
    /// An empty set, to [`push`](Self::push) records into.
    pub fn new() -> Records {
        Records::default()
    }

    /// The answer, authority and additional records of `msg`, names
    /// expanded. `None` if any record is malformed: a reply the validator
    /// cannot read whole is not validated in part.
    pub fn from_message(msg: &[u8]) -> Option<Records> {
        let [qd, an, ns, ar] = wire::header::counts(msg);
        let mut pos = HEADER_LEN;
        for _ in 0..qd {
            pos = wire::skip_name(msg, pos)? + 4;
        }
        let mut out = Records { bytes: Vec::with_capacity(msg.len() * 2), items: Vec::new() };
        let sections = [(Section::Answer, an), (Section::Authority, ns), (Section::Additional, ar)];
        for (section, count) in sections {
            for _ in 0..count {
                pos = out.read_one(msg, pos, section)?;
            }
        }
        Some(out)
    }

    fn read_one(&mut self, msg: &[u8], pos: usize, section: Section) -> Option<usize> {
        let owner_start = self.bytes.len();
        let after_owner = expand_name(msg, pos, &mut self.bytes)?;
        let rr = wire::rr_after_name(msg, after_owner)?;
        let ttl = rr.ttl(msg);
        if rr.rtype == rtype::OPT {
            self.bytes.truncate(owner_start);
            return Some(rr.end);
        }
        let rdata_start = self.bytes.len();
        let raw = &msg[rr.rdata_pos..rr.end];
        if compressible(rr.rtype) {
            // Expand each name in place of its compressed form, copying the
            // bytes between names as they are.
            let mut copied = 0;
            let bytes = &mut self.bytes;
            let mut failed = false;
            walk_rdata(
                rr.rtype,
                raw,
                |p| wire::walk_name(msg, rr.rdata_pos + p, |_, _| {}).map(|end| end - rr.rdata_pos),
                |s, e| {
                    bytes.extend_from_slice(&raw[copied..s]);
                    failed |= expand_name(msg, rr.rdata_pos + s, bytes).is_none();
                    copied = e;
                },
            )?;
            if failed {
                return None;
            }
            bytes.extend_from_slice(&raw[copied..]);
        } else {
            self.bytes.extend_from_slice(raw);
        }
        let rdata_end = self.bytes.len();
        if rdata_end > MAX_EXPANDED {
            return None;
        }
        self.items.push(Item {
            section,
            owner: (owner_start as u32, rdata_start as u32),
            rtype: rr.rtype,
            class: rr.class,
            ttl,
            rdata: (rdata_start as u32, rdata_end as u32),
        });
        Some(rr.end)
    }

    /// Adds a record (owner and RDATA already uncompressed), for records
    /// that come from elsewhere than one message.
    pub fn push(&mut self, section: Section, r: Record<'_>) {
        let owner = self.bytes.len() as u32;
        self.bytes.extend_from_slice(r.owner);
        let rdata = self.bytes.len() as u32;
        self.bytes.extend_from_slice(r.rdata);
        let end = self.bytes.len() as u32;
        self.items.push(Item {
            section,
            owner: (owner, rdata),
            rtype: r.rtype,
            class: r.class,
            ttl: r.ttl,
            rdata: (rdata, end),
        });
    }

    fn record(&self, item: &Item) -> Record<'_> {
        Record {
            owner: &self.bytes[item.owner.0 as usize..item.owner.1 as usize],
            rtype: item.rtype,
            class: item.class,
            ttl: item.ttl,
            rdata: &self.bytes[item.rdata.0 as usize..item.rdata.1 as usize],
        }
    }

    /// Every record with its section, in message order.
    pub fn iter(&self) -> impl Iterator<Item = (Section, Record<'_>)> {
        self.items.iter().map(|i| (i.section, self.record(i)))
    }

    /// The records of one section.
    pub fn section(&self, section: Section) -> impl Iterator<Item = Record<'_>> {
        self.items.iter().filter(move |i| i.section == section).map(|i| self.record(i))
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The records of `records` at `owner` (any case) of type `t`.
pub fn rrset<'a>(records: &[Record<'a>], owner: &[u8], t: u16) -> Vec<Record<'a>> {
    records.iter().filter(|r| r.rtype == t && name::eq(r.owner, owner)).copied().collect()
}

/// The RRSIGs in `records` at `owner` that cover type `t`.
pub fn rrsigs_for<'a>(records: &[Record<'a>], owner: &[u8], t: u16) -> Vec<Record<'a>> {
    records
        .iter()
        .filter(|r| {
            r.rtype == rtype::RRSIG
                && name::eq(r.owner, owner)
                && Rrsig::parse(r.rdata).is_some_and(|s| s.type_covered == t)
        })
        .copied()
        .collect()
}

/// The zone that signed the RRset at `owner` of type `t`, by the signer
/// name of its first RRSIG: the zone whose keys the caller must fetch.
pub fn signer_of<'a>(records: &[Record<'a>], owner: &[u8], t: u16) -> Option<&'a [u8]> {
    records.iter().filter(|r| r.rtype == rtype::RRSIG && name::eq(r.owner, owner)).find_map(|r| {
        let sig = Rrsig::parse(r.rdata)?;
        (sig.type_covered == t).then_some(sig.signer)
    })
}

/// An RRSIG's RDATA (RFC 4034 §3.1).
#[derive(Debug, Clone, Copy)]
pub struct Rrsig<'a> {
    pub type_covered: u16,
    pub algorithm: u8,
    pub labels: u8,
    pub original_ttl: u32,
    pub expiration: u32,
    pub inception: u32,
    pub key_tag: u16,
    /// The signer's name, uncompressed (RFC 4034 §3.1.7 forbids pointers).
    pub signer: &'a [u8],
    pub signature: &'a [u8],
    /// Everything before the signature: what the signed data starts with.
    pub head: &'a [u8],
}

impl<'a> Rrsig<'a> {
    pub fn parse(rdata: &'a [u8]) -> Option<Rrsig<'a>> {
        let fixed = rdata.get(..18)?;
        let signer_len = name::name_len(&rdata[18..])?;
        let head = &rdata[..18 + signer_len];
        let signature = &rdata[18 + signer_len..];
        if signature.is_empty() {
            return None;
        }
        Some(Rrsig {
            type_covered: u16::from_be_bytes([fixed[0], fixed[1]]),
            algorithm: fixed[2],
            labels: fixed[3],
            original_ttl: wire::u32_at(fixed, 4)?,
            expiration: wire::u32_at(fixed, 8)?,
            inception: wire::u32_at(fixed, 12)?,
            key_tag: u16::from_be_bytes([fixed[16], fixed[17]]),
            signer: &rdata[18..18 + signer_len],
            signature,
            head,
        })
    }
}

/// A DNSKEY's RDATA (RFC 4034 §2.1).
#[derive(Debug, Clone, Copy)]
pub struct Dnskey<'a> {
    pub flags: u16,
    pub protocol: u8,
    pub algorithm: u8,
    pub public_key: &'a [u8],
}

impl<'a> Dnskey<'a> {
    /// Zone Key flag: only such keys verify RRSIGs (RFC 4034 §2.1.1).
    pub const ZONE: u16 = 0x0100;
    /// REVOKE flag (RFC 5011 §2.1): a revoked key verifies nothing here.
    pub const REVOKE: u16 = 0x0080;

    pub fn parse(rdata: &'a [u8]) -> Option<Dnskey<'a>> {
        let public_key = rdata.get(4..)?;
        Some(Dnskey { flags: wire::u16_at(rdata, 0)?, protocol: rdata[2], algorithm: rdata[3], public_key })
    }

    /// Whether this key may verify RRSIGs: a zone key, protocol 3, not revoked.
    pub fn signs_zone(&self) -> bool {
        self.flags & Self::ZONE != 0 && self.flags & Self::REVOKE == 0 && self.protocol == 3
    }
}

/// A DS's RDATA (RFC 4034 §5.1).
#[derive(Debug, Clone, Copy)]
pub struct Ds<'a> {
    pub key_tag: u16,
    pub algorithm: u8,
    pub digest_type: u8,
    pub digest: &'a [u8],
}

impl<'a> Ds<'a> {
    pub fn parse(rdata: &'a [u8]) -> Option<Ds<'a>> {
        let digest = rdata.get(4..)?;
        Some(Ds { key_tag: wire::u16_at(rdata, 0)?, algorithm: rdata[2], digest_type: rdata[3], digest })
    }
}

/// Whether type `t` is in the type bitmap `bitmap` (RFC 4034 §4.1.2: window,
/// length, bits). A malformed bitmap holds nothing.
pub(crate) fn bitmap_has(bitmap: &[u8], t: u16) -> bool {
    let (window, bit) = ((t >> 8) as u8, (t & 0xff) as usize);
    let mut p = 0;
    // Each window is at least 3 bytes: at most 86 in 255 bytes, 256 in any.
    for _ in 0..256 {
        let (Some(&w), Some(&len)) = (bitmap.get(p), bitmap.get(p + 1)) else { return false };
        let Some(bits) = bitmap.get(p + 2..p + 2 + len as usize) else { return false };
        if w == window {
            return bits.get(bit / 8).is_some_and(|b| b & (0x80 >> (bit % 8)) != 0);
        }
        p += 2 + len as usize;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::name::from_text as n;

    /// A reply with compressed names in owners and in MX, SOA and CNAME
    /// RDATA, and an OPT record, built by hand.
    fn compressed_reply() -> Vec<u8> {
        let mut m = vec![0, 1, 0x81, 0x80, 0, 1, 0, 2, 0, 1, 0, 1];
        m.extend_from_slice(&n("Example.com.")); // question at 12
        m.extend_from_slice(&[0, 15, 0, 1]);
        // example.com. MX 10 mail.example.com. (owner pointer to 12)
        m.extend_from_slice(&[0xc0, 12, 0, 15, 0, 1, 0, 0, 0, 60, 0, 9, 0, 10, 4]);
        m.extend_from_slice(b"mail");
        m.extend_from_slice(&[0xc0, 12]);
        // www.example.com. CNAME example.com.
        m.extend_from_slice(&[3, b'w', b'w', b'w', 0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xc0, 12]);
        // example.com. SOA ns.example.com. host.example.com. …
        m.extend_from_slice(&[0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 60, 0, 32, 2, b'n', b's', 0xc0, 12, 4]);
        m.extend_from_slice(b"host");
        m.extend_from_slice(&[0xc0, 12]);
        m.extend_from_slice(&[0; 20]);
        // OPT
        m.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0]);
        m
    }

    #[test]
    fn expands_names() {
        let records = Records::from_message(&compressed_reply()).unwrap();
        let all: Vec<_> = records.iter().collect();
        assert_eq!(all.len(), 3, "the OPT is left out");
        let (sec, mx) = all[0];
        assert_eq!(sec, Section::Answer);
        assert_eq!(mx.owner, &n("Example.com.")[..]);
        assert_eq!(mx.rdata, &[&[0, 10][..], &n("mail.Example.com.")].concat()[..]);
        let (_, cname) = all[1];
        assert_eq!(cname.owner, &n("www.Example.com.")[..]);
        assert_eq!(cname.rdata, &n("Example.com.")[..]);
        let (sec, soa) = all[2];
        assert_eq!(sec, Section::Authority);
        assert_eq!(soa.rdata.len(), n("ns.Example.com.").len() + n("host.Example.com.").len() + 20);
        let mut canon = Vec::new();
        canonical_rdata(rtype::SOA, soa.rdata, &mut canon).unwrap();
        assert!(canon.starts_with(&n("ns.example.com.")));
    }

    #[test]
    fn malformed_is_refused() {
        let mut m = compressed_reply();
        // A forward pointer in the MX RDATA.
        let at = m.windows(4).position(|w| w == b"mail").unwrap() + 4;
        assert_eq!(m[at], 0xc0);
        m[at + 1] = 200;
        assert!(Records::from_message(&m).is_none());
        let m = compressed_reply();
        for cut in 0..m.len() {
            let _ = Records::from_message(&m[..cut]);
        }
    }

    /// Pointers to a long name expand to far more than the reply's size:
    /// past a bound the reply is refused rather than grown.
    #[test]
    fn expansion_is_bounded() {
        let reply = |count: u16| {
            let mut m = vec![0, 1, 0x81, 0x80, 0, 1];
            m.extend_from_slice(&count.to_be_bytes());
            m.extend_from_slice(&[0, 0, 0, 0]);
            for _ in 0..4 {
                m.push(61);
                m.extend_from_slice(&[b'a'; 61]);
            }
            m.push(0);
            m.extend_from_slice(&[0, 16, 0, 1]);
            for _ in 0..count {
                m.extend_from_slice(&[0xc0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 0]);
            }
            m
        };
        assert_eq!(Records::from_message(&reply(100)).map(|r| r.len()), Some(100));
        let big = reply(2000);
        assert!(big.len() < 32 * 1024);
        assert!(Records::from_message(&big).is_none());
    }

    #[test]
    fn canonical_forms() {
        let mut out = Vec::new();
        // NSEC's next name keeps its case (RFC 6840 §5.1); RRSIG's signer does not.
        canonical_rdata(rtype::NSEC, &[&n("A.example.")[..], &[0, 1, 0x40]].concat(), &mut out).unwrap();
        assert!(out.starts_with(&n("A.example.")));
        out.clear();
        canonical_rdata(rtype::TXT, b"\x02Hi", &mut out).unwrap();
        assert_eq!(out, b"\x02Hi");
        out.clear();
        assert!(canonical_rdata(rtype::MX, &[0, 1, 0xc0, 12], &mut out).is_none());
        assert!(lowercased(rtype::RRSIG) && lowercased(rtype::NXT) && !lowercased(rtype::NSEC));
        assert!(!lowercased(13), "HINFO holds no names");
    }

    #[test]
    fn bitmaps() {
        // A MX RRSIG NSEC TYPE1234, RFC 4034 §4.3's example.
        let mut bm = vec![0, 6, 0x40, 0x01, 0x00, 0x00, 0x00, 0x03, 4, 27];
        bm.extend_from_slice(&[0; 26]);
        bm.push(0x20);
        assert!(bitmap_has(&bm, 1234));
        assert!(!bitmap_has(&bm, 1235));
        for t in [rtype::A, rtype::MX, rtype::RRSIG, rtype::NSEC] {
            assert!(bitmap_has(&bm, t), "{t}");
        }
        for t in [rtype::NS, rtype::AAAA, rtype::DS, rtype::CNAME] {
            assert!(!bitmap_has(&bm, t), "{t}");
        }
        assert!(bitmap_has(&bm[..8], rtype::MX));
        assert!(!bitmap_has(&bm[..5], rtype::MX), "cut short");
    }
}
