//! Validated zone keys, and zones proven insecure, kept per upstream set
//! for their TTL so that a chain is fetched once, not once per answer.
//!
//! Bounded twice: at most [`MAX_ZONES`] entries and [`MAX_BYTES`] of keys.
//! A full cache drops what has expired, then the entries used longest ago:
//! a household meets more than a thousand unsigned zones a day, and a
//! cache that refused new entries once full would send every later miss
//! up the chain again. A zone whose keys alone pass [`MAX_ENTRY_BYTES`]
//! (a hostile zone's DNSKEY set of hundreds of keys) is validated but not
//! kept (counted in [`KeyCache::refused`]). Entries made while the clock
//! was not known good live at most [`UNDATED_TTL`] seconds, so their
//! dates are checked soon after the clock is.
//!
//! It also knows which zones' keys a miss is fetching right now
//! ([`KeyCache::claim`]): a burst of names in one cold zone then fetches
//! its chain once, the other misses waiting for that fetch and reading
//! what it kept, instead of each asking the upstreams again (without it,
//! 50 names sent 150 DS and DNSKEY queries to a slow upstream). An entry
//! lives only while its [`Flight`] does, and a miss holds one at a time
//! and waits on none while it does, so there are never more entries than
//! misses, and no two misses wait on each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use smol::channel::{Receiver, Sender};

use super::name;
use super::verdict::Insecure;
use super::verify::ZoneKeys;

/// Zones kept per set: a home network's answers come from a few hundred
/// zones a day, signed or proven unsigned.
pub const MAX_ZONES: usize = 1024;
/// Bytes of zone names and keys kept per set: 1,024 zones of four
/// RSA-2048 keys each fit.
pub const MAX_BYTES: usize = 1 << 20;
/// Largest entry kept: 32 RSA-4096 keys. Real zones have two to four
/// keys, six in a roll-over.
pub const MAX_ENTRY_BYTES: usize = 16 * 1024;
/// Longest an entry lives, whatever its TTL says (a day, as Unbound's
/// `cache-max-ttl`), so a key roll-over is seen within a day.
pub const MAX_TTL: u32 = 86_400;
/// Longest an entry validated without a known-good clock lives: dates are
/// to be enforced within 10 s of the clock becoming good, and the next
/// miss after the entry ends is what notices the clock (half of that, so a
/// busy router's slow miss still lands inside it).
pub const UNDATED_TTL: u32 = 5;

/// What is known of a zone.
#[derive(Debug, Clone)]
pub enum Known {
    /// Its keys, validated from a trust anchor.
    Keys(Arc<ZoneKeys>),
    /// It, and everything below it, is insecure.
    Insecure(Insecure),
    /// Validating in it (named here) took half or more of one answer's
    /// work budget and then hit the limit: its answers are indeterminate
    /// until the entry ends, without doing that work again.
    OverLimit(Arc<[u8]>),
}

impl Known {
    /// About what an entry of `zone` holding this costs in memory.
    fn bytes(&self, zone: &[u8]) -> usize {
        let keys = match self {
            Known::Keys(k) => k.bytes(),
            Known::Insecure(_) => 0,
            Known::OverLimit(z) => z.len(),
        };
        64 + zone.len() + keys
    }
}

/// One zone's entry.
#[derive(Debug)]
struct Entry {
    known: Known,
    /// Unix second it expires.
    expires: u64,
    /// Unix second it was last found: the eviction order.
    used: u64,
    /// [`Known::bytes`], counted against [`MAX_BYTES`].
    bytes: usize,
}

#[derive(Debug, Default)]
struct Zones {
    /// Lowercase zone name → its entry.
    map: HashMap<Box<[u8]>, Entry>,
    /// Sum of the entries' bytes.
    bytes: usize,
}

impl Zones {
    fn remove(&mut self, zone: &[u8]) {
        if let Some(e) = self.map.remove(zone) {
            self.bytes -= e.bytes;
        }
    }

    /// Makes room for an entry of `bytes`: the expired go first, then the
    /// least recently used.
    fn make_room(&mut self, bytes: usize, now: u64) {
        let full = |z: &Zones| z.map.len() >= MAX_ZONES || z.bytes + bytes > MAX_BYTES;
        if !full(self) {
            return;
        }
        let before = self.map.len();
        self.map.retain(|_, e| e.expires > now);
        if self.map.len() != before {
            self.bytes = self.map.values().map(|e| e.bytes).sum();
        }
        while full(self) {
            let Some(oldest) = self.map.iter().min_by_key(|(_, e)| e.used).map(|(z, _)| z.clone()) else { return };
            self.remove(&oldest);
        }
    }
}

/// One set's zones.
#[derive(Debug, Default)]
pub struct KeyCache {
    zones: Mutex<Zones>,
    /// Entries not kept because they were larger than [`MAX_ENTRY_BYTES`].
    pub refused: AtomicU64,
    /// Lowercase zone name, and a channel closed when the miss fetching
    /// its keys (or proving it unsigned) is done with it, whatever came of
    /// it. A list, not a map: it holds one entry per miss at most, each
    /// looked at once per chain step that goes upstream anyway, and a
    /// second map type would cost the binary more than the scan costs.
    flights: Mutex<Vec<InFlight>>,
    /// Misses that waited for another's fetch instead of sending their own.
    pub coalesced: AtomicU64,
}

/// A zone whose keys a miss is fetching: its lowercase name, and the
/// channel its followers wait on.
type InFlight = (Box<[u8]>, Receiver<()>);

/// A miss's part in learning a zone's keys, from [`KeyCache::claim`].
#[derive(Debug)]
pub enum Claim<'a> {
    /// Nobody is fetching them: fetch them, and keep the flight until
    /// what was learnt is in the cache (or nothing will be).
    Lead(Flight<'a>),
    /// Another miss is fetching them: [`Wait::done`], then look in the
    /// cache again.
    Follow(Wait),
}

/// The right to fetch one zone's keys while others wait. Dropping it
/// (done, failed, or its miss cancelled by a timeout) wakes them.
#[derive(Debug)]
pub struct Flight<'a> {
    cache: &'a KeyCache,
    /// The lowercase zone name, its entry in `flights`.
    zone: Box<[u8]>,
    /// Never sent on: dropping it closes the channel the waiters wait on.
    _done: Sender<()>,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        // Out of the map before the sender closes: a waiter that wakes and
        // finds nothing kept may lead the next fetch.
        let mut flights = self.cache.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = flights.iter().position(|(z, _)| *z == self.zone) {
            flights.swap_remove(at);
        }
    }
}

/// Another miss's fetch of a zone's keys, to wait for.
#[derive(Debug)]
pub struct Wait(Receiver<()>);

impl Wait {
    /// Returns once that fetch is over (its [`Flight`] dropped).
    pub async fn done(self) {
        // Nothing is ever sent: recv ends with the channel closed.
        let _ = self.0.recv().await;
    }
}

impl KeyCache {
    pub fn new() -> KeyCache {
        KeyCache::default()
    }

    /// What is known of `zone` exactly, at Unix second `now`.
    pub fn get(&self, zone: &[u8], now: u64) -> Option<Known> {
        let mut lower = Vec::with_capacity(zone.len());
        name::push_lower(&mut lower, zone);
        let mut zones = self.zones.lock().ok()?;
        let e = zones.map.get_mut(&lower[..]).filter(|e| e.expires > now)?;
        e.used = now;
        Some(e.known.clone())
    }

    /// The deepest entry at or above `name` that is still live: where a
    /// walk down to `name` may start.
    pub fn closest(&self, name: &[u8], now: u64) -> Option<Known> {
        let mut lower = Vec::with_capacity(name.len());
        name::push_lower(&mut lower, name);
        let mut zones = self.zones.lock().ok()?;
        let mut at: &[u8] = &lower;
        loop {
            if let Some(e) = zones.map.get_mut(at)
                && e.expires > now
            {
                e.used = now;
                return Some(e.known.clone());
            }
            at = name::parent(at)?;
        }
    }

    /// Keeps `known` for `zone` for `ttl` seconds from `now` (capped at
    /// [`MAX_TTL`]); `dated`: the signatures' dates were checked.
    pub fn insert(&self, zone: &[u8], known: Known, ttl: u32, dated: bool, now: u64) {
        let ttl = ttl.min(MAX_TTL).min(if dated { u32::MAX } else { UNDATED_TTL });
        if ttl == 0 {
            return;
        }
        let mut lower = Vec::with_capacity(zone.len());
        name::push_lower(&mut lower, zone);
        let bytes = known.bytes(&lower);
        if bytes > MAX_ENTRY_BYTES {
            self.refused.fetch_add(1, Relaxed);
            return;
        }
        let Ok(mut zones) = self.zones.lock() else { return };
        zones.remove(&lower);
        zones.make_room(bytes, now);
        zones.bytes += bytes;
        let entry = Entry { known, expires: now + u64::from(ttl), used: now, bytes };
        zones.map.insert(lower.into_boxed_slice(), entry);
    }

    /// Claims the fetch of `zone`'s keys: the first miss to ask leads,
    /// the others follow until it is done. The caller looks in the cache
    /// after either (a leader's predecessor may have just finished).
    pub fn claim(&self, zone: &[u8]) -> Claim<'_> {
        let mut lower = Vec::with_capacity(zone.len());
        name::push_lower(&mut lower, zone);
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, rx)) = flights.iter().find(|(z, _)| z[..] == lower[..]) {
            self.coalesced.fetch_add(1, Relaxed);
            return Claim::Follow(Wait(rx.clone()));
        }
        let (tx, rx) = smol::channel::bounded(1);
        let zone = lower.into_boxed_slice();
        flights.push((zone.clone(), rx));
        Claim::Lead(Flight { cache: self, zone, _done: tx })
    }

    /// Zones whose keys are being fetched now.
    pub fn in_flight(&self) -> usize {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Entries held (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.zones.lock().map_or(0, |z| z.map.len())
    }

    /// Bytes the entries hold, by [`MAX_BYTES`]'s count.
    pub fn bytes(&self) -> usize {
        self.zones.lock().map_or(0, |z| z.bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bounded_expiring_and_found_from_below() {
        let c = KeyCache::new();
        c.insert(b"\x04Test\x00", Known::Insecure(Insecure::NoDs), 60, true, 1000);
        assert!(matches!(c.closest(b"\x03www\x04test\x00", 1000), Some(Known::Insecure(_))));
        assert!(c.get(b"\x04TEST\x00", 1059).is_some());
        assert!(c.get(b"\x04test\x00", 1060).is_none(), "expired");
        c.insert(b"\x01u\x00", Known::Insecure(Insecure::NoDs), 3600, false, 1000);
        assert!(c.get(b"\x01u\x00", 1010).is_none(), "undated entries live 10 s");
        for i in 0..MAX_ZONES + 5 {
            let n = format!("z{i}");
            let mut wire = vec![n.len() as u8];
            wire.extend_from_slice(n.as_bytes());
            wire.push(0);
            c.insert(&wire, Known::Insecure(Insecure::NoDs), 60, true, 2000);
        }
        assert_eq!(c.len(), MAX_ZONES);
        assert!(c.get(&[5, b'z', b'1', b'0', b'2', b'8', 0], 2000).is_some(), "the newest is kept");
    }

    #[test]
    fn one_miss_fetches_a_zone_and_the_others_wait_until_it_is_done_or_gone() {
        let c = KeyCache::new();
        let Claim::Lead(lead) = c.claim(b"\x04test\x00") else { panic!("the first leads") };
        let Claim::Follow(wait) = c.claim(b"\x04TEST\x00") else { panic!("the second waits") };
        assert!(matches!(c.claim(b"\x05other\x00"), Claim::Lead(_)), "another zone is its own");
        assert_eq!(c.in_flight(), 1, "the other zone's flight ended with its claim");
        c.insert(b"\x04test\x00", Known::Insecure(Insecure::NoDs), 60, true, 1000);
        drop(lead);
        smol::block_on(wait.done());
        assert_eq!(c.in_flight(), 0);
        assert!(c.get(b"\x04test\x00", 1000).is_some(), "the follower finds what the leader kept");
        assert_eq!(c.coalesced.load(Relaxed), 1);

        // A leader whose miss is cancelled (a timeout drops its future)
        // still wakes its followers.
        let leading = async {
            let Claim::Lead(_flight) = c.claim(b"\x04test\x00") else { panic!("the zone is free again") };
            smol::future::pending::<()>().await;
        };
        let followed = async {
            let Claim::Follow(wait) = c.claim(b"\x04test\x00") else { panic!("the leader holds it") };
            wait.done().await;
        };
        smol::block_on(async {
            let mut leading = Box::pin(leading);
            assert!(smol::future::poll_once(&mut leading).await.is_none(), "leading, and stuck");
            let mut followed = Box::pin(followed);
            assert!(smol::future::poll_once(&mut followed).await.is_none(), "waiting");
            drop(leading);
            followed.await;
        });
        assert_eq!(c.in_flight(), 0, "nothing is left behind");
    }

    #[test]
    fn a_full_cache_evicts_what_was_used_longest_ago_and_keeps_within_its_bytes() {
        let c = KeyCache::new();
        let zone = |i: usize| {
            let n = format!("z{i}");
            let mut wire = vec![n.len() as u8];
            wire.extend_from_slice(n.as_bytes());
            wire.push(0);
            wire
        };
        for i in 0..MAX_ZONES {
            c.insert(&zone(i), Known::Insecure(Insecure::NoDs), 3600, true, 1000 + i as u64);
        }
        // z0 is in use; z1 is not.
        assert!(c.get(&zone(0), 2100).is_some());
        c.insert(&zone(MAX_ZONES), Known::Insecure(Insecure::NoDs), 3600, true, 2100);
        assert_eq!(c.len(), MAX_ZONES);
        assert!(c.get(&zone(0), 2100).is_some(), "used lately: kept");
        assert!(c.get(&zone(1), 2100).is_none(), "used longest ago: evicted");
        assert!(c.get(&zone(2), 2100).is_some(), "one went, for one");
        assert!(c.bytes() <= MAX_BYTES);
    }
}
