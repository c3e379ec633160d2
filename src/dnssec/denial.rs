//! Denial of existence: what NSEC (RFC 4034 §4, RFC 4035 §5.4) and NSEC3
//! (RFC 5155 §8) records prove about names in one zone.
//!
//! A [`Denial`] is made from a reply's records and the keys of the zone
//! they must come from. Only records that zone signed count: an NSEC or
//! NSEC3 is checked (its own RRSIG, by the zone's keys) the first time a
//! proof relies on it, so records nobody needs cost nothing. An NSEC3 must
//! not be expanded from a wildcard; an NSEC may be, and then stands for
//! the wildcard its RRSIG was made for (see [`Nsec::owner`]). The rules
//! peers got wrong are kept here:
//! - an NSEC or NSEC3 from the parent side of a delegation (NS without
//!   SOA) or at a DNAME proves nothing below it, and proves only the
//!   absence of DS at it (RFC 6840 §4.1, §4.4; Blocky GHSA-6fgw-qmpq-vwxp);
//! - a child zone's own apex record (SOA) never proves its DS absent;
//! - an NSEC3's owner must be one hash label directly under the zone
//!   (hickory RUSTSEC-2026-0505);
//! - every NSEC3 search is bounded by the name's labels and the hash
//!   budget, and records above the iteration limit are not hashed at all
//!   (hickory RUSTSEC-2026-0118/0120, CVE-2023-50868);
//! - opt-out makes NXDOMAIN, wildcard and DS proofs insecure, never
//!   secure (RFC 5155 §9.2; Blocky GHSA-583r-m4vv-q43p).

use std::borrow::Cow;
use std::cmp::Ordering;

use super::crypto;
use super::name;
use super::record::{Record, Rrsig, bitmap_has, rtype};
use super::text::unbase32hex;
use super::verdict::{Bogus, Insecure, Verdict};
use super::verify::{Validation, Wildcard, ZoneKeys};

/// Whether a record has been checked yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Unchecked,
    Good,
    Bad,
}

#[derive(Debug)]
struct Nsec<'r> {
    record: Record<'r>,
    /// The owner the proofs use: the record's own, or for an NSEC sent
    /// under a name expanded from a wildcard (an RRSIG whose Labels field
    /// is below the owner's count, as Unbound's auth-zone sends the NSEC
    /// that proves a wildcard answer, at the query name) the wildcard
    /// `*.<the owner's last Labels labels>` the signature was made over.
    ///
    /// Why the wildcard and never the name it arrived under: the signature
    /// covers `*.W NSEC next types` and not the name in front of it, so
    /// anyone holding that one record can replay it under every name below
    /// W. Taken at that name, it would prove whatever an NSEC there would:
    /// `x.W NSEC next` covers `y.x.W` and `*.x.W`, an NXDOMAIN for a name
    /// that `*.W` answers; with its types it is a NODATA at `x.W` even
    /// where `x.W` is a real name with other data. Taken at `*.W`, it
    /// proves exactly what the zone signed, so the expansion adds nothing
    /// an attacker could not already do with the unexpanded record. It
    /// counts only when an RRSIG with that same Labels value verifies
    /// (`labels`), so one owner cannot be claimed with another's signature.
    owner: Cow<'r, [u8]>,
    /// The Labels field of the RRSIGs that must verify it.
    labels: u8,
    next: &'r [u8],
    bitmap: &'r [u8],
    state: State,
}

#[derive(Debug)]
struct Nsec3<'r> {
    record: Record<'r>,
    /// The owner's hash.
    hash: [u8; 20],
    next: [u8; 20],
    opt_out: bool,
    iterations: u16,
    salt: &'r [u8],
    bitmap: &'r [u8],
    state: State,
}

/// What a reply proves about a DS at a name below the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DsAbsence {
    /// The name is a delegation without DS: the child is insecure.
    Delegation,
    /// The name is not a delegation (it holds no NS, or does not exist):
    /// it is in this zone, and so is what is below it.
    NotACut,
    /// The name is in an opt-out span: any delegation there is insecure.
    OptOut,
}

/// The NSEC or NSEC3 records of one zone in a reply, to prove with.
#[derive(Debug)]
pub struct Denial<'r, 'k> {
    keys: &'k ZoneKeys,
    /// Every record of the reply: the RRSIGs are looked up here.
    records: &'r [Record<'r>],
    nsecs: Vec<Nsec<'r>>,
    nsec3s: Vec<Nsec3<'r>>,
}

fn bad() -> Verdict {
    Verdict::Bogus(Bogus::BadDenial)
}

/// Whether `name` lies strictly between `owner` and `next` in canonical
/// order; for the zone's last NSEC (`next` back at the apex), after `owner`.
fn covers(owner: &[u8], next: &[u8], name: &[u8]) -> bool {
    use Ordering::*;
    name::canonical_cmp(owner, name) == Less
        && (name::canonical_cmp(name, next) == Less || name::canonical_cmp(next, owner) != Greater)
}

/// Whether a record at `owner` with `bitmap` speaks for the names below it:
/// not if `owner` is a delegation seen from the parent or a DNAME.
fn speaks_below(bitmap: &[u8]) -> bool {
    let delegation = bitmap_has(bitmap, rtype::NS) && !bitmap_has(bitmap, rtype::SOA);
    !delegation && !bitmap_has(bitmap, rtype::DNAME)
}

/// The same for NSEC3 hashes, which sort as plain bytes; the last NSEC3
/// wraps round to the first, so it covers the hashes above it and those
/// below the first.
fn covers_hash(owner: &[u8; 20], next: &[u8; 20], h: &[u8; 20]) -> bool {
    if owner < next { owner < h && h < next } else { owner < h || h < next }
}

/// The fields of NSEC3 RDATA a proof uses.
#[derive(Debug, PartialEq, Eq)]
struct Nsec3Rdata<'r> {
    opt_out: bool,
    iterations: u16,
    salt: &'r [u8],
    next: [u8; 20],
    bitmap: &'r [u8],
}

/// Parses NSEC3 RDATA (RFC 5155 §3.2), SHA-1 only, flags 0 or 1 (§8.1:
/// others are ignored).
fn parse_nsec3(rdata: &[u8]) -> Option<Nsec3Rdata<'_>> {
    let (&alg, rest) = rdata.split_first()?;
    let (&flags, rest) = rest.split_first()?;
    let (iter, rest) = rest.split_first_chunk::<2>()?;
    let (&salt_len, rest) = rest.split_first()?;
    let salt = rest.get(..salt_len as usize)?;
    let rest = &rest[salt_len as usize..];
    let (&hash_len, rest) = rest.split_first()?;
    if alg != 1 || flags > 1 || hash_len != 20 {
        return None;
    }
    let next: [u8; 20] = rest.get(..20)?.try_into().ok()?;
    Some(Nsec3Rdata { opt_out: flags == 1, iterations: u16::from_be_bytes(*iter), salt, next, bitmap: &rest[20..] })
}

impl<'r, 'k> Denial<'r, 'k> {
    /// The NSEC and NSEC3 records among `records` that the zone of `keys`
    /// signed (by their RRSIGs' signer name; the signatures themselves are
    /// checked when used).
    pub fn new(keys: &'k ZoneKeys, records: &'r [Record<'r>]) -> Denial<'r, 'k> {
        let zone = keys.zone();
        // The owners of the NSEC and NSEC3 RRSIGs this zone signed, with
        // their Labels fields, sorted, so that finding each record's
        // signatures is a search, not a scan of the reply: a reply stuffed
        // with records stays n log n.
        let mut signed: Vec<(u16, &[u8], u8)> = records
            .iter()
            .filter(|s| s.rtype == rtype::RRSIG)
            .filter_map(|s| {
                let sig = Rrsig::parse(s.rdata)?;
                let denial = matches!(sig.type_covered, rtype::NSEC | rtype::NSEC3);
                (denial && name::eq(sig.signer, zone)).then_some((sig.type_covered, s.owner, sig.labels))
            })
            .collect();
        let order = |a: &(u16, &[u8], u8), b: &(u16, &[u8])| {
            a.0.cmp(&b.0)
                .then_with(|| a.1.iter().map(u8::to_ascii_lowercase).cmp(b.1.iter().map(u8::to_ascii_lowercase)))
        };
        signed.sort_unstable_by(|a, b| order(a, &(b.0, b.1)).then(a.2.cmp(&b.2)));
        // The Labels values of the RRSIGs over `r`, each once, ascending.
        let sig_labels = |r: &Record<'_>| {
            let start = signed.partition_point(|e| order(e, &(r.rtype, r.owner)) == Ordering::Less);
            let end = signed.partition_point(|e| order(e, &(r.rtype, r.owner)) != Ordering::Greater);
            let mut labels: Vec<u8> = signed[start..end].iter().map(|e| e.2).collect();
            labels.dedup();
            labels
        };
        let mut nsecs = Vec::new();
        let mut nsec3s = Vec::new();
        for r in records.iter().filter(|r| name::is_at_or_below(r.owner, zone)) {
            match r.rtype {
                rtype::NSEC => {
                    let Some(len) = name::name_len(r.rdata) else { continue };
                    let next = &r.rdata[..len];
                    if !name::is_at_or_below(next, zone) {
                        continue;
                    }
                    let owner_labels = name::rrsig_label_count(r.owner);
                    // One candidate owner per Labels value its RRSIGs give.
                    for labels in sig_labels(r) {
                        let owner = match (labels as usize).cmp(&owner_labels) {
                            Ordering::Equal => Cow::Borrowed(r.owner),
                            Ordering::Less => {
                                let parent = name::suffix(r.owner, labels as usize);
                                if !name::is_at_or_below(parent, zone) {
                                    continue;
                                }
                                let mut buf = [0u8; 255];
                                let Some(n) = name::wildcard_of(parent, &mut buf) else { continue };
                                Cow::Owned(buf[..n].to_vec())
                            }
                            Ordering::Greater => continue,
                        };
                        let bitmap = &r.rdata[len..];
                        nsecs.push(Nsec { record: *r, owner, labels, next, bitmap, state: State::Unchecked });
                    }
                }
                rtype::NSEC3 if !sig_labels(r).is_empty() => {
                    // One hash label directly under the zone, nothing else.
                    if !name::parent(r.owner).is_some_and(|p| name::eq(p, zone)) {
                        continue;
                    }
                    let mut hash = [0u8; 20];
                    let label = &r.owner[1..1 + r.owner[0] as usize];
                    if unbase32hex(label, &mut hash) != Some(20) {
                        continue;
                    }
                    let Some(p) = parse_nsec3(r.rdata) else { continue };
                    nsec3s.push(Nsec3 {
                        record: *r,
                        hash,
                        next: p.next,
                        opt_out: p.opt_out,
                        iterations: p.iterations,
                        salt: p.salt,
                        bitmap: p.bitmap,
                        state: State::Unchecked,
                    });
                }
                _ => {}
            }
        }
        // RFC 5155 §8.2: one parameter set per proof; the first record's.
        if let Some(first) = nsec3s.first() {
            let (iterations, salt) = (first.iterations, first.salt);
            nsec3s.retain(|n| n.iterations == iterations && n.salt == salt);
        }
        Denial { keys, records, nsecs, nsec3s }
    }

    fn zone(&self) -> &'k [u8] {
        self.keys.zone()
    }

    /// Checks record `record` once: good if its own signature by the zone
    /// verifies and was not made for a wildcard.
    fn check(&self, v: &mut Validation, record: Record<'r>) -> Result<bool, Verdict> {
        match v.verify_rrset(self.keys, &[record], self.records) {
            Ok(proof) => Ok(proof.wildcard.is_none()),
            Err(Verdict::Indeterminate(i)) => Err(Verdict::Indeterminate(i)),
            Err(_) => Ok(false),
        }
    }

    /// Checks NSEC `i` once: good if an RRSIG of its Labels value (so for
    /// its owner as [`Nsec::owner`] gives it) verifies.
    fn check_nsec(&self, v: &mut Validation, i: usize) -> Result<bool, Verdict> {
        let n = &self.nsecs[i];
        let sigs: Vec<Record<'r>> = self
            .records
            .iter()
            .filter(|s| s.rtype == rtype::RRSIG && name::eq(s.owner, n.record.owner))
            .filter(|s| {
                Rrsig::parse(s.rdata).is_some_and(|sig| sig.type_covered == rtype::NSEC && sig.labels == n.labels)
            })
            .copied()
            .collect();
        match v.verify_rrset(self.keys, &[n.record], &sigs) {
            Ok(_) => Ok(true),
            Err(Verdict::Indeterminate(i)) => Err(Verdict::Indeterminate(i)),
            Err(_) => Ok(false),
        }
    }

    /// The first NSEC for which `pred` holds and whose signature is good.
    fn find_nsec(&mut self, v: &mut Validation, pred: impl Fn(&Nsec<'r>) -> bool) -> Result<Option<usize>, Verdict> {
        for i in 0..self.nsecs.len() {
            if self.nsecs[i].state == State::Bad || !pred(&self.nsecs[i]) {
                continue;
            }
            if self.nsecs[i].state == State::Unchecked {
                let good = self.check_nsec(v, i)?;
                self.nsecs[i].state = if good { State::Good } else { State::Bad };
            }
            if self.nsecs[i].state == State::Good {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    fn find_nsec3(&mut self, v: &mut Validation, pred: impl Fn(&Nsec3<'r>) -> bool) -> Result<Option<usize>, Verdict> {
        for i in 0..self.nsec3s.len() {
            if self.nsec3s[i].state == State::Bad || !pred(&self.nsec3s[i]) {
                continue;
            }
            if self.nsec3s[i].state == State::Unchecked {
                let good = self.check(v, self.nsec3s[i].record)?;
                self.nsec3s[i].state = if good { State::Good } else { State::Bad };
            }
            if self.nsec3s[i].state == State::Good {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Which kind of proof the reply carries; `Err` when there is none or
    /// its NSEC3 parameters are beyond the limit.
    fn kind(&self, v: &Validation) -> Result<bool, Verdict> {
        if !self.nsecs.is_empty() {
            return Ok(true);
        }
        match self.nsec3s.first() {
            None => Err(Verdict::Bogus(Bogus::NsecMissing)),
            Some(n) if n.iterations > v.limits.nsec3_iterations => Err(Verdict::Insecure(Insecure::Nsec3Iterations)),
            Some(_) => Ok(false),
        }
    }

    /// Proves that `qname` does not exist (NXDOMAIN): no such name, and no
    /// wildcard at its closest encloser that would have answered.
    pub fn nxdomain(&mut self, v: &mut Validation, qname: &[u8]) -> Verdict {
        let r = match self.kind(v) {
            Ok(true) => self.nsec_nxdomain(v, qname),
            Ok(false) => self.nsec3_nxdomain(v, qname),
            Err(e) => Err(e),
        };
        r.unwrap_or_else(|e| e)
    }

    /// Proves that `qname` has no records of type `qtype` (NODATA),
    /// directly, as an empty non-terminal, or through a wildcard.
    pub fn nodata(&mut self, v: &mut Validation, qname: &[u8], qtype: u16) -> Verdict {
        let r = match self.kind(v) {
            Ok(true) => self.nsec_nodata(v, qname, qtype),
            Ok(false) => self.nsec3_nodata(v, qname, qtype),
            Err(e) => Err(e),
        };
        r.unwrap_or_else(|e| e)
    }

    /// Proves that a wildcard answer for `qname` was right to be one: the
    /// next closer name below the wildcard's parent does not exist (RFC
    /// 4035 §5.3.4, RFC 5155 §8.8).
    pub fn wildcard_answer(&mut self, v: &mut Validation, qname: &[u8], wildcard: Wildcard) -> Verdict {
        let zone = self.zone();
        let nc = wildcard.next_closer(qname);
        if name::label_count(qname) <= wildcard.labels as usize
            || !name::is_at_or_below(wildcard.closest_encloser(qname), zone)
        {
            return bad();
        }
        let r = match self.kind(v) {
            Ok(true) => self
                .find_nsec(v, |n| nsec_absent(zone, n, nc))
                .map(|f| if f.is_some() { Verdict::Secure } else { bad() }),
            Ok(false) => (|| {
                let h = self.hash(v, nc)?;
                let c = self.find_nsec3(v, |n| covers_hash(&n.hash, &n.next, &h))?.ok_or_else(bad)?;
                Ok(if self.nsec3s[c].opt_out { Verdict::Insecure(Insecure::OptOut) } else { Verdict::Secure })
            })(),
            Err(e) => Err(e),
        };
        r.unwrap_or_else(|e| e)
    }

    /// What the reply proves about a DS at `child`, a name below the zone
    /// (the reply to a DS query, from the parent).
    pub fn ds_absence(&mut self, v: &mut Validation, child: &[u8]) -> Result<DsAbsence, Verdict> {
        // The zone that proves a DS absent is the parent: a child's own
        // records (its apex) cannot.
        if !name::is_below(child, self.zone()) {
            return Err(bad());
        }
        if self.kind(v)? { self.nsec_ds(v, child) } else { self.nsec3_ds(v, child) }
    }

    // NSEC

    fn nsec_nxdomain(&mut self, v: &mut Validation, qname: &[u8]) -> Result<Verdict, Verdict> {
        let zone = self.zone();
        let Some(i) = self.find_nsec(v, |n| nsec_absent(zone, n, qname))? else { return Err(bad()) };
        let ce = nsec_encloser(&self.nsecs[i], qname);
        if !name::is_at_or_below(ce, zone) {
            return Err(bad());
        }
        let mut buf = [0u8; 255];
        let len = name::wildcard_of(ce, &mut buf).ok_or_else(bad)?;
        let wildcard = &buf[..len];
        let found = self.find_nsec(v, |n| nsec_absent(zone, n, wildcard))?;
        Ok(if found.is_some() { Verdict::Secure } else { bad() })
    }

    fn nsec_nodata(&mut self, v: &mut Validation, qname: &[u8], qtype: u16) -> Result<Verdict, Verdict> {
        let zone = self.zone();
        let lacks = |bitmap: &[u8]| !bitmap_has(bitmap, qtype) && !bitmap_has(bitmap, rtype::CNAME);
        if let Some(i) = self.find_nsec(v, |n| name::eq(&n.owner, qname))? {
            let bm = self.nsecs[i].bitmap;
            let ok = lacks(bm)
                && if qtype == rtype::DS {
                    // The DS of a zone is the parent's: the zone's own apex NSEC
                    // (SOA set) cannot deny it.
                    !bitmap_has(bm, rtype::SOA)
                } else {
                    // At a delegation, the parent's NSEC speaks for the DS only.
                    speaks_below(bm)
                };
            return Ok(if ok { Verdict::Secure } else { bad() });
        }
        // An empty non-terminal: covered, with a name below it next.
        let ent = self.find_nsec(v, |n| {
            covers(&n.owner, n.next, qname)
                && name::is_below(n.next, qname)
                && (speaks_below(n.bitmap) || !name::is_below(qname, &n.owner))
        })?;
        if ent.is_some() {
            return Ok(Verdict::Secure);
        }
        // A wildcard that exists without the type (RFC 4035 §3.1.3.4).
        let Some(i) = self.find_nsec(v, |n| nsec_absent(zone, n, qname))? else { return Err(bad()) };
        let ce = nsec_encloser(&self.nsecs[i], qname);
        let mut buf = [0u8; 255];
        let len = name::wildcard_of(ce, &mut buf).ok_or_else(bad)?;
        let wildcard = &buf[..len];
        let Some(w) = self.find_nsec(v, |n| name::eq(&n.owner, wildcard))? else { return Err(bad()) };
        Ok(if lacks(self.nsecs[w].bitmap) { Verdict::Secure } else { bad() })
    }

    fn nsec_ds(&mut self, v: &mut Validation, child: &[u8]) -> Result<DsAbsence, Verdict> {
        if let Some(i) = self.find_nsec(v, |n| name::eq(&n.owner, child))? {
            let bm = self.nsecs[i].bitmap;
            if bitmap_has(bm, rtype::DS) || bitmap_has(bm, rtype::SOA) {
                return Err(bad());
            }
            return Ok(if bitmap_has(bm, rtype::NS) { DsAbsence::Delegation } else { DsAbsence::NotACut });
        }
        // No name there, or an empty non-terminal: no cut either way.
        let found = self.find_nsec(v, |n| {
            covers(&n.owner, n.next, child) && (speaks_below(n.bitmap) || !name::is_below(child, &n.owner))
        })?;
        found.map(|_| DsAbsence::NotACut).ok_or_else(bad)
    }

    // NSEC3

    fn hash(&self, v: &mut Validation, name: &[u8]) -> Result<[u8; 20], Verdict> {
        let first = self.nsec3s.first().ok_or(Verdict::Bogus(Bogus::NsecMissing))?;
        if first.iterations > v.limits.nsec3_iterations {
            return Err(Verdict::Insecure(Insecure::Nsec3Iterations));
        }
        v.spend_hash()?;
        Ok(crypto::nsec3_hash(name, first.salt, first.iterations))
    }

    /// The closest encloser proof (RFC 5155 §8.3): hashes `qname`, then
    /// each ancestor up to the zone, until one matches an NSEC3; the name
    /// one label below it (the next closer) must then be covered. At most
    /// one hash per label of `qname`, and the hash budget bounds it too.
    fn encloser<'q>(&mut self, v: &mut Validation, qname: &'q [u8]) -> Result<Encloser<'q>, Verdict> {
        let zone = self.zone();
        let mut sname = qname;
        let mut below: Option<&'q [u8]> = None;
        for _ in 0..=name::label_count(qname) {
            if !name::is_at_or_below(sname, zone) {
                break;
            }
            let h = self.hash(v, sname)?;
            if let Some(m) = self.find_nsec3(v, |n| n.hash == h)? {
                let Some(nc) = below else { return Ok(Encloser::Exact(m)) };
                // A cut or DNAME there means the names below are not this zone's.
                if !speaks_below(self.nsec3s[m].bitmap) {
                    return Err(bad());
                }
                let h = self.hash(v, nc)?;
                let cover = self.find_nsec3(v, |n| covers_hash(&n.hash, &n.next, &h))?.ok_or_else(bad)?;
                return Ok(Encloser::Closest { ce: sname, nc_cover: cover });
            }
            if name::eq(sname, zone) {
                break;
            }
            below = Some(sname);
            sname = name::parent(sname).ok_or_else(bad)?;
        }
        Err(bad())
    }

    fn nsec3_nxdomain(&mut self, v: &mut Validation, qname: &[u8]) -> Result<Verdict, Verdict> {
        let Encloser::Closest { ce, nc_cover } = self.encloser(v, qname)? else { return Err(bad()) };
        let mut buf = [0u8; 255];
        let len = name::wildcard_of(ce, &mut buf).ok_or_else(bad)?;
        let h = self.hash(v, &buf[..len])?;
        self.find_nsec3(v, |n| covers_hash(&n.hash, &n.next, &h))?.ok_or_else(bad)?;
        Ok(if self.nsec3s[nc_cover].opt_out { Verdict::Insecure(Insecure::OptOut) } else { Verdict::Secure })
    }

    fn nsec3_nodata(&mut self, v: &mut Validation, qname: &[u8], qtype: u16) -> Result<Verdict, Verdict> {
        let lacks = |bitmap: &[u8]| !bitmap_has(bitmap, qtype) && !bitmap_has(bitmap, rtype::CNAME);
        match self.encloser(v, qname)? {
            Encloser::Exact(m) => {
                let bm = self.nsec3s[m].bitmap;
                let ok = lacks(bm) && if qtype == rtype::DS { !bitmap_has(bm, rtype::SOA) } else { speaks_below(bm) };
                Ok(if ok { Verdict::Secure } else { bad() })
            }
            Encloser::Closest { ce, nc_cover } => {
                let opt_out = self.nsec3s[nc_cover].opt_out;
                if qtype == rtype::DS {
                    // RFC 5155 §8.6: only an opt-out span may hide a delegation.
                    return Ok(if opt_out { Verdict::Insecure(Insecure::OptOut) } else { bad() });
                }
                // A wildcard that exists without the type (§8.7).
                let mut buf = [0u8; 255];
                let len = name::wildcard_of(ce, &mut buf).ok_or_else(bad)?;
                let h = self.hash(v, &buf[..len])?;
                if let Some(w) = self.find_nsec3(v, |n| n.hash == h)? {
                    return Ok(if lacks(self.nsec3s[w].bitmap) { Verdict::Secure } else { bad() });
                }
                // An empty non-terminal above unsigned delegations has no
                // NSEC3 of its own in an opt-out zone: insecure, as Unbound.
                Ok(if opt_out { Verdict::Insecure(Insecure::OptOut) } else { bad() })
            }
        }
    }

    fn nsec3_ds(&mut self, v: &mut Validation, child: &[u8]) -> Result<DsAbsence, Verdict> {
        match self.encloser(v, child)? {
            Encloser::Exact(m) => {
                let bm = self.nsec3s[m].bitmap;
                if bitmap_has(bm, rtype::DS) || bitmap_has(bm, rtype::SOA) {
                    return Err(bad());
                }
                Ok(if bitmap_has(bm, rtype::NS) { DsAbsence::Delegation } else { DsAbsence::NotACut })
            }
            Encloser::Closest { nc_cover, .. } => {
                Ok(if self.nsec3s[nc_cover].opt_out { DsAbsence::OptOut } else { DsAbsence::NotACut })
            }
        }
    }
}

/// Whether NSEC `n` proves that nothing exists at or below `name` in
/// `zone`: it covers it, its next name is not below it (which would make
/// `name` an empty non-terminal), and it is not a cut or DNAME above `name`.
fn nsec_absent(zone: &[u8], n: &Nsec<'_>, name: &[u8]) -> bool {
    name::is_at_or_below(name, zone)
        && covers(&n.owner, n.next, name)
        && !name::is_below(n.next, name)
        && (speaks_below(n.bitmap) || !name::is_below(name, &n.owner))
}

/// The closest encloser an NSEC covering `qname` shows: the deepest
/// ancestor `qname` shares with its owner or its next name.
fn nsec_encloser<'q>(n: &Nsec<'_>, qname: &'q [u8]) -> &'q [u8] {
    let a = name::common_ancestor(qname, &n.owner);
    let b = name::common_ancestor(qname, n.next);
    if b.len() > a.len() { b } else { a }
}

/// What the closest encloser search found.
enum Encloser<'q> {
    /// An NSEC3 matches the name itself.
    Exact(usize),
    /// `ce` is the closest encloser; `nc_cover` the NSEC3 covering the next
    /// closer name.
    Closest { ce: &'q [u8], nc_cover: usize },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::name::from_text as n;

    #[test]
    fn cover_rules() {
        let (a, c, z) = (n("a.example."), n("c.example."), n("example."));
        assert!(covers(&a, &c, &n("b.example.")));
        assert!(covers(&a, &c, &n("x.b.example.")));
        assert!(!covers(&a, &c, &a));
        assert!(!covers(&a, &c, &c));
        assert!(!covers(&a, &c, &n("d.example.")));
        // The last NSEC wraps back to the apex.
        assert!(covers(&c, &z, &n("d.example.")));
        assert!(!covers(&c, &z, &n("b.example.")));
        let (lo, hi) = ([1u8; 20], [9u8; 20]);
        assert!(covers_hash(&lo, &hi, &[5; 20]));
        assert!(!covers_hash(&lo, &hi, &[9; 20]));
        assert!(covers_hash(&hi, &lo, &[0; 20]), "wraps");
        assert!(covers_hash(&hi, &lo, &[0xff; 20]), "wraps");
        assert!(!covers_hash(&hi, &lo, &[5; 20]));
    }

    #[test]
    fn nsec3_rdata() {
        let mut rd = vec![1, 1, 0, 12, 4, 0xaa, 0xbb, 0xcc, 0xdd, 20];
        rd.extend_from_slice(&[7; 20]);
        rd.extend_from_slice(&[0, 1, 0x40]);
        let want = Nsec3Rdata {
            opt_out: true,
            iterations: 12,
            salt: &[0xaa, 0xbb, 0xcc, 0xdd],
            next: [7; 20],
            bitmap: &[0, 1, 0x40],
        };
        assert_eq!(parse_nsec3(&rd), Some(want));
        rd[0] = 2;
        assert!(parse_nsec3(&rd).is_none(), "unknown hash algorithm");
        rd[0] = 1;
        rd[1] = 2;
        assert!(parse_nsec3(&rd).is_none(), "unknown flags");
        rd[1] = 0;
        for cut in 0..29 {
            assert!(parse_nsec3(&rd[..cut]).is_none());
        }
    }
}
