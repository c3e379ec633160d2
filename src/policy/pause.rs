//! Blocking paused for a while (`hydradns pause 5m`): "this shop won't
//! load" without editing lists. Pi-hole's `pihole disable 5m` and
//! AdGuard's "disable protection for…" do the same.
//!
//! While paused, a name a list would block is answered as if no list had
//! it: forwarded or from the cache, logged with the outcome `paused` and the
//! list that would have blocked it, counted as `paused`. Local names and
//! rebind protection stay: they are not blocking. An answer cached while
//! paused is marked as passed by no list, so once the pause ends the next
//! hit looks at the lists again and the name is blocked at once.
//!
//! The end is kept on the monotonic clock (a wall clock set at boot by NTP
//! would stretch or cut it), in the engine, so a reload keeps it and a
//! restart ends it. Only a blocked name reads it: one atomic load, and a
//! clock read while a pause is set.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When blocking resumes.
#[derive(Debug)]
pub struct Pause {
    base: Instant,
    /// Milliseconds after `base` at which the pause ends; 0 when none is set.
    until_ms: AtomicU64,
}

impl Default for Pause {
    fn default() -> Pause {
        Pause { base: Instant::now(), until_ms: AtomicU64::new(0) }
    }
}

impl Pause {
    /// Pauses blocking for `d` from now; zero resumes it.
    pub fn set(&self, d: Duration) {
        let until = if d.is_zero() { 0 } else { (self.base.elapsed() + d).as_millis().max(1) as u64 };
        self.until_ms.store(until, Relaxed);
    }

    /// Whether blocking is paused now.
    #[inline]
    pub fn active(&self) -> bool {
        let until = self.until_ms.load(Relaxed);
        until != 0 && (self.base.elapsed().as_millis() as u64) < until
    }

    /// When the pause ends, in Unix seconds; 0 when blocking is on.
    pub fn until_unix(&self) -> u64 {
        let until = self.until_ms.load(Relaxed);
        let left = Duration::from_millis(until).checked_sub(self.base.elapsed()).filter(|_| until != 0);
        match (left, SystemTime::now().duration_since(UNIX_EPOCH)) {
            (Some(left), Ok(now)) if !left.is_zero() => (now + left).as_secs(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_ends_on_time_or_when_resumed() {
        let p = Pause::default();
        assert!(!p.active());
        assert_eq!(p.until_unix(), 0);
        p.set(Duration::from_millis(200));
        assert!(p.active());
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        assert!((now..=now + 1).contains(&p.until_unix()), "{}", p.until_unix());
        std::thread::sleep(Duration::from_millis(250));
        assert!(!p.active(), "ended on its own");
        assert_eq!(p.until_unix(), 0);
        p.set(Duration::from_secs(300));
        assert!(p.active());
        p.set(Duration::ZERO);
        assert!(!p.active(), "resumed");
    }
}
