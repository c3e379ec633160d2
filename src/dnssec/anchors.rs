//! Trust anchors: the root's keys built in, or a `trust_anchor_file` of DS
//! and DNSKEY records in zone-file form (as Unbound's trust-anchor-file),
//! which replaces them: for private zones, for tests, and for the root's
//! next key change without a firmware update.

use std::fmt;
use std::path::Path;

use super::crypto;
use super::name;
use super::record::rtype;
use super::text::{self, Entry};
use super::verify::Anchor;

/// The root zone's key-signing keys as IANA publishes them
/// (https://data.iana.org/root-anchors/root-anchors.xml): KSK-2017 and
/// KSK-2024, SHA-256 digests. The tests check both against the published
/// public keys.
const ROOT_DS: [(u16, u8, u8, [u8; 32]); 2] = [
    (
        20326,
        8,
        2,
        [
            0xe0, 0x6d, 0x44, 0xb8, 0x0b, 0x8f, 0x1d, 0x39, 0xa9, 0x5c, 0x0b, 0x0d, 0x7c, 0x65, 0xd0, 0x84, 0x58, 0xe8,
            0x80, 0x40, 0x9b, 0xbc, 0x68, 0x34, 0x57, 0x10, 0x42, 0x37, 0xc7, 0xf8, 0xec, 0x8d,
        ],
    ),
    (
        38696,
        8,
        2,
        [
            0x68, 0x3d, 0x2d, 0x0a, 0xcb, 0x8c, 0x9b, 0x71, 0x2a, 0x19, 0x48, 0xb2, 0x7f, 0x74, 0x12, 0x19, 0x29, 0x8d,
            0x0a, 0x45, 0x0d, 0x61, 0x2c, 0x48, 0x3a, 0xf4, 0x44, 0xa4, 0xc0, 0xfb, 0x2b, 0x16,
        ],
    ),
];

/// Largest trust anchor file read: the root's anchors are 200 bytes, a
/// few private zones' DNSKEYs a few KB.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Most anchors one file may hold.
pub const MAX_ANCHORS: usize = 256;

/// One anchor: a DS or DNSKEY record for a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    /// The zone, lowercase wire form.
    zone: Box<[u8]>,
    /// DS or DNSKEY.
    rtype: u16,
    rdata: Box<[u8]>,
}

/// The trust anchors in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchors {
    anchors: Vec<Stored>,
}

/// A bad trust anchor file, as `file:line: message` (line 0: the file as
/// a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for AnchorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl TrustAnchors {
    /// The root's anchors, built in.
    pub fn root() -> TrustAnchors {
        let anchors = ROOT_DS
            .iter()
            .map(|(tag, alg, dt, digest)| {
                let mut rdata = tag.to_be_bytes().to_vec();
                rdata.extend_from_slice(&[*alg, *dt]);
                rdata.extend_from_slice(digest);
                Stored { zone: name::ROOT.into(), rtype: rtype::DS, rdata: rdata.into() }
            })
            .collect();
        TrustAnchors { anchors }
    }

    /// Reads `path` (a regular file of at most [`MAX_FILE_BYTES`]).
    pub fn load(path: &Path) -> Result<TrustAnchors, AnchorError> {
        let file = path.display().to_string();
        let text = crate::sys::read_regular_text(path, MAX_FILE_BYTES).map_err(|e| AnchorError {
            file: file.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        TrustAnchors::parse(&text, &file)
    }

    /// The anchors in `text`, DS and DNSKEY records in zone-file form;
    /// `file` names it in errors. Nothing else is accepted, and a file with
    /// no anchor is an error: it would turn validation off unnoticed.
    pub fn parse(text: &str, file: &str) -> Result<TrustAnchors, AnchorError> {
        let fail = |line: usize, message: String| AnchorError { file: file.to_string(), line, message };
        let entries = text::entries(text).map_err(|e| fail(e.line, e.message))?;
        let mut anchors = Vec::new();
        for e in &entries {
            if anchors.len() == MAX_ANCHORS {
                return Err(fail(e.line, format!("more than {MAX_ANCHORS} anchors")));
            }
            let (rt, rdata) = anchor_rdata(e).map_err(|m| fail(e.line, m))?;
            let mut zone = Vec::with_capacity(e.owner.len());
            name::push_lower(&mut zone, &e.owner);
            let entry = Stored { zone: zone.into(), rtype: rt, rdata: rdata.into() };
            if !anchors.contains(&entry) {
                anchors.push(entry);
            }
        }
        if anchors.is_empty() {
            return Err(fail(0, "holds no DS or DNSKEY record".into()));
        }
        Ok(TrustAnchors { anchors })
    }

    /// The anchored zone closest above `name` (or `name` itself), if any:
    /// where validation of `name` starts.
    pub fn closest(&self, name: &[u8]) -> Option<&[u8]> {
        self.anchors
            .iter()
            .map(|a| &a.zone[..])
            .filter(|z| name::is_at_or_below(name, z))
            .max_by_key(|z| name::label_count(z))
    }

    /// The anchors of `zone`, to check its DNSKEY RRset against.
    pub fn for_zone(&self, zone: &[u8]) -> Vec<Anchor<'_>> {
        self.anchors
            .iter()
            .filter(|a| name::eq(&a.zone, zone))
            .map(|a| if a.rtype == rtype::DS { Anchor::Ds(&a.rdata) } else { Anchor::Key(&a.rdata) })
            .collect()
    }

    /// How many anchors there are.
    pub fn len(&self) -> usize {
        self.anchors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.anchors.is_empty()
    }
}

/// The type and RDATA of a DS or DNSKEY entry.
fn anchor_rdata(e: &Entry<'_>) -> Result<(u16, Vec<u8>), String> {
    let f = &e.rdata;
    if e.rtype.eq_ignore_ascii_case("DS") {
        let tag: u16 = text::number(f.first(), "key tag")?;
        let alg: u8 = text::number(f.get(1), "algorithm")?;
        let dt: u8 = text::number(f.get(2), "digest type")?;
        let hex: String = f.get(3..).unwrap_or_default().concat();
        let digest = text::unhex(&hex).filter(|d| !d.is_empty()).ok_or("the digest is not hex")?;
        let want = match dt {
            1 => Some(20),
            2 => Some(32),
            4 => Some(48),
            _ => None,
        };
        if want.is_some_and(|w| w != digest.len()) {
            return Err(format!("a digest of type {dt} is {} bytes, not {}", want.unwrap_or(0), digest.len()));
        }
        let mut rdata = tag.to_be_bytes().to_vec();
        rdata.extend_from_slice(&[alg, dt]);
        rdata.extend_from_slice(&digest);
        Ok((rtype::DS, rdata))
    } else if e.rtype.eq_ignore_ascii_case("DNSKEY") {
        let flags: u16 = text::number(f.first(), "flags")?;
        let protocol: u8 = text::number(f.get(1), "protocol")?;
        let alg: u8 = text::number(f.get(2), "algorithm")?;
        if protocol != 3 {
            return Err(format!("protocol {protocol}, not 3"));
        }
        let b64: String = f.get(3..).unwrap_or_default().concat();
        let key = text::base64(&b64).filter(|k| !k.is_empty()).ok_or("the key is not base64")?;
        if crypto::algorithm_supported(alg) && crypto::key_use(alg, &key) == crypto::KeyUse::Malformed {
            return Err(format!("not a key of algorithm {alg}"));
        }
        let mut rdata = flags.to_be_bytes().to_vec();
        rdata.extend_from_slice(&[protocol, alg]);
        rdata.extend_from_slice(&key);
        Ok((rtype::DNSKEY, rdata))
    } else {
        Err(format!("{} record: a trust anchor is a DS or DNSKEY record", e.rtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root KSKs' public keys as IANA publishes them beside the digests
    /// (root-anchors.xml, PublicKey): their key tags and SHA-256 digests
    /// must be the built-in anchors, so a typo in either fails here.
    #[test]
    fn root_anchors_match_the_published_keys() {
        let keys = [
            (
                20326,
                "AwEAAaz/tAm8yTn4Mfeh5eyI96WSVexTBAvkMgJzkKTOiW1vkIbzxeF3+/4RgWOq7HrxRixHlFlExOLAJr5emLvN7SWXgnLh4+B5xQlNVz8Og8kvArMtNROxVQuCaSnIDdD5LKyWbRd2n9WGe2R8PzgCmr3EgVLrjyBxWezF0jLHwVN8efS3rCj/EWgvIWgb9tarpVUDK/b58Da+sqqls3eNbuv7pr+eoZG+SrDK6nWeL3c6H5Apxz7LjVc1uTIdsIXxuOLYA4/ilBmSVIzuDWfdRUfhHdY6+cn8HFRm+2hM8AnXGXws9555KrUB5qihylGa8subX2Nn6UwNR1AkUTV74bU=",
            ),
            (
                38696,
                "AwEAAa96jeuknZlaeSrvyAJj6ZHv28hhOKkx3rLGXVaC6rXTsDc449/cidltpkyGwCJNnOAlFNKF2jBosZBU5eeHspaQWOmOElZsjICMQMC3aeHbGiShvZsx4wMYSjH8e7Vrhbu6irwCzVBApESjbUdpWWmEnhathWu1jo+siFUiRAAxm9qyJNg/wOZqqzL/dL/q8PkcRU5oUKEpUge71M3ej2/7CPqpdVwuMoTvoB+ZOT4YeGyxMvHmbrxlFzGOHOijtzN+u1TQNatX2XBuzZNQ1K+s2CXkPIZo7s6JgZyvaBevYtxPvYLw4z9mR7K2vaF18UYH9Z9GNUUeayffKC73PYc=",
            ),
        ];
        let root = TrustAnchors::root();
        assert_eq!(root.len(), 2);
        let built_in = root.for_zone(name::ROOT);
        for (i, (tag, b64)) in keys.iter().enumerate() {
            let mut rdata = vec![1, 1, 3, 8];
            rdata.extend_from_slice(&text::base64(b64).unwrap());
            assert_eq!(crypto::key_tag(&rdata), *tag);
            assert_eq!(crypto::key_use(8, &rdata[4..]), crypto::KeyUse::Usable, "2048-bit RSA");
            let mut out = [0u8; 48];
            let len = crypto::ds_digest(2, name::ROOT, &rdata, &mut out).unwrap();
            let Anchor::Ds(ds) = built_in[i] else { panic!("a DS") };
            assert_eq!(&ds[..4], &[(tag >> 8) as u8, *tag as u8, 8, 2]);
            assert_eq!(&ds[4..], &out[..len], "KSK {tag}");
        }
        assert_eq!(root.closest(&name::from_text("www.example.")), Some(name::ROOT));
    }

    #[test]
    fn file_form() {
        let text = "; anchors\n$ORIGIN example.\n@ IN DS 60485 5 1 ( 2BB183AF5F22588179A53B0A\n  98631FAD1A292118 )\nsub 3600 IN DNSKEY 257 3 15 ( l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4= )\n";
        let ta = TrustAnchors::parse(text, "ta").unwrap();
        assert_eq!(ta.len(), 2);
        let example = name::from_text("example.");
        assert!(matches!(ta.for_zone(&example)[..], [Anchor::Ds(d)] if d.len() == 24));
        assert_eq!(ta.closest(&name::from_text("a.SUB.example.")), Some(&name::from_text("sub.example.")[..]));
        assert_eq!(ta.closest(&name::from_text("other.")), None);
        assert!(TrustAnchors::root().closest(&name::from_text("x.")).is_some());

        let bad = |text: &str| TrustAnchors::parse(text, "/etc/ta").unwrap_err().to_string();
        assert_eq!(bad("x. IN A 192.0.2.1"), "/etc/ta:1: A record: a trust anchor is a DS or DNSKEY record");
        assert_eq!(bad("\nx. DS 1 8 2 zz"), "/etc/ta:2: the digest is not hex");
        assert_eq!(bad("x. DS 1 8 2 abcd"), "/etc/ta:1: a digest of type 2 is 32 bytes, not 2");
        assert_eq!(bad("x. DS one 8 2 abcd"), "/etc/ta:1: bad key tag one");
        assert_eq!(bad("x. DNSKEY 257 2 8 AAAA"), "/etc/ta:1: protocol 2, not 3");
        assert_eq!(bad("x. DNSKEY 257 3 13 AAAA"), "/etc/ta:1: not a key of algorithm 13");
        assert_eq!(bad("x. DNSKEY 257 3 13 !!"), "/etc/ta:1: the key is not base64");
        assert_eq!(bad("; nothing\n"), "/etc/ta: holds no DS or DNSKEY record");
        assert_eq!(bad("x. DS ( 1 8 2"), "/etc/ta:1: a ( is not closed");
        let many: String = (0..=MAX_ANCHORS).map(|i| format!("x. DS {i} 8 2 {}\n", "00".repeat(32))).collect();
        assert_eq!(bad(&many), format!("/etc/ta:{}: more than {MAX_ANCHORS} anchors", MAX_ANCHORS + 1));
    }

    #[test]
    fn size_cap() {
        let dir = std::env::temp_dir().join(format!("hydradns-ta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big");
        std::fs::write(&big, vec![b';'; MAX_FILE_BYTES as usize + 1]).unwrap();
        let e = TrustAnchors::load(&big).unwrap_err();
        assert_eq!(e.line, 0);
        let ok = dir.join("ok");
        std::fs::write(&ok, ". IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D\n")
            .unwrap();
        assert_eq!(TrustAnchors::load(&ok).unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
