//! Counters of what the engine did.
//!
//! Each worker thread owns one [`Counters`] and is its only writer, so
//! counting never bounces a cache line between cores; readers sum all
//! workers' counters with relaxed loads.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// One worker's counters.
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A point-in-time sum of counters.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct Totals {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Totals {
            /// Adds one worker's counters.
            pub fn add(&mut self, c: &Counters) {
                $(self.$name += c.$name.load(Relaxed);)*
            }

            /// `name=value` pairs in declaration order.
            pub fn pairs(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name)),*]
            }
        }
    };
}

counters! {
    /// Queries received over UDP (well-formed or not).
    udp_queries,
    /// Queries received over TCP.
    tcp_queries,
    /// Answered from a blocklist.
    blocked,
    /// Blocked by a list but let through by an allow entry.
    allowed,
    /// Answered from the cache.
    cached,
    /// Sent upstream (one per distinct miss).
    forwarded,
    /// Misses that waited for an identical miss already in flight.
    coalesced,
    /// Answered SERVFAIL because no upstream answered.
    failed,
    /// Answered SERVFAIL at once because too many misses were in flight.
    overloaded,
    /// Answered FORMERR.
    formerr,
    /// Answered NOTIMP.
    notimp,
    /// Answered BADVERS.
    badvers,
    /// Dropped unanswered (too short, or a response rather than a query).
    dropped,
    /// UDP answers cut to TC=1 because they did not fit the client's size.
    truncated,
    /// TCP connections accepted.
    tcp_connections,
    /// TCP connections refused because the connection cap was reached.
    tcp_refused,
    /// TCP connections closed for idling or for a message not completed in time.
    tcp_timeouts,
}

impl Counters {
    /// Adds one to a counter. Only the owning worker writes, so a relaxed
    /// load and store suffice and skip the locked read-modify-write.
    #[inline]
    pub fn bump(field: &AtomicU64) {
        field.store(field.load(Relaxed) + 1, Relaxed);
    }
}

impl Totals {
    /// All queries received.
    pub fn queries(&self) -> u64 {
        self.udp_queries + self.tcp_queries
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs = self.pairs();
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}
