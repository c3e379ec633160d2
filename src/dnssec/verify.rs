//! Signatures: one validation's clock and budget ([`Validation`]), an
//! RRset checked against a zone's trusted keys ([`Validation::verify_rrset`]),
//! and a zone's DNSKEY RRset checked against its DS records or trust
//! anchors, key by key ([`Validation::validate_dnskeys`]).
//!
//! A signature counts only if the very key it names (signer, key tag,
//! algorithm) verifies it; a DNSKEY RRset is trusted only if a key that a
//! DS (or anchor) names verifies it, and the keys that did are reported
//! (hickory's RUSTSEC-2025-0006 trusted a set once any key matched).

use super::canon::{self, Scratch};
use super::crypto::{self, KeyUse};
use super::name;
use super::record::{Dnskey, Ds, Record, Rrsig, rtype};
use super::verdict::{Bogus, Indeterminate, Insecure, Verdict};

/// Work one validation may do: against KeyTrap (CVE-2023-50387: many keys
/// with one tag times many signatures) and NSEC3 floods (CVE-2023-50868).
/// Spent, the validation is indeterminate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Signature verifications in one validation (a whole answer, its chain
    /// included): a chain of four zones with a CNAME into another costs
    /// about 15; dnsmasq allows 200 crypto operations per query. A P-384
    /// check counts 16, an RSA one by its modulus and exponent, up to 22
    /// ([`super::crypto::cost`]): at most 8 or 5 of those.
    pub verifications: u32,
    /// Verifications one RRset may take, whatever the number of keys and
    /// RRSIGs: Unbound's MAX_VALIDATE_RRSIGS. RFC 4035 §5.3.1 would try
    /// every key with the tag; KeyTrap is why nobody does.
    pub per_rrset: u32,
    /// DS digests and NSEC3 name hashes in one validation. An NSEC3
    /// closest-encloser proof hashes each ancestor of the name once.
    pub hashes: u32,
    /// NSEC3 iterations above which a proof makes the answer insecure (RFC
    /// 9276 §3.2, EDE 27): 150, as Unbound (val-nsec3-keysize-iterations
    /// "1024 150 2048 150 4096 150"), dnsmasq and Blocky. No hash is
    /// computed for such a record.
    pub nsec3_iterations: u16,
}

impl Default for Limits {
    fn default() -> Limits {
        // At most 128 × 151 = 19,328 SHA-1 runs and 128 signature checks.
        Limits { verifications: 128, per_rrset: 8, hashes: 128, nsec3_iterations: 150 }
    }
}

/// Serial-number arithmetic on 32-bit times (RFC 1982 §3.2, as RFC 4034
/// §3.1.5 requires): `a` before `b`, across the 2106 wrap.
pub fn serial_lt(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) > 0
}

/// When signatures relied on are all valid: the latest inception and the
/// earliest expiration among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub inception: u32,
    pub expiration: u32,
}

/// What is wrong with a time against a signature window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DateFault {
    Expired,
    NotYetValid,
}

impl Window {
    /// Whether `now` is inside the window. A cache whose entries were
    /// validated without a clock asks this once the clock is known good.
    pub fn check(&self, now: u32) -> Result<(), DateFault> {
        if serial_lt(self.expiration, now) {
            Err(DateFault::Expired)
        } else if serial_lt(now, self.inception) {
            Err(DateFault::NotYetValid)
        } else {
            Ok(())
        }
    }

    fn intersect(self, other: Window) -> Window {
        Window {
            inception: if serial_lt(self.inception, other.inception) { other.inception } else { self.inception },
            expiration: if serial_lt(other.expiration, self.expiration) { other.expiration } else { self.expiration },
        }
    }
}

impl From<DateFault> for Bogus {
    fn from(f: DateFault) -> Bogus {
        match f {
            DateFault::Expired => Bogus::SignatureExpired,
            DateFault::NotYetValid => Bogus::SignatureNotYetValid,
        }
    }
}

/// A key by what an RRSIG names it by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyId {
    pub tag: u16,
    pub algorithm: u8,
}

/// A DNSKEY the validator may verify with: a zone key, not revoked, of a
/// supported algorithm, key material ring takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub id: KeyId,
    /// The DNSKEY RDATA.
    rdata: Box<[u8]>,
}

impl Key {
    /// The key from DNSKEY RDATA, if it may verify RRSIGs.
    fn from_rdata(rdata: &[u8]) -> Option<Key> {
        let k = Dnskey::parse(rdata)?;
        (k.signs_zone() && crypto::key_use(k.algorithm, k.public_key) == KeyUse::Usable)
            .then(|| Key { id: KeyId { tag: crypto::key_tag(rdata), algorithm: k.algorithm }, rdata: rdata.into() })
    }

    fn material(&self) -> &[u8] {
        &self.rdata[4..]
    }

    /// The DNSKEY RDATA.
    pub fn rdata(&self) -> &[u8] {
        &self.rdata
    }
}

/// A zone's keys, trusted because its DNSKEY RRset verified under a key its
/// DS (or a trust anchor) names. What the engine caches per zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneKeys {
    /// The zone, lowercase.
    zone: Box<[u8]>,
    /// Its keys that may verify RRSIGs.
    keys: Vec<Key>,
    /// The DS-named key whose signature over the DNSKEY RRset verified.
    pub verified_by: KeyId,
    /// How long the DNSKEY RRset may be cached (RFC 4035 §5.3.3).
    pub ttl: u32,
    /// When that signature is valid.
    pub window: Window,
}

impl ZoneKeys {
    pub fn zone(&self) -> &[u8] {
        &self.zone
    }

    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// About what it holds in memory: the name and every key's RDATA.
    pub fn bytes(&self) -> usize {
        let key = std::mem::size_of::<Key>();
        std::mem::size_of::<ZoneKeys>() + self.zone.len() + self.keys.iter().map(|k| key + k.rdata.len()).sum::<usize>()
    }
}

/// What a good signature over an RRset says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proof {
    /// How long the RRset may be cached: the least of its TTL, the RRSIG's
    /// original TTL and the time to the RRSIG's expiration (RFC 4035 §5.3.3).
    pub ttl: u32,
    /// The key that verified it.
    pub key: KeyId,
    /// The signature's validity.
    pub window: Window,
    /// Set when the RRSIG's Labels field is below the owner's label count:
    /// the RRset was expanded from a wildcard, and the caller must prove
    /// that the name asked for does not exist (RFC 4035 §5.3.4).
    pub wildcard: Option<Wildcard>,
}

/// A wildcard expansion, as the RRSIG's Labels field gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wildcard {
    /// The labels of the wildcard's parent (the RRSIG's Labels field).
    pub labels: u8,
}

impl Wildcard {
    /// The closest encloser: the wildcard `*.CE`'s parent, a suffix of `owner`.
    pub fn closest_encloser<'n>(&self, owner: &'n [u8]) -> &'n [u8] {
        name::suffix(owner, self.labels as usize)
    }

    /// The next closer name: one label longer than the closest encloser.
    /// A denial must show that it does not exist.
    pub fn next_closer<'n>(&self, owner: &'n [u8]) -> &'n [u8] {
        name::suffix(owner, self.labels as usize + 1)
    }
}

/// A trust point for a zone's DNSKEY RRset: a DS record's RDATA (from the
/// parent, its RRset already verified, or a trust anchor) or a DNSKEY's
/// RDATA (a trust anchor given as a key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor<'a> {
    Ds(&'a [u8]),
    Key(&'a [u8]),
}

/// One validation: the clock, the work budget, the buffers, and what the
/// signatures relied on say about time. Make one per answer (its chain,
/// CNAMEs and proofs included) so the budget bounds the whole answer.
#[derive(Debug)]
pub struct Validation {
    /// The time (seconds since 1970, mod 2³²), or `None` while the clock is
    /// not known good: dates are then not enforced.
    now: Option<u32>,
    pub(super) limits: Limits,
    verifications_left: u32,
    pub(super) hashes_left: u32,
    scratch: Scratch,
    /// The intersection of the windows of the signatures relied on.
    window: Option<Window>,
}

/// The order of faults when no signature verifies: the most telling wins.
fn rank(b: Bogus) -> u8 {
    match b {
        Bogus::RrsigMissing => 0,
        Bogus::NoMatchingKey => 1,
        Bogus::Malformed => 2,
        Bogus::SignatureNotYetValid => 3,
        Bogus::SignatureExpired => 4,
        _ => 5,
    }
}

impl Validation {
    pub fn new(now: Option<u32>, limits: Limits) -> Validation {
        Validation {
            now,
            limits,
            verifications_left: limits.verifications,
            hashes_left: limits.hashes,
            scratch: Scratch::default(),
            window: None,
        }
    }

    /// Whether signature dates were enforced (a clock was given).
    pub fn dates_checked(&self) -> bool {
        self.now.is_some()
    }

    /// When every signature relied on so far is valid. Without a clock, an
    /// answer's only fault may be its dates: `window().check(t)` says so
    /// once a time is known.
    pub fn window(&self) -> Option<Window> {
        self.window
    }

    /// Signature verifications run so far, in budget units (a P-384 check 16).
    pub fn verifications(&self) -> u32 {
        self.limits.verifications - self.verifications_left
    }

    /// Hashes computed so far (DS digests and NSEC3 names).
    pub fn hashes(&self) -> u32 {
        self.limits.hashes - self.hashes_left
    }

    /// Takes one hash from the budget.
    pub(super) fn spend_hash(&mut self) -> Result<(), Verdict> {
        if self.hashes_left == 0 {
            return Err(Verdict::Indeterminate(Indeterminate::WorkLimit));
        }
        self.hashes_left -= 1;
        Ok(())
    }

    /// Checks `rrset` (records of one owner, type and class) against the
    /// RRSIGs among `rrsigs` that cover it and `keys`. Ok with what the
    /// signature says; Err with a bogus or indeterminate verdict.
    pub fn verify_rrset(
        &mut self,
        keys: &ZoneKeys,
        rrset: &[Record<'_>],
        rrsigs: &[Record<'_>],
    ) -> Result<Proof, Verdict> {
        self.verify_with(&keys.zone, &keys.keys, rrset, rrsigs)
    }

    fn verify_with(
        &mut self,
        zone: &[u8],
        keys: &[Key],
        rrset: &[Record<'_>],
        rrsigs: &[Record<'_>],
    ) -> Result<Proof, Verdict> {
        let malformed = Verdict::Bogus(Bogus::Malformed);
        let first = rrset.first().ok_or(malformed)?;
        let same = |r: &Record<'_>| r.rtype == first.rtype && r.class == first.class && name::eq(r.owner, first.owner);
        if !rrset.iter().all(same) || !name::is_name(first.owner) || first.rtype == rtype::RRSIG {
            return Err(malformed);
        }
        let owner_labels = name::rrsig_label_count(first.owner);
        let mut fault = Bogus::RrsigMissing;
        let mut note = |b: Bogus| {
            if rank(b) > rank(fault) {
                fault = b;
            }
        };
        let mut tries = 0;
        for r in rrsigs {
            if r.rtype != rtype::RRSIG || r.class != first.class || !name::eq(r.owner, first.owner) {
                continue;
            }
            let Some(sig) = Rrsig::parse(r.rdata) else {
                note(Bogus::Malformed);
                continue;
            };
            if sig.type_covered != first.rtype {
                continue;
            }
            // RFC 4035 §5.3.1: the signer is the zone, the owner is in it,
            // and the labels are no more than the owner has.
            if !name::eq(sig.signer, zone) || !crypto::algorithm_supported(sig.algorithm) {
                note(Bogus::NoMatchingKey);
                continue;
            }
            if !name::is_at_or_below(first.owner, sig.signer) || sig.labels as usize > owner_labels {
                note(Bogus::Malformed);
                continue;
            }
            let window = Window { inception: sig.inception, expiration: sig.expiration };
            if let Some(now) = self.now {
                // Dates before cryptography: a stale signature costs nothing.
                if let Err(f) = window.check(now) {
                    note(f.into());
                    continue;
                }
            }
            let mut candidates = keys.iter().filter(|k| k.id.tag == sig.key_tag && k.id.algorithm == sig.algorithm);
            let Some(mut key) = candidates.next() else {
                note(Bogus::NoMatchingKey);
                continue;
            };
            let Some(data) = canon::signed_data(&mut self.scratch, &sig, rrset) else {
                note(Bogus::Malformed);
                continue;
            };
            loop {
                let cost = crypto::cost(sig.algorithm, key.material());
                if tries == self.limits.per_rrset || self.verifications_left < cost {
                    return Err(Verdict::Indeterminate(Indeterminate::WorkLimit));
                }
                tries += 1;
                self.verifications_left -= cost;
                if crypto::verify(sig.algorithm, key.material(), data, sig.signature) {
                    let mut ttl = rrset.iter().map(|r| r.ttl).min().unwrap_or(0).min(sig.original_ttl);
                    if let Some(now) = self.now {
                        ttl = ttl.min(sig.expiration.wrapping_sub(now));
                    }
                    self.window = Some(self.window.map_or(window, |w| w.intersect(window)));
                    let wildcard = ((sig.labels as usize) < owner_labels).then_some(Wildcard { labels: sig.labels });
                    return Ok(Proof { ttl, key: key.id, window, wildcard });
                }
                note(Bogus::BadSignature);
                match candidates.next() {
                    Some(k) => key = k,
                    None => break,
                }
            }
        }
        Err(Verdict::Bogus(fault))
    }

    /// Checks the DNSKEY RRset of `zone` (among `dnskeys`, with its RRSIGs
    /// among `rrsigs`) against `anchors`: the zone's DS records, already
    /// verified in the parent, or trust anchors.
    ///
    /// Only DS records with a supported algorithm and digest count, and a
    /// SHA-1 DS is ignored when the DS RRset holds a SHA-256 or SHA-384
    /// one (RFC 4509 §3 says "SHOULD ignore"; it applies to the whole DS
    /// RRset, as written and as Unbound does, not key by key, so a SHA-1
    /// digest cannot stand in for a failed stronger one). With none left,
    /// the zone is insecure (RFC 4035 §5.2). Then a key must match a DS
    /// (tag, algorithm, digest), be a zone key, and verify the DNSKEY
    /// RRset itself; all the set's keys are then trusted.
    pub fn validate_dnskeys(
        &mut self,
        zone: &[u8],
        dnskeys: &[Record<'_>],
        rrsigs: &[Record<'_>],
        anchors: &[Anchor<'_>],
    ) -> Result<ZoneKeys, Verdict> {
        let keyset: Vec<Record<'_>> =
            dnskeys.iter().filter(|r| r.rtype == rtype::DNSKEY && name::eq(r.owner, zone)).copied().collect();
        if keyset.is_empty() {
            return Err(Verdict::Bogus(Bogus::DnskeyMissing));
        }
        // (tag, algorithm, digest type (0 for a key anchor), digest or key RDATA)
        let mut points: Vec<(u16, u8, u8, &[u8])> = Vec::new();
        let (mut unsupported_alg, mut unsupported_digest) = (false, false);
        for a in anchors {
            match *a {
                Anchor::Ds(rdata) => {
                    let Some(ds) = Ds::parse(rdata) else { continue };
                    if !crypto::algorithm_supported(ds.algorithm) {
                        unsupported_alg = true;
                    } else if !crypto::digest_supported(ds.digest_type) {
                        unsupported_digest = true;
                    } else {
                        points.push((ds.key_tag, ds.algorithm, ds.digest_type, ds.digest));
                    }
                }
                Anchor::Key(rdata) => match Dnskey::parse(rdata) {
                    Some(k) if crypto::algorithm_supported(k.algorithm) => {
                        points.push((crypto::key_tag(rdata), k.algorithm, 0, rdata))
                    }
                    Some(_) => unsupported_alg = true,
                    None => {}
                },
            }
        }
        if points.iter().any(|p| p.2 == 2 || p.2 == 4) {
            points.retain(|p| p.2 != 1);
        }
        if points.is_empty() {
            return Err(Verdict::Insecure(if unsupported_digest {
                Insecure::UnsupportedDigest
            } else if unsupported_alg {
                Insecure::UnsupportedAlgorithm
            } else {
                Insecure::NoDs
            }));
        }

        let (mut matched, mut matched_unusable, mut matched_not_zone) = (Vec::new(), false, false);
        for r in &keyset {
            let Some(k) = Dnskey::parse(r.rdata) else { continue };
            let tag = crypto::key_tag(r.rdata);
            for &(ptag, palg, dtype, digest) in &points {
                if ptag != tag || palg != k.algorithm {
                    continue;
                }
                let matches = if dtype == 0 {
                    digest == r.rdata
                } else {
                    self.spend_hash()?;
                    let mut out = [0u8; 48];
                    crypto::ds_digest(dtype, zone, r.rdata, &mut out).is_some_and(|n| &out[..n] == digest)
                };
                if !matches {
                    continue;
                }
                if !k.signs_zone() {
                    matched_not_zone = true;
                } else if let Some(key) = Key::from_rdata(r.rdata) {
                    if !matched.contains(&key) {
                        matched.push(key);
                    }
                } else if crypto::key_use(k.algorithm, k.public_key) == KeyUse::Unsupported {
                    matched_unusable = true;
                }
                break;
            }
        }
        if matched.is_empty() {
            return Err(if matched_unusable {
                Verdict::Insecure(Insecure::UnsupportedAlgorithm)
            } else if matched_not_zone {
                Verdict::Bogus(Bogus::NoZoneKeyBit)
            } else {
                Verdict::Bogus(Bogus::DsMatchesNoKey)
            });
        }
        let proof = self.verify_with(zone, &matched, &keyset, rrsigs).map_err(|v| match v {
            Verdict::Bogus(Bogus::NoMatchingKey) => Verdict::Bogus(Bogus::KeysNotSignedByDsKey),
            other => other,
        })?;
        let mut lower = Vec::with_capacity(zone.len());
        name::push_lower(&mut lower, zone);
        let mut keys: Vec<Key> = Vec::with_capacity(keyset.len());
        for k in keyset.iter().filter_map(|r| Key::from_rdata(r.rdata)) {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        Ok(ZoneKeys { zone: lower.into(), keys, verified_by: proof.key, ttl: proof.ttl, window: proof.window })
    }
}

#[cfg(test)]
impl ZoneKeys {
    /// Keys trusted as given, for tests of signatures without a DNSKEY
    /// RRset (the RFCs' examples).
    pub(crate) fn assume(zone: &[u8], rdatas: &[&[u8]]) -> ZoneKeys {
        let mut lower = Vec::new();
        name::push_lower(&mut lower, zone);
        ZoneKeys {
            zone: lower.into(),
            keys: rdatas.iter().filter_map(|r| Key::from_rdata(r)).collect(),
            verified_by: KeyId { tag: 0, algorithm: 0 },
            ttl: 0,
            window: Window { inception: 0, expiration: 0 },
        }
    }

    /// Keys trusted as given, unchecked: for tests that need keys ring
    /// would refuse or that share a tag.
    pub(crate) fn assume_raw(zone: &[u8], rdatas: &[Vec<u8>]) -> ZoneKeys {
        let mut keys = ZoneKeys::assume(zone, &[]);
        keys.keys = rdatas
            .iter()
            .filter_map(|r| {
                let k = Dnskey::parse(r)?;
                Some(Key { id: KeyId { tag: crypto::key_tag(r), algorithm: k.algorithm }, rdata: r.as_slice().into() })
            })
            .collect();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_arithmetic() {
        assert!(serial_lt(1, 2));
        assert!(!serial_lt(2, 1));
        assert!(!serial_lt(5, 5));
        // Across the wrap: 0xffff_fff0 is before 0x10.
        assert!(serial_lt(0xffff_fff0, 0x10));
        assert!(!serial_lt(0x10, 0xffff_fff0));
        let w = Window { inception: 0xffff_ff00, expiration: 0x100 };
        assert_eq!(w.check(0), Ok(()));
        assert_eq!(w.check(0x200), Err(DateFault::Expired));
        assert_eq!(w.check(0xffff_0000), Err(DateFault::NotYetValid));
        let both = w.intersect(Window { inception: 0x10, expiration: 0x80 });
        assert_eq!(both, Window { inception: 0x10, expiration: 0x80 });
    }
}
