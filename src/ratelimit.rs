//! Per-client rate limit: a token bucket per client in a fixed table.
//!
//! The table has [`SLOTS`] slots whatever happens, so a flood from spoofed
//! source addresses cannot grow it; a client whose slot another one took
//! starts again with a full bucket (the limiter fails open, never against a
//! real client for someone else's traffic). Each slot is one `AtomicU64`
//! updated by compare-and-swap, so workers share the table without a lock.
//! IPv6 clients are limited per /64 (one host can use a whole /64).
//! A query whose own source is 127.0.0.1 or ::1 is never limited (in
//! `dnsmasq_mode upstream` every query comes from dnsmasq on 127.0.0.1),
//! unless a forwarder named its client: then it is that client's, even when
//! the name is 127.0.0.1 (the router asking through dnsmasq, or a LAN
//! device claiming to be it).

use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use rustc_hash::FxBuildHasher;

/// Buckets kept: 64 KiB, enough for every client of a home or office LAN
/// many times over.
pub const SLOTS: usize = 8192;
/// Token fractions per token (4 bits), so slow rates refill smoothly.
const UNIT: u64 = 16;
const TAG_BITS: u32 = 20;
const TOKEN_BITS: u32 = 16;
const TIME_BITS: u32 = 28;
const TOKEN_MASK: u64 = (1 << TOKEN_BITS) - 1;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;
/// Largest burst the packed slot holds.
pub const MAX_BURST: u32 = (TOKEN_MASK / UNIT) as u32;

/// The shared limiter of one configuration.
#[derive(Debug)]
pub struct RateLimiter {
    slots: Box<[AtomicU64]>,
    /// Tokens per second.
    rate: u64,
    /// Bucket size in tokens.
    burst: u64,
    epoch: Instant,
    seed: u64,
}

/// A random seed for [`client_hash`], so nobody can pick an address that
/// shares a slot with a victim's.
pub fn random_seed() -> u64 {
    let mut seed = [0u8; 8];
    // A fixed seed only makes slot collisions predictable; not fatal.
    let _ = rustix::rand::getrandom(&mut seed, rustix::rand::GetRandomFlags::empty());
    u64::from_ne_bytes(seed)
}

/// Hash of who a packet from `source` is for per-client limits: the
/// address, or its /64 for IPv6. `None` for 127.0.0.1 and ::1, which are
/// never limited.
pub fn client_hash(seed: u64, source: IpAddr) -> Option<u64> {
    match source.to_canonical() {
        IpAddr::V4(a) if a == Ipv4Addr::LOCALHOST => None,
        IpAddr::V6(a) if a.is_loopback() => None,
        _ => Some(named_hash(seed, source)),
    }
}

/// [`client_hash`] of a client a forwarder named, loopback included.
fn named_hash(seed: u64, client: IpAddr) -> u64 {
    let mut h = FxBuildHasher.build_hasher();
    h.write_u64(seed);
    match client.to_canonical() {
        IpAddr::V4(a) => h.write_u32(u32::from(a)),
        IpAddr::V6(a) => h.write_u64((u128::from(a) >> 64) as u64),
    }
    h.finish()
}

impl RateLimiter {
    /// A limiter of `rate` queries per second per client with bursts of
    /// `burst` (clamped to 1..=[`MAX_BURST`]).
    pub fn new(rate: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            rate: u64::from(rate.max(1)),
            burst: u64::from(burst.clamp(1, MAX_BURST)),
            epoch: Instant::now(),
            seed: random_seed(),
        }
    }

    /// Takes one token for `client`; false when its bucket is empty.
    /// `named`: a forwarder named `client` (so loopback is not exempt);
    /// otherwise it is the packet's source.
    pub fn allow(&self, client: IpAddr, named: bool) -> bool {
        let now = (self.epoch.elapsed().as_millis() as u64) & TIME_MASK;
        self.allow_at(client, named, now)
    }

    fn allow_at(&self, client: IpAddr, named: bool, now: u64) -> bool {
        let hash = if named { Some(named_hash(self.seed, client)) } else { client_hash(self.seed, client) };
        let Some(hash) = hash else { return true };
        let slot = &self.slots[(hash as usize) % SLOTS];
        // Tag 0 marks an empty slot, so a client's tag is never 0.
        let tag = ((hash >> 40) & ((1 << TAG_BITS) - 1)).max(1);
        let full = self.burst * UNIT;
        let mut old = slot.load(Relaxed);
        loop {
            let (old_tag, tokens, at) =
                (old >> (TOKEN_BITS + TIME_BITS), (old >> TIME_BITS) & TOKEN_MASK, old & TIME_MASK);
            let (mut tokens, mut at) = if old_tag == tag { (tokens, at) } else { (full, now) };
            let elapsed = now.wrapping_sub(at) & TIME_MASK;
            let refill = elapsed.saturating_mul(self.rate * UNIT) / 1000;
            if refill > 0 {
                // Only whole fractions are added; keep the rest of the time for later.
                tokens = (tokens + refill).min(full);
                at = now;
            }
            let allowed = tokens >= UNIT;
            if allowed {
                tokens -= UNIT;
            }
            let new = (tag << (TOKEN_BITS + TIME_BITS)) | (tokens << TIME_BITS) | at;
            match slot.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                Ok(_) => return allowed,
                Err(current) => old = current,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn burst_then_rate() {
        let l = RateLimiter::new(10, 5);
        let c = ip("192.168.1.7");
        assert_eq!((0..8).filter(|_| l.allow_at(c, false, 1000)).count(), 5, "the burst");
        assert!(!l.allow_at(c, false, 1050), "half a token after 50 ms");
        assert!(l.allow_at(c, false, 1100), "one token after 100 ms");
        assert!(!l.allow_at(c, false, 1100));
        // Queries every 20 ms refill 0.2 tokens each: one in five passes.
        let passed = (1..=50).filter(|i| l.allow_at(c, false, 1100 + i * 20)).count();
        assert!((9..=11).contains(&passed), "{passed}");
        assert_eq!((0..20).filter(|_| l.allow_at(c, false, 100_000)).count(), 5, "refilled to the burst, no more");
    }

    #[test]
    fn clients_are_apart_and_loopback_is_free() {
        let l = RateLimiter::new(1, 1);
        assert!(l.allow_at(ip("10.0.0.1"), false, 0));
        assert!(!l.allow_at(ip("10.0.0.1"), false, 0));
        assert!(l.allow_at(ip("10.0.0.2"), false, 0), "another client has its own bucket");
        assert!((0..100).all(|_| l.allow_at(ip("127.0.0.1"), false, 0)));
        assert!((0..100).all(|_| l.allow_at(ip("::1"), false, 0)));
        assert!(
            l.allow_at(ip("127.0.0.2"), false, 0) && !l.allow_at(ip("127.0.0.2"), false, 0),
            "only dnsmasq's address is free"
        );
        // Named by a forwarder, loopback is a client like any other.
        assert!(l.allow_at(ip("127.0.0.1"), true, 0) && !l.allow_at(ip("127.0.0.1"), true, 0));
        assert!(l.allow_at(ip("::1"), true, 0) && !l.allow_at(ip("::1"), true, 0));
        assert!(!l.allow_at(ip("::ffff:127.0.0.1"), true, 0), "the mapped form is the same client");
        assert!(l.allow_at(ip("127.0.0.1"), false, 0), "the forwarder's own query stays free");
        assert!(!l.allow_at(ip("10.0.0.1"), true, 0), "named or not, one address is one bucket");
        // One /64 is one client.
        assert!(l.allow_at(ip("2001:db8::1"), false, 0));
        assert!(!l.allow_at(ip("2001:db8::2"), false, 0));
        assert!(l.allow_at(ip("2001:db8:0:1::1"), false, 0));
    }

    #[test]
    fn a_flood_of_sources_stays_in_the_table() {
        let l = RateLimiter::new(1, 1);
        for i in 0..200_000u32 {
            l.allow_at(IpAddr::from((0x0a00_0000 | i).to_be_bytes()), false, 0);
        }
        assert_eq!(l.slots.len(), SLOTS);
        assert_eq!(std::mem::size_of_val(&*l.slots), SLOTS * 8);
    }
}
