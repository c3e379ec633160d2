//! Validated zone keys, and zones proven insecure, kept per upstream set
//! for their TTL so that a chain is fetched once, not once per answer.
//!
//! Bounded: at most [`MAX_ZONES`] entries; a full cache first drops what
//! has expired, then refuses the new entry (counted in
//! [`KeyCache::dropped`]): the chain is fetched again next time, which
//! costs queries but never a wrong verdict. Entries made while the clock
//! was not known good live at most [`UNDATED_TTL`] seconds, so their
//! dates are checked soon after the clock is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::name;
use super::verdict::Insecure;
use super::verify::ZoneKeys;

/// Zones kept per set: a home network's answers come from a few hundred
/// zones; one entry is a zone's keys (a few hundred bytes each).
pub const MAX_ZONES: usize = 1024;
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
}

/// Lowercase zone name → what is known and the Unix second it expires.
type Zones = HashMap<Box<[u8]>, (Known, u64)>;

/// One set's zones.
#[derive(Debug, Default)]
pub struct KeyCache {
    zones: Mutex<Zones>,
    /// Entries refused because the cache was full of live ones.
    pub dropped: AtomicU64,
}

impl KeyCache {
    pub fn new() -> KeyCache {
        KeyCache::default()
    }

    /// What is known of `zone` exactly, at Unix second `now`.
    pub fn get(&self, zone: &[u8], now: u64) -> Option<Known> {
        let mut lower = Vec::with_capacity(zone.len());
        name::push_lower(&mut lower, zone);
        let zones = self.zones.lock().ok()?;
        zones.get(&lower[..]).filter(|(_, exp)| *exp > now).map(|(k, _)| k.clone())
    }

    /// The deepest entry at or above `name` that is still live: where a
    /// walk down to `name` may start.
    pub fn closest(&self, name: &[u8], now: u64) -> Option<Known> {
        let mut lower = Vec::with_capacity(name.len());
        name::push_lower(&mut lower, name);
        let zones = self.zones.lock().ok()?;
        let mut at: &[u8] = &lower;
        loop {
            if let Some((k, exp)) = zones.get(at)
                && *exp > now
            {
                return Some(k.clone());
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
        let Ok(mut zones) = self.zones.lock() else { return };
        if zones.len() >= MAX_ZONES && !zones.contains_key(&lower[..]) {
            zones.retain(|_, (_, exp)| *exp > now);
            if zones.len() >= MAX_ZONES {
                self.dropped.fetch_add(1, Relaxed);
                return;
            }
        }
        zones.insert(lower.into_boxed_slice(), (known, now + u64::from(ttl)));
    }

    /// Entries held (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.zones.lock().map_or(0, |z| z.len())
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
        assert!(c.dropped.load(Relaxed) > 0);
    }
}
