//! The answer cache: a fixed number of slots, shared by every worker, read
//! without locks.
//!
//! Slots are grouped in sets of sixteen (16-way set-associative). A name,
//! type, class and DO bit hash to one set; a lookup compares at most sixteen
//! tags. Each slot holds a reference-counted pointer to an immutable entry
//! behind an [`ArcSwapAny`], so a reader never waits for a writer: a writer
//! builds the whole entry first and swaps the pointer in. Eviction: an
//! insert replaces, within its set, the slot holding the same key, else an
//! empty or expired slot, else the one least recently used (by a one-second
//! clock, a tie going to the entry not hit since it was stored: see
//! [`Cache::used`]). Memory is bounded by `capacity × MAX_ENTRY_BYTES`
//! whatever the load.
//!
//! Serve-stale (RFC 8767) keeps nothing extra: an expired entry stays in
//! its slot, servable for `stale_max_age`, until an insert needs the slot,
//! and an insert takes expired slots before live ones. A lookup that asks
//! for stale entries gets them marked as such ([`Hit::is_stale`]).
//!
//! Entries keep the upstream answer as bytes (OPT removed) and the offset of
//! every TTL; a hit copies the bytes, patches ID, question case, flags and
//! counted-down TTLs, and needs no parse. Each entry also records which
//! lists last passed its name (see [`Hit`]).

use std::hash::Hasher;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Instant;

use arc_swap::{ArcSwapAny, Guard};
use rustc_hash::FxHasher;
use triomphe::{HeaderSlice, HeaderWithLength, ThinArc};

use crate::answer::{Dnssec, EDE_OPTION, Stored, replay};
use crate::domain::key_eq;
use crate::wire::{self, Query, flags};

/// Slots per set. At half the capacity in use, 4 ways left about 4 % of
/// names without a slot (set conflicts evicting live entries; seen as a
/// 95 % hit ratio on 5,000 names in a 10,000-entry cache), 16 ways about
/// 0.1 %: close to a true LRU, for a scan of half a cache line of tags.
const WAYS: usize = 16;
/// Longest cache key: a 255-byte name, type, class, and the byte of the DO and CD flags and the upstream set.
pub const MAX_KEY_LEN: usize = wire::MAX_NAME_LEN + 5;
/// Extended DNS Error 3, "Stale Answer", as a whole option (RFC 8914 §4.4).
const EDE_STALE: [u8; 6] = [0, EDE_OPTION as u8, 0, 2, 0, 3];

/// What an entry holds beside its bytes.
#[derive(Debug)]
struct Meta {
    /// The policy generation whose lists last passed this name, shifted
    /// left one, with bit 0 set when an allowlist passed it (see [`Hit`]).
    checked: AtomicU64,
    /// Clock second it was stored.
    stored_at: u32,
    /// Clock second it stops being served fresh.
    expires: u32,
    /// Clock second before which a stale entry is not refreshed again: a
    /// refresh that failed holds the name off the upstream for a while.
    refresh_after: AtomicU32,
    /// A prefetch of this entry has been started (at most one per entry).
    prefetched: AtomicBool,
    /// Length of the key at the start of the bytes.
    key_len: u16,
    /// Length of the message after the key.
    msg_len: u16,
    /// Length of the Extended DNS Errors at the end.
    ede_len: u16,
    /// The validating set's verdict on it (in the padding: no larger entry).
    dnssec: Option<Dnssec>,
}

/// One cached answer, in one allocation: reference count, [`Meta`], then
/// the full cache key (checked on every hit: the tag only narrows the set),
/// the answer as [`Stored`] keeps it, each TTL's offset (u16) and stored
/// value (u32), little-endian, and the upstream's Extended DNS Errors.
///
/// A hit follows every pointer on its way, each a likely cache miss after
/// the kernel's packet work has run through the caches. An `Arc` to a
/// struct holding a boxed buffer was two such steps; a thin pointer to one
/// block is one, and the key sits in the block's first two cache lines.
type Entry = ThinArc<Meta, u8>;

/// What an [`Entry`] points to.
type EntryData = HeaderSlice<HeaderWithLength<Meta>, [u8]>;

fn new_entry(key: &[u8], stored: &Stored, stored_at: u32, expires: u32, checked: u64) -> Option<Entry> {
    let key_len = u16::try_from(key.len()).ok()?;
    let msg_len = u16::try_from(stored.bytes().len()).ok()?;
    let ede_len = u16::try_from(stored.ede().len()).ok()?;
    let mut buf = Vec::with_capacity(key.len() + stored.bytes().len() + 6 * stored.ttls().len() + stored.ede().len());
    buf.extend_from_slice(key);
    buf.extend_from_slice(stored.bytes());
    for &(pos, ttl) in stored.ttls().iter() {
        buf.extend_from_slice(&pos.to_le_bytes());
        buf.extend_from_slice(&ttl.to_le_bytes());
    }
    buf.extend_from_slice(stored.ede());
    let meta = Meta {
        checked: AtomicU64::new(checked),
        stored_at,
        expires,
        refresh_after: AtomicU32::new(0),
        prefetched: AtomicBool::new(false),
        key_len,
        msg_len,
        ede_len,
        dnssec: stored.dnssec,
    };
    Some(ThinArc::from_header_and_slice(meta, &buf))
}

#[inline]
fn entry_key(e: &EntryData) -> &[u8] {
    e.slice.get(..e.header.header.key_len as usize).unwrap_or_default()
}

/// An entry's message, TTL table (6 bytes per TTL: offset u16, stored
/// value u32, little-endian) and Extended DNS Errors. The table stays bytes:
/// each caller reads it with its own closure, which inlines into it (one
/// iterator shared by two callers was outlined, +100 instructions per hit).
#[inline(always)]
fn entry_parts(e: &EntryData) -> (&[u8], &[u8], &[u8]) {
    let meta = &e.header.header;
    let rest = e.slice.get(meta.key_len as usize..).unwrap_or_default();
    let (msg, rest) = rest.split_at(usize::from(meta.msg_len).min(rest.len()));
    let (ttls, ede) = rest.split_at(rest.len().saturating_sub(meta.ede_len.into()));
    (msg, ttls, ede)
}

#[inline(always)]
fn entry_write_answer(e: &EntryData, q: &Query, elapsed: u32, out: &mut Vec<u8>) {
    let (msg, ttls, ede) = entry_parts(e);
    let ttls =
        ttls.chunks_exact(6).map(|t| (u16::from_le_bytes([t[0], t[1]]), u32::from_le_bytes([t[2], t[3], t[4], t[5]])));
    replay(msg, ttls, ede, q, elapsed, out);
}

/// Writes an expired entry's answer: every TTL `ttl`, and Extended DNS
/// Error 3 after the upstream's own for a client that uses EDNS.
fn entry_write_stale(e: &EntryData, q: &Query, ttl: u32, out: &mut Vec<u8>) {
    let (msg, ttls, ede) = entry_parts(e);
    let mut all = Vec::with_capacity(ede.len() + EDE_STALE.len());
    all.extend_from_slice(ede);
    all.extend_from_slice(&EDE_STALE);
    replay(msg, ttls.chunks_exact(6).map(|t| (u16::from_le_bytes([t[0], t[1]]), ttl)), &all, q, 0, out);
}

/// The shared answer cache.
pub struct Cache {
    /// `sets × ways` entries, each swapped whole.
    entries: Box<[ArcSwapAny<Option<Entry>>]>,
    /// Sixteen bits of each entry's hash (0: empty), kept apart so a lookup
    /// scans one set's tags, half a cache line, without touching the
    /// entries. A name that is not cached (every blocked name, which is
    /// looked up here before the lists) touches only that line. With 15
    /// bits a lookup finds a wrong candidate once in about 2,000 (16 ways /
    /// 2^15), whose key comparison then fails: cheaper than the full hashes
    /// kept beside the tags before, one more likely cache miss on every hit.
    tags: Box<[AtomicU16]>,
    /// Clock second of each entry's last hit or insert, shifted left one,
    /// bit 0 set once it has been hit: the LRU order within a set.
    ///
    /// The bit breaks ties within one second. A stream of names asked once
    /// each (at 15k/s into a 10,000-entry cache in the benchmark's mix) fills
    /// a set several times a second; by the clock alone, a name hit a
    /// hundred times that second ties with one stored a moment ago, and the
    /// tie went to slot order. It evicted popular names, and 12.3 % of the
    /// mix went upstream where 10 % were misses.
    used: Box<[AtomicU32]>,
    /// Clock second each entry expires (0: empty), kept apart so an insert
    /// picks its victim from three small arrays without loading a set's
    /// entries: that load, one likely cache miss per way, was three quarters
    /// of `Engine::finish`'s samples (perf, all-miss load).
    expires: Box<[AtomicU32]>,
    /// Number of sets.
    sets: usize,
    /// Slots per set (fewer than `WAYS` only for tiny caches).
    ways: usize,
    /// Origin of the one-second clock.
    epoch: Instant,
    /// Random hash seed, so nobody can aim names at one set from outside.
    seed: usize,
    /// Sweeps so far (see [`Cache::forget_sets`]): an insert made under an
    /// older count is an answer from before the sweep, and is not kept.
    sweeps: AtomicU32,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("sets", &self.sets).field("ways", &self.ways).finish_non_exhaustive()
    }
}

impl Cache {
    /// A cache of `capacity` entries (rounded down to a multiple of 16); 0 disables it.
    pub fn new(capacity: usize) -> Cache {
        let ways = capacity.clamp(1, WAYS);
        let sets = capacity / ways;
        let mut seed = [0u8; 8];
        // A fixed seed only weakens the spread, so a getrandom failure is not fatal.
        let _ = rustix::rand::getrandom(&mut seed, rustix::rand::GetRandomFlags::empty());
        let n = sets * ways;
        Cache {
            entries: (0..n).map(|_| ArcSwapAny::new(None)).collect(),
            tags: (0..n).map(|_| AtomicU16::new(0)).collect(),
            used: (0..n).map(|_| AtomicU32::new(0)).collect(),
            expires: (0..n).map(|_| AtomicU32::new(0)).collect(),
            sets,
            ways,
            epoch: Instant::now(),
            seed: u64::from_ne_bytes(seed) as usize,
            sweeps: AtomicU32::new(0),
        }
    }

    /// The sweep count an insert passes to [`Cache::insert`].
    pub fn sweeps(&self) -> u32 {
        self.sweeps.load(SeqCst)
    }

    /// Drops every entry of the upstream sets in `sets` (bit N: set N, see
    /// [`key`]), for a reload that changed what answers them or whether
    /// they validate: an answer one resolver gave, or one validated (or
    /// not) under the old setting, is never served under the new one.
    /// Returns the new sweep count; an insert under an older one (a miss
    /// that was asked before) is dropped, even one racing this sweep.
    pub fn forget_sets(&self, sets: u64) -> u32 {
        let sweep = self.sweeps.fetch_add(1, SeqCst).wrapping_add(1);
        for (slot, entry) in self.entries.iter().enumerate() {
            let doomed = entry.load().as_ref().is_some_and(|e| {
                let set = key_set(entry_key(e));
                set < 64 && sets >> set & 1 != 0
            });
            if doomed {
                entry.store(None);
                self.tags[slot].store(0, Relaxed);
                self.expires[slot].store(0, Relaxed);
                self.used[slot].store(0, Relaxed);
            }
        }
        sweep
    }

    /// Slots available.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Entries currently held (expired ones included until replaced).
    pub fn len(&self) -> usize {
        self.entries.iter().filter(|e| e.load().is_some()).count()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Seconds since the cache was created: the clock for TTLs and LRU.
    #[inline]
    pub fn now(&self) -> u32 {
        self.clock_at(Instant::now())
    }

    /// The cache clock at `at`.
    #[inline]
    fn clock_at(&self, at: Instant) -> u32 {
        at.saturating_duration_since(self.epoch).as_secs() as u32
    }

    /// Hash of a key.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        let mut h = FxHasher::with_seed(self.seed);
        h.write(key);
        h.finish()
    }

    /// The slot indices of `hash`'s set.
    #[inline]
    fn set(&self, hash: u64) -> std::ops::Range<usize> {
        // Multiply-shift maps the hash onto any set count, not only powers of two.
        let i = (((hash >> 32) * self.sets as u64) >> 32) as usize;
        i * self.ways..(i + 1) * self.ways
    }

    /// Writes the cached answer for `q` into `out` if there is a live one.
    #[cfg(test)]
    pub fn answer(&self, key: &[u8], hash: u64, q: &Query, out: &mut Vec<u8>) -> bool {
        self.find(key, hash, Instant::now(), 0).is_some_and(|hit| {
            hit.write_answer(q, out);
            true
        })
    }

    /// The entry for `key` live at `at` (when the query arrived: the
    /// caller's clock read serves here too, so a lookup reads no clock), or
    /// expired less than `stale_for` seconds before (then [`Hit::is_stale`]).
    #[inline]
    pub fn find(&self, key: &[u8], hash: u64, at: Instant, stale_for: u32) -> Option<Hit> {
        if self.sets == 0 {
            return None;
        }
        let set = self.set(hash);
        let tag = tag(hash);
        // Read the clock only once a tag matches: a name not in the cache
        // (every blocked name, every miss) never needs it, and turning an
        // `Instant` into seconds was 37 instructions of a blocked query
        // (`bench/instructions.py --by-function --scenarios blocked`).
        let mut clock = None;
        for (i, t) in self.tags[set.clone()].iter().enumerate() {
            let slot = set.start + i;
            if t.load(Relaxed) != tag {
                continue;
            }
            let guard = self.entries[slot].load();
            let Some(e) = guard.as_ref() else { continue };
            let now = *clock.get_or_insert_with(|| self.clock_at(at));
            // `key_eq`, not `!=`: slice equality calls `bcmp`, compiler-rt's
            // byte loop in the static musl build, 1.9 % of the server's
            // samples in the mix (`bench/profile.sh --scenario mix --graph
            // compiler_rt.bcmp`), all of it this comparison on a hit.
            let expires = e.header.header.expires;
            if !key_eq(entry_key(e), key) || now >= expires.saturating_add(stale_for) {
                continue;
            }
            // At most one store per entry per second: a hit writes no shared
            // cache line that another core is reading.
            let mark = now << 1 | 1;
            let used = self.used[slot].load(Relaxed);
            if used != mark {
                self.used[slot].store(mark, Relaxed);
            }
            // Bit 0: hit before, since it was stored.
            return Some(Hit { entry: guard, now, stale: now >= expires, hit_before: used & 1 != 0 });
        }
        None
    }

    /// Stores an answer under `key` if it is cacheable. `checked` is what
    /// [`Hit::checked`] will return: the generation of the lists that passed
    /// the name, shifted left one, bit 0 set if an allowlist passed it.
    /// `sweep`: [`Cache::sweeps`] when the question was asked (the
    /// snapshot's); after a sweep since, the answer is not stored.
    pub fn insert(&self, key: &[u8], hash: u64, stored: &Stored, checked: u64, sweep: u32) {
        let Some(ttl) = stored.cache_ttl else { return };
        if self.sets == 0 || self.sweeps() != sweep {
            return;
        }
        let now = self.now();
        let set = self.set(hash);
        let victim = set
            .clone()
            .find(|&i| {
                self.tags[i].load(Relaxed) == tag(hash)
                    && self.entries[i].load().as_ref().is_some_and(|e| entry_key(e) == key)
            })
            .or_else(|| set.clone().find(|&i| now >= self.expires[i].load(Relaxed)))
            .or_else(|| set.min_by_key(|&i| self.used[i].load(Relaxed)));
        let Some(slot) = victim else { return };
        let expires = now.saturating_add(ttl);
        let Some(entry) = new_entry(key, stored, now, expires, checked) else { return };
        self.entries[slot].store(Some(entry));
        self.expires[slot].store(expires, Relaxed);
        self.tags[slot].store(tag(hash), Relaxed);
        self.used[slot].store(now << 1, Relaxed);
        // A sweep that began after the check above may have passed this
        // slot already: the count went up before it cleared anything.
        if self.sweeps() != sweep {
            self.entries[slot].store(None);
            self.tags[slot].store(0, Relaxed);
        }
    }
}

/// The tag of a hash: bits the set index does not use (it comes from the
/// top ones), never 0 (an empty slot's tag).
#[inline]
fn tag(hash: u64) -> u16 {
    (hash >> 16) as u16 | 0x8000
}

/// A live cache entry, found.
///
/// Beside the answer it carries which lists last passed its name: a hit
/// under the same lists needs no blocklist lookup, the dearest step of a
/// hit (perf: 7-10 % of the server's cycles at saturation, most of them
/// cache misses in a set of 100k-1M names).
pub struct Hit {
    entry: Guard<Option<Entry>>,
    now: u32,
    stale: bool,
    hit_before: bool,
}

impl Hit {
    /// Expired, found because the lookup asked for stale entries too.
    #[inline]
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Whether this hit should refresh the entry ahead of its expiry, and
    /// claims that refresh (true once per entry): the name was asked at
    /// least twice since it was stored (this hit and one before) and is in
    /// the last tenth of its TTL (at least the last second).
    pub fn claim_prefetch(&self) -> bool {
        let Some(e) = self.entry.as_ref() else { return false };
        let m = &e.header.header;
        let window = ((m.expires - m.stored_at) / 10).max(1);
        self.hit_before
            && !self.stale
            && self.now.saturating_add(window) >= m.expires
            && !m.prefetched.load(Relaxed)
            && !m.prefetched.swap(true, Relaxed)
    }

    /// A failed refresh holds the name off the upstream until later.
    pub fn refresh_held(&self) -> bool {
        self.entry.as_ref().is_some_and(|e| self.now < e.header.header.refresh_after.load(Relaxed))
    }

    /// The entry, owned, to answer from if a refresh fails or is slow.
    /// Not a bogus one: that is a SERVFAIL, and a failure is never replayed
    /// as a stale answer (it would hold the name off the upstream too).
    pub fn into_stale(self) -> Option<Stale> {
        if self.dnssec() == Some(Dnssec::Bogus) {
            return None;
        }
        Guard::into_inner(self.entry).map(Stale)
    }

    /// The validating set's verdict it was stored with.
    #[inline]
    pub fn dnssec(&self) -> Option<Dnssec> {
        self.entry.as_ref().and_then(|e| e.header.header.dnssec)
    }

    /// See [`Cache::insert`].
    #[inline]
    pub fn checked(&self) -> u64 {
        self.entry.as_ref().map_or(0, |e| e.header.header.checked.load(Relaxed))
    }

    /// The cached answer as stored (OPT removed, TTLs as first stored).
    pub fn message(&self) -> &[u8] {
        self.entry.as_ref().map_or(&[][..], |e| entry_parts(e).0)
    }

    /// Records that newer lists passed the name too.
    #[inline]
    pub fn set_checked(&self, checked: u64) {
        if let Some(e) = self.entry.as_ref() {
            e.header.header.checked.store(checked, Relaxed);
        }
    }

    /// Writes the answer for client query `q` into `out`, TTLs counted down.
    #[inline(always)]
    pub fn write_answer(&self, q: &Query, out: &mut Vec<u8>) {
        if let Some(e) = self.entry.as_ref() {
            entry_write_answer(e, q, self.now - e.header.header.stored_at, out);
        }
    }
}

/// An expired entry kept by a miss that refreshes it: the answer the
/// client gets if the upstream fails or is slow.
pub struct Stale(Entry);

impl Stale {
    /// The answer as stored (OPT removed, TTLs as first stored).
    pub fn message(&self) -> &[u8] {
        entry_parts(&self.0).0
    }

    /// Writes the stale answer for `q`: every TTL `ttl`, Extended DNS Error 3.
    pub fn write_answer(&self, q: &Query, ttl: u32, out: &mut Vec<u8>) {
        entry_write_stale(&self.0, q, ttl, out);
    }

    /// The validating set's verdict it was stored with.
    pub fn dnssec(&self) -> Option<Dnssec> {
        self.0.header.header.dnssec
    }

    /// No refresh of this name before cache clock second `until`.
    pub fn hold_refresh(&self, until: u32) {
        self.0.header.header.refresh_after.store(until, Relaxed);
    }
}

impl std::fmt::Debug for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stale").field("expires", &self.0.header.header.expires).finish_non_exhaustive()
    }
}

/// Writes the cache key of `q` into `buf`: lowercase wire name, type, class,
/// and a byte of the DO and CD bits (both change what upstream returns)
/// with the upstream set that answers it above them (see
/// [`crate::upstream::sets`]: one set's answers are never another's; at
/// most [`crate::upstream::sets::MAX_SETS`] of them, so the key is no
/// longer than before sets, and hashes as fast). Returns its length.
#[inline]
pub fn key(q: &Query, set: u8, buf: &mut [u8; MAX_KEY_LEN]) -> usize {
    let n = q.qname.len();
    for (dst, b) in buf[..n].iter_mut().zip(q.qname) {
        *dst = b.to_ascii_lowercase();
    }
    buf[n..n + 2].copy_from_slice(&q.qtype.to_be_bytes());
    buf[n + 2..n + 4].copy_from_slice(&q.qclass.to_be_bytes());
    buf[n + 4] = q.edns.is_some_and(|e| e.dnssec_ok) as u8 | (((q.flags & flags::CD) != 0) as u8) << 1 | set << 2;
    n + 5
}

/// The upstream set a cache key is for (see [`key`]).
#[inline]
pub fn key_set(key: &[u8]) -> u8 {
    key.last().map_or(0, |b| b >> 2)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::answer::MAX_NEGATIVE_TTL;
    use crate::wire::{header, parse_query, rtype, tests::query};
    use simple_dns::{CLASS, Name, Packet, PacketFlag, RCODE, ResourceRecord, rdata};
    use std::time::Duration;

    /// An upstream-style answer to `q` with A records and optional OPT.
    pub(crate) fn upstream_answer(q: &[u8], ttls: &[u32], with_opt: bool) -> Vec<u8> {
        let qp = Packet::parse(q).unwrap();
        let mut p = Packet::new_reply(qp.id());
        p.set_flags(PacketFlag::RECURSION_DESIRED | PacketFlag::RECURSION_AVAILABLE);
        p.questions = qp.questions.clone();
        for (i, &ttl) in ttls.iter().enumerate() {
            p.answers.push(ResourceRecord::new(
                qp.questions[0].qname.clone(),
                CLASS::IN,
                ttl,
                rdata::RData::A(rdata::A { address: 0x0a000001 + i as u32 }),
            ));
        }
        if with_opt {
            *p.opt_mut() = Some(rdata::OPT { opt_codes: vec![], udp_packet_size: 1232, version: 0 });
        }
        p.build_bytes_vec().unwrap()
    }

    fn negative(q: &[u8], rc: RCODE, soa_ttl: u32, minimum: u32) -> Vec<u8> {
        let qp = Packet::parse(q).unwrap();
        let mut p = Packet::new_reply(qp.id());
        *p.rcode_mut() = rc;
        p.questions = qp.questions.clone();
        p.name_servers.push(ResourceRecord::new(
            Name::new_unchecked("example"),
            CLASS::IN,
            soa_ttl,
            rdata::RData::SOA(rdata::SOA {
                mname: Name::new_unchecked("ns.example"),
                rname: Name::new_unchecked("host.example"),
                serial: 1,
                refresh: 2,
                retry: 3,
                expire: 4,
                minimum,
            }),
        ));
        p.build_bytes_vec().unwrap()
    }

    /// A cache holding one answer (TTL `ttl`) for `name`, with its key.
    fn one_entry(name: &str, ttl: u32) -> (Cache, Vec<u8>, u64, Vec<u8>) {
        let msg = query(1, name, rtype::A, Some((1232, false)));
        let s = Stored::from_response(&upstream_answer(&msg, &[ttl], false), 0, 86400).unwrap();
        let cache = Cache::new(64);
        let mut kb = [0u8; MAX_KEY_LEN];
        let k = key(&parse_query(&msg).unwrap(), 0, &mut kb);
        let h = cache.hash(&kb[..k]);
        cache.insert(&kb[..k], h, &s, 0, 0);
        (cache, kb[..k].to_vec(), h, msg)
    }

    #[test]
    fn expired_entries_are_found_only_as_stale_and_only_for_a_while() {
        let (cache, k, h, msg) = one_entry("old.example", 10);
        let at = |secs| Instant::now() + Duration::from_secs(secs);
        assert!(cache.find(&k, h, at(0), 60).is_some_and(|hit| !hit.is_stale()));
        assert!(cache.find(&k, h, at(12), 0).is_none(), "expired, stale not asked for");
        let hit = cache.find(&k, h, at(12), 60).expect("servable stale");
        assert!(hit.is_stale() && !hit.refresh_held());
        assert!(cache.find(&k, h, at(75), 60).is_none(), "past the stale window");
        // The stale answer: every TTL 30, EDE 3 for an EDNS client.
        let q = parse_query(&msg).unwrap();
        let mut out = Vec::new();
        let stale = hit.into_stale().unwrap();
        stale.write_answer(&q, 30, &mut out);
        let p = Packet::parse(&out).unwrap();
        assert_eq!(p.answers[0].ttl, 30);
        let opt = p.opt().unwrap();
        assert_eq!(opt.opt_codes.len(), 1);
        assert_eq!((opt.opt_codes[0].code, &opt.opt_codes[0].data[..]), (EDE_OPTION, &[0u8, 3][..]));
        // A failed refresh holds the name until the given clock second.
        stale.hold_refresh(cache.now() + 30);
        assert!(cache.find(&k, h, at(12), 60).unwrap().refresh_held());
        assert!(!cache.find(&k, h, at(45), 60).unwrap().refresh_held());
    }

    #[test]
    fn a_sweep_forgets_only_its_sets_and_an_answer_asked_before_it_is_not_stored() {
        let msg = query(1, "swept.example", rtype::A, None);
        let s = Stored::from_response(&upstream_answer(&msg, &[300], false), 0, 86400).unwrap();
        let q = parse_query(&msg).unwrap();
        let cache = Cache::new(64);
        let keys: Vec<(Vec<u8>, u64)> = (0..3)
            .map(|set| {
                let mut kb = [0u8; MAX_KEY_LEN];
                let k = key(&q, set, &mut kb);
                (kb[..k].to_vec(), cache.hash(&kb[..k]))
            })
            .collect();
        for (k, h) in &keys {
            cache.insert(k, *h, &s, 0, 0);
        }
        let held = |i: usize| cache.find(&keys[i].0, keys[i].1, Instant::now(), 0).is_some();
        assert!(held(0) && held(1) && held(2));
        let sweep = cache.forget_sets(0b010);
        assert_eq!((held(0), held(1), held(2)), (true, false, true));
        // A miss asked before the sweep (under count 0) answers, but is not kept.
        cache.insert(&keys[1].0, keys[1].1, &s, 0, 0);
        assert!(!held(1));
        cache.insert(&keys[1].0, keys[1].1, &s, 0, sweep);
        assert!(held(1));
    }

    #[test]
    fn a_bogus_answer_is_never_kept_to_serve_stale() {
        let msg = query(1, "bogus.example", rtype::A, None);
        let mut s = Stored::from_response(&upstream_answer(&msg, &[10], false), 0, 86400).unwrap();
        s.dnssec = Some(Dnssec::Bogus);
        let cache = Cache::new(64);
        let mut kb = [0u8; MAX_KEY_LEN];
        let k = key(&parse_query(&msg).unwrap(), 0, &mut kb);
        let h = cache.hash(&kb[..k]);
        cache.insert(&kb[..k], h, &s, 0, 0);
        let later = Instant::now() + Duration::from_secs(12);
        let hit = cache.find(&kb[..k], h, later, 60).expect("found as stale");
        assert!(hit.is_stale() && hit.into_stale().is_none());
    }

    #[test]
    fn a_prefetch_is_claimed_once_late_in_the_ttl_of_a_name_hit_before() {
        let at = |secs| Instant::now() + Duration::from_secs(secs);
        let (cache, k, h, _) = one_entry("popular.example", 100);
        assert!(!cache.find(&k, h, at(0), 0).unwrap().claim_prefetch(), "early in the TTL");
        assert!(cache.find(&k, h, at(95), 0).unwrap().claim_prefetch(), "late, and hit before");
        assert!(!cache.find(&k, h, at(96), 0).unwrap().claim_prefetch(), "once");
        let (cache, k, h, _) = one_entry("once.example", 100);
        assert!(!cache.find(&k, h, at(95), 0).unwrap().claim_prefetch(), "the first hit");
    }

    #[test]
    fn cache_replays_what_stored_writes() {
        // The entry packs key, message and TTL table into one buffer; a hit
        // must read back exactly what `Stored` holds.
        let q1 = query(1, "www.example", rtype::A, Some((1232, false)));
        let s = Stored::from_response(&upstream_answer(&q1, &[300, 200, 250], true), 0, 86400).unwrap();
        let cache = Cache::new(64);
        let q2 = query(77, "WwW.ExAmple", rtype::A, Some((1232, true)));
        let q = parse_query(&q2).unwrap();
        let mut kb = [0u8; MAX_KEY_LEN];
        let k = key(&q, 0, &mut kb);
        let other = query(78, "www.example", rtype::AAAA, None);
        let mut ok = [0u8; MAX_KEY_LEN];
        let ok_len = key(&parse_query(&other).unwrap(), 0, &mut ok);
        cache.insert(&kb[..k], cache.hash(&kb[..k]), &s, 0, 0);
        let mut hit = Vec::new();
        assert!(cache.answer(&kb[..k], cache.hash(&kb[..k]), &q, &mut hit));
        assert!(!cache.answer(&ok[..ok_len], cache.hash(&ok[..ok_len]), &q, &mut Vec::new()));
        // The one-second clock may tick between insert and hit.
        let expect = |elapsed| {
            let mut out = Vec::new();
            s.write_answer(&q, elapsed, &mut out);
            out
        };
        assert!(hit == expect(0) || hit == expect(1), "{hit:?}");
    }

    #[test]
    fn stored_answer_patches_id_case_ttl_and_opt() {
        let q1 = query(1, "www.example", rtype::A, Some((1232, false)));
        let s = Stored::from_response(&upstream_answer(&q1, &[300, 200], true), 0, 86400).unwrap();
        assert_eq!(s.cache_ttl, Some(200));
        let q2 = query(77, "WwW.ExAmple", rtype::A, None);
        let q = parse_query(&q2).unwrap();
        let mut out = Vec::new();
        s.write_answer(&q, 50, &mut out);
        let p = Packet::parse(&out).unwrap();
        assert_eq!(p.id(), 77);
        assert_eq!(p.questions[0].qname.to_string(), "WwW.ExAmple");
        assert_eq!(p.answers.iter().map(|a| a.ttl).collect::<Vec<_>>(), [250, 150]);
        assert!(p.opt().is_none(), "client without EDNS gets no OPT");
        let q3 = query(78, "www.example", rtype::A, Some((1232, true)));
        let q = parse_query(&q3).unwrap();
        s.write_answer(&q, 0, &mut out);
        let p = Packet::parse(&out).unwrap();
        assert_eq!(p.opt().map(|o| o.udp_packet_size), Some(1232));
        assert_eq!(p.additional_records.len(), 0);
    }

    /// An OPT in the answer section (ARCOUNT 0) is no answer to store: once
    /// it was cut as the additional section's last record, ARCOUNT 0 - 1.
    #[test]
    fn an_opt_outside_the_additional_section_is_refused() {
        let msg = query(1, "www.example", rtype::A, None);
        let mut r = upstream_answer(&msg, &[60], true);
        assert!(Stored::from_response(&r, 0, 86400).is_some(), "OPT as the one additional record");
        header::set_counts(&mut r, [1, 2, 0, 0]);
        assert_eq!(Stored::from_response(&r, 0, 86400), None, "OPT as the answer's last record");
        header::set_counts(&mut r, [1, 1, 1, 0]);
        assert_eq!(Stored::from_response(&r, 0, 86400), None, "OPT in the authority section");
    }

    #[test]
    fn ttl_clamps_and_negative_ttls() {
        let q = query(1, "x.example", rtype::A, None);
        let s = Stored::from_response(&upstream_answer(&q, &[5], false), 30, 60).unwrap();
        assert_eq!(s.cache_ttl, Some(30));
        let s = Stored::from_response(&upstream_answer(&q, &[500], false), 30, 60).unwrap();
        assert_eq!(s.cache_ttl, Some(60));
        let s = Stored::from_response(&upstream_answer(&q, &[0], false), 0, 60).unwrap();
        assert_eq!(s.cache_ttl, None, "TTL 0 is not cached");
        let s = Stored::from_response(&negative(&q, RCODE::NameError, 900, 120), 0, 86400).unwrap();
        assert_eq!(s.cache_ttl, Some(120));
        let s = Stored::from_response(&negative(&q, RCODE::NoError, 100, 120), 0, 86400).unwrap();
        assert_eq!(s.cache_ttl, Some(100), "NODATA cached from the SOA");
        let s = Stored::from_response(&negative(&q, RCODE::NameError, 99999, 99999), 0, 86400).unwrap();
        assert_eq!(s.cache_ttl, Some(MAX_NEGATIVE_TTL));
        let s = Stored::from_response(&negative(&q, RCODE::ServerFailure, 900, 120), 0, 86400).unwrap();
        assert_eq!(s.cache_ttl, None, "SERVFAIL is never cached");
        let mut nosoa = upstream_answer(&q, &[], false);
        nosoa[3] |= 3;
        assert_eq!(Stored::from_response(&nosoa, 0, 86400).unwrap().cache_ttl, None);
    }

    fn put(cache: &Cache, name: &str, ttl: u32) -> Vec<u8> {
        let m = query(1, name, rtype::A, None);
        let q = parse_query(&m).unwrap();
        let mut kb = [0u8; MAX_KEY_LEN];
        let k = key(&q, 0, &mut kb);
        let s = Stored::from_response(&upstream_answer(&m, &[ttl], false), 0, 86400).unwrap();
        cache.insert(&kb[..k], cache.hash(&kb[..k]), &s, 0, 0);
        m
    }

    fn hit(cache: &Cache, m: &[u8]) -> bool {
        let q = parse_query(m).unwrap();
        let mut kb = [0u8; MAX_KEY_LEN];
        let k = key(&q, 0, &mut kb);
        cache.answer(&kb[..k], cache.hash(&kb[..k]), &q, &mut Vec::new())
    }

    #[test]
    fn a_matching_tag_with_another_key_is_no_hit() {
        // The tag only narrows the set: the key decides. Asking for one name
        // with another's hash finds that name's slot and tag, not its answer.
        let cache = Cache::new(64);
        let a = put(&cache, "a.example", 300);
        let b = query(1, "b.example", rtype::A, None);
        let (qa, qb) = (parse_query(&a).unwrap(), parse_query(&b).unwrap());
        let (mut ka, mut kb) = ([0u8; MAX_KEY_LEN], [0u8; MAX_KEY_LEN]);
        let (la, lb) = (key(&qa, 0, &mut ka), key(&qb, 0, &mut kb));
        let ha = cache.hash(&ka[..la]);
        assert!(cache.answer(&ka[..la], ha, &qa, &mut Vec::new()));
        assert!(!cache.answer(&kb[..lb], ha, &qb, &mut Vec::new()));
    }

    #[test]
    fn never_grows_past_capacity() {
        let cache = Cache::new(64);
        assert_eq!(cache.capacity(), 64);
        for i in 0..10_000 {
            put(&cache, &format!("n{i}.example"), 300);
        }
        assert!(cache.len() <= 64);
        assert!(cache.len() >= 32, "most slots used: {}", cache.len());
        let m = put(&cache, "fresh.example", 300);
        assert!(hit(&cache, &m));
        let other_type = query(1, "fresh.example", rtype::AAAA, None);
        assert!(!hit(&cache, &other_type));
        let do_bit = query(1, "fresh.example", rtype::A, Some((1232, true)));
        assert!(!hit(&cache, &do_bit), "DO answers are kept apart");
    }

    #[test]
    fn zero_capacity_and_lru_within_a_set() {
        let off = Cache::new(0);
        let m = put(&off, "a.example", 300);
        assert!(!hit(&off, &m));
        // One set of four: the fifth insert evicts the least recently used.
        let c = Cache::new(4);
        let names: Vec<Vec<u8>> = (0..4).map(|i| put(&c, &format!("s{i}.example"), 300)).collect();
        assert!(names.iter().all(|m| hit(&c, m)));
        put(&c, "s4.example", 300);
        assert_eq!(c.len(), 4);
        assert_eq!(names.iter().filter(|m| hit(&c, m)).count(), 3);
    }

    #[test]
    fn an_expired_entry_goes_before_the_least_recently_used() {
        let mut c = Cache::new(4);
        let back = |c: &mut Cache, secs| c.epoch = c.epoch.checked_sub(Duration::from_secs(secs)).unwrap();
        let live: Vec<Vec<u8>> = (1..4).map(|i| put(&c, &format!("s{i}.example"), 300)).collect();
        back(&mut c, 2);
        let short = put(&c, "s0.example", 1);
        assert!(hit(&c, &short), "the most recently used");
        back(&mut c, 5);
        assert!(!hit(&c, &short), "expired");
        let newest = put(&c, "s4.example", 300);
        assert!(hit(&c, &newest));
        assert!(live.iter().all(|m| hit(&c, m)), "the expired slot was taken, no live one");
    }

    #[test]
    fn names_asked_once_do_not_evict_names_in_use() {
        // One set of sixteen: eight names in use, then a flood of names asked
        // once, as fast as a test runs (within one or two clock seconds).
        let c = Cache::new(16);
        let hot: Vec<Vec<u8>> = (0..8).map(|i| put(&c, &format!("hot{i}.example"), 300)).collect();
        for i in 0..400 {
            if i % 4 == 0 {
                assert!(hot.iter().all(|m| hit(&c, m)), "a name in use was evicted after {i} one-off names");
            }
            put(&c, &format!("once{i}.example"), 300);
        }
        let last = put(&c, "last.example", 300);
        assert!(hit(&c, &last), "the newest one-off name has a slot");
    }

    #[test]
    fn half_full_cache_keeps_nearly_every_name() {
        // Set conflicts are the only way a name is lost here; 4 ways lost ~180.
        let c = Cache::new(10_000);
        let names: Vec<Vec<u8>> = (0..5000).map(|i| put(&c, &format!("n{i}.example"), 300)).collect();
        let kept = names.iter().filter(|m| hit(&c, m)).count();
        assert!(kept >= 4975, "kept {kept} of 5000");
    }
}
