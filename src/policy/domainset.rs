//! The compact sorted domain set behind blocklists and allowlists.
//!
//! Every name is stored once, labels reversed (`ads.example.com` →
//! `com␀example␀ads`), in one contiguous buffer sorted bytewise. Because the
//! separator sorts below every byte a name may hold, a name's subdomains sort
//! directly after it; the builder drops every entry already covered by a
//! parent, so no entry is a label-prefix of another. Then the only entry that
//! can cover a query is the greatest entry not above the query's own key: one
//! binary search answers "is this name or any parent listed?", with no
//! allocation and no walk over the query's parents.
//!
//! Layout: entries `[key len: u8][tag: u16 LE][key]` back to back, plus the
//! first 8 key bytes and offset of every 8th entry, side by side. Per name
//! that is its bytes + 4.6, against 40+ bytes for a `HashSet<String>`.

use std::cmp::Ordering;

use crate::domain::{SEP, for_each_label_rev, key_eq};

/// Entries per index block: the binary search touches one index slot per
/// step, then scans at most this many neighbouring entries in one or two
/// cache lines. 8 rather than 16: 200 fewer instructions a lookup
/// (callgrind, 100k list) for 0.75 more bytes a name (0.8 MiB at 1M names).
const BLOCK: usize = 8;
/// Prefixes per `top` slot.
const FANOUT: usize = 16;

/// One index slot: where a block starts and its first key's first 8 bytes.
///
/// The prefix and the offset share a slot (not two arrays) so that the
/// offset the search ends on is in the cache line it last compared: with
/// separate arrays, loading it was 13 % of a lookup's cycles, a cache miss of
/// its own (perf, cache hits with 100k names). Packed to 12 bytes, the size
/// of the two arrays it replaces.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, packed(4))]
struct Slot {
    /// First 8 key bytes, big-endian: the binary search compares these and
    /// touches `data` only on a tie.
    prefix: u64,
    /// Offset in `data` of the block's first entry.
    offset: u32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 12);

impl Slot {
    #[inline]
    fn prefix(&self) -> u64 {
        self.prefix
    }

    #[inline]
    fn offset(&self) -> usize {
        self.offset as usize
    }
}

/// Bytes in a cache line, and a stride in slots that lands on every line a
/// window of slots spans (12-byte slots, 8-byte loads: 52 bytes between loads).
const LINE: usize = 64;
const SLOTS_PER_LINE: usize = (LINE - std::mem::size_of::<u64>()) / std::mem::size_of::<Slot>() + 1;

/// Loads one value from each cache line the next steps will read, all at
/// once. The binary search over a window of slots and the walk along a block
/// each take one line after another, every address depending on the last
/// line's contents; when those lines are out of cache (1M names, a busy
/// host), a blocked name waited for three or four misses in a row. Loads
/// with no dependence between them go out together (the core has several
/// misses in flight), and the search then finds its lines arriving or
/// arrived. Portable where a prefetch instruction would need `unsafe` and one
/// per architecture.
#[inline]
fn touch(values: impl Iterator<Item = u64>) {
    std::hint::black_box(values.fold(0, |acc, v| acc ^ v));
}

/// An immutable, sorted, parent-collapsed set of domain names.
#[derive(Clone, Default)]
pub struct DomainSet {
    /// Entries `[len][tag lo][tag hi][key…]`, sorted by key.
    data: Box<[u8]>,
    /// One slot for every `BLOCK`-th entry.
    slots: Box<[Slot]>,
    /// Every `FANOUT`-th slot's prefix: small enough to stay in L1, it
    /// narrows the search in `slots` to a few cache lines.
    top: Box<[u64]>,
    /// Number of entries.
    len: usize,
}

impl std::fmt::Debug for DomainSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DomainSet").field("len", &self.len).field("heap_bytes", &self.heap_bytes()).finish()
    }
}

/// The first 8 bytes of a key as a big-endian number, zero-padded: ordered like the keys.
///
/// No copy of a variable length: musl's `memcpy`, which that is a call to,
/// was 4 % of a list load's instructions from here alone (callgrind).
#[inline]
fn prefix(key: &[u8]) -> u64 {
    if let Some(w) = key.first_chunk::<8>() {
        return u64::from_be_bytes(*w);
    }
    let v = key.iter().fold(0u64, |v, &b| v << 8 | u64::from(b));
    // Fewer than 8 bytes: shift them to the top, zeros below (an empty key is 0).
    v.checked_shl(8 * (8 - key.len() as u32)).unwrap_or(0)
}

/// Compares keys as `a.cmp(b)` does, eight bytes at a time. Slice
/// comparison calls `memcmp`, which in the static musl build is a loop over
/// single bytes; neighbouring keys share long prefixes (`com␀example␀…`),
/// and the byte loop was 20 % of a cache hit's instructions (callgrind).
#[inline]
pub fn key_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (&a[..n], &b[..n]);
    while let (Some((wx, rx)), Some((wy, ry))) = (x.split_first_chunk::<8>(), y.split_first_chunk::<8>()) {
        if wx != wy {
            return u64::from_be_bytes(*wx).cmp(&u64::from_be_bytes(*wy));
        }
        (x, y) = (rx, ry);
    }
    for (p, q) in x.iter().zip(y) {
        if p != q {
            return p.cmp(q);
        }
    }
    a.len().cmp(&b.len())
}

/// The entry that covers a looked-up name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match<'a> {
    /// The entry's key (reversed labels); see [`key_to_name`].
    pub key: &'a [u8],
    /// The tag given at insertion (the source list).
    pub tag: u16,
}

impl DomainSet {
    /// Number of names after collapsing.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes held by the set.
    pub fn heap_bytes(&self) -> usize {
        self.data.len() + self.slots.len() * std::mem::size_of::<Slot>() + self.top.len() * std::mem::size_of::<u64>()
    }

    /// The entry equal to `key` or to one of its parents, if any.
    /// `key` is a reversed-label key as made by [`crate::wire::reversed_key`].
    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<Match<'_>> {
        let kp = prefix(key);
        let t = self.top.partition_point(|&p| p < kp);
        let start = t.saturating_sub(1) * FANOUT;
        let end = (t * FANOUT).min(self.slots.len());
        let window = &self.slots[start..end.max(start)];
        touch(window.iter().step_by(SLOTS_PER_LINE).map(Slot::prefix));
        let block = start + window.partition_point(|s| s.prefix() < kp);
        // Blocks from `block` on whose prefix ties with the key need the full comparison.
        let block = block
            + self.slots[block..]
                .iter()
                .take_while(|s| {
                    s.prefix() == kp
                        && entries(self.data.get(s.offset()..).unwrap_or_default())
                            .next()
                            .is_some_and(|(k, _)| key_cmp(k, key).is_le())
                })
                .count();
        if block == 0 {
            return None;
        }
        let pos = self.slots[block - 1].offset();
        let end = self.slots.get(block).map_or(self.data.len(), Slot::offset);
        let bytes = self.data.get(pos..end).unwrap_or_default();
        touch(bytes.iter().step_by(LINE).map(|&b| u64::from(b)));
        let mut best = None;
        for (k, tag) in entries(bytes) {
            if key_cmp(k, key).is_gt() {
                break;
            }
            best = Some(Match { key: k, tag });
        }
        best.filter(|m| covers(m.key, key))
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = Match<'_>> {
        entries(&self.data).map(|(key, tag)| Match { key, tag })
    }
}

/// Is `parent` equal to `key` or a whole-label prefix of it?
#[inline]
pub fn covers(parent: &[u8], key: &[u8]) -> bool {
    key.get(..parent.len()).is_some_and(|head| key_eq(head, parent))
        && (key.len() == parent.len() || key[parent.len()] == SEP)
}

/// Turns a key back into a dotted name.
pub fn key_to_name(key: &[u8]) -> String {
    let labels: Vec<String> = key.split(|&b| b == SEP).rev().map(|l| String::from_utf8_lossy(l).into_owned()).collect();
    labels.join(".")
}

/// The key of a dotted name, or `None` if it is not a valid domain name.
pub fn name_key(name: &str) -> Option<Vec<u8>> {
    let mut key = Vec::with_capacity(name.len());
    push_key(&mut key, name)?;
    Some(key)
}

/// Names collected before the bucket boundaries are chosen from them.
const SAMPLE: usize = 1 << 16;
/// Buckets a large build is split into. Each bucket is sorted, packed and
/// freed in turn, so the build needs about one bucket beyond the finished
/// set instead of a second copy of it.
const BUCKETS: usize = 64;

/// Collects names, then sorts and packs them into a [`DomainSet`].
///
/// Names are stored as finished records (`[len][tag][key]`) in buckets that
/// cover consecutive key ranges (boundaries taken from the first
/// [`SAMPLE`] names). [`SetBuilder::build`] sorts one bucket at a time,
/// appends it to the set and frees it, so peak memory is the records once
/// plus one bucket's sort index.
#[derive(Debug, Default)]
pub struct SetBuilder {
    /// Records per bucket, unsorted within a bucket; buckets in key order.
    buckets: Vec<Vec<u8>>,
    /// Records in each bucket, so its sort index is allocated once.
    counts: Vec<usize>,
    /// Lowest key of every bucket but the first, once chosen.
    bounds: Vec<Box<[u8]>>,
    /// `prefix` of each bound: most names find their bucket on these alone.
    bound_prefixes: Vec<u64>,
    /// Names inserted.
    count: usize,
    /// Keys of names whose exact entry is to be dropped (`$badfilter`).
    cancelled: Vec<Box<[u8]>>,
    /// Bytes of list text expected in all (see [`SetBuilder::expect`]).
    expected: usize,
}

/// Walks entries `[len][tag lo][tag hi][key…]` laid end to end, in a set's
/// data or a builder's bucket: (key, tag); it stops at an entry cut short.
/// Each field comes off the front of a shrinking slice, one length check
/// apiece, where indexing the buffer at offsets checked every byte against
/// the whole of it: `DomainSet::lookup` 647 → 581 instructions a blocked name
/// (`bench/instructions.py --by-function --scenarios blocked`).
#[inline]
fn entries(buf: &[u8]) -> impl Iterator<Item = (&[u8], u16)> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let (&len, tail) = rest.split_first()?;
        let (tag, tail) = tail.split_first_chunk::<2>()?;
        let (key, tail) = tail.split_at_checked(len as usize)?;
        rest = tail;
        Some((key, u16::from_le_bytes(*tag)))
    })
}

/// [`entries`] with where each record starts, for a builder's sort index:
/// (offset, key, tag).
fn records(buf: &[u8]) -> impl Iterator<Item = (usize, &[u8], u16)> {
    let mut at = 0;
    entries(buf).map(move |(key, tag)| {
        let rec = at;
        at += 3 + key.len();
        (rec, key, tag)
    })
}

impl SetBuilder {
    /// An empty builder.
    pub fn new() -> SetBuilder {
        SetBuilder { buckets: vec![Vec::new()], counts: vec![0], ..SetBuilder::default() }
    }

    /// Announces about how many bytes of list text will be inserted, so the
    /// buckets are reserved once instead of growing by copies. A record is
    /// no longer than its line, and each bucket gets twice its share:
    /// reserved pages that are never written cost address space, not memory.
    pub fn expect(&mut self, bytes: usize) {
        self.expected = self.expected.saturating_add(bytes);
    }

    /// Names inserted so far (before de-duplication).
    pub fn inserted(&self) -> usize {
        self.count
    }

    /// Adds `name` (and, implicitly, everything under it) with `tag`. Returns
    /// false, adding nothing, when the name is not a valid domain name.
    pub fn insert(&mut self, name: &str, tag: u16) -> bool {
        let mut rec = [0u8; 3 + 256];
        let Some(len) = write_key(name, &mut rec[3..]) else { return false };
        self.push_record(&mut rec, len, tag);
        true
    }

    /// [`SetBuilder::insert`] of an entry already in key form, such as
    /// another set's ([`Match::key`]): no round trip through its name.
    pub fn insert_key(&mut self, key: &[u8], tag: u16) {
        let mut rec = [0u8; 3 + 256];
        let len = key.len().min(256);
        rec[3..3 + len].copy_from_slice(&key[..len]);
        self.push_record(&mut rec, len, tag);
    }

    /// Files record `rec` (`[len][tag][key]`, the key of `len` bytes already at 3..).
    fn push_record(&mut self, rec: &mut [u8; 3 + 256], len: usize, tag: u16) {
        if self.buckets.is_empty() {
            self.buckets.push(Vec::new());
            self.counts.push(0);
        }
        rec[0] = len as u8;
        rec[1..3].copy_from_slice(&tag.to_le_bytes());
        let k = &rec[3..3 + len];
        let b = self.bucket_of(k);
        self.counts[b] += 1;
        let bucket = &mut self.buckets[b];
        // Most records fit 32 bytes: copying a constant 32 and cutting back
        // is two vector moves, where the exact length was a `memcpy` call
        // (musl's is a byte loop: 5 % of a 1M load's instructions).
        if len + 3 <= 32 {
            let at = bucket.len();
            bucket.extend_from_slice(&rec[..32]);
            bucket.truncate(at + 3 + len);
        } else {
            bucket.extend_from_slice(&rec[..3 + len]);
        }
        self.count += 1;
        if self.count == SAMPLE && self.bounds.is_empty() {
            self.split();
        }
    }

    /// Chooses bucket boundaries from the names so far and spreads them out.
    fn split(&mut self) {
        let first = std::mem::take(&mut self.buckets[0]);
        // Every 8th name places 64 bounds well enough (each bucket's share
        // is off by a tenth or so), at an eighth of the sort; `key_cmp`,
        // not `memcmp`, which sorting all of them made 15 % of a 100k load.
        let mut keys: Vec<&[u8]> = records(&first).step_by(8).map(|(_, k, _)| k).collect();
        keys.sort_unstable_by(|a, b| key_cmp(a, b));
        keys.dedup();
        let mut bounds: Vec<Box<[u8]>> = (1..BUCKETS).map(|i| Box::from(keys[i * keys.len() / BUCKETS])).collect();
        bounds.dedup();
        self.bound_prefixes = bounds.iter().map(|b| prefix(b)).collect();
        self.bounds = bounds;
        let share = self.expected / (self.bounds.len() + 1) * 2;
        self.buckets = (0..=self.bounds.len()).map(|_| Vec::with_capacity(share)).collect();
        self.counts = vec![0; self.buckets.len()];
        for (rec, k, _) in records(&first) {
            let b = self.bucket_of(k);
            self.buckets[b].extend_from_slice(&first[rec..rec + 3 + k.len()]);
            self.counts[b] += 1;
        }
    }

    /// The bucket whose range holds `k`: the number of bounds ≤ `k`. Keys
    /// compare as their prefixes do unless the prefixes are equal, so only a
    /// tie needs the whole bound.
    fn bucket_of(&self, k: &[u8]) -> usize {
        let p = prefix(k);
        let mut b = self.bound_prefixes.partition_point(|&lo| lo < p);
        while b < self.bounds.len() && self.bound_prefixes[b] == p && *self.bounds[b] <= *k {
            b += 1;
        }
        b
    }

    /// Drops the entry for exactly `name` from the built set, wherever it came
    /// from; its subdomains listed on their own stay. Returns false for an invalid name.
    pub fn cancel(&mut self, name: &str) -> bool {
        let mut key = Vec::new();
        push_key(&mut key, name).is_some_and(|_| {
            self.cancelled.push(key.into_boxed_slice());
            true
        })
    }

    /// Sorts, removes duplicates and covered subdomains, and packs the set.
    pub fn build(mut self) -> DomainSet {
        self.cancelled.sort_unstable();
        let total: usize = self.buckets.iter().map(Vec::len).sum();
        // Reserved, not touched: pages count as memory only as they fill.
        let mut data = Vec::with_capacity(total);
        let mut slots = Vec::with_capacity(self.count / BLOCK + 1);
        // Where the last kept key lies in `data`.
        let mut last: Option<std::ops::Range<usize>> = None;
        let mut len = 0;
        for (b, bucket) in self.buckets.iter_mut().enumerate() {
            let buf = std::mem::take(bucket);
            let key_at = |off: u32| {
                let off = off as usize;
                &buf[off + 3..off + 3 + buf[off] as usize]
            };
            // Keys in a bucket share a common prefix; eight bytes past it
            // order most pairs without reaching into the records.
            let mut records_ = records(&buf);
            let first = records_.next().map_or(&[][..], |(_, k, _)| k);
            let common = records_
                .fold(first.len(), |n, (_, k, _)| n.min(k.iter().zip(first).take_while(|(a, b)| a == b).count()));
            let mut order: Vec<(u64, u32)> = Vec::with_capacity(self.counts.get(b).copied().unwrap_or(0));
            order.extend(records(&buf).map(|(off, k, _)| (prefix(&k[common..]), off as u32)));
            // Integers first, the keys only where eight bytes tie: a
            // comparator that reached into the records on every call made
            // the sort a third of a 1M load's instructions. Equal keys go
            // lowest tag first, so the first list to name a name is the one
            // a lookup reports.
            order.sort_unstable();
            let tag_at = |off: u32| u16::from_le_bytes([buf[off as usize + 1], buf[off as usize + 2]]);
            for run in order.chunk_by_mut(|a, b| a.0 == b.0).filter(|r| r.len() > 1) {
                run.sort_unstable_by(|a, b| {
                    key_cmp(key_at(a.1), key_at(b.1)).then_with(|| tag_at(a.1).cmp(&tag_at(b.1)))
                });
            }
            for (_, off) in order {
                let k = key_at(off);
                if last.clone().is_some_and(|r| covers(&data[r], k)) {
                    continue;
                }
                if !self.cancelled.is_empty() && self.cancelled.binary_search_by(|c| key_cmp(c, k)).is_ok() {
                    continue;
                }
                if len % BLOCK == 0 {
                    slots.push(Slot { prefix: prefix(k), offset: data.len() as u32 });
                }
                // A bucket's record is laid out as the set's entry is.
                // Copied 32 bytes and cut back when that fits the space
                // reserved, as in `insert`; never a reallocation of `data`.
                let (rec, n) = (off as usize, 3 + k.len());
                let at = data.len();
                match buf.get(rec..rec + 32) {
                    Some(wide) if n <= 32 && data.capacity() - at >= 32 => {
                        data.extend_from_slice(wide);
                        data.truncate(at + n);
                    }
                    _ => data.extend_from_slice(&buf[rec..rec + n]),
                }
                last = Some(data.len() - k.len()..data.len());
                len += 1;
            }
            // `buf` is freed here, before the next bucket is sorted.
        }
        DomainSet {
            data: data.into_boxed_slice(),
            top: slots.iter().step_by(FANOUT).map(Slot::prefix).collect(),
            slots: slots.into_boxed_slice(),
            len,
        }
    }
}

/// Writes the reversed-label key of `name` into `out` (at least 253 bytes)
/// and returns its length: what [`push_key`] appends, in one pass with no
/// copy in between, for the build's hot loop. `None` for an invalid name
/// (the rules of [`for_each_label_rev`]).
fn write_key(name: &str, out: &mut [u8]) -> Option<usize> {
    let name = name.strip_suffix('.').unwrap_or(name).as_bytes();
    if name.is_empty() || name.len() > 253 || name.len() > out.len() {
        return None;
    }
    let (mut end, mut pos) = (name.len(), 0);
    loop {
        let start = name[..end].iter().rposition(|&b| b == b'.').map_or(0, |i| i + 1);
        let label = &name[start..end];
        if label.is_empty() || label.len() > 63 || label[0] == b'-' || label[label.len() - 1] == b'-' {
            return None;
        }
        // Branch-free: the whole label, then one check.
        let mut ok = true;
        for (dst, &b) in out[pos..pos + label.len()].iter_mut().zip(label) {
            let v = KEY_BYTE[b as usize];
            ok &= v != 0;
            *dst = v;
        }
        if !ok {
            return None;
        }
        pos += label.len();
        if start == 0 {
            return Some(pos);
        }
        out[pos] = SEP;
        pos += 1;
        end = start - 1;
    }
}

/// What a name's byte becomes in a key: lowercased, or 0 where it may not appear.
const KEY_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            t[i] = b.to_ascii_lowercase();
        }
        i += 1;
    }
    t
};

/// Appends the reversed-label key of `name` to `out`; returns its length.
fn push_key(out: &mut Vec<u8>, name: &str) -> Option<usize> {
    let start = out.len();
    for_each_label_rev(name, |label| {
        if out.len() > start {
            out.push(SEP);
        }
        out.extend_from_slice(label);
    })?;
    Some(out.len() - start)
}

#[cfg(test)]
#[path = "../../bench/synth.rs"]
mod synth;

#[cfg(test)]
mod tests {
    use super::synth;
    use super::*;

    #[test]
    fn key_cmp_agrees_with_slice_order() {
        // Shared heads of 0, 7, 8, 9, 15 and 16 bytes put the first difference
        // on both sides of every 8-byte word boundary.
        let heads: [&[u8]; 6] =
            [b"", b"com\0exam", b"com\0examp", b"com\0exampl", b"com\0example\0ad", b"com\0example\0ads"];
        let mut keys = Vec::new();
        for head in heads {
            for len in 0..=3u32 {
                for n in 0..3usize.pow(len) {
                    let mut k = head.to_vec();
                    k.extend((0..len).map(|d| [0u8, b'a', b'z'][n / 3usize.pow(d) % 3]));
                    keys.push(k);
                }
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(key_cmp(a, b), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(key_eq(a, b), a == b, "{a:?} vs {b:?}");
                assert_eq!(covers(a, b), b.starts_with(a) && (b.len() == a.len() || b[a.len()] == SEP), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn key_eq_agrees_with_slice_equality() {
        let base: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        for len in 0..base.len() {
            let a = &base[..len];
            assert!(key_eq(a, a));
            for cut in 0..len {
                assert!(!key_eq(a, &base[..cut]), "{len} {cut}");
            }
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x20;
                assert_eq!(key_eq(a, &b), a == b.as_slice(), "{len} {at}");
            }
        }
    }

    #[test]
    fn write_key_agrees_with_push_key() {
        let names = [
            "example.com",
            "Ads.Example.COM.",
            "a",
            "x-y.z_w.org",
            "a..b",
            ".a",
            "a.",
            "-a.com",
            "a-.com",
            "a.b-",
            "é.com",
            "a b.com",
            "",
            ".",
            "1.2.3.4",
            &"a".repeat(63),
            &"a".repeat(64),
            &["abc"; 63].join("."),
            &["abcd"; 51].join("."),
        ];
        for name in names {
            let mut out = [0u8; 256];
            let mut want = Vec::new();
            let want = push_key(&mut want, name).map(|_| want);
            assert_eq!(write_key(name, &mut out).map(|n| out[..n].to_vec()), want, "{name:?}");
        }
    }
    use crate::wire::{MAX_NAME_LEN, reversed_key};

    fn wire(name: &str) -> Vec<u8> {
        let mut w = Vec::new();
        for l in name.split('.').filter(|l| !l.is_empty()) {
            w.push(l.len() as u8);
            w.extend_from_slice(l.as_bytes());
        }
        w.push(0);
        w
    }

    fn find(set: &DomainSet, name: &str) -> Option<(String, u16)> {
        let mut buf = [0u8; MAX_NAME_LEN];
        let n = reversed_key(&wire(name), &mut buf);
        set.lookup(&buf[..n]).map(|m| (key_to_name(m.key), m.tag))
    }

    fn set(names: &[(&str, u16)]) -> DomainSet {
        let mut b = SetBuilder::new();
        for (n, t) in names {
            assert!(b.insert(n, *t), "{n}");
        }
        b.build()
    }

    #[test]
    fn exact_parent_and_non_matches() {
        let s = set(&[("example.com", 1), ("ads.other.org", 2), ("x.y.z", 3)]);
        assert_eq!(find(&s, "example.com"), Some(("example.com".into(), 1)));
        assert_eq!(find(&s, "ADS.Example.COM"), Some(("example.com".into(), 1)));
        assert_eq!(find(&s, "a.b.c.example.com"), Some(("example.com".into(), 1)));
        assert_eq!(find(&s, "ads.other.org"), Some(("ads.other.org".into(), 2)));
        assert_eq!(find(&s, "deep.ads.other.org"), Some(("ads.other.org".into(), 2)));
        for miss in
            ["com", "other.org", "xads.other.org", "example.co", "example-x.com", "notexample.com", "y.z", "", "zzz"]
        {
            assert_eq!(find(&s, miss), None, "{miss}");
        }
    }

    #[test]
    fn collapses_children_and_duplicates() {
        let s = set(&[
            ("a.example.com", 5),
            ("example.com", 3),
            ("example.com", 1),
            ("b.example.com", 2),
            ("example-x.com", 4),
            ("z.example-x.com", 4),
        ]);
        assert_eq!(s.len(), 2);
        assert_eq!(find(&s, "a.example.com"), Some(("example.com".into(), 1)));
        assert_eq!(find(&s, "q.example-x.com"), Some(("example-x.com".into(), 4)));
    }

    #[test]
    fn neighbours_between_parent_and_query_do_not_hide_it() {
        // Entries sorting between "example.com" and "zz.example.com" must not stop the match.
        let mut names: Vec<(String, u16)> = vec![("example.com".into(), 0)];
        for i in 0..100 {
            names.push((format!("a{i}.example.co"), 1));
            names.push((format!("example{i}.com"), 1));
        }
        let refs: Vec<(&str, u16)> = names.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let s = set(&refs);
        assert_eq!(find(&s, "zz.example.com"), Some(("example.com".into(), 0)));
        assert_eq!(find(&s, "a5.example.co"), Some(("a5.example.co".into(), 1)));
        assert_eq!(find(&s, "example.co"), None);
        assert_eq!(find(&s, "x.example55.com"), Some(("example55.com".into(), 1)));
        assert_eq!(s.iter().count(), s.len());
    }

    #[test]
    fn badfilter_cancels_exact_entry_only() {
        let mut b = SetBuilder::new();
        b.insert("pl.ua", 0);
        b.insert("ads.pl.ua", 1);
        b.insert("other.example", 0);
        assert!(b.cancel("PL.ua"));
        let s = b.build();
        assert_eq!(find(&s, "shop.pl.ua"), None);
        assert_eq!(find(&s, "x.ads.pl.ua"), Some(("ads.pl.ua".into(), 1)));
        assert_eq!(find(&s, "other.example"), Some(("other.example".into(), 0)));
    }

    #[test]
    fn invalid_names_add_nothing() {
        let mut b = SetBuilder::new();
        assert!(!b.insert("bad name", 0));
        assert!(!b.insert("a..b", 0));
        assert!(b.insert("ok.example", 0));
        assert_eq!(b.inserted(), 1);
        assert_eq!(b.build().len(), 1);
        assert!(DomainSet::default().lookup(b"com").is_none());
    }

    /// Issue budget: at most ~1.3× the names' own bytes. docs/benchmarks.md's
    /// 1,000,000-name figure comes from `examples/blocklist-memory.rs`.
    #[test]
    fn costs_under_1_3_times_the_names() {
        let names = synth::names(200_000, 42);
        let name_bytes: usize = names.iter().map(String::len).sum();
        let mut b = SetBuilder::new();
        for n in &names {
            assert!(b.insert(n, 0));
        }
        let s = b.build();
        assert!(s.len() > 199_000);
        let ratio = s.heap_bytes() as f64 / name_bytes as f64;
        assert!(ratio <= 1.3, "{ratio}");
        for n in names.iter().step_by(97) {
            assert!(find(&s, &format!("sub.{n}")).is_some(), "{n}");
        }
    }

    /// Enough names to split into buckets, from a tiny alphabet so that
    /// parents, children and duplicates land in different buckets.
    #[test]
    fn bucketed_build_matches_a_naive_parent_walk() {
        let mut rng = synth::Rng::new(7);
        let labels = ["a", "b", "c", "ab", "a-b", "0"];
        let name = |rng: &mut synth::Rng| {
            let n = 1 + rng.below(5);
            (0..n).map(|_| labels[rng.below(labels.len() as u64) as usize]).collect::<Vec<_>>().join(".")
        };
        let listed: Vec<String> = (0..SAMPLE + 20_000).map(|_| name(&mut rng)).collect();
        let set_of: std::collections::HashSet<&str> = listed.iter().map(String::as_str).collect();
        let mut b = SetBuilder::new();
        for (i, n) in listed.iter().enumerate() {
            assert!(b.insert(n, (i % 3) as u16));
        }
        assert!(b.bounds.len() > 1, "the build was split into buckets");
        let s = b.build();
        let keys: Vec<&[u8]> = s.iter().map(|m| m.key).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1] && !covers(w[0], w[1])), "sorted, no entry covers the next");
        for _ in 0..5000 {
            let q = name(&mut rng);
            let parts: Vec<&str> = q.split('.').collect();
            let naive = (0..parts.len()).any(|i| set_of.contains(parts[i..].join(".").as_str()));
            assert_eq!(find(&s, &q).is_some(), naive, "{q}");
        }
    }

    #[test]
    fn a_set_rebuilt_from_its_keys_is_the_same_set() {
        let mut rng = synth::Rng::new(11);
        let mut b = SetBuilder::new();
        for i in 0..SAMPLE + 5_000 {
            let n = (0..3).map(|_| format!("n{}", rng.below(50))).collect::<Vec<_>>();
            b.insert(&n.join("."), (i % 5) as u16);
        }
        let s = b.build();
        let mut again = SetBuilder::new();
        for m in s.iter() {
            again.insert_key(m.key, m.tag);
        }
        let t = again.build();
        assert!(s.len() > 1000);
        assert!(s.iter().eq(t.iter()), "the same keys and tags in the same order");
    }

    #[test]
    fn matches_a_naive_parent_walk() {
        // Pseudo-random names over a small alphabet so parents and neighbours collide often.
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let labels = ["a", "b", "a-b", "ab", "b0", "_x"];
        let mut name = || {
            let n = 1 + next() % 4;
            (0..n).map(|_| labels[(next() % labels.len() as u64) as usize]).collect::<Vec<_>>().join(".")
        };
        let listed: Vec<String> = (0..300).map(|_| name()).collect();
        let refs: Vec<(&str, u16)> = listed.iter().map(|n| (n.as_str(), 0)).collect();
        let s = set(&refs);
        let naive = |q: &str| {
            let parts: Vec<&str> = q.split('.').collect();
            (0..parts.len()).any(|i| listed.contains(&parts[i..].join(".")))
        };
        for _ in 0..3000 {
            let q = name();
            assert_eq!(find(&s, &q).is_some(), naive(&q), "{q}");
        }
    }
}
