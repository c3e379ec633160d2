//! Whether an upstream is worth a try: after [`FAILS_TO_DOWN`] tries in a
//! row that got nothing (timeouts, send errors) a server is down and
//! skipped, and once every [`PROBE_EVERY`] one query probes it; an answer
//! brings it back. A resolution tries down servers only when every server
//! in its group is down (a dead WAN has nothing better to offer).
//!
//! Without it, a dead first server cost a timeout whenever the live one
//! missed one reply: the failover order then put the dead one first again.
//! State is two atomics per server, shared by every thread, read on each
//! try without a lock; the clock is read only while some server is down.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Failed tries in a row that make a server down.
pub const FAILS_TO_DOWN: u32 = 3;
/// How often a down server gets one try.
pub const PROBE_EVERY: Duration = Duration::from_secs(30);

/// Milliseconds on a process-wide monotonic clock.
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One server's health.
#[derive(Debug, Default)]
pub struct Health {
    /// Tries in a row that got nothing.
    fails: AtomicU32,
    /// While down: when the next probe may go ([`now_ms`]).
    probe_at: AtomicU64,
    /// When a refusal of it was last logged ([`now_ms`] + 1; 0: never).
    refusal_logged: AtomicU64,
}

/// A server's refusals (REFUSED, NOTIMP) are logged at most this often.
pub const LOG_REFUSALS_EVERY: Duration = Duration::from_secs(60);

impl Health {
    /// Down: skipped until its probe is due.
    pub fn is_down(&self) -> bool {
        self.fails.load(Relaxed) >= FAILS_TO_DOWN
    }

    /// Whether a try may go to this server now. A down server's probe is
    /// claimed here, so one query per [`PROBE_EVERY`] probes it, not every
    /// query that comes along once it is due.
    pub fn try_now(&self) -> bool {
        if !self.is_down() {
            return true;
        }
        let now = now_ms();
        let at = self.probe_at.load(Relaxed);
        now >= at && self.probe_at.compare_exchange(at, now + PROBE_EVERY.as_millis() as u64, Relaxed, Relaxed).is_ok()
    }

    /// A try got an answer (any RCODE: the server is there). True when
    /// that brings a down server back (for the log).
    pub fn answered(&self) -> bool {
        let fails = self.fails.load(Relaxed);
        if fails != 0 {
            self.fails.store(0, Relaxed);
        }
        fails >= FAILS_TO_DOWN
    }

    /// A try got nothing; the third in a row makes the server down. True
    /// for that third one (for the log: once per outage, not per try).
    pub fn failed(&self) -> bool {
        if self.fails.fetch_add(1, Relaxed) + 1 == FAILS_TO_DOWN {
            self.probe_at.store(now_ms() + PROBE_EVERY.as_millis() as u64, Relaxed);
            return true;
        }
        false
    }

    /// The server answered with a refusal: whether to log it now (at most
    /// once per [`LOG_REFUSALS_EVERY`]).
    pub fn log_refusal(&self) -> bool {
        let now = now_ms() + 1;
        let last = self.refusal_logged.load(Relaxed);
        (last == 0 || now >= last + LOG_REFUSALS_EVERY.as_millis() as u64)
            && self.refusal_logged.compare_exchange(last, now, Relaxed, Relaxed).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_after_three_failures_in_a_row_and_up_after_an_answer() {
        let h = Health::default();
        for _ in 0..2 {
            assert!(!h.failed(), "not down yet");
            assert!(!h.is_down() && h.try_now());
        }
        assert!(!h.answered(), "it was not down");
        assert_eq!([h.failed(), h.failed(), h.failed(), h.failed()], [false, false, true, false], "down once");
        assert!(h.is_down());
        assert!(!h.try_now(), "no probe before its time");
        // Its probe is due: one query gets it, the next does not.
        h.probe_at.store(0, Relaxed);
        assert!(h.try_now());
        assert!(!h.try_now());
        assert!(h.answered(), "back");
        assert!(!h.is_down() && h.try_now());
        assert!(h.log_refusal() && !h.log_refusal(), "a refusal logged once a minute");
    }
}
