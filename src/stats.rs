//! Counters of what the engine did, and the latency histogram.
//!
//! Each worker thread owns one [`Counters`] and is its only writer, so
//! counting never bounces a cache line between cores; readers sum all
//! workers' counters with relaxed loads. [`Report`] is the snapshot the
//! control socket serves and the periodic log line prints.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use nanoserde::{DeJson, SerJson};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// One worker's counters.
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)*
            /// Time from arrival to answer of every answered query.
            pub latency: Histogram,
            /// Blocks per group.
            pub groups: GroupCounters,
            /// Answered queries by question type ([`QTYPES`], then other).
            pub qtypes: [AtomicU64; QTYPE_SLOTS],
            /// Answers by outcome ([`Outcome`] order) and rcode ([`RCODES`]).
            pub answers: [[AtomicU64; RCODES.len()]; OUTCOMES],
        }

        /// A point-in-time sum of counters; fields as documented on [`Counters`]
        /// (nanoserde's derive cannot take doc attributes from a macro).
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, SerJson, DeJson)]
        pub struct Totals {
            $(pub $name: u64,)*
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
    /// A list would have blocked them; answered as unlisted while blocking was paused.
    paused,
    /// Search hosts answered with their engine's safe host, or NODATA for HTTPS/SVCB (safe search).
    safe_search,
    /// Forwarded, then blocked because a CNAME in the answer led to a blocked name.
    cname_blocked,
    /// Forwarded, then blocked because the answer put a private address under a public name.
    rebind_blocked,
    /// Answered from the cache.
    cached,
    /// Answered from a local name (`config record`).
    local_records,
    /// Answered with an expired cache entry (serve-stale): the upstream failed or was slow.
    stale_served,
    /// Cache hits near expiry that started a refresh of the name (prefetch).
    prefetched,
    /// Prefetches not started because `forward_max / 8` were in flight.
    prefetch_skipped,
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
    /// From clients outside `allow_client`, or naming their client twice through
    /// a trusted forwarder (`client::edns::Repeated`): refused or dropped per `deny_action`.
    denied,
    /// Over the client's `ratelimit`: refused or dropped per `ratelimit_action`.
    ratelimited,
    /// UDP answers cut to TC=1 because they did not fit the client's size.
    truncated,
    /// UDP answers the kernel would not send (full send buffer, unreachable peer): lost.
    udp_send_failed,
    /// TCP connections accepted.
    tcp_connections,
    /// TCP connections refused because the connection cap was reached.
    tcp_refused,
    /// TCP connections refused because the client held `tcp_max_per_client` already.
    tcp_client_refused,
    /// TCP connections closed for idling or for a message not completed in
    /// time, or, idle the longest, to make room for a new one with every place taken.
    tcp_timeouts,
    /// Answers of a validating upstream set (`option dnssec`) found secure: AD for clients that ask.
    dnssec_secure,
    /// Answers of a validating set proven unsigned (or signed with what the validator does not check).
    dnssec_insecure,
    /// Answers of a validating set whose signatures or proofs are wrong: SERVFAIL with an Extended DNS Error.
    dnssec_bogus,
    /// Answers of a validating set that could not be decided (an upstream failed on the chain, a work
    /// limit was hit): SERVFAIL, never cached.
    dnssec_indeterminate,
}

/// Question types counted on their own; every other type is `other`, so
/// the metrics' label set stays fixed whatever clients ask.
pub const QTYPES: [(u16, &str); 12] = [
    (1, "A"),
    (28, "AAAA"),
    (65, "HTTPS"),
    (64, "SVCB"),
    (12, "PTR"),
    (5, "CNAME"),
    (16, "TXT"),
    (15, "MX"),
    (33, "SRV"),
    (2, "NS"),
    (6, "SOA"),
    (255, "ANY"),
];
/// [`QTYPES`] and `other`.
pub const QTYPE_SLOTS: usize = QTYPES.len() + 1;
/// Header rcodes counted on their own, then `other`.
pub const RCODES: [&str; 7] = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "other"];
/// How a query was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Resolved upstream (or by joining an identical query in flight).
    Forwarded,
    /// From the cache.
    Cached,
    /// From a blocklist.
    Blocked,
    /// By the gateway itself without a lookup: FORMERR, NOTIMP, BADVERS.
    Local,
    /// SERVFAIL: no upstream answered, or too many misses in flight.
    Failed,
    /// An expired cache entry, because the upstream failed or was slow (serve-stale).
    Stale,
    /// From a local name (`config record`).
    Record,
    /// A list would have blocked it, but blocking was paused.
    Paused,
    /// A search host answered with its engine's safe host (safe search).
    SafeSearch,
}

impl Outcome {
    /// Name stored in the database and shown by the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Forwarded => "forwarded",
            Outcome::Cached => "cached",
            Outcome::Blocked => "blocked",
            Outcome::Local => "local",
            Outcome::Failed => "failed",
            Outcome::Stale => "stale",
            Outcome::Record => "record",
            Outcome::Paused => "paused",
            Outcome::SafeSearch => "safe_search",
        }
    }

    /// Every outcome, in a fixed order (counters are kept per outcome).
    pub const ALL: [Outcome; 9] = [
        Outcome::Forwarded,
        Outcome::Cached,
        Outcome::Blocked,
        Outcome::Local,
        Outcome::Failed,
        Outcome::Stale,
        Outcome::Record,
        Outcome::Paused,
        Outcome::SafeSearch,
    ];
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kinds of answer ([`Outcome`]).
pub const OUTCOMES: usize = Outcome::ALL.len();

/// The slot of a question type in [`Counters::qtypes`].
#[inline]
pub fn qtype_slot(qtype: u16) -> usize {
    // A match, not a search of QTYPES: a few compares per answer (a unit
    // test holds the two in step).
    match qtype {
        1 => 0,
        28 => 1,
        65 => 2,
        64 => 3,
        12 => 4,
        5 => 5,
        16 => 6,
        15 => 7,
        33 => 8,
        2 => 9,
        6 => 10,
        255 => 11,
        _ => 12,
    }
}

/// The slot of a header rcode in [`RCODES`].
#[inline]
pub fn rcode_slot(rcode: u8) -> usize {
    (rcode as usize).min(RCODES.len() - 1)
}

/// Counters per group, by the group's bit (`config::groups::GroupTable`).
#[derive(Debug)]
pub struct GroupCounters {
    /// Names blocked by a list of the group.
    pub blocked: [AtomicU64; crate::config::groups::MAX_GROUPS],
}

impl Default for GroupCounters {
    fn default() -> GroupCounters {
        GroupCounters { blocked: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
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

/// Histogram buckets: values below 8 µs exactly, then 8 per power of two
/// (under 12.5 % error), up to about 2^34 µs (4.8 hours).
const BUCKETS: usize = 256;

/// A latency histogram in microseconds, written by one thread.
#[derive(Debug)]
pub struct Histogram {
    /// Counts per bucket.
    buckets: Box<[AtomicU64; BUCKETS]>,
    /// Sum of every value, µs (a Prometheus histogram's `_sum`).
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: Box::new(std::array::from_fn(|_| AtomicU64::new(0))), sum_us: AtomicU64::new(0) }
    }
}

fn bucket_of(us: u64) -> usize {
    if us < 8 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // >= 3
    let sub = ((us >> (octave - 3)) & 7) as usize;
    ((octave - 2) * 8 + sub).min(BUCKETS - 1)
}

/// Smallest value that falls in bucket `b`.
fn bucket_floor(b: usize) -> u64 {
    if b < 8 {
        return b as u64;
    }
    let octave = b / 8 + 2;
    let sub = (b % 8) as u64;
    (8 + sub) << (octave - 3)
}

impl Histogram {
    /// Counts one value (single writer: load and store, no locked instruction).
    #[inline]
    pub fn record(&self, us: u64) {
        Counters::bump(&self.buckets[bucket_of(us)]);
        self.sum_us.store(self.sum_us.load(Relaxed) + us, Relaxed);
    }
}

/// Every bucket's count summed over several histograms.
fn merged<'a>(hists: impl Iterator<Item = &'a Histogram> + Clone) -> Vec<u64> {
    (0..BUCKETS).map(|b| hists.clone().map(|h| h.buckets[b].load(Relaxed)).sum()).collect()
}

/// Values below `2^k` µs for each `k` in `powers`, cumulative, over several
/// histograms, then the count and sum (µs) of all. Powers of two are bucket
/// edges, so these counts are exact.
pub fn below_powers_of_two<'a>(
    hists: impl Iterator<Item = &'a Histogram> + Clone,
    powers: std::ops::RangeInclusive<u32>,
) -> (Vec<u64>, u64, u64) {
    let counts = merged(hists.clone());
    let below = powers
        .map(|k| counts.iter().enumerate().filter(|&(b, _)| bucket_floor(b) < 1 << k).map(|(_, n)| n).sum())
        .collect();
    let sum = hists.map(|h| h.sum_us.load(Relaxed)).sum();
    (below, counts.iter().sum(), sum)
}

/// p50, p90 and p99 (µs, bucket floors) over several histograms.
pub fn percentiles<'a>(hists: impl Iterator<Item = &'a Histogram> + Clone) -> Latency {
    let counts = merged(hists);
    let total: u64 = counts.iter().sum();
    let at = |q: f64| {
        if total == 0 {
            return 0;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_floor(b);
            }
        }
        bucket_floor(BUCKETS - 1)
    };
    Latency { samples: total, p50_us: at(0.50), p90_us: at(0.90), p99_us: at(0.99) }
}

/// Latency percentiles of the engine's own time (arrival to answer).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, SerJson, DeJson)]
pub struct Latency {
    /// Answers measured.
    pub samples: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
}

/// One upstream server's figures.
#[derive(Debug, Default, Clone, PartialEq, SerJson, DeJson)]
pub struct UpstreamReport {
    /// Its address (`tls://NAME:PORT` for DNS over TLS).
    pub addr: String,
    /// `udp` (TCP when truncated) or `tls`.
    #[nserde(default)]
    pub transport: String,
    /// `up` or `down`; an encrypted one: `connected`, `idle`,
    /// `connecting`, `failed` (its last connection attempt), or `down`.
    #[nserde(default)]
    pub state: String,
    /// TLS handshakes completed (a connection is kept and reused).
    #[nserde(default)]
    pub handshakes: u64,
    /// Replies accepted.
    pub answers: u64,
    /// Tries that timed out.
    pub timeouts: u64,
    /// Tries that failed at once.
    pub errors: u64,
    /// Stray or forged replies ignored.
    pub mismatched: u64,
    /// Mean reply time, µs.
    pub avg_latency_us: u64,
    /// Down after failures in a row: skipped but for a probe every 30 s.
    #[nserde(default)]
    pub down: bool,
}

/// One upstream set's figures: the main upstreams, or a group's own
/// (see [`crate::upstream::sets`]).
#[derive(Debug, Default, Clone, PartialEq, SerJson, DeJson)]
pub struct SetReport {
    /// `main`, or the groups that use it, comma-separated.
    pub name: String,
    /// Its upstreams, as configured.
    pub upstreams: Vec<String>,
    /// Whether the main upstreams follow its own when they all fail.
    pub fallback_main: bool,
    /// Misses sent to it.
    pub queries: u64,
    /// Misses it gave no usable answer to.
    pub failed: u64,
    /// Mean time from a query's arrival to the set's answer, µs.
    pub avg_latency_us: u64,
}

/// The query log's figures.
#[derive(Debug, Default, Clone, PartialEq, SerJson, DeJson)]
pub struct LogReport {
    /// Whether the log is on.
    pub enabled: bool,
    /// Entries committed.
    pub written: u64,
    /// Entries dropped because the queue was full.
    pub dropped: u64,
    /// Entries lost to database errors.
    pub lost: u64,
    /// Entries waiting now.
    pub queued: u64,
    /// Queue capacity.
    pub queue_size: u64,
    /// Flushes that wrote to flash since start (one with nothing new writes nothing).
    pub flushes: u64,
    /// Failed copies to flash since start.
    pub flush_errors: u64,
    /// Unix time the flash copy was last known current (0: never).
    pub last_flush_unix: u64,
    /// Bytes the query log wrote to flash since start (its flushes; issue 46).
    #[nserde(default)]
    pub flash_bytes_written: u64,
    /// Files the query log wrote to flash since start (the copy and its
    /// journal, per flush that wrote).
    #[nserde(default)]
    pub flash_files_written: u64,
}

/// One list source's figures.
#[derive(Debug, Default, Clone, PartialEq, SerJson, DeJson)]
pub struct ListReport {
    /// Source name.
    pub name: String,
    /// `blocklist` or `allowlist`.
    pub kind: String,
    /// Block entries read.
    pub blocks: u64,
    /// Allow entries read.
    pub allows: u64,
    /// Rules skipped as inexpressible.
    pub unsupported: u64,
    /// Lines skipped as malformed.
    pub invalid: u64,
    /// Files the running gateway could not read (as its user), with the reason.
    #[nserde(default)]
    pub errors: Vec<String>,
    /// Entries covering a whole top-level domain, and the like.
    #[nserde(default)]
    pub warnings: Vec<String>,
}

/// Everything `hydradns stats` shows. Field names are a stable interface (docs/operation.md).
#[derive(Debug, Default, Clone, PartialEq, SerJson, DeJson)]
pub struct Report {
    /// Version of this JSON's layout ([`SCHEMA`]): LuCI and scripts check it.
    #[nserde(default)]
    pub schema: u64,
    /// Program version.
    pub version: String,
    /// Seconds since start.
    pub uptime_s: u64,
    /// All queries received.
    pub queries: u64,
    /// Per-outcome and error counters.
    pub counters: Totals,
    /// Queries the kernel dropped before we read them: our UDP sockets'
    /// receive buffers were full (a burst beyond what they hold).
    #[nserde(default)]
    pub udp_receive_drops: u64,
    /// Share of cache lookups answered from the cache, 0–1.
    pub cache_hit_ratio: f64,
    /// Entries in the cache.
    pub cache_entries: u64,
    /// Cache capacity.
    pub cache_capacity: u64,
    /// Names in the blocklist after merging subdomains.
    pub blocklist_names: u64,
    /// Names in the allowlist after merging subdomains.
    pub allowlist_names: u64,
    /// Bytes the block and allow sets hold.
    pub lists_bytes: u64,
    /// Bytes the list downloads wrote to flash (`list_dir`) since start:
    /// saved copies and their metadata (issue 46: an unchanged list writes none).
    #[nserde(default)]
    pub lists_flash_bytes_written: u64,
    /// Files the list downloads wrote to flash since start (a saved copy or
    /// its metadata replaced counts one each).
    #[nserde(default)]
    pub lists_flash_files_written: u64,
    /// Engine time per answered query.
    pub latency: Latency,
    /// When blocking resumes (`hydradns pause`), Unix seconds; 0 while it is on.
    #[nserde(default)]
    pub paused_until: u64,
    /// Upstream servers.
    pub upstreams: Vec<UpstreamReport>,
    /// Upstream sets, `main` first; empty without a group's own upstreams.
    #[nserde(default)]
    pub upstream_sets: Vec<SetReport>,
    /// Query log.
    pub querylog: LogReport,
    /// List sources.
    pub lists: Vec<ListReport>,
    /// Groups of devices, `default` first.
    #[nserde(default)]
    pub groups: Vec<GroupReport>,
    /// While some set validates DNSSEC but signature dates go unchecked
    /// because the clock is not known good yet (`time_check`): the file
    /// that will say it is (`time_synced_file`). Empty otherwise.
    #[nserde(default)]
    pub dnssec_clock_wait: String,
}

/// The layout version of the JSON `stats` and `status` print: raised when
/// a field changes meaning or goes away (new fields do not raise it).
pub const SCHEMA: u64 = 1;

/// One group's state and counters.
#[derive(Debug, Default, Clone, PartialEq, SerJson, DeJson)]
pub struct GroupReport {
    /// Its name.
    pub name: String,
    /// Names a list of the group blocked.
    pub blocked: u64,
    /// Its schedule, if it has one.
    pub schedule: String,
    /// With a schedule: whether its lists apply now (inside the window, or the clock not yet synced).
    pub active: bool,
    /// When its lists come back on (`hydradns pause --group`), Unix seconds; 0 while they are on.
    pub paused_until: u64,
}

impl Report {
    /// The one-line summary for syslog.
    pub fn summary(&self) -> String {
        let c = &self.counters;
        format!(
            "stats: uptime={}s queries={} blocked={} cached={} stale={} forwarded={} failed={} hit_ratio={:.3} p50={}us p90={}us p99={}us log_written={} log_dropped={} log_lost={} cache={}/{} blocklist={} udp_receive_drops={}",
            self.uptime_s,
            self.queries,
            c.blocked,
            c.cached,
            c.stale_served,
            c.forwarded + c.coalesced,
            c.failed + c.overloaded,
            self.cache_hit_ratio,
            self.latency.p50_us,
            self.latency.p90_us,
            self.latency.p99_us,
            self.querylog.written,
            self.querylog.dropped,
            self.querylog.lost,
            self.cache_entries,
            self.cache_capacity,
            self.blocklist_names,
            self.udp_receive_drops
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_tight() {
        let mut last = 0;
        for us in [0u64, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 12_345, 1 << 20, 1 << 33] {
            let b = bucket_of(us);
            assert!(b >= last, "{us}");
            last = b;
            let floor = bucket_floor(b);
            assert!(floor <= us && us - floor <= us / 8 + 1, "{us} in bucket {b} floor {floor}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn counts_below_powers_of_two_are_exact() {
        let (a, b) = (Histogram::default(), Histogram::default());
        for us in [15, 16, 17, 31] {
            a.record(us);
        }
        b.record(1 << 20);
        let (below, count, sum) = below_powers_of_two([&a, &b].into_iter(), 4..=21);
        assert_eq!(&below[..3], [1, 4, 4]);
        assert_eq!(below[16], 4, "2^20 itself is not below 2^20");
        assert_eq!(below[17], 5);
        assert_eq!((count, sum), (5, 15 + 16 + 17 + 31 + (1 << 20)));
    }

    #[test]
    fn qtype_and_rcode_slots_are_bounded() {
        for (slot, &(t, _)) in QTYPES.iter().enumerate() {
            assert_eq!(qtype_slot(t), slot, "type {t}");
        }
        assert_eq!(qtype_slot(255), QTYPES.len() - 1);
        assert_eq!(qtype_slot(99), QTYPES.len());
        assert_eq!(qtype_slot(u16::MAX), QTYPE_SLOTS - 1);
        assert_eq!(RCODES[rcode_slot(3)], "NXDOMAIN");
        assert_eq!(RCODES[rcode_slot(15)], "other");
    }

    #[test]
    fn percentiles_over_workers() {
        let (a, b) = (Histogram::default(), Histogram::default());
        for us in 1..=90 {
            a.record(us);
        }
        for _ in 0..9 {
            b.record(1000);
        }
        b.record(100_000);
        let l = percentiles([&a, &b].into_iter());
        assert_eq!(l.samples, 100);
        assert!((40..=50).contains(&l.p50_us), "{l:?}");
        assert!((80..=90).contains(&l.p90_us), "{l:?}");
        assert!((896..=1000).contains(&l.p99_us), "{l:?}");
        assert_eq!(percentiles([&Histogram::default()].into_iter()).p99_us, 0);
    }
}
