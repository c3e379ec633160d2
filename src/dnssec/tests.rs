//! The validator against real signed zones and the RFCs' examples.
//!
//! tests/data/dnssec/ holds a small signed tree made by make.sh there
//! (ldns and BIND, checked by ldns-verify-zone and kzonecheck): `test.`
//! anchored by anchors.conf, a child per algorithm, and the special cases
//! (opt-out, 200 NSEC3 iterations, expired, not yet valid, a 512-bit RSA
//! key, Ed448, an unknown digest type). The zones are read with the trust
//! anchor file's reader plus RDATA parsers that exist only here; denials
//! are assembled the way an authoritative server picks them.

use std::cmp::Ordering;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::name::{self, from_text as n};
use super::record::rtype::*;
use super::*;

/// 2026-06-01T00:00:00Z: inside the zones' signatures (2025–2037).
const NOW: u32 = 1_780_272_000;

fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dnssec")
}

#[derive(Debug, Clone)]
struct Rr {
    owner: Vec<u8>,
    rtype: u16,
    ttl: u32,
    rdata: Vec<u8>,
}

impl Rr {
    fn rec(&self) -> Record<'_> {
        Record { owner: &self.owner, rtype: self.rtype, class: 1, ttl: self.ttl, rdata: &self.rdata }
    }
}

fn recs(rrs: &[Rr]) -> Vec<Record<'_>> {
    rrs.iter().map(Rr::rec).collect()
}

const TYPES: &[(&str, u16)] = &[
    ("A", A),
    ("NS", NS),
    ("CNAME", CNAME),
    ("SOA", SOA),
    ("MX", MX),
    ("TXT", TXT),
    ("AAAA", AAAA),
    ("DS", DS),
    ("RRSIG", RRSIG),
    ("NSEC", NSEC),
    ("DNSKEY", DNSKEY),
    ("NSEC3", NSEC3),
    ("NSEC3PARAM", NSEC3PARAM),
];

fn type_code(t: &str) -> u16 {
    TYPES
        .iter()
        .find(|(m, _)| m.eq_ignore_ascii_case(t))
        .map(|p| p.1)
        .or_else(|| t.strip_prefix("TYPE").and_then(|d| d.parse().ok()))
        .unwrap_or_else(|| panic!("type {t}"))
}

fn bitmap(types: &[&str]) -> Vec<u8> {
    let mut codes: Vec<u16> = types.iter().map(|t| type_code(t)).collect();
    codes.sort_unstable();
    let mut out = Vec::new();
    for window in 0..=255u8 {
        let bits: Vec<u8> = codes.iter().filter(|c| (*c >> 8) as u8 == window).map(|c| (*c & 0xff) as u8).collect();
        let Some(&max) = bits.iter().max() else { continue };
        let mut block = vec![0u8; max as usize / 8 + 1];
        for b in bits {
            block[b as usize / 8] |= 0x80 >> (b % 8);
        }
        out.extend_from_slice(&[window, block.len() as u8]);
        out.extend_from_slice(&block);
    }
    out
}

/// `YYYYMMDDHHmmSS` to seconds since 1970.
fn time(t: &str) -> u32 {
    let d = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, day) = (d(0, 4), d(4, 6), d(6, 8));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + d(8, 10) * 3600 + d(10, 12) * 60 + d(12, 14)) as u32
}

fn wire_name(t: &str) -> Vec<u8> {
    text::parse_name(t, None).unwrap()
}

fn rdata_from_text(t: u16, f: &[&str]) -> Vec<u8> {
    let num = |i: usize| f[i].parse::<u32>().unwrap();
    let mut out = Vec::new();
    match t {
        A => out.extend_from_slice(&f[0].parse::<Ipv4Addr>().unwrap().octets()),
        AAAA => out.extend_from_slice(&f[0].parse::<Ipv6Addr>().unwrap().octets()),
        NS | CNAME => out = wire_name(f[0]),
        MX => {
            out.extend_from_slice(&(num(0) as u16).to_be_bytes());
            out.extend_from_slice(&wire_name(f[1]));
        }
        SOA => {
            out = wire_name(f[0]);
            out.extend_from_slice(&wire_name(f[1]));
            for i in 2..7 {
                out.extend_from_slice(&num(i).to_be_bytes());
            }
        }
        TXT => {
            for s in f {
                let s = s.trim_matches('"').as_bytes();
                out.push(s.len() as u8);
                out.extend_from_slice(s);
            }
        }
        DS => {
            out.extend_from_slice(&(num(0) as u16).to_be_bytes());
            out.extend_from_slice(&[num(1) as u8, num(2) as u8]);
            out.extend_from_slice(&text::unhex(&f[3..].concat()).unwrap());
        }
        DNSKEY => {
            out.extend_from_slice(&(num(0) as u16).to_be_bytes());
            out.extend_from_slice(&[num(1) as u8, num(2) as u8]);
            out.extend_from_slice(&text::base64(&f[3..].concat()).unwrap());
        }
        RRSIG => {
            out.extend_from_slice(&type_code(f[0]).to_be_bytes());
            out.extend_from_slice(&[num(1) as u8, num(2) as u8]);
            out.extend_from_slice(&num(3).to_be_bytes());
            out.extend_from_slice(&time(f[4]).to_be_bytes());
            out.extend_from_slice(&time(f[5]).to_be_bytes());
            out.extend_from_slice(&(num(6) as u16).to_be_bytes());
            out.extend_from_slice(&wire_name(f[7]));
            out.extend_from_slice(&text::base64(&f[8..].concat()).unwrap());
        }
        NSEC => {
            out = wire_name(f[0]);
            out.extend_from_slice(&bitmap(&f[1..]));
        }
        NSEC3 | NSEC3PARAM => {
            out.extend_from_slice(&[num(0) as u8, num(1) as u8]);
            out.extend_from_slice(&(num(2) as u16).to_be_bytes());
            let salt = if f[3] == "-" { Vec::new() } else { text::unhex(f[3]).unwrap() };
            out.push(salt.len() as u8);
            out.extend_from_slice(&salt);
            if t == NSEC3 {
                let mut next = [0u8; 20];
                assert_eq!(text::unbase32hex(f[4].as_bytes(), &mut next), Some(20));
                out.push(20);
                out.extend_from_slice(&next);
                out.extend_from_slice(&bitmap(&f[5..]));
            }
        }
        _ => panic!("no parser for type {t}"),
    }
    out
}

/// A signed zone from tests/data/dnssec/NAME.signed.
struct Zone {
    name: Vec<u8>,
    rrs: Vec<Rr>,
}

impl Zone {
    fn load(zone: &str) -> Zone {
        let path = dir().join(format!("{}.signed", zone.trim_end_matches('.')));
        let text = std::fs::read_to_string(&path).unwrap();
        let rrs = text::entries(&text)
            .unwrap()
            .iter()
            .map(|e| {
                let t = type_code(e.rtype);
                Rr { owner: e.owner.clone(), rtype: t, ttl: e.ttl.unwrap(), rdata: rdata_from_text(t, &e.rdata) }
            })
            .collect();
        Zone { name: n(zone), rrs }
    }

    fn set(&self, owner: &str, t: u16) -> Vec<Rr> {
        let owner = n(owner);
        self.rrs.iter().filter(|r| r.rtype == t && name::eq(&r.owner, &owner)).cloned().collect()
    }

    fn sigs(&self, owner: &str, t: u16) -> Vec<Rr> {
        let owner = n(owner);
        self.rrs
            .iter()
            .filter(|r| {
                r.rtype == RRSIG && name::eq(&r.owner, &owner) && Rrsig::parse(&r.rdata).unwrap().type_covered == t
            })
            .cloned()
            .collect()
    }

    /// An RRset and its RRSIGs, as in a reply.
    fn signed(&self, owner: &str, t: u16) -> (Vec<Rr>, Vec<Rr>) {
        let set = self.set(owner, t);
        assert!(!set.is_empty(), "{owner} {t}");
        (set, self.sigs(owner, t))
    }

    fn with_sigs(&self, rr: &Rr) -> Vec<Rr> {
        let mut out = vec![rr.clone()];
        out.extend(self.sigs(&name::to_text(&rr.owner), rr.rtype));
        out
    }

    /// The NSEC at `owner`, with its RRSIG.
    fn nsec_at(&self, owner: &str) -> Vec<Rr> {
        let rr = self.set(owner, NSEC).pop().unwrap_or_else(|| panic!("no NSEC at {owner}"));
        self.with_sigs(&rr)
    }

    /// The NSEC whose span holds `name`, with its RRSIG.
    fn nsec_covering(&self, name: &str) -> Vec<Rr> {
        let target = n(name);
        let rr = self
            .rrs
            .iter()
            .find(|r| {
                if r.rtype != NSEC {
                    return false;
                }
                let next = &r.rdata[..name::name_len(&r.rdata).unwrap()];
                let after = name::canonical_cmp(&r.owner, &target) == Ordering::Less;
                let before = name::canonical_cmp(&target, next) == Ordering::Less;
                let last = name::canonical_cmp(next, &r.owner) != Ordering::Greater;
                after && (before || last)
            })
            .unwrap_or_else(|| panic!("no NSEC covers {name}"));
        self.with_sigs(rr)
    }

    fn nsec3_params(&self) -> (Vec<u8>, u16) {
        let p = self.rrs.iter().find(|r| r.rtype == NSEC3PARAM).unwrap();
        let iterations = u16::from_be_bytes([p.rdata[2], p.rdata[3]]);
        (p.rdata[5..5 + p.rdata[4] as usize].to_vec(), iterations)
    }

    fn nsec3_hash_of(&self, rr: &Rr) -> [u8; 20] {
        let mut h = [0u8; 20];
        assert_eq!(text::unbase32hex(&rr.owner[1..1 + rr.owner[0] as usize], &mut h), Some(20));
        h
    }

    /// The NSEC3 matching (`cover` false) or covering `name`, with its RRSIG.
    fn nsec3(&self, name: &str, cover: bool) -> Vec<Rr> {
        let (salt, iterations) = self.nsec3_params();
        let h = super::crypto::nsec3_hash(&n(name), &salt, iterations);
        let rr = self
            .rrs
            .iter()
            .find(|r| {
                if r.rtype != NSEC3 {
                    return false;
                }
                let owner = self.nsec3_hash_of(r);
                let salt_len = r.rdata[4] as usize;
                let next: [u8; 20] = r.rdata[6 + salt_len..26 + salt_len].try_into().unwrap();
                let covers = if owner < next { owner < h && h < next } else { owner < h || h < next };
                if cover { covers } else { owner == h }
            })
            .unwrap_or_else(|| panic!("no NSEC3 {} {name}", if cover { "covers" } else { "matches" }));
        self.with_sigs(rr)
    }

    fn nsec3_matching(&self, name: &str) -> Vec<Rr> {
        self.nsec3(name, false)
    }

    fn nsec3_covering(&self, name: &str) -> Vec<Rr> {
        self.nsec3(name, true)
    }
}

fn validation() -> Validation {
    Validation::new(Some(NOW), Limits::default())
}

fn anchors() -> TrustAnchors {
    TrustAnchors::load(&dir().join("anchors.conf")).unwrap()
}

fn parent_keys(v: &mut Validation) -> ZoneKeys {
    let p = Zone::load("test.");
    let ta = anchors();
    let a = ta.for_zone(&n("test."));
    let (keys, sigs) = p.signed("test.", DNSKEY);
    v.validate_dnskeys(&p.name, &recs(&keys), &recs(&sigs), &a).unwrap()
}

/// The DS RRset of `child` from the parent, checked there.
fn checked_ds(v: &mut Validation, child: &str) -> Vec<Rr> {
    let p = Zone::load("test.");
    let pk = parent_keys(v);
    let (ds, sigs) = p.signed(child, DS);
    v.verify_rrset(&pk, &recs(&ds), &recs(&sigs)).unwrap();
    ds
}

/// `child`'s keys with `ds` as its DS RRset.
fn keys_with_ds(v: &mut Validation, child: &Zone, ds: &[Rr]) -> Result<ZoneKeys, Verdict> {
    let anchors: Vec<Anchor<'_>> = ds.iter().map(|r| Anchor::Ds(&r.rdata)).collect();
    let owner = name::to_text(&child.name);
    v.validate_dnskeys(&child.name, &recs(&child.set(&owner, DNSKEY)), &recs(&child.sigs(&owner, DNSKEY)), &anchors)
}

fn child_keys(v: &mut Validation, child: &str) -> Result<ZoneKeys, Verdict> {
    let ds = checked_ds(v, child);
    keys_with_ds(v, &Zone::load(child), &ds)
}

const ALGORITHM_ZONES: &[&str] =
    &["alg5.test.", "alg7.test.", "alg8.test.", "alg10.test.", "alg13.test.", "alg14.test.", "alg15.test."];

fn verify(v: &mut Validation, keys: &ZoneKeys, set: &[Rr], sigs: &[Rr]) -> Result<Proof, Verdict> {
    v.verify_rrset(keys, &recs(set), &recs(sigs))
}

#[test]
fn every_algorithm_is_secure_down_the_chain() {
    for zone in ALGORITHM_ZONES {
        // Eight RRsets under one budget, more than one answer has: eight
        // P-384 checks (16 each) would pass the default 128.
        let mut v = Validation::new(Some(NOW), Limits { verifications: 1024, ..Limits::default() });
        let keys = child_keys(&mut v, zone).unwrap_or_else(|e| panic!("{zone}: {e}"));
        let z = Zone::load(zone);
        let alg = zone.trim_start_matches("alg").trim_end_matches(".test.").parse::<u8>().unwrap();
        assert_eq!(keys.verified_by.algorithm, alg);
        let www = format!("www.{zone}");
        for (owner, t) in [(&www[..], A), (&www, AAAA), (&www, TXT), (zone, MX), (zone, SOA), (zone, NS)] {
            let (set, sigs) = z.signed(owner, t);
            let proof = verify(&mut v, &keys, &set, &sigs).unwrap_or_else(|e| panic!("{owner} {t}: {e}"));
            assert_eq!(proof.ttl, 3600);
            assert_eq!(proof.wildcard, None);
        }
        // Queried in other case, the same records still verify.
        let (mut set, sigs) = z.signed(&www, A);
        set[0].owner = n(&www.to_uppercase());
        assert!(verify(&mut v, &keys, &set, &sigs).is_ok());
        assert!(v.dates_checked());
        assert_eq!(v.window().map(|w| w.check(NOW)), Some(Ok(())));
    }
}

#[test]
fn both_trust_anchor_forms_anchor_the_tree() {
    let p = Zone::load("test.");
    for file in ["anchors.conf", "anchors-dnskey.conf"] {
        let ta = TrustAnchors::load(&dir().join(file)).unwrap();
        assert_eq!(ta.closest(&n("www.alg8.test.")), Some(&n("test.")[..]));
        let a = ta.for_zone(&n("test."));
        let mut v = validation();
        let (keys, sigs) = p.signed("test.", DNSKEY);
        let zk = v.validate_dnskeys(&p.name, &recs(&keys), &recs(&sigs), &a).unwrap();
        assert_eq!(zk.zone(), &n("test.")[..]);
        assert_eq!(zk.keys().len(), 1);
        // `test.`'s anchors match no key of a child.
        let z = Zone::load("alg13.test.");
        let (ckeys, csigs) = z.signed("alg13.test.", DNSKEY);
        assert_eq!(
            v.validate_dnskeys(&z.name, &recs(&ckeys), &recs(&csigs), &a),
            Err(Verdict::Bogus(Bogus::DsMatchesNoKey))
        );
    }
}

#[test]
fn canonical_form_lowercases_names_in_rdata() {
    // The zones hold `MX 10 MAIL.<zone>` and `NS NS.Elsewhere.example.`:
    // signed over lowercase, and verified above. Lowercasing them here
    // changes nothing; uppercasing a letter of the TXT does.
    let mut v = validation();
    let keys = child_keys(&mut v, "alg13.test.").unwrap();
    let z = Zone::load("alg13.test.");
    let (mut mx, sigs) = z.signed("alg13.test.", MX);
    assert!(mx[0].rdata.contains(&b'M'));
    mx[0].rdata.make_ascii_lowercase();
    assert!(verify(&mut v, &keys, &mx, &sigs).is_ok());
    let (mut txt, sigs) = z.signed("www.alg13.test.", TXT);
    txt[0].rdata[1] = b'H';
    assert_eq!(verify(&mut v, &keys, &txt, &sigs), Err(Verdict::Bogus(Bogus::BadSignature)));
}

/// Every byte of a signed RRset, its RRSIG and the key flipped in turn:
/// never secure, and never a panic.
#[test]
fn each_tampered_byte_is_bogus() {
    for zone in ALGORITHM_ZONES {
        let mut v = Validation::new(Some(NOW), Limits { verifications: u32::MAX, ..Limits::default() });
        let keys = child_keys(&mut v, zone).unwrap();
        let z = Zone::load(zone);
        let (set, sigs) = z.signed(&format!("www.{zone}"), A);
        assert!(verify(&mut v, &keys, &set, &sigs).is_ok());
        for mask in [0x01u8, 0x80] {
            for i in 0..set[0].rdata.len() {
                let mut s = set.clone();
                s[0].rdata[i] ^= mask;
                assert!(verify(&mut v, &keys, &s, &sigs).is_err(), "{zone} rdata {i}");
            }
            for i in 0..set[0].owner.len() {
                let mut s = set.clone();
                s[0].owner[i] ^= mask;
                let mut g = sigs.clone();
                g[0].owner = s[0].owner.clone();
                assert!(verify(&mut v, &keys, &s, &g).is_err(), "{zone} owner {i}");
            }
            for i in 0..sigs[0].rdata.len() {
                let mut g = sigs.clone();
                g[0].rdata[i] ^= mask;
                assert!(verify(&mut v, &keys, &set, &g).is_err(), "{zone} rrsig {i}");
            }
        }
        // The key itself: flipped, it is another key (or none).
        let (dnskeys, dsigs) = z.signed(zone, DNSKEY);
        let ds = checked_ds(&mut v, zone);
        for i in 4..dnskeys[0].rdata.len() {
            let mut k = dnskeys.clone();
            k[0].rdata[i] ^= 0x01;
            let anchors: Vec<Anchor<'_>> = ds.iter().map(|r| Anchor::Ds(&r.rdata)).collect();
            let got = v.validate_dnskeys(&z.name, &recs(&k), &recs(&dsigs), &anchors);
            assert!(got.is_err(), "{zone} key byte {i}");
        }
    }
}

#[test]
fn expired_and_not_yet_valid() {
    for (zone, want) in [("expired.test.", Bogus::SignatureExpired), ("future.test.", Bogus::SignatureNotYetValid)] {
        let mut v = validation();
        let got = child_keys(&mut v, zone);
        assert_eq!(got, Err(Verdict::Bogus(want)), "{zone}");
        let ede = if zone == "expired.test." { 7 } else { 8 };
        assert_eq!(Verdict::Bogus(want).ede(), Some(ede));

        // Without a clock the dates are not enforced: secure, and the
        // window says that its dates would have been its only fault.
        let mut v = Validation::new(None, Limits::default());
        let keys = child_keys(&mut v, zone).unwrap();
        let z = Zone::load(zone);
        let (set, sigs) = z.signed(&format!("www.{zone}"), A);
        assert!(verify(&mut v, &keys, &set, &sigs).is_ok());
        assert!(!v.dates_checked());
        let fault = if ede == 7 { DateFault::Expired } else { DateFault::NotYetValid };
        assert_eq!(v.window().unwrap().check(NOW), Err(fault));
    }
    // Good signatures read at the wrong time.
    let mut v = validation();
    let keys = child_keys(&mut v, "alg15.test.").unwrap();
    let z = Zone::load("alg15.test.");
    let (set, sigs) = z.signed("www.alg15.test.", A);
    for (now, want) in
        [(time("20370102000000"), Bogus::SignatureExpired), (time("20241231000000"), Bogus::SignatureNotYetValid)]
    {
        let mut late = Validation::new(Some(now), Limits::default());
        assert_eq!(verify(&mut late, &keys, &set, &sigs), Err(Verdict::Bogus(want)));
        assert_eq!(late.verifications(), 0, "dates are checked before the signature");
    }
    // The TTL never outlives the signature.
    let mut v = Validation::new(Some(time("20361231235000")), Limits::default());
    assert_eq!(verify(&mut v, &keys, &set, &sigs).unwrap().ttl, 600);
}

#[test]
fn missing_rrsig_and_missing_dnskey() {
    let mut v = validation();
    let keys = child_keys(&mut v, "alg8.test.").unwrap();
    let z = Zone::load("alg8.test.");
    let (set, _) = z.signed("www.alg8.test.", A);
    let got = verify(&mut v, &keys, &set, &[]);
    assert_eq!(got, Err(Verdict::Bogus(Bogus::RrsigMissing)));
    assert_eq!(got.unwrap_err().ede(), Some(10));
    // The RRSIG of another type is not one for this RRset.
    let (_, aaaa_sigs) = z.signed("www.alg8.test.", AAAA);
    assert_eq!(verify(&mut v, &keys, &set, &aaaa_sigs), Err(Verdict::Bogus(Bogus::RrsigMissing)));
    // Another zone's signature names no key of this one.
    let other = Zone::load("alg10.test.");
    let (_, sigs10) = other.signed("www.alg10.test.", A);
    let mut s = set.clone();
    s[0].owner = n("www.alg10.test.");
    assert_eq!(verify(&mut v, &keys, &s, &sigs10), Err(Verdict::Bogus(Bogus::NoMatchingKey)));

    let ds = checked_ds(&mut v, "alg8.test.");
    let anchors: Vec<Anchor<'_>> = ds.iter().map(|r| Anchor::Ds(&r.rdata)).collect();
    let got = v.validate_dnskeys(&z.name, &[], &[], &anchors);
    assert_eq!(got, Err(Verdict::Bogus(Bogus::DnskeyMissing)));
    assert_eq!(got.unwrap_err().ede(), Some(9));
    let (dnskeys, _) = z.signed("alg8.test.", DNSKEY);
    let got = v.validate_dnskeys(&z.name, &recs(&dnskeys), &[], &anchors);
    assert_eq!(got, Err(Verdict::Bogus(Bogus::RrsigMissing)));
}

#[test]
fn ds_must_match_a_key_that_signs() {
    let mut v = validation();
    let z = Zone::load("alg13.test.");
    let mut ds = checked_ds(&mut v, "alg13.test.");
    let last = ds[0].rdata.len() - 1;
    ds[0].rdata[last] ^= 1;
    let got = keys_with_ds(&mut v, &z, &ds);
    assert_eq!(got, Err(Verdict::Bogus(Bogus::DsMatchesNoKey)));
    assert_eq!(got.unwrap_err().ede(), Some(9));

    // alg8 has a KSK and a ZSK; the DNSKEY RRset is signed by the KSK
    // only. A DS naming the ZSK matches a key, but not one that signs the
    // set: the set is not trusted because some key matched.
    let z = Zone::load("alg8.test.");
    let zsk = z.set("alg8.test.", DNSKEY).into_iter().find(|k| k.rdata[1] == 0).unwrap();
    let mut digest = [0u8; 48];
    let len = super::crypto::ds_digest(2, &z.name, &zsk.rdata, &mut digest).unwrap();
    let mut rdata = key_tag(&zsk.rdata).to_be_bytes().to_vec();
    rdata.extend_from_slice(&[8, 2]);
    rdata.extend_from_slice(&digest[..len]);
    let zsk_ds = Rr { owner: z.name.clone(), rtype: DS, ttl: 3600, rdata };
    let got = keys_with_ds(&mut v, &z, std::slice::from_ref(&zsk_ds));
    assert_eq!(got, Err(Verdict::Bogus(Bogus::KeysNotSignedByDsKey)));
    assert_eq!(got.unwrap_err().ede(), Some(6));
    // With the KSK's DS beside it, the KSK is the key reported.
    let ds = checked_ds(&mut v, "alg8.test.");
    let both: Vec<Rr> = ds.iter().cloned().chain([zsk_ds]).collect();
    let keys = keys_with_ds(&mut v, &z, &both).unwrap();
    let ksk = z.set("alg8.test.", DNSKEY).into_iter().find(|k| k.rdata[1] == 1).unwrap();
    assert_eq!(keys.verified_by, KeyId { tag: key_tag(&ksk.rdata), algorithm: 8 });
    assert_eq!(keys.keys().len(), 2);
}

/// RFC 4509 §3: with a SHA-256 DS present, the SHA-1 DS is ignored, so a
/// wrong SHA-256 digest is not rescued by a right SHA-1 one.
#[test]
fn sha1_ds_is_ignored_beside_sha256() {
    let mut v = validation();
    let z = Zone::load("alg8.test.");
    let ds = checked_ds(&mut v, "alg8.test.");
    let (sha1, sha256): (Vec<Rr>, Vec<Rr>) = ds.into_iter().partition(|r| r.rdata[3] == 1);
    assert_eq!((sha1.len(), sha256.len()), (1, 1));
    assert!(keys_with_ds(&mut v, &z, &sha1).is_ok(), "SHA-1 alone is used");
    let mut bad = sha256.clone();
    let last = bad[0].rdata.len() - 1;
    bad[0].rdata[last] ^= 1;
    let both: Vec<Rr> = sha1.iter().chain(&bad).cloned().collect();
    assert_eq!(keys_with_ds(&mut v, &z, &both), Err(Verdict::Bogus(Bogus::DsMatchesNoKey)));
    // alg5 has SHA-1 only, alg14 SHA-384 only: both secure.
    assert!(child_keys(&mut v, "alg5.test.").is_ok());
    assert!(child_keys(&mut v, "alg14.test.").is_ok());
}

#[test]
fn a_p384_check_costs_sixteen_of_the_budget() {
    // The parent's DNSKEY and DS (RSA/SHA-256 root, 1 each), then alg14's DNSKEY set: 16.
    let mut v = validation();
    assert!(child_keys(&mut v, "alg14.test.").is_ok());
    let spent = v.verifications();
    assert!(spent >= 16, "the P-384 check counted 16: {spent}");
    let mut tight = Validation::new(Some(NOW), Limits { verifications: spent - 1, ..Limits::default() });
    assert_eq!(child_keys(&mut tight, "alg14.test.").err(), Some(Verdict::Indeterminate(Indeterminate::WorkLimit)));
    let mut enough = Validation::new(Some(NOW), Limits { verifications: spent, ..Limits::default() });
    assert!(child_keys(&mut enough, "alg14.test.").is_ok());
}

#[test]
fn a_big_rsa_check_costs_by_its_modulus_and_exponent() {
    // A hostile zone's RSA-8192 key with exponent 2^33 - 1 (the largest
    // ring takes) is a millisecond a check, 18 P-256 checks' time: at 1
    // unit, 128 of them held a worker 133 ms an answer. Any odd modulus is
    // a key; a signature of the modulus's length is computed, then fails.
    let z = Zone::load("alg8.test.");
    let (set, sigs) = z.signed("www.alg8.test.", A);
    let modulus = vec![0xc5u8; 1024];
    let key_of = |e: &[u8], m: &[u8]| {
        let mut k = vec![1, 1, 3, 8, e.len() as u8];
        k.extend_from_slice(e);
        k.extend_from_slice(m);
        k
    };
    let spent_on = |key: Vec<u8>, budget: u32| {
        let keys = ZoneKeys::assume_raw(&n("alg8.test."), std::slice::from_ref(&key));
        assert_eq!(keys.keys().len(), 1, "ring takes the key");
        let mut sig = sigs[0].clone();
        sig.rdata[16..18].copy_from_slice(&key_tag(&key).to_be_bytes());
        sig.rdata.truncate(18);
        sig.rdata.extend_from_slice(&n("alg8.test."));
        sig.rdata.resize(sig.rdata.len() + key.len() - 5 - key[4] as usize, 0x5a);
        let mut v = Validation::new(Some(NOW), Limits { verifications: budget, ..Limits::default() });
        let got = verify(&mut v, &keys, &set, &[sig]);
        (got, v.verifications())
    };
    let big = key_of(&[1, 0xff, 0xff, 0xff, 0xff], &modulus);
    assert_eq!(spent_on(big.clone(), 128), (Err(Verdict::Bogus(Bogus::BadSignature)), 22));
    assert_eq!(spent_on(big, 21).0, Err(Verdict::Indeterminate(Indeterminate::WorkLimit)));
    // Exponent 65,537: 7 at 8,192 bits, 2 at 4,096, 1 at 2,048 (the common key).
    for (bytes, units) in [(1024, 7), (512, 2), (256, 1)] {
        let (got, spent) = spent_on(key_of(&[1, 0, 1], &modulus[..bytes]), 128);
        assert_eq!((got, spent), (Err(Verdict::Bogus(Bogus::BadSignature)), units), "{} bits", bytes * 8);
    }
}

#[test]
fn unsupported_algorithms_digests_and_keys_are_insecure() {
    for (zone, want, ede) in [
        ("ed448.test.", Insecure::UnsupportedAlgorithm, 1),
        ("small.test.", Insecure::UnsupportedAlgorithm, 1),
        ("digest.test.", Insecure::UnsupportedDigest, 2),
    ] {
        let mut v = validation();
        let ds = checked_ds(&mut v, zone);
        let anchors: Vec<Anchor<'_>> = ds.iter().map(|r| Anchor::Ds(&r.rdata)).collect();
        // digest.test. has no zone of its own: its DS alone decides.
        let (keys, sigs) =
            if zone == "digest.test." { (Vec::new(), Vec::new()) } else { Zone::load(zone).signed(zone, DNSKEY) };
        let dnskeys = if keys.is_empty() {
            vec![Rr { owner: n(zone), rtype: DNSKEY, ttl: 0, rdata: vec![1, 1, 3, 13, 0] }]
        } else {
            keys
        };
        let got = v.validate_dnskeys(&n(zone), &recs(&dnskeys), &recs(&sigs), &anchors);
        assert_eq!(got, Err(Verdict::Insecure(want)), "{zone}");
        assert_eq!(got.unwrap_err().ede(), Some(ede));
    }
}

// Denial with NSEC (alg8.test.: apex, cname, deleg, a.b.ent, mail, *.wild, www).

fn nsec_denial_keys() -> (Validation, ZoneKeys, Zone) {
    let mut v = validation();
    let keys = child_keys(&mut v, "alg8.test.").unwrap();
    (v, keys, Zone::load("alg8.test."))
}

/// One of `Denial`'s proofs, run by a test.
type DenialCheck<'a> = dyn Fn(&mut Denial<'_, '_>, &mut Validation) -> Verdict + 'a;

/// What `check` says of the denial records `rrs` under `keys`.
fn denial(v: &mut Validation, keys: &ZoneKeys, rrs: &[Rr], check: &DenialCheck<'_>) -> Verdict {
    let r = recs(rrs);
    check(&mut Denial::new(keys, &r), v)
}

fn absence(v: &mut Validation, keys: &ZoneKeys, rrs: &[Rr], child: &[u8]) -> Result<DsAbsence, Verdict> {
    let r = recs(rrs);
    Denial::new(keys, &r).ds_absence(v, child)
}

fn reply(parts: &[Vec<Rr>]) -> Vec<Rr> {
    parts.concat()
}

#[test]
fn nsec_proofs_accepted() {
    let (mut v, keys, z) = nsec_denial_keys();
    let check = |v: &mut Validation, rrs: &[Rr], f: &dyn Fn(&mut Denial<'_, '_>, &mut Validation) -> Verdict| {
        let r = recs(rrs);
        let mut d = Denial::new(&keys, &r);
        f(&mut d, v)
    };
    // NXDOMAIN: the name is covered, and so is the wildcard at its closest encloser.
    let rrs = reply(&[z.nsec_covering("nx.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    assert_eq!(check(&mut v, &rrs, &|d, v| d.nxdomain(v, &n("nx.alg8.test."))), Verdict::Secure);
    let rrs = reply(&[z.nsec_covering("x.y.mail2.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    assert_eq!(check(&mut v, &rrs, &|d, v| d.nxdomain(v, &n("x.y.mail2.alg8.test."))), Verdict::Secure);
    // NODATA at a name with other types.
    let rrs = z.nsec_at("www.alg8.test.");
    assert_eq!(check(&mut v, &rrs, &|d, v| d.nodata(v, &n("WWW.alg8.test."), MX)), Verdict::Secure);
    // NODATA at empty non-terminals.
    for ent in ["ent.alg8.test.", "b.ent.alg8.test."] {
        let rrs = z.nsec_covering(ent);
        assert_eq!(check(&mut v, &rrs, &|d, v| d.nodata(v, &n(ent), A)), Verdict::Secure, "{ent}");
    }
    // A wildcard answer: *.wild's A, expanded for x.wild.
    let (mut set, sigs) = z.signed("*.wild.alg8.test.", A);
    set[0].owner = n("x.wild.alg8.test.");
    let mut sigs = sigs;
    sigs[0].owner = n("x.wild.alg8.test.");
    let proof = verify(&mut v, &keys, &set, &sigs).unwrap();
    let wildcard = proof.wildcard.expect("expanded from *.wild");
    assert_eq!(wildcard.closest_encloser(&n("x.wild.alg8.test.")), &n("wild.alg8.test.")[..]);
    let rrs = z.nsec_covering("x.wild.alg8.test.");
    let qname = n("x.wild.alg8.test.");
    assert_eq!(check(&mut v, &rrs, &|d, v| d.wildcard_answer(v, &qname, wildcard)), Verdict::Secure);
    // Wildcard NODATA: x.wild does not exist and *.wild has no AAAA.
    let rrs = reply(&[z.nsec_covering("x.wild.alg8.test."), z.nsec_at("*.wild.alg8.test.")]);
    assert_eq!(check(&mut v, &rrs, &|d, v| d.nodata(v, &n("x.wild.alg8.test."), AAAA)), Verdict::Secure);
    // No DS: deleg is an unsigned delegation; www is no cut; nothing at nx.
    assert_eq!(
        absence(&mut v, &keys, &z.nsec_at("deleg.alg8.test."), &n("deleg.alg8.test.")),
        Ok(DsAbsence::Delegation)
    );
    assert_eq!(absence(&mut v, &keys, &z.nsec_at("www.alg8.test."), &n("www.alg8.test.")), Ok(DsAbsence::NotACut));
    assert_eq!(absence(&mut v, &keys, &z.nsec_covering("nx.alg8.test."), &n("nx.alg8.test.")), Ok(DsAbsence::NotACut));
    // And in the parent: insecure.test. is delegated without DS.
    let p = Zone::load("test.");
    let pk = parent_keys(&mut v);
    assert_eq!(absence(&mut v, &pk, &p.nsec_at("insecure.test."), &n("insecure.test.")), Ok(DsAbsence::Delegation));
}

#[test]
fn nsec_proofs_refused() {
    let (mut v, keys, z) = nsec_denial_keys();
    let mut run = |rrs: &[Rr], f: &DenialCheck<'_>| denial(&mut v, &keys, rrs, f);
    let bad = Verdict::Bogus(Bogus::BadDenial);
    // NXDOMAIN without the wildcard's denial.
    let rrs = z.nsec_covering("nx.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("nx.alg8.test."))), bad);
    // NXDOMAIN with an NSEC that does not cover the name.
    let rrs = reply(&[z.nsec_at("www.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("nx.alg8.test."))), bad);
    // NXDOMAIN for an empty non-terminal, which exists.
    let rrs = reply(&[z.nsec_covering("ent.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("ent.alg8.test."))), bad);
    // NXDOMAIN for a name that exists.
    let rrs = reply(&[z.nsec_at("www.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("www.alg8.test."))), bad);
    // NXDOMAIN below a wildcard: *.wild would have answered.
    let rrs = reply(&[z.nsec_covering("x.wild.alg8.test."), z.nsec_at("*.wild.alg8.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("x.wild.alg8.test."))), bad);
    // NODATA for a type that is there, and at a CNAME.
    let rrs = z.nsec_at("www.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("www.alg8.test."), A)), bad);
    let rrs = z.nsec_at("cname.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("cname.alg8.test."), A)), bad);
    // The parent side of a delegation (NS, no SOA) speaks for the DS only:
    // not for the child's data at the cut, nor for names below it.
    let rrs = z.nsec_at("deleg.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("deleg.alg8.test."), A)), bad);
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("deleg.alg8.test."), DS)), Verdict::Secure);
    let rrs = reply(&[z.nsec_at("deleg.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("x.deleg.alg8.test."))), bad);
    // A zone's own apex NSEC (SOA) cannot deny its DS: that is the parent's.
    let rrs = z.nsec_at("alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("alg8.test."), DS)), bad);
    // A wildcard answer without its proof, or with the wrong one.
    let q = n("x.wild.alg8.test.");
    let w = Wildcard { labels: 3 };
    assert_eq!(run(&[], &|d, v| d.wildcard_answer(v, &q, w)), Verdict::Bogus(Bogus::NsecMissing));
    let rrs = z.nsec_at("www.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.wildcard_answer(v, &q, w)), bad);
    // A tampered NSEC (its next name moved on) fails its signature.
    let mut rrs = reply(&[z.nsec_covering("nx.alg8.test."), z.nsec_covering("*.alg8.test.")]);
    rrs[0].rdata = [&n("zzz.alg8.test.")[..], &rrs[0].rdata[name::name_len(&rrs[0].rdata).unwrap()..]].concat();
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("www2.alg8.test."))), bad);
    // Another zone's NSEC is not this zone's denial.
    let other = Zone::load("alg10.test.");
    let rrs = reply(&[other.nsec_covering("nx.alg10.test."), other.nsec_covering("*.alg10.test.")]);
    let got = run(&rrs, &|d, v| d.nxdomain(v, &n("nx.alg10.test.")));
    assert_eq!(got, Verdict::Bogus(Bogus::NsecMissing));
    assert_eq!(got.ede(), Some(12));
}

/// `*.wild`'s NSEC sent under `owner`, as Unbound's auth-zone sends it with
/// a wildcard answer: the same RDATA and RRSIG (Labels 3), another name.
fn expanded_nsec(z: &Zone, owner: &str) -> Vec<Rr> {
    let mut rrs = z.nsec_at("*.wild.alg8.test.");
    for r in &mut rrs {
        r.owner = n(owner);
    }
    rrs
}

#[test]
fn expanded_nsec_stands_for_its_wildcard() {
    let (mut v, keys, z) = nsec_denial_keys();
    let mut run = |rrs: &[Rr], f: &DenialCheck<'_>| denial(&mut v, &keys, rrs, f);
    let bad = Verdict::Bogus(Bogus::BadDenial);
    let w = Wildcard { labels: 3 };
    // What *.wild's NSEC proves it proves under any name it was expanded
    // to: x.wild is absent (the wildcard answer is right), and *.wild,
    // so x.wild, has no AAAA.
    let q = n("x.wild.alg8.test.");
    let rrs = expanded_nsec(&z, "x.wild.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.wildcard_answer(v, &q, w)), Verdict::Secure);
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &q, AAAA)), Verdict::Secure);
    let q2 = n("a.b.wild.alg8.test.");
    let rrs = expanded_nsec(&z, "a.b.wild.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.wildcard_answer(v, &q2, Wildcard { labels: 3 })), Verdict::Secure);
    // And no more. At x.wild it would cover y.x.wild and *.x.wild, an
    // NXDOMAIN for a name *.wild answers; at *.wild it covers y.x.wild but
    // shows *.wild exists, so the NXDOMAIN fails, as it does with the
    // unexpanded record.
    let rrs = expanded_nsec(&z, "x.wild.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("y.x.wild.alg8.test."))), bad);
    let rrs = z.nsec_at("*.wild.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("y.x.wild.alg8.test."))), bad);
    // Its types are *.wild's: no NODATA for the A that *.wild has.
    let rrs = expanded_nsec(&z, "x.wild.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &q, A)), bad);
    // Only when the signature verifies for the wildcard: under a name not
    // below wild. its Labels make it *.mail's, which the zone did not sign.
    let rrs = expanded_nsec(&z, "x.mail.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.wildcard_answer(v, &n("x.mail.alg8.test."), w)), bad);
    // A flipped signature bit.
    let mut rrs = expanded_nsec(&z, "x.wild.alg8.test.");
    let last = rrs[1].rdata.len() - 1;
    rrs[1].rdata[last] ^= 1;
    assert_eq!(run(&rrs, &|d, v| d.wildcard_answer(v, &q, w)), bad);
    // An ordinary NSEC whose RRSIG's Labels field is lowered does not
    // become *.alg8.test's: the field is signed too.
    let mut rrs = z.nsec_at("www.alg8.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("www.alg8.test."), MX)), Verdict::Secure);
    rrs[1].rdata[3] = 2;
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("www.alg8.test."), MX)), bad);
    // Two RRSIGs, the expanded one good and a forged one claiming the
    // literal owner: only the good one's owner counts.
    let mut rrs = expanded_nsec(&z, "x.wild.alg8.test.");
    let mut forged = rrs[1].clone();
    forged.rdata[3] = 4;
    rrs.push(forged);
    assert_eq!(run(&rrs, &|d, v| d.wildcard_answer(v, &q, w)), Verdict::Secure);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("y.x.wild.alg8.test."))), bad);
}

// Denial with NSEC3.

#[test]
fn nsec3_proofs_accepted() {
    for zone in ["alg7.test.", "alg13.test.", "alg15.test."] {
        let mut v = validation();
        let keys = child_keys(&mut v, zone).unwrap();
        let z = Zone::load(zone);
        let name = |s: &str| format!("{s}.{zone}");
        let run = |v: &mut Validation, rrs: &[Rr], f: &dyn Fn(&mut Denial<'_, '_>, &mut Validation) -> Verdict| {
            let r = recs(rrs);
            let mut d = Denial::new(&keys, &r);
            f(&mut d, v)
        };
        // NXDOMAIN: closest encloser (the apex), next closer covered,
        // wildcard covered.
        let q = name("nx.deeper");
        let rrs = reply(&[z.nsec3_matching(zone), z.nsec3_covering(&name("deeper")), z.nsec3_covering(&name("*"))]);
        assert_eq!(run(&mut v, &rrs, &|d, v| d.nxdomain(v, &n(&q))), Verdict::Secure, "{zone}");
        // NODATA, also at an empty non-terminal (it has an NSEC3 of its own).
        let rrs = z.nsec3_matching(&name("www"));
        assert_eq!(run(&mut v, &rrs, &|d, v| d.nodata(v, &n(&name("www")), MX)), Verdict::Secure);
        let rrs = z.nsec3_matching(&name("b.ent"));
        assert_eq!(run(&mut v, &rrs, &|d, v| d.nodata(v, &n(&name("b.ent")), A)), Verdict::Secure);
        // A wildcard answer: the next closer is covered.
        let (mut set, mut sigs) = z.signed(&name("*.wild"), TXT);
        set[0].owner = n(&name("a.b.wild"));
        sigs[0].owner = set[0].owner.clone();
        let w = verify(&mut v, &keys, &set, &sigs).unwrap().wildcard.unwrap();
        let rrs = z.nsec3_covering(&name("b.wild"));
        let q = n(&name("a.b.wild"));
        assert_eq!(run(&mut v, &rrs, &|d, v| d.wildcard_answer(v, &q, w)), Verdict::Secure);
        // Wildcard NODATA.
        let rrs = reply(&[
            z.nsec3_matching(&name("wild")),
            z.nsec3_covering(&name("x.wild")),
            z.nsec3_matching(&name("*.wild")),
        ]);
        assert_eq!(run(&mut v, &rrs, &|d, v| d.nodata(v, &n(&name("x.wild")), AAAA)), Verdict::Secure);
        // No DS at the unsigned delegation.
        let rrs = z.nsec3_matching(&name("deleg"));
        assert_eq!(absence(&mut v, &keys, &rrs, &n(&name("deleg"))), Ok(DsAbsence::Delegation));
    }
}

#[test]
fn nsec3_proofs_refused() {
    let zone = "alg13.test.";
    let mut v = validation();
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let mut run = |rrs: &[Rr], f: &DenialCheck<'_>| denial(&mut v, &keys, rrs, f);
    let bad = Verdict::Bogus(Bogus::BadDenial);
    let q = n("nx.deeper.alg13.test.");
    let ce = z.nsec3_matching(zone);
    let nc = z.nsec3_covering("deeper.alg13.test.");
    let wc = z.nsec3_covering("*.alg13.test.");
    // Each part of the NXDOMAIN proof left out in turn.
    assert_eq!(run(&reply(&[nc.clone(), wc.clone()]), &|d, v| d.nxdomain(v, &q)), bad);
    assert_eq!(run(&reply(&[ce.clone(), wc.clone()]), &|d, v| d.nxdomain(v, &q)), bad);
    assert_eq!(run(&reply(&[ce.clone(), nc.clone()]), &|d, v| d.nxdomain(v, &q)), bad);
    // NXDOMAIN for a name that exists.
    let rrs = reply(&[z.nsec3_matching("www.alg13.test."), wc.clone()]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("www.alg13.test."))), bad);
    // NODATA for a type that is there, at a CNAME, and at the cut for A.
    let rrs = z.nsec3_matching("www.alg13.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("www.alg13.test."), AAAA)), bad);
    let rrs = z.nsec3_matching("cname.alg13.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("cname.alg13.test."), A)), bad);
    let rrs = z.nsec3_matching("deleg.alg13.test.");
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("deleg.alg13.test."), A)), bad);
    // Names below a delegation: its NSEC3 cannot be their closest encloser.
    let rrs = reply(&[z.nsec3_matching("deleg.alg13.test."), z.nsec3_covering("x.deleg.alg13.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nxdomain(v, &n("x.deleg.alg13.test."))), bad);
    // The apex's NSEC3 (SOA) cannot deny the zone's own DS.
    let rrs = z.nsec3_matching(zone);
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n(zone), DS)), bad);
    // A DS denied without opt-out and without a matching NSEC3.
    let rrs = reply(&[ce.clone(), z.nsec3_covering("nx.alg13.test.")]);
    assert_eq!(run(&rrs, &|d, v| d.nodata(v, &n("nx.alg13.test."), DS)), bad);
    // NSEC3 from another zone (the parent's keys, alg13's records).
    let rrs = reply(&[ce.clone(), nc.clone(), wc.clone()]);
    let pk = parent_keys(&mut validation());
    let r = recs(&rrs);
    let mut d = Denial::new(&pk, &r);
    assert_eq!(d.nxdomain(&mut validation(), &q), Verdict::Bogus(Bogus::NsecMissing));
}

/// RUSTSEC-2026-0505: an NSEC3 whose owner is not one label directly under
/// the zone is not the zone's, whatever signs it.
#[test]
fn nsec3_owner_must_be_directly_under_the_zone() {
    let zone = "alg13.test.";
    let mut v = validation();
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let mut rrs =
        reply(&[z.nsec3_matching(zone), z.nsec3_covering("deeper.alg13.test."), z.nsec3_covering("*.alg13.test.")]);
    // The same records moved one label down: not even looked at (their
    // signatures would fail too, but the owner rule comes first: the
    // reply holds no NSEC3 of the zone at all).
    for r in &mut rrs {
        let label = r.owner[0] as usize + 1;
        r.owner = [&r.owner[..label], &n("sub.alg13.test.")[..]].concat();
    }
    let r = recs(&rrs);
    let mut d = Denial::new(&keys, &r);
    assert_eq!(d.nxdomain(&mut v, &n("nx.deeper.alg13.test.")), Verdict::Bogus(Bogus::NsecMissing));
    assert_eq!(v.verifications(), 3, "the parent's DNSKEY, the DS, the child's DNSKEY; none for the moved records");
}

#[test]
fn opt_out_is_insecure() {
    let zone = "optout.test.";
    let mut v = validation();
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let run = |v: &mut Validation, rrs: &[Rr], f: &dyn Fn(&mut Denial<'_, '_>, &mut Validation) -> Verdict| {
        let r = recs(rrs);
        let mut d = Denial::new(&keys, &r);
        f(&mut d, v)
    };
    // ua is an unsigned delegation with no NSEC3 of its own: a DS query
    // there gets the closest encloser and an opt-out span.
    let rrs = reply(&[z.nsec3_matching(zone), z.nsec3_covering("ua.optout.test.")]);
    let r = recs(&rrs);
    let mut d = Denial::new(&keys, &r);
    assert_eq!(d.ds_absence(&mut v, &n("ua.optout.test.")), Ok(DsAbsence::OptOut));
    assert_eq!(run(&mut v, &rrs, &|d, v| d.nodata(v, &n("ua.optout.test."), DS)), Verdict::Insecure(Insecure::OptOut));
    // An NXDOMAIN in an opt-out span is insecure, not secure.
    let rrs = reply(&[z.nsec3_matching(zone), z.nsec3_covering("nx.optout.test."), z.nsec3_covering("*.optout.test.")]);
    let got = run(&mut v, &rrs, &|d, v| d.nxdomain(v, &n("nx.optout.test.")));
    assert_eq!(got, Verdict::Insecure(Insecure::OptOut));
    assert_eq!(got.ede(), None);
    // A NODATA at a name that has its NSEC3 is secure.
    let rrs = z.nsec3_matching("www.optout.test.");
    assert_eq!(run(&mut v, &rrs, &|d, v| d.nodata(v, &n("www.optout.test."), MX)), Verdict::Secure);
    // And the signed data of the zone is secure as ever.
    let (set, sigs) = z.signed("www.optout.test.", A);
    assert!(verify(&mut v, &keys, &set, &sigs).is_ok());
}

#[test]
fn nsec3_iterations_over_the_limit_are_insecure() {
    let zone = "iter200.test.";
    let mut v = validation();
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let rrs =
        reply(&[z.nsec3_matching(zone), z.nsec3_covering("nx.iter200.test."), z.nsec3_covering("*.iter200.test.")]);
    let r = recs(&rrs);
    let mut d = Denial::new(&keys, &r);
    let got = d.nxdomain(&mut v, &n("nx.iter200.test."));
    assert_eq!(got, Verdict::Insecure(Insecure::Nsec3Iterations));
    assert_eq!(got.ede(), Some(27));
    assert_eq!(d.nodata(&mut v, &n("www.iter200.test."), MX), got);
    assert_eq!(v.hashes(), 2, "the DS digests only: no NSEC3 name was hashed");
    // An answer that needs no NSEC3 proof is secure.
    let (set, sigs) = z.signed("www.iter200.test.", A);
    assert!(verify(&mut v, &keys, &set, &sigs).is_ok());
    // With a higher limit the same proof holds.
    let mut v = Validation::new(Some(NOW), Limits { nsec3_iterations: 200, ..Limits::default() });
    let keys = child_keys(&mut v, zone).unwrap();
    let mut d = Denial::new(&keys, &r);
    assert_eq!(d.nxdomain(&mut v, &n("nx.iter200.test.")), Verdict::Secure);
}

/// KeyTrap (CVE-2023-50387): many keys sharing the signing key's tag and
/// many RRSIGs naming it. Checking stays within the per-RRset limit and
/// the budget, however many there are.
#[test]
fn keytrap_stays_within_the_budget() {
    let zone = "alg15.test.";
    let mut v = validation();
    let real = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let (set, sigs) = z.signed("www.alg15.test.", A);
    let key = z.set(zone, DNSKEY).remove(0).rdata;
    let tag = key_tag(&key);
    // 200 other Ed25519 keys with the same tag: the last two bytes fix up
    // the checksum.
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for i in 0..200u32 {
        let mut k = key.clone();
        k[10..14].copy_from_slice(&i.to_be_bytes());
        let mut x = 0u16;
        loop {
            let at = k.len() - 2;
            k[at..].copy_from_slice(&x.to_be_bytes());
            if key_tag(&k) == tag {
                break;
            }
            x = x.wrapping_add(1);
        }
        if k != key {
            keys.push(k);
        }
    }
    keys.push(key.clone());
    let trap = ZoneKeys::assume_raw(&n(zone), &keys);
    assert_eq!(trap.keys().iter().filter(|k| k.id.tag == tag).count(), keys.len());
    // Twenty copies of the RRSIG, signatures garbled.
    let mut many = Vec::new();
    for i in 0..20u8 {
        let mut s = sigs[0].clone();
        let last = s.rdata.len() - 1;
        s.rdata[last] ^= i;
        many.push(s);
    }
    let mut v = validation();
    let got = verify(&mut v, &trap, &set, &many);
    assert_eq!(got, Err(Verdict::Indeterminate(Indeterminate::WorkLimit)));
    assert_eq!(v.verifications(), Limits::default().per_rrset);
    // The budget bounds a whole answer of such RRsets.
    let mut v = validation();
    for _ in 0..100 {
        let _ = verify(&mut v, &trap, &set, &many);
    }
    assert_eq!(v.verifications(), Limits::default().verifications);
    // The honest zone: its one key verifies at the first try.
    let mut v = validation();
    assert!(verify(&mut v, &real, &set, &sigs).is_ok());
    assert_eq!(v.verifications(), 1);
}

/// CVE-2023-50868: a deep name makes the closest-encloser search hash
/// each ancestor; the hash budget stops it.
#[test]
fn nsec3_hashing_is_bounded() {
    let zone = "alg13.test.";
    let mut v = validation();
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let deep = format!("{}alg13.test.", "a.".repeat(120));
    let rrs = reply(&[z.nsec3_matching(zone), z.nsec3_covering(&deep), z.nsec3_covering("*.alg13.test.")]);
    let r = recs(&rrs);
    let before = v.hashes();
    let mut d = Denial::new(&keys, &r);
    let got = d.nxdomain(&mut v, &n(&deep));
    assert!(matches!(got, Verdict::Bogus(_) | Verdict::Indeterminate(_)), "{got}");
    assert!(v.hashes() - before <= 122);
    let mut tight = Validation::new(Some(NOW), Limits { hashes: 10, ..Limits::default() });
    let k = child_keys(&mut tight, zone).unwrap();
    let mut d = Denial::new(&k, &r);
    assert_eq!(d.nxdomain(&mut tight, &n(&deep)), Verdict::Indeterminate(Indeterminate::WorkLimit));
    assert_eq!(tight.hashes(), 10);
}

/// A reply stuffed with thousands of NSEC3 records (each with an RRSIG that
/// names the zone, none of them good) before the real proof: the proof is
/// still found, and none of the stuffing is checked, as none of it covers
/// or matches a name the proof needs.
#[test]
fn stuffed_denials_still_prove() {
    let zone = "alg13.test.";
    let mut v = validation();
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let proof =
        reply(&[z.nsec3_matching(zone), z.nsec3_covering("deeper.alg13.test."), z.nsec3_covering("*.alg13.test.")]);
    let template = proof[0].clone();
    let sig = proof[1].clone();
    let mut rrs = Vec::new();
    for i in 0..3000u32 {
        // Spans of one hash each, [ff.. i] to [ff.. i+1]: they cover nothing.
        let mut h = [0xffu8; 20];
        h[16..].copy_from_slice(&i.to_be_bytes());
        let mut next = h;
        next[16..].copy_from_slice(&(i + 1).to_be_bytes());
        let owner = [&[32u8][..], text::base32hex(&h).as_bytes(), &n(zone)].concat();
        let mut rdata = template.rdata.clone();
        let at = rdata.len() - template.rdata.len() + 5 + template.rdata[4] as usize + 1;
        rdata[at..at + 20].copy_from_slice(&next);
        rrs.push(Rr { owner: owner.clone(), rtype: NSEC3, ttl: 3600, rdata });
        rrs.push(Rr { owner, ..sig.clone() });
    }
    rrs.extend(proof);
    let before = v.verifications();
    let r = recs(&rrs);
    let mut d = Denial::new(&keys, &r);
    assert_eq!(d.nxdomain(&mut v, &n("nx.deeper.alg13.test.")), Verdict::Secure);
    assert_eq!(v.verifications() - before, 3);
}

/// Bytes of a good RRSIG, DNSKEY, NSEC and NSEC3 flipped and cut, through
/// every entry point: no panic (the results are whatever they are).
#[test]
fn no_panic_on_mangled_records() {
    let zone = "alg13.test.";
    let mut v = Validation::new(Some(NOW), Limits { verifications: u32::MAX, hashes: u32::MAX, ..Limits::default() });
    let keys = child_keys(&mut v, zone).unwrap();
    let z = Zone::load(zone);
    let (set, sigs) = z.signed("www.alg13.test.", A);
    let (dnskeys, dsigs) = z.signed(zone, DNSKEY);
    let ds = checked_ds(&mut v, zone);
    let proof = reply(&[z.nsec3_matching(zone), z.nsec3_covering("nx.alg13.test."), z.nsec3_covering("*.alg13.test.")]);
    let nsec_zone = Zone::load("alg8.test.");
    let nsec_proof = reply(&[nsec_zone.nsec_covering("nx.alg8.test."), nsec_zone.nsec_covering("*.alg8.test.")]);
    let variants = |rdata: &[u8]| {
        let mut out = Vec::new();
        for i in 0..rdata.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut r = rdata.to_vec();
                r[i] ^= mask;
                out.push(r);
            }
            out.push(rdata[..i].to_vec());
        }
        out
    };
    for bad in variants(&sigs[0].rdata) {
        let g = [Rr { rdata: bad, ..sigs[0].clone() }];
        let _ = verify(&mut v, &keys, &set, &g);
    }
    let anchors: Vec<Anchor<'_>> = ds.iter().map(|r| Anchor::Ds(&r.rdata)).collect();
    for bad in variants(&dnskeys[0].rdata) {
        let k = [Rr { rdata: bad.clone(), ..dnskeys[0].clone() }];
        let _ = v.validate_dnskeys(&z.name, &recs(&k), &recs(&dsigs), &anchors);
        let _ = v.validate_dnskeys(&z.name, &recs(&dnskeys), &recs(&dsigs), &[Anchor::Key(&bad), Anchor::Ds(&bad)]);
    }
    for (proof, zk, q) in
        [(&proof, &keys, "nx.alg13.test."), (&nsec_proof, &child_keys(&mut v, "alg8.test.").unwrap(), "nx.alg8.test.")]
    {
        for (i, rr) in proof.iter().enumerate() {
            for bad in variants(&rr.rdata) {
                let mut p = proof.clone();
                p[i].rdata = bad;
                let r = recs(&p);
                let mut d = Denial::new(zk, &r);
                let _ = d.nxdomain(&mut v, &n(q));
                let _ = d.nodata(&mut v, &n(q), A);
                let _ = d.ds_absence(&mut v, &n(q));
                let _ = d.wildcard_answer(&mut v, &n(q), Wildcard { labels: 2 });
            }
        }
    }
    // Garbage as a whole reply.
    let mut msg = vec![0u8; 12];
    msg[7] = 3;
    for i in 0..=255u8 {
        msg.push(i);
        let _ = Records::from_message(&msg);
    }
}

/// A reply read from the wire (names compressed) verifies like the zone.
#[test]
fn records_from_a_compressed_reply() {
    let mut v = validation();
    let keys = child_keys(&mut v, "alg8.test.").unwrap();
    let z = Zone::load("alg8.test.");
    let (mx, sigs) = z.signed("alg8.test.", MX);
    // Header, question alg8.test. MX, then the MX with its owner and its
    // RDATA name compressed, then the RRSIG (owner compressed).
    let mut msg = vec![0, 1, 0x81, 0xa0, 0, 1, 0, 2, 0, 0, 0, 0];
    msg.extend_from_slice(&n("alg8.test."));
    msg.extend_from_slice(&[0, 15, 0, 1]);
    msg.extend_from_slice(&[0xc0, 12, 0, 15, 0, 1, 0, 0, 0x0e, 0x10, 0, 9, 0, 10, 4]);
    msg.extend_from_slice(b"MAIL");
    msg.extend_from_slice(&[0xc0, 12]);
    msg.extend_from_slice(&[0xc0, 12, 0, 46, 0, 1, 0, 0, 0x0e, 0x10]);
    msg.extend_from_slice(&(sigs[0].rdata.len() as u16).to_be_bytes());
    msg.extend_from_slice(&sigs[0].rdata);
    let records = Records::from_message(&msg).unwrap();
    let all: Vec<Record<'_>> = records.section(Section::Answer).collect();
    assert_eq!(all.len(), 2);
    let set = rrset(&all, &n("alg8.test."), MX);
    assert_eq!(set[0].rdata, &mx[0].rdata[..]);
    assert_eq!(signer_of(&all, &n("ALG8.test."), MX), Some(&n("alg8.test.")[..]));
    let sigs = rrsigs_for(&all, &n("alg8.test."), MX);
    assert!(v.verify_rrset(&keys, &set, &sigs).is_ok());
}

// The RFCs' example signatures.

fn rfc_case(zone: &str, key: &str, owner: &str, t: u16, rdata: Vec<u8>, sig: &str) -> (ZoneKeys, Rr, Rr, u32) {
    let f: Vec<&str> = key.split_whitespace().collect();
    let key = rdata_from_text(DNSKEY, &f);
    let keys = ZoneKeys::assume(&n(zone), &[&key]);
    let f: Vec<&str> = sig.split_whitespace().collect();
    let sig = rdata_from_text(RRSIG, &f);
    let inception = Rrsig::parse(&sig).unwrap().inception;
    (
        keys,
        Rr { owner: n(owner), rtype: t, ttl: 3600, rdata },
        Rr { owner: n(owner), rtype: RRSIG, ttl: 3600, rdata: sig },
        inception + 1,
    )
}

#[test]
fn rfc_example_signatures() {
    let a = |ip: [u8; 4]| ip.to_vec();
    let mx = [&[0u8, 10][..], &n("mail.example.com.")].concat();
    let cases = [
        // RFC 6605 §6.1, ECDSA P-256.
        rfc_case(
            "example.net.",
            "257 3 13 GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edbkrSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA==",
            "www.example.net.",
            A,
            a([192, 0, 2, 1]),
            "A 13 3 3600 20100909100439 20100812100439 55648 example.net. qx6wLYqmh+l9oCKTN6qIc+bw6ya+KJ8oMz0YP107epXAyGmt+3SNruPFKG7tZoLBLlUzGGus7ZwmwWep666VCw==",
        ),
        // RFC 6605 §6.2, ECDSA P-384.
        rfc_case(
            "example.net.",
            "257 3 14 xKYaNhWdGOfJ+nPrL8/arkwf2EY3MDJ+SErKivBVSum1w/egsXvSADtNJhyem5RCOpgQ6K8X1DRSEkrbYQ+OB+v8/uX45NBwY8rp65F6Glur8I/mlVNgF6W/qTI37m40",
            "www.example.net.",
            A,
            a([192, 0, 2, 1]),
            "A 14 3 3600 20100909102025 20100812102025 10771 example.net. /L5hDKIvGDyI1fcARX3z65qrmPsVz73QD1Mr5CEqOiLP95hxQouuroGCeZOvzFaxsT8Glr74hbavRKayJNuydCuzWTSSPdz7wnqXL5bdcJzusdnI0RSMROxxwGipWcJm",
        ),
        // RFC 5702 §6.2, RSA/SHA-512 with a 1,024-bit key.
        rfc_case(
            "example.net.",
            "256 3 10 AwEAAdHoNTOW+et86KuJOWRDp1pndvwb6Y83nSVXXyLA3DLroROUkN6X0O6pnWnjJQujX/AyhqFDxj13tOnD9u/1kTg7cV6rklMrZDtJCQ5PCl/D7QNPsgVsMu1J2Q8gpMpztNFLpPBz1bWXjDtaR7ZQBlZ3PFY12ZTSncorffcGmhOL",
            "www.example.net.",
            A,
            a([192, 0, 2, 91]),
            "A 10 3 3600 20300101000000 20000101000000 3740 example.net. tsb4wnjRUDnB1BUi+t6TMTXThjVnG+eCkWqjvvjhzQL1d0YRoOe0CbxrVDYd0xDtsuJRaeUw1ep94PzEWzr0iGYgZBWm/zpq+9fOuagYJRfDqfReKBzMweOLDiNa8iP5g9vMhpuv6OPlvpXwm9Sa9ZXIbNl1MBGk0fthPgxdDLw=",
        ),
        // RFC 8080 §6.1, Ed25519, both examples as corrected by erratum 4935
        // (Labels 2; the signatures printed in the RFC do not verify).
        rfc_case(
            "example.com.",
            "257 3 15 l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4=",
            "example.com.",
            MX,
            mx.clone(),
            "MX 15 2 3600 20150819220000 20150729220000 3613 example.com. oL9krJun7xfBOIWcGHi7mag5/hdZrKWw15jPGrHpjQeRAvTdszaPD+QLs3fx8A4M3e23mRZ9VrbpMngwcrqNAg==",
        ),
        rfc_case(
            "example.com.",
            "257 3 15 zPnZ/QwEe7S8C5SPz2OfS5RR40ATk2/rYnE9xHIEijs=",
            "example.com.",
            MX,
            mx.clone(),
            "MX 15 2 3600 20150819220000 20150729220000 35217 example.com. zXQ0bkYgQTEFyfLyi9QoiY6D8ZdYo4wyUhVioYZXFdT410QPRITQSqJSnzQoSm5poJ7gD7AQR0O7KuI5k2pcBg==",
        ),
    ];
    for (keys, rr, sig, now) in &cases {
        let mut v = Validation::new(Some(*now), Limits::default());
        let proof = verify(&mut v, keys, std::slice::from_ref(rr), std::slice::from_ref(sig));
        assert!(proof.is_ok(), "{} {:?}", name::to_text(&rr.owner), proof);
        assert_eq!(proof.unwrap().key.tag, Rrsig::parse(&sig.rdata).unwrap().key_tag, "the tag is the RFC's");
        let mut changed = rr.clone();
        let last = changed.rdata.len() - 1;
        changed.rdata[last] ^= 1;
        assert!(verify(&mut v, keys, &[changed], std::slice::from_ref(sig)).is_err());
    }
    // RFC 5702 §6.1's RSA/SHA-256 key is 512 bits: not a key this
    // validator uses, so its DS would make the zone insecure.
    let key = rdata_from_text(
        DNSKEY,
        &[
            "256",
            "3",
            "8",
            "AwEAAcFcGsaxxdgiuuGmCkVImy4h99CqT7jwY3pexPGcnUFtR2Fh36BponcwtkZ4cAgtvd4Qs8PkxUdp6p/DlUmObdk=",
        ],
    );
    assert_eq!(key_tag(&key), 9033);
    assert!(ZoneKeys::assume(&n("example.net."), &[&key]).keys().is_empty());
    let mut digest = [0u8; 48];
    let len = super::crypto::ds_digest(2, &n("example.net."), &key, &mut digest).unwrap();
    let mut ds = 9033u16.to_be_bytes().to_vec();
    ds.extend_from_slice(&[8, 2]);
    ds.extend_from_slice(&digest[..len]);
    let owner = n("example.net.");
    let key_rr = Record { owner: &owner, rtype: DNSKEY, class: 1, ttl: 3600, rdata: &key };
    let mut v = validation();
    assert_eq!(
        v.validate_dnskeys(&owner, &[key_rr], &[], &[Anchor::Ds(&ds)]),
        Err(Verdict::Insecure(Insecure::UnsupportedAlgorithm))
    );
}
