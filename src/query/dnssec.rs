//! DNSSEC on a miss of a set with `option dnssec '1'`: the question goes
//! to the set's upstreams with DO and CD, the reply's AD is dropped, and
//! the reply is validated here with the `dnssec` stage: the DNSKEY and DS
//! records along the chain come from the same upstreams (the set's
//! [`KeyCache`] keeps what was validated), and the [`Verdict`] decides
//! what clients get (RFC 4035 §3.2, RFC 6840 §5.7–5.8):
//! - secure: the answer with AD (shown only to clients that set AD or DO);
//! - insecure: the answer without AD;
//! - bogus: SERVFAIL with the verdict's Extended DNS Error, cached at most
//!   [`BOGUS_TTL`] seconds;
//! - indeterminate: SERVFAIL with its EDE, never cached.
//!
//! A client with CD gets the data unvalidated, without AD (its cache key
//! has CD, so it is never served to a client without). A client without
//! DO gets the answer with RRSIG, NSEC and NSEC3 records removed (unless
//! it asked for that type); its cache key has no DO, so a DO client never
//! gets a stripped copy.
//!
//! Work per answer is bounded twice: the validator's [`Limits`] (signature
//! checks, hashes) and [`MAX_CHAIN_QUERIES`] upstream queries; past either
//! the answer is indeterminate. A zone that alone took half a budget or
//! more before hitting it is kept in the [`KeyCache`] as over the limit
//! for [`BOGUS_TTL`] ([`Chain::spend`]), so its next names do not redo it.

use crate::dnssec::name;
use crate::dnssec::{
    Bogus, Claim, Denial, DsAbsence, Flight, Indeterminate, Insecure, KeyCache, Known, Limits, Record, Records,
    Section, TrustAnchors, Validation, Verdict, ZoneKeys, rrset, rrsigs_for, rtype as drtype, signer_of,
};
use crate::querylog::Dnssec;
use crate::upstream::Group;
use crate::wire::{self, HEADER_LEN, flags, header, rcode};

use super::*;

/// Upstream queries (DNSKEY and DS) one answer's validation may send: a
/// chain of five zones below the anchor, and a CNAME into a sixth, stay
/// within it; KeyTrap's many-zones variant does not.
pub(super) const MAX_CHAIN_QUERIES: u32 = 16;
/// Longest a bogus answer is cached (the bound; Unbound's
/// `val-bogus-ttl` is 60 too).
pub(super) const BOGUS_TTL: u32 = 60;
/// CNAME and DNAME links followed in one answer.
const MAX_LINKS: usize = 12;

/// What validation made of a reply: the bytes to cache and answer, and
/// how long they may be cached.
pub(super) struct Checked {
    /// The reply as clients see it (AD set or cleared; DNSSEC records
    /// removed for a client without DO; SERVFAIL with an EDE if bogus or
    /// indeterminate).
    pub(super) reply: Vec<u8>,
    /// What the cache and the counters need to know of it.
    pub(super) outcome: Outcome,
}

/// What validation said of a reply, beside the reply itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outcome {
    /// Longest the answer may be cached (signature TTLs, [`BOGUS_TTL`], or
    /// the short life of an answer whose dates were not checked).
    ttl_cap: u32,
    /// Cache it although it is a SERVFAIL (bogus).
    cache_failure: bool,
    /// The verdict (`None`: not validated, a CD client's).
    verdict: Option<Verdict>,
}

/// The query sent upstream for `q` on a validating set: RD, CD and DO
/// (the answer is checked here, so a validating upstream must not hide
/// bogus data behind its own SERVFAIL), the client's question.
pub(super) fn ask(q: &Query) -> Vec<u8> {
    question(q.qname, q.qtype, q.qclass)
}

/// A query for `name` (wire form), type `t`, class `class`, with RD, CD and DO.
fn question(name: &[u8], t: u16, class: u16) -> Vec<u8> {
    let mut m = Vec::with_capacity(HEADER_LEN + name.len() + 15);
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&(flags::RD | flags::CD).to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 1]);
    m.extend_from_slice(name);
    m.extend_from_slice(&t.to_be_bytes());
    m.extend_from_slice(&class.to_be_bytes());
    m.push(0);
    m.extend_from_slice(&wire::rtype::OPT.to_be_bytes());
    m.extend_from_slice(&wire::EDNS_UDP_SIZE.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0x80, 0, 0, 0]);
    m
}

/// A SERVFAIL for `reply`'s question carrying Extended DNS Error `code`
/// in an OPT, as an upstream would send it (the cache keeps the EDE).
fn servfail(reply: &[u8], code: u16) -> Option<Vec<u8>> {
    let end = wire::skip_name(reply, HEADER_LEN)? + 4;
    let mut m = reply.get(..end)?.to_vec();
    let f = header::flags(reply) & (flags::RD | flags::CD) | flags::QR | flags::RA | u16::from(rcode::SERVFAIL);
    header::set_flags(&mut m, f);
    header::set_counts(&mut m, [1, 0, 0, 1]);
    m.push(0);
    m.extend_from_slice(&wire::rtype::OPT.to_be_bytes());
    m.extend_from_slice(&wire::EDNS_UDP_SIZE.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0, 0, 6]);
    m.extend_from_slice(&crate::answer::EDE_OPTION.to_be_bytes());
    m.extend_from_slice(&[0, 2]);
    m.extend_from_slice(&code.to_be_bytes());
    Some(m)
}

/// `reply` with only the records `keep` says yes to. Written again from
/// its expanded records: a compression pointer may lead into a removed one.
fn rebuild(reply: &[u8], records: &Records, keep: impl Fn(Section, &Record<'_>) -> bool) -> Option<Vec<u8>> {
    let end = wire::skip_name(reply, HEADER_LEN)? + 4;
    let mut m = reply.get(..end)?.to_vec();
    let mut counts = [1u16, 0, 0, 0];
    for (section, r) in records.iter() {
        if !keep(section, &r) {
            continue;
        }
        m.extend_from_slice(r.owner);
        m.extend_from_slice(&r.rtype.to_be_bytes());
        m.extend_from_slice(&r.class.to_be_bytes());
        m.extend_from_slice(&r.ttl.to_be_bytes());
        m.extend_from_slice(&u16::try_from(r.rdata.len()).ok()?.to_be_bytes());
        m.extend_from_slice(r.rdata);
        counts[match section {
            Section::Answer => 1,
            Section::Authority => 2,
            Section::Additional => 3,
        }] += 1;
    }
    header::set_counts(&mut m, counts);
    (m.len() <= usize::from(u16::MAX)).then_some(m)
}

/// Whether `r` is a DNSSEC record a client without DO does not get (RFC
/// 4035 §3.2.1: RRSIG, NSEC and NSEC3, unless it asked for that type).
fn dnssec_only(r: &Record<'_>, qtype: u16) -> bool {
    r.rtype != qtype && matches!(r.rtype, drtype::RRSIG | drtype::NSEC | drtype::NSEC3)
}

/// Whether `r` may stand in an answer marked secure: in the answer
/// section an RRset that was validated (or an RRSIG over one), in the
/// authority section the denial's SOA, NSEC and NSEC3 and their RRSIGs;
/// nothing unvalidated rides along under AD (RFC 4035 §3.2.3), so the
/// additional section and referral NS records go.
fn validated_part(section: Section, r: &Record<'_>, validated: &[(Vec<u8>, u16)]) -> bool {
    match section {
        Section::Answer => {
            let t = match r.rtype {
                drtype::RRSIG => match crate::dnssec::Rrsig::parse(r.rdata) {
                    Some(sig) => sig.type_covered,
                    None => return false,
                },
                t => t,
            };
            validated.iter().any(|(owner, vt)| *vt == t && name::eq(owner, r.owner))
        }
        Section::Authority => matches!(r.rtype, drtype::SOA | drtype::NSEC | drtype::NSEC3 | drtype::RRSIG),
        Section::Additional => false,
    }
}

/// What a walk down the chain found for a name.
enum Zone {
    /// The keys of the deepest secure zone at or above it.
    Keys(Arc<ZoneKeys>),
    Insecure(Insecure),
}

/// Whether a step of validation ended at the work limit.
trait WorkDone {
    fn hit_limit(&self) -> bool;
}

impl WorkDone for Verdict {
    fn hit_limit(&self) -> bool {
        *self == Verdict::Indeterminate(Indeterminate::WorkLimit)
    }
}

impl<T> WorkDone for Result<T, Verdict> {
    fn hit_limit(&self) -> bool {
        matches!(self, Err(v) if v.hit_limit())
    }
}

/// What a miss does about a zone whose keys it needs and has not cached.
enum Turn<'a> {
    /// Another miss learnt them while this one waited, or just before
    /// (or found the zone over the work limit).
    Known(Result<Zone, Verdict>),
    /// Fetch them; with the flight, others wait for this fetch meanwhile.
    Fetch(Option<Flight<'a>>),
}

/// One answer's validation: its budget, its clock, and where it asks.
struct Chain<'a> {
    group: &'a Group,
    timeout: Duration,
    anchors: &'a TrustAnchors,
    keys: &'a KeyCache,
    /// The budget `v` started with: [`Chain::spend`] measures a zone's
    /// share of it.
    limits: Limits,
    v: Validation,
    queries_left: u32,
    /// Unix second, for the key cache's lifetimes.
    now: u64,
    /// The least TTL of the signatures the answer relied on.
    ttl: u32,
    /// The answer's RRsets that verified (owner, type): what a secure
    /// answer may hold.
    validated: Vec<(Vec<u8>, u16)>,
}

impl<'a> Chain<'a> {
    /// Whether to fetch `zone`'s keys (or its proof of being unsigned)
    /// now: not while another miss fetches them; after it, only if it
    /// kept nothing (it failed, its answer was indeterminate, or it was
    /// too large to keep), and then without making anyone wait again.
    async fn turn(&self, zone: &[u8]) -> Turn<'a> {
        let keys: &'a KeyCache = self.keys;
        let flight = match keys.claim(zone) {
            Claim::Lead(f) => Some(f),
            Claim::Follow(w) => {
                w.done().await;
                None
            }
        };
        match self.known(zone) {
            Some(z) => Turn::Known(z),
            None => Turn::Fetch(flight),
        }
    }

    /// `name`'s `t` records from the set's upstreams, names expanded.
    async fn fetch(&mut self, name: &[u8], t: u16) -> Result<(Records, u8), Verdict> {
        if self.queries_left == 0 {
            return Err(Verdict::Indeterminate(Indeterminate::WorkLimit));
        }
        self.queries_left -= 1;
        let msg = question(name, t, wire::CLASS_IN);
        let q = wire::parse_query(&msg).map_err(|_| Verdict::Bogus(Bogus::Malformed))?;
        let Some((reply, _)) = self.group.resolve(&q, self.timeout).await else {
            return Err(Verdict::Indeterminate(Indeterminate::NoReachableAuthority));
        };
        let rc = header::rcode(&reply);
        if rc != rcode::NOERROR && rc != rcode::NXDOMAIN {
            return Err(Verdict::Indeterminate(Indeterminate::NetworkError));
        }
        let records = Records::from_message(&reply).ok_or(Verdict::Bogus(Bogus::Malformed))?;
        Ok((records, rc))
    }

    /// The keys of trust anchor `zone`.
    async fn anchor_keys(&mut self, zone: &[u8]) -> Result<Zone, Verdict> {
        if let Some(k) = self.known(zone) {
            return k;
        }
        let _flight = match self.turn(zone).await {
            Turn::Known(k) => return k,
            Turn::Fetch(f) => f,
        };
        let (records, _) = self.fetch(zone, drtype::DNSKEY).await?;
        let all: Vec<Record<'_>> = records.iter().map(|(_, r)| r).collect();
        let sigs = rrsigs_for(&all, zone, drtype::DNSKEY);
        let anchors = self.anchors.for_zone(zone);
        self.keys_of(zone, &all, &sigs, &anchors)
    }

    /// What the key cache knows of `zone` exactly.
    fn known(&self, zone: &[u8]) -> Option<Result<Zone, Verdict>> {
        Some(match self.keys.get(zone, self.now)? {
            Known::Keys(k) => Ok(Zone::Keys(k)),
            Known::Insecure(i) => Ok(Zone::Insecure(i)),
            Known::OverLimit(_) => Err(Verdict::Indeterminate(Indeterminate::WorkLimit)),
        })
    }

    /// Does `work` in `zone` on the answer's budget. If it hit the limit
    /// having taken half the budget or more itself, the zone is kept as
    /// over the limit for [`BOGUS_TTL`]: its next answers are
    /// indeterminate without that work. Less than half could be another
    /// zone's spending (a CNAME chain through a hostile zone into this
    /// one), and a trust anchor's zone is never marked (that would fail
    /// every name below it).
    fn spend<R: WorkDone>(&mut self, zone: &[u8], work: impl FnOnce(&mut Validation) -> R) -> R {
        let before = (self.v.verifications(), self.v.hashes());
        let done = work(&mut self.v);
        if done.hit_limit() {
            self.over_limit(zone, before);
        }
        done
    }

    /// [`Chain::spend`]'s judgement, out of line: one copy, not one per
    /// kind of work (the aarch64 size budget).
    #[inline(never)]
    fn over_limit(&mut self, zone: &[u8], (verifications, hashes): (u32, u32)) {
        let heavy = (self.v.verifications() - verifications) * 2 >= self.limits.verifications
            || (self.v.hashes() - hashes) * 2 >= self.limits.hashes;
        if heavy && self.anchors.for_zone(zone).is_empty() {
            self.keys.insert(zone, Known::OverLimit(zone.into()), BOGUS_TTL, true, self.now);
        }
    }

    /// Validates `zone`'s DNSKEY RRset among `all` against `anchors` and
    /// caches the outcome.
    fn keys_of(
        &mut self,
        zone: &[u8],
        all: &[Record<'_>],
        sigs: &[Record<'_>],
        anchors: &[crate::dnssec::Anchor<'_>],
    ) -> Result<Zone, Verdict> {
        let dated = self.v.dates_checked();
        match self.spend(zone, |v| v.validate_dnskeys(zone, all, sigs, anchors)) {
            Ok(keys) => {
                let keys = Arc::new(keys);
                self.keys.insert(zone, Known::Keys(keys.clone()), keys.ttl, dated, self.now);
                Ok(Zone::Keys(keys))
            }
            Err(Verdict::Insecure(i)) => {
                let ttl = all.iter().map(|r| r.ttl).min().unwrap_or(0);
                self.keys.insert(zone, Known::Insecure(i), ttl, dated, self.now);
                Ok(Zone::Insecure(i))
            }
            Err(v) => Err(v),
        }
    }

    /// Walks from the closest trust anchor (or the deepest zone cached)
    /// down to `target`, one label at a time: at each name the parent's
    /// DS RRset (verified) leads to the child's keys, a proven absence
    /// either ends the walk insecure (a delegation) or goes on (no cut).
    async fn descend(&mut self, target: &[u8]) -> Result<Zone, Verdict> {
        let Some(anchor) = self.anchors.closest(target).map(<[u8]>::to_vec) else {
            return Ok(Zone::Insecure(Insecure::NoAnchor));
        };
        let mut current = match self.keys.closest(target, self.now) {
            Some(Known::Insecure(i)) => return Ok(Zone::Insecure(i)),
            Some(Known::OverLimit(z)) if name::is_at_or_below(&z, &anchor) => {
                return Err(Verdict::Indeterminate(Indeterminate::WorkLimit));
            }
            Some(Known::Keys(k)) if name::is_at_or_below(k.zone(), &anchor) => k,
            _ => match self.anchor_keys(&anchor).await? {
                Zone::Keys(k) => k,
                insecure => return Ok(insecure),
            },
        };
        let want = name::label_count(target);
        let mut at = name::label_count(current.zone());
        while at < want {
            at += 1;
            let child = name::suffix(target, at).to_vec();
            // Held until this step's outcome is in the cache (the end of
            // the loop's body): misses for other names in the zone wait.
            let _flight = match self.turn(&child).await {
                Turn::Known(Ok(Zone::Keys(k))) => {
                    current = k;
                    continue;
                }
                Turn::Known(known) => return known,
                Turn::Fetch(f) => f,
            };
            let (records, _) = self.fetch(&child, drtype::DS).await?;
            let all: Vec<Record<'_>> = records.iter().map(|(_, r)| r).collect();
            let answer: Vec<Record<'_>> = records.section(Section::Answer).collect();
            let ds = rrset(&answer, &child, drtype::DS);
            if !ds.is_empty() {
                let sigs = rrsigs_for(&all, &child, drtype::DS);
                let parent = current.zone().to_vec();
                self.spend(&parent, |v| v.verify_rrset(&current, &ds, &sigs))?;
                let anchors: Vec<crate::dnssec::Anchor<'_>> =
                    ds.iter().map(|r| crate::dnssec::Anchor::Ds(r.rdata)).collect();
                let (keyset, _) = self.fetch(&child, drtype::DNSKEY).await?;
                let kall: Vec<Record<'_>> = keyset.iter().map(|(_, r)| r).collect();
                let ksigs = rrsigs_for(&kall, &child, drtype::DNSKEY);
                match self.keys_of(&child, &kall, &ksigs, &anchors)? {
                    Zone::Keys(k) => current = k,
                    insecure => return Ok(insecure),
                }
                continue;
            }
            let dated = self.v.dates_checked();
            let ttl = all.iter().map(|r| r.ttl).min().unwrap_or(0);
            let parent = current.zone().to_vec();
            match self.spend(&parent, |v| Denial::new(&current, &all).ds_absence(v, &child))? {
                DsAbsence::NotACut => {}
                DsAbsence::Delegation => {
                    self.keys.insert(&child, Known::Insecure(Insecure::NoDs), ttl, dated, self.now);
                    return Ok(Zone::Insecure(Insecure::NoDs));
                }
                DsAbsence::OptOut => {
                    self.keys.insert(&child, Known::Insecure(Insecure::OptOut), ttl, dated, self.now);
                    return Ok(Zone::Insecure(Insecure::OptOut));
                }
            }
        }
        Ok(Zone::Keys(current))
    }

    /// The verdict on RRset `set` (`owner`, type `t`) among the reply's
    /// records `all`, wildcard proof included.
    async fn rrset_verdict(&mut self, all: &[Record<'_>], set: &[Record<'_>], owner: &[u8], t: u16) -> Verdict {
        let Some(signer) = signer_of(all, owner, t).map(<[u8]>::to_vec) else {
            // Unsigned: fine only where the chain proves the zone unsigned.
            return match self.descend(owner).await {
                Ok(Zone::Insecure(i)) => Verdict::Insecure(i),
                Ok(Zone::Keys(_)) => Verdict::Bogus(Bogus::RrsigMissing),
                Err(v) => v,
            };
        };
        if !name::is_at_or_below(owner, &signer) {
            return Verdict::Bogus(Bogus::Malformed);
        }
        let keys = match self.descend(&signer).await {
            Ok(Zone::Keys(k)) => k,
            Ok(Zone::Insecure(i)) => return Verdict::Insecure(i),
            Err(v) => return v,
        };
        if !name::eq(keys.zone(), &signer) {
            // The chain knows no zone cut where the RRSIG says its signer is.
            return Verdict::Bogus(Bogus::NoMatchingKey);
        }
        let sigs = rrsigs_for(all, owner, t);
        match self.spend(&signer, |v| v.verify_rrset(&keys, set, &sigs)) {
            Err(v) => v,
            Ok(proof) => {
                self.ttl = self.ttl.min(proof.ttl);
                self.validated.push((owner.to_vec(), t));
                match proof.wildcard {
                    Some(w) => self.spend(&signer, |v| Denial::new(&keys, all).wildcard_answer(v, owner, w)),
                    None => Verdict::Secure,
                }
            }
        }
    }

    /// The verdict on a reply that has no `qtype` data for `name`: NXDOMAIN
    /// (`qtype` `None`) or NODATA, proven in the zone whose SOA it carries.
    async fn denial_verdict(
        &mut self,
        records: &Records,
        all: &[Record<'_>],
        name: &[u8],
        qtype: Option<u16>,
    ) -> Verdict {
        let authority: Vec<Record<'_>> = records.section(Section::Authority).collect();
        let zone = authority
            .iter()
            .filter(|r| r.rtype == drtype::SOA)
            .find_map(|r| signer_of(all, r.owner, drtype::SOA))
            .or_else(|| {
                authority
                    .iter()
                    .filter(|r| r.rtype == drtype::NSEC || r.rtype == drtype::NSEC3)
                    .find_map(|r| signer_of(all, r.owner, r.rtype))
            })
            .map(<[u8]>::to_vec);
        let Some(zone) = zone else {
            return match self.descend(name).await {
                Ok(Zone::Insecure(i)) => Verdict::Insecure(i),
                Ok(Zone::Keys(_)) => Verdict::Bogus(Bogus::NsecMissing),
                Err(v) => v,
            };
        };
        if !name::is_at_or_below(name, &zone) {
            return Verdict::Bogus(Bogus::BadDenial);
        }
        let keys = match self.descend(&zone).await {
            Ok(Zone::Keys(k)) => k,
            Ok(Zone::Insecure(i)) => return Verdict::Insecure(i),
            Err(v) => return v,
        };
        if !name::eq(keys.zone(), &zone) {
            return Verdict::Bogus(Bogus::NoMatchingKey);
        }
        let soa = rrset(&authority, &zone, drtype::SOA);
        if !soa.is_empty() {
            match self.spend(&zone, |v| v.verify_rrset(&keys, &soa, &rrsigs_for(all, &zone, drtype::SOA))) {
                Ok(p) => self.ttl = self.ttl.min(p.ttl),
                Err(v) => return v,
            }
        }
        self.spend(&zone, |v| {
            let mut denial = Denial::new(&keys, all);
            match qtype {
                None => denial.nxdomain(v, name),
                Some(t) => denial.nodata(v, name, t),
            }
        })
    }

    /// The verdict on a whole reply to `qname`/`qtype`: each CNAME or
    /// DNAME link in its own zone, then the data or the denial.
    async fn answer_verdict(&mut self, records: &Records, rc: u8, qname: &[u8], qtype: u16) -> Verdict {
        let all: Vec<Record<'_>> = records.iter().map(|(_, r)| r).collect();
        let answer: Vec<Record<'_>> = records.section(Section::Answer).collect();
        let mut verdict = Verdict::Secure;
        if qtype == wire::rtype::ANY {
            // `any_mode 'forward'`: every RRset the name has, each checked in
            // its own right (no CNAME is followed; one is an RRset here).
            let mut types: Vec<u16> = answer
                .iter()
                .filter(|r| r.rtype != drtype::RRSIG && name::eq(r.owner, qname))
                .map(|r| r.rtype)
                .collect();
            types.sort_unstable();
            types.dedup();
            for &t in &types {
                let set = rrset(&answer, qname, t);
                verdict = verdict.and(self.rrset_verdict(&all, &set, qname, t).await);
                if matches!(verdict, Verdict::Bogus(_) | Verdict::Indeterminate(_)) {
                    return verdict;
                }
            }
            if !types.is_empty() {
                return verdict;
            }
        }
        let mut name = qname.to_vec();
        for _ in 0..MAX_LINKS {
            let set = rrset(&answer, &name, qtype);
            if !set.is_empty() {
                return verdict.and(self.rrset_verdict(&all, &set, &name, qtype).await);
            }
            let cname = rrset(&answer, &name, drtype::CNAME);
            let [link] = cname.as_slice() else { break };
            let link_verdict = match self.dname_for(&all, &answer, &name, link.rdata).await {
                Some(v) => v,
                None => self.rrset_verdict(&all, &cname, &name, drtype::CNAME).await,
            };
            verdict = verdict.and(link_verdict);
            if matches!(verdict, Verdict::Bogus(_) | Verdict::Indeterminate(_)) {
                return verdict;
            }
            name = link.rdata.to_vec();
        }
        let data_end = match rc {
            rcode::NXDOMAIN => self.denial_verdict(records, &all, &name, None).await,
            rcode::NOERROR => self.denial_verdict(records, &all, &name, Some(qtype)).await,
            _ => return verdict,
        };
        verdict.and(data_end)
    }

    /// For an unsigned CNAME at `name` pointing to `target`: the verdict
    /// on the DNAME it was synthesized from (RFC 6672 §5.3.1), if the
    /// answer holds one above `name` whose substitution gives `target`.
    async fn dname_for(
        &mut self,
        all: &[Record<'_>],
        answer: &[Record<'_>],
        name: &[u8],
        target: &[u8],
    ) -> Option<Verdict> {
        if !rrsigs_for(all, name, drtype::CNAME).is_empty() {
            return None;
        }
        let dname = answer.iter().find(|r| r.rtype == drtype::DNAME && name::is_below(name, r.owner))?;
        let prefix = name.get(..name.len() - dname.owner.len())?;
        let mut synthesized = prefix.to_vec();
        synthesized.extend_from_slice(dname.rdata);
        if !name::eq(&synthesized, target) {
            return Some(Verdict::Bogus(Bogus::Malformed));
        }
        let owner = dname.owner.to_vec();
        let set = rrset(answer, &owner, drtype::DNAME);
        let verdict = self.rrset_verdict(all, &set, &owner, drtype::DNAME).await;
        // The synthesized CNAME is as good as the DNAME it follows from.
        self.validated.push((name.to_vec(), drtype::CNAME));
        Some(verdict)
    }
}

/// Validates upstream `reply` to client query `q` (asked with [`ask`]) on
/// a validating set, and makes what clients get of it.
#[allow(clippy::too_many_arguments)]
pub(super) async fn check(
    q: &Query<'_>,
    mut reply: Vec<u8>,
    group: &Group,
    timeout: Duration,
    anchors: &TrustAnchors,
    keys: &KeyCache,
    clock_good: bool,
) -> Checked {
    let f = header::flags(&reply) & !flags::AD;
    header::set_flags(&mut reply, f);
    let do_bit = q.edns.is_some_and(|e| e.dnssec_ok);
    let Some(records) = Records::from_message(&reply) else {
        return bogus_or_not(reply, Verdict::Bogus(Bogus::Malformed), clock_good);
    };
    let unstripped = |reply: Vec<u8>| {
        if do_bit { Some(reply) } else { rebuild(&reply, &records, |_, r| !dnssec_only(r, q.qtype)) }
    };
    if q.flags & flags::CD != 0 {
        let reply = unstripped(reply).unwrap_or_default();
        return Checked { reply, outcome: Outcome { ttl_cap: u32::MAX, cache_failure: false, verdict: None } };
    }
    let rc = header::rcode(&reply);
    let now = crate::sys::unix_now();
    let mut chain = Chain {
        group,
        timeout,
        anchors,
        keys,
        limits: Limits::default(),
        v: Validation::new(clock_good.then_some(now as u32), Limits::default()),
        queries_left: MAX_CHAIN_QUERIES,
        now,
        ttl: u32::MAX,
        validated: Vec::new(),
    };
    let verdict = if rc == rcode::NOERROR || rc == rcode::NXDOMAIN {
        chain.answer_verdict(&records, rc, q.qname, q.qtype).await
    } else {
        // An upstream's own failure is passed on as it is, without AD.
        Verdict::Insecure(Insecure::NoAnchor)
    };
    let ttl_cap = if clock_good { chain.ttl } else { crate::dnssec::keycache::UNDATED_TTL };
    match verdict {
        Verdict::Secure => {
            let validated = &chain.validated;
            let keep =
                |section, r: &Record<'_>| validated_part(section, r, validated) && (do_bit || !dnssec_only(r, q.qtype));
            let mut out = rebuild(&reply, &records, keep).unwrap_or_default();
            if out.len() >= HEADER_LEN {
                let f = header::flags(&out) | flags::AD;
                header::set_flags(&mut out, f);
            }
            Checked { reply: out, outcome: Outcome { ttl_cap, cache_failure: false, verdict: Some(verdict) } }
        }
        Verdict::Insecure(_) => {
            let out = unstripped(reply).unwrap_or_default();
            Checked { reply: out, outcome: Outcome { ttl_cap, cache_failure: false, verdict: Some(verdict) } }
        }
        _ => bogus_or_not(reply, verdict, clock_good),
    }
}

/// The SERVFAIL for a bogus or indeterminate verdict.
fn bogus_or_not(reply: Vec<u8>, verdict: Verdict, clock_good: bool) -> Checked {
    let bogus = matches!(verdict, Verdict::Bogus(_));
    let code = verdict.ede().unwrap_or(6);
    let out = servfail(&reply, code).unwrap_or_default();
    let ttl_cap = if clock_good { BOGUS_TTL } else { crate::dnssec::keycache::UNDATED_TTL };
    Checked { reply: out, outcome: Outcome { ttl_cap, cache_failure: bogus, verdict: Some(verdict) } }
}

/// Puts validation's outcome `o` on the answer about to be cached: its
/// cache lifetime and its verdict (counted as each client is answered).
pub(super) fn settle(o: &Outcome, resolved: Option<&mut Resolved>) {
    let state = o.verdict.map(|v| match v {
        Verdict::Secure => Dnssec::Secure,
        Verdict::Insecure(_) => Dnssec::Insecure,
        Verdict::Bogus(_) => Dnssec::Bogus,
        Verdict::Indeterminate(_) => Dnssec::Indeterminate,
    });
    if let Some(r) = resolved {
        r.dnssec = state;
        if let Some(s) = Arc::get_mut(&mut r.stored) {
            let ttl = if o.cache_failure { Some(o.ttl_cap) } else { s.cache_ttl.map(|t| t.min(o.ttl_cap)) };
            s.cache_ttl = ttl.filter(|&t| t > 0);
            s.dnssec = state;
        }
    }
}

/// Counts an answer given with validation state `state`: a miss's, a
/// cache hit's or a stale one's alike, so `stats` adds up to what clients got.
#[cold]
pub(super) fn count(state: Dnssec, stats: &Counters) {
    Counters::bump(match state {
        Dnssec::Secure => &stats.dnssec_secure,
        Dnssec::Insecure => &stats.dnssec_insecure,
        Dnssec::Bogus => &stats.dnssec_bogus,
        Dnssec::Indeterminate => &stats.dnssec_indeterminate,
    });
}

/// Longest `hydradns check` spends validating a name: the chain's
/// [`MAX_CHAIN_QUERIES`] queries answer within it from a working upstream;
/// a dead one makes the line indeterminate instead of the check late.
pub const CHECK_WITHIN: Duration = Duration::from_secs(10);

/// `hydradns check`'s `dnssec:` line for `name` (a domain name), asked of
/// upstream set `set` of `snap` as a client without CD would ask its A
/// records, validated as for that client. Neither the answer cache nor
/// the counters see it; the set's key cache keeps the keys it validated,
/// as a client's query would.
pub async fn check_line(snap: &Snapshot, name: &str, set: u8) -> String {
    let not = |why: &str| format!("dnssec: not validated ({why})");
    let Some(key) = name_key(name) else { return not("not a domain name") };
    // RFC 6761 6.4: never looked up. LuCI asks `check --client X x.invalid`
    // for a device's groups, which must not wait on the upstreams.
    let b = name.trim_end_matches('.').as_bytes();
    if b.eq_ignore_ascii_case(b"invalid") || b.len() > 8 && b[b.len() - 8..].eq_ignore_ascii_case(b".invalid") {
        return not("a special-use name, never asked upstream");
    }
    let forward = snap.forward_for(&key);
    if forward.is_some_and(|f| f >= snap.forwards.len()) {
        return not("it goes to the bootstrap resolvers until the clock is known good");
    }
    let Some(client) = wire::build::query(0, name, wire::rtype::A, Some((wire::EDNS_UDP_SIZE, true))) else {
        return not("not a domain name");
    };
    let Ok(cq) = wire::parse_query(&client) else { return not("not a domain name") };
    let Some((anchors, keys)) = snap.validator(forward, set, cq.qname) else {
        return not(match forward {
            Some(_) => "a config forward rule sends it to its own servers, and no trust anchor of its own covers it",
            None => "no trust anchors are loaded",
        });
    };
    let asked = ask(&cq);
    let Ok(aq) = wire::parse_query(&asked) else { return not("not a domain name") };
    let group = snap.group(forward, set);
    let clock_good = snap.clock.synced();
    let validated = crate::sys::within(CHECK_WITHIN, async {
        let Some((reply, _)) = group.resolve(&aq, snap.timeout).await else {
            return Ok(Verdict::Indeterminate(Indeterminate::NoReachableAuthority));
        };
        let rc = header::rcode(&reply);
        if rc != rcode::NOERROR && rc != rcode::NXDOMAIN {
            // Passed on to clients as it is, without AD: nothing to validate.
            return Err(format!("the upstream answered with rcode {rc}"));
        }
        let checked = check(&cq, reply, group, snap.timeout, anchors, keys, clock_good).await;
        checked.outcome.verdict.ok_or_else(|| "asked with CD".to_string())
    })
    .await;
    let verdict = match validated {
        None => return format!("dnssec: indeterminate (not decided within {} s)", CHECK_WITHIN.as_secs()),
        Some(Err(why)) => return not(&why),
        Some(Ok(v)) => v,
    };
    let mut line = format!("dnssec: {}", verdict.state());
    match (verdict.ede(), verdict.reason()) {
        (Some(code), Some(why)) => line += &format!(" (EDE {code}: {why})"),
        (None, Some(why)) => line += &format!(" ({why})"),
        _ => {}
    }
    if !clock_good {
        line += "; signature dates not checked: the clock is not known good yet";
    }
    line
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::upstream::Strategy;
    use crate::dnssec::Anchor;

    const TEST: &[u8] = b"\x04test\x00";
    const HOSTILE: &[u8] = b"\x07hostile\x04test\x00";

    /// An Ed25519 zone key, and a DS with its tag whose digest does not
    /// fit it: each copy of the key in a DNSKEY set costs a DS digest (a
    /// hash), and none matches.
    fn colliding() -> (Vec<u8>, Vec<u8>) {
        let mut key = vec![1, 1, 3, 15];
        key.extend_from_slice(&[7; 32]);
        let mut ds = crate::dnssec::key_tag(&key).to_be_bytes().to_vec();
        ds.extend_from_slice(&[15, 2]);
        ds.extend_from_slice(&[0; 32]);
        (key, ds)
    }

    /// `n` copies of DNSKEY `key` at `zone`.
    fn records<'a>(zone: &'a [u8], key: &'a [u8], n: usize) -> Vec<Record<'a>> {
        let r = Record { owner: zone, rtype: drtype::DNSKEY, class: 1, ttl: 3600, rdata: key };
        vec![r; n]
    }

    /// A validation with a budget of `hashes`, asking `group`.
    fn chain<'a>(group: &'a Group, anchors: &'a TrustAnchors, keys: &'a KeyCache, hashes: u32) -> Chain<'a> {
        let limits = Limits { hashes, ..Limits::default() };
        Chain {
            group,
            timeout: Duration::from_millis(300),
            anchors,
            keys,
            limits,
            v: Validation::new(None, limits),
            queries_left: MAX_CHAIN_QUERIES,
            now: 1000,
            ttl: u32::MAX,
            validated: Vec::new(),
        }
    }

    #[test]
    fn a_zone_that_takes_the_work_budget_is_indeterminate_for_a_while_without_the_work() {
        // Nothing answers there: a chain query would end NoReachableAuthority, not WorkLimit.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let group = Group::new(&[silent.local_addr().unwrap()], &[], Strategy::Failover);
        let anchors = TrustAnchors::parse(
            "test.\t3600\tIN\tDS\t18445 13 2 a81ff17873057818ce7128f4d83e8915ec763aede9d2a1a6b89a59bded3deb3d\n",
            "t",
        )
        .unwrap();
        let keys = KeyCache::new();
        let limit = Verdict::Indeterminate(Indeterminate::WorkLimit);
        let (key, ds) = colliding();
        let anchor = [Anchor::Ds(&ds)];

        // KeyTrap-shaped: the zone's own DNSKEY set spends the budget.
        let mut c = chain(&group, &anchors, &keys, 8);
        assert_eq!(c.keys_of(HOSTILE, &records(HOSTILE, &key, 20), &[], &anchor).err(), Some(limit));
        assert!(matches!(keys.get(HOSTILE, 1000), Some(Known::OverLimit(_))));
        // The next name in it: indeterminate, no query, no hash.
        let mut c = chain(&group, &anchors, &keys, 8);
        let www = b"\x03www\x07hostile\x04test\x00";
        assert_eq!(smol::block_on(c.descend(www)).err(), Some(limit));
        assert_eq!((c.queries_left, c.v.hashes()), (MAX_CHAIN_QUERIES, 0));
        assert!(keys.get(HOSTILE, 1000 + u64::from(BOGUS_TTL)).is_none(), "for BOGUS_TTL seconds");

        // A zone that hit the limit after others had spent most of it
        // (a CNAME chain through a hostile zone into it) is not marked.
        let victim = b"\x06victim\x04test\x00";
        let mut c = chain(&group, &anchors, &keys, 8);
        assert!(c.keys_of(HOSTILE, &records(HOSTILE, &key, 6), &[], &anchor).is_err());
        assert_eq!(c.keys_of(victim, &records(victim, &key, 6), &[], &anchor).err(), Some(limit));
        assert!(keys.get(victim, 1000).is_none(), "6 of 8 hashes were spent elsewhere");

        // Nor is a trust anchor's zone: every name below it would fail.
        let mut c = chain(&group, &anchors, &keys, 8);
        assert_eq!(c.keys_of(TEST, &records(TEST, &key, 20), &[], &anchor).err(), Some(limit));
        assert!(keys.get(TEST, 1000).is_none());
    }
}
