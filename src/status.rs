//! Assembling the live [`Report`] from the workers' counters, the engine's
//! snapshot and the query log.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use crate::config::ListKind;
use crate::query::Engine;
use crate::rebuild::ListsHandle;
use crate::stats::{Counters, GroupReport, ListReport, LogReport, Report, Totals, UpstreamReport, percentiles};

/// What the report is made from; shared by the signal loop and the control socket.
pub struct Status {
    /// The engine (snapshot: cache, lists, upstreams).
    pub engine: Arc<Engine>,
    /// One set of counters per worker.
    pub workers: Vec<Arc<Counters>>,
    /// Process start.
    pub started: Instant,
    /// The lists thread, for reloads and `hydradns update`.
    pub lists: ListsHandle,
    /// Inode numbers of the listening UDP sockets, for the kernel's drops.
    pub udp_inodes: Vec<u64>,
}

impl Status {
    /// Sum of every worker's counters.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for w in &self.workers {
            t.add(w);
        }
        t
    }

    /// UDP queries the receive threads have read so far: moving while
    /// the watchdog's probe goes unanswered, it is a daemon under a flood,
    /// not a hung one.
    pub fn udp_received(&self) -> u64 {
        self.workers.iter().map(|w| w.udp_queries.load(Relaxed)).sum()
    }

    /// A consistent-enough snapshot of everything (counters are read one by one).
    pub fn report(&self) -> Report {
        let snap = self.engine.snapshot.load();
        let t = self.totals();
        let lookups = t.cached + t.forwarded + t.coalesced;
        let querylog = match self.engine.logger() {
            Some(l) => LogReport {
                enabled: true,
                written: l.counters.written.load(Relaxed),
                dropped: l.counters.dropped.load(Relaxed),
                lost: l.counters.lost.load(Relaxed),
                queued: l.queued() as u64,
                queue_size: l.capacity() as u64,
                flushes: l.counters.flushes.load(Relaxed),
                flush_errors: l.counters.flush_errors.load(Relaxed),
                last_flush_unix: l.counters.last_flush_unix.load(Relaxed),
                flash_bytes_written: l.counters.flash_bytes.load(Relaxed),
                flash_files_written: l.counters.flash_files.load(Relaxed),
            },
            None => LogReport::default(),
        };
        Report {
            schema: crate::stats::SCHEMA,
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: self.started.elapsed().as_secs(),
            queries: t.queries(),
            counters: t,
            udp_receive_drops: crate::sys::udp_drops(&self.udp_inodes),
            cache_hit_ratio: if lookups == 0 { 0.0 } else { t.cached as f64 / lookups as f64 },
            cache_entries: snap.cache.len() as u64,
            cache_capacity: snap.cache.capacity() as u64,
            blocklist_names: snap.policy.blocked_len() as u64,
            allowlist_names: snap.policy.allowed_len() as u64,
            lists_bytes: snap.policy.heap_bytes() as u64,
            lists_flash_bytes_written: crate::lists::FLASH_BYTES.load(Relaxed),
            lists_flash_files_written: crate::lists::FLASH_FILES.load(Relaxed),
            latency: percentiles(self.workers.iter().map(|w| &w.latency)),
            paused_until: self.engine.pause.until_unix(),
            upstreams: snap
                .servers()
                .iter()
                .map(|s| {
                    let answers = s.answers.load(Relaxed);
                    let link = s.link.as_ref().map(|l| &l.shared);
                    let state = match link {
                        _ if s.health.is_down() => "down",
                        Some(l) => l.state().name(),
                        None => "up",
                    };
                    UpstreamReport {
                        addr: s.spec.to_string(),
                        transport: s.spec.transport().into(),
                        state: state.into(),
                        handshakes: link.map_or(0, |l| l.handshakes.load(Relaxed)),
                        answers,
                        timeouts: s.timeouts.load(Relaxed),
                        errors: s.errors.load(Relaxed),
                        mismatched: s.mismatched.load(Relaxed) + link.map_or(0, |l| l.stray.load(Relaxed)),
                        avg_latency_us: s.latency_us.load(Relaxed).checked_div(answers).unwrap_or(0),
                        down: s.health.is_down(),
                    }
                })
                .collect(),
            upstream_sets: upstream_sets(&snap),
            querylog,
            lists: snap
                .policy
                .sources
                .iter()
                .map(|s| ListReport {
                    name: s.name.clone(),
                    kind: match s.kind {
                        ListKind::Block => "blocklist".into(),
                        ListKind::Allow => "allowlist".into(),
                    },
                    blocks: s.stats.blocks,
                    allows: s.stats.allows,
                    unsupported: s.stats.unsupported,
                    invalid: s.stats.invalid,
                    errors: s.errors.iter().map(|e| crate::plaintext::plain(e)).collect(),
                    warnings: s.warnings.clone(),
                })
                .collect(),
            groups: self.groups(&snap),
            dnssec_clock_wait: dnssec_clock_wait(&snap),
        }
    }

    /// Each group's counters and state.
    fn groups(&self, snap: &crate::query::Snapshot) -> Vec<GroupReport> {
        let groups = &snap.policy.groups;
        let off = snap.schedules.off();
        let paused = self.engine.pause.groups_until_unix();
        groups
            .names
            .iter()
            .enumerate()
            .map(|(bit, name)| GroupReport {
                name: name.to_string(),
                blocked: self.workers.iter().map(|w| w.groups.blocked[bit].load(Relaxed)).sum(),
                schedule: groups.schedules[bit].as_ref().map(|s| s.name.clone()).unwrap_or_default(),
                active: off >> bit & 1 == 0,
                paused_until: paused.iter().find(|(n, _)| **n == **name).map_or(0, |p| p.1),
            })
            .collect()
    }
}

/// The file DNSSEC's date checks wait for, or empty. Asking the gate
/// looks at the file (once a second at most), so the report shows the
/// moment the gateway itself notices, not a guess beside it.
fn dnssec_clock_wait(snap: &crate::query::Snapshot) -> String {
    let validating = snap.config.dnssec || snap.sets.own().iter().any(|s| s.dnssec);
    if validating && !snap.clock.synced() { snap.clock.marker().display().to_string() } else { String::new() }
}

/// Each upstream set's figures, `main` first; none without a group's own
/// upstreams (the main set's are then the `forwarded` and `failed` counters).
fn upstream_sets(snap: &crate::query::Snapshot) -> Vec<crate::stats::SetReport> {
    if snap.sets.is_empty() {
        return Vec::new();
    }
    let report = |name: &str, upstreams: Vec<String>, fallback_main, c: &crate::upstream::sets::SetCounters| {
        let queries = c.queries.load(Relaxed);
        crate::stats::SetReport {
            name: name.into(),
            upstreams,
            fallback_main,
            queries,
            failed: c.failed.load(Relaxed),
            avg_latency_us: c.latency_us.load(Relaxed).checked_div(queries).unwrap_or(0),
        }
    };
    let main = snap.config.upstreams.iter().map(ToString::to_string).collect();
    let mut all = vec![report("main", main, false, snap.sets.main_counters())];
    for s in snap.sets.own() {
        let ups = s.upstreams.iter().map(ToString::to_string).collect();
        all.push(report(&s.name, ups, s.fallback_main, &s.counters));
    }
    all
}
