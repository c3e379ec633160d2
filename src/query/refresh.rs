//! Refreshing the cache: serve-stale and prefetch.
//!
//! Serve-stale (RFC 8767): an expired answer instead of SERVFAIL when the
//! upstream fails or is slow.
//!
//! A lookup finds an entry up to `stale_max_age` after it expired. Then:
//! - the query goes upstream as a refresh that carries the expired entry
//!   ([`Miss::stale`]); if the upstream has not answered within
//!   `stale_client_timeout` of the query's arrival ([`Led::stale_deadline`],
//!   watched by the UDP receive loop, and by [`Engine::resolve_led`] for TCP
//!   clients and UDP retries over TCP), or fails first, the client gets the
//!   expired answer, every TTL `stale_answer_ttl`, with Extended DNS Error 3
//!   for an EDNS client (RFC 8914), and the refresh goes on without it;
//! - with `stale_client_timeout 0`, the client gets it at once and the
//!   refresh runs behind it ([`Step::Refresh`]);
//! - the same name asked while its refresh is in flight gets it at once:
//!   one refresh per name, never a queue of clients behind a dead upstream;
//! - a refresh that fails holds the name off the upstream for
//!   [`RETRY_AFTER`]: meanwhile it is answered stale at once, without a try
//!   (unlike Unbound's, whose users saw every expired hit become an upstream
//!   query: NLnetLabs/unbound#1174).
//!
//! Only answers the cache took are ever served stale, and it takes none with
//! SERVFAIL or REFUSED: a failure is never replayed. Any answer the upstream
//! gives, NXDOMAIN and NODATA included, replaces the entry; a SERVFAIL or
//! REFUSED leaves it servable (coredns/coredns#8003 had one shadow a good entry).
//!
//! Prefetch: a hit in the last tenth of its entry's TTL, on a name hit
//! before since it was stored, is answered from the cache and starts one
//! refresh ([`Step::Refresh`], [`crate::cache::Hit::claim_prefetch`]), so a
//! name in use does not expire and cost its next asker a round trip. At
//! most `forward_max / 8` run at once; a prefetch beyond that is skipped and
//! counted. Both kinds of refresh go through the in-flight table like any
//! miss, so there is never more than one per name.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use super::{Answered, Engine, Led, Miss, Snapshot, Step, fit};
use crate::cache::Stale;
use crate::stats::Counters;
use crate::stats::Outcome;
use crate::upstream::Resolved;
use crate::wire::{Query, rcode};

/// Seconds a failed refresh keeps a name from being tried again.
pub(super) const RETRY_AFTER: u32 = 30;

/// Whether a refresh ended without an answer that may replace the entry.
pub(super) fn failed(resolved: Option<&Resolved>) -> bool {
    resolved.is_none_or(|r| matches!(r.stored.rcode(), rcode::SERVFAIL | rcode::REFUSED))
}

/// One prefetch in flight; dropped with its miss, however that ends.
pub(super) struct PrefetchSlot(Arc<AtomicUsize>);

impl Drop for PrefetchSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Led {
    /// When the client stops waiting for the upstream and gets the expired
    /// answer instead; `None` unless there is one and the client waits.
    pub fn stale_deadline(&self) -> Option<Instant> {
        let miss = &self.miss;
        (miss.stale.is_some() && !miss.quiet).then(|| miss.origin.received + miss.snapshot.config.stale_client_timeout)
    }
}

impl Engine {
    /// Turns `miss`, a hit whose answer is written, into a prefetch; `None`
    /// (the plain reply) when `forward_max / 8` are in flight already.
    pub(super) fn prefetch(&self, mut miss: Miss, stats: &Counters) -> Option<Step> {
        let cap = (miss.snapshot.config.forward_max / 8).max(1);
        let taken = self.prefetching.fetch_update(Relaxed, Relaxed, |n| (n < cap).then_some(n + 1)).is_ok();
        if !taken {
            Counters::bump(&stats.prefetch_skipped);
            return None;
        }
        Counters::bump(&stats.prefetched);
        miss.prefetch_slot = Some(PrefetchSlot(self.prefetching.clone()));
        miss.quiet = true;
        Some(Step::Refresh(miss))
    }

    /// Writes `stale`'s answer for `q` and records it.
    pub(super) fn answer_stale(
        &self,
        origin: &super::Origin,
        q: &Query,
        stale: &Stale,
        (snap, asked, active): (&Snapshot, &[u8], u64),
        out: &mut Vec<u8>,
        stats: &Counters,
    ) {
        // Its CNAMEs for this client, as a fresh answer's would be.
        if let Some(source) = self.cnames(snap, stale.message(), asked, active).blocked {
            Counters::bump(&stats.cname_blocked);
            self.block(snap, q, source, active, origin, out, stats);
            return;
        }
        Counters::bump(&stats.stale_served);
        stale.write_answer(q, snap.config.stale_answer_ttl, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Stale);
        a.dnssec = stale.dnssec();
        if let Some(state) = a.dnssec {
            super::dnssec::count(state, stats);
        }
        self.done(origin, a, out, stats);
    }

    /// The client of a miss this thread leads has waited its
    /// `stale_client_timeout`: writes the expired answer into `out` and
    /// leaves the miss to refresh the cache alone. False if there is none
    /// or the client has its answer already.
    pub fn answer_stale_now(&self, led: &mut Led, out: &mut Vec<u8>, stats: &Counters) -> bool {
        let miss = &mut led.miss;
        if miss.quiet {
            return false;
        }
        if !self.stale_for_client(miss, out, stats) {
            return false;
        }
        miss.quiet = true;
        true
    }
}
