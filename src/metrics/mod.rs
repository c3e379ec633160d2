//! The Prometheus text format (version 0.0.4) of the gateway's counters:
//! for `hydradns metrics` (through the control socket), `metrics_listen`
//! ([`http`]) and `metrics_textfile`. Every label set is bounded by the
//! config or by a fixed table: question types beyond the common ones are
//! `other`, rcodes beyond REFUSED are `other`, and nothing is per client.

pub mod http;

use std::fmt::{Display, Write};

use std::sync::atomic::Ordering::Relaxed;

use crate::stats::Outcome;
use crate::stats::{QTYPES, RCODES, Report, below_powers_of_two};
use crate::status::Status;
use crate::upstream::Server;

/// The duration histogram's `le` edges: 2^4 µs (16 µs) to 2^22 µs (4.2 s).
/// Powers of two are the internal histogram's bucket edges, so the counts
/// are exact (values below the edge; a value exactly on it, to the µs, goes
/// to the next bucket).
const LE_POWERS: std::ops::RangeInclusive<u32> = 4..=22;

/// `Content-Type` of the text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

struct Text(String);

// Cold code: out of line and non-generic, so rendering costs little binary
// (the crate is built at opt-level 3). No HELP lines, which the format
// leaves optional: docs/operation.md describes every family.
impl Text {
    #[inline(never)]
    fn family(&mut self, name: &str, kind: &str) {
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    #[inline(never)]
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: &dyn Display) {
        self.0.push_str(name);
        for (i, (k, v)) in labels.iter().enumerate() {
            self.0.push(if i == 0 { '{' } else { ',' });
            self.0.push_str(k);
            self.0.push_str("=\"");
            for c in v.chars() {
                match c {
                    '\\' => self.0.push_str("\\\\"),
                    '"' => self.0.push_str("\\\""),
                    '\n' => self.0.push_str("\\n"),
                    c => self.0.push(c),
                }
            }
            self.0.push('"');
        }
        if !labels.is_empty() {
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A family with one sample per item, labelled `label` by `key`.
    #[inline(never)]
    fn each<T>(&mut self, name: &str, kind: &str, items: &[T], label: &str, key: fn(&T) -> &str, value: fn(&T) -> u64) {
        self.family(name, kind);
        for i in items {
            self.sample(name, &[(label, key(i))], &value(i));
        }
    }
}

/// Microseconds shown as seconds (`0.000016`, `4.194304`), with integer
/// arithmetic: f64's shortest-form printing would add kilobytes of code.
#[derive(Clone, Copy)]
struct Secs(u64);

impl Display for Secs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let frac = format!("{:06}", self.0 % 1_000_000);
        let frac = frac.trim_end_matches('0');
        write!(f, "{}{}{frac}", self.0 / 1_000_000, if frac.is_empty() { "" } else { "." })
    }
}

type Scalar = (&'static str, &'static str, fn(&Report) -> u64);

/// Families of one unlabelled sample, from the report.
const SCALARS: [Scalar; 18] = [
    ("hydradns_udp_receive_drops_total", "counter", |r| r.udp_receive_drops),
    ("hydradns_cache_entries", "gauge", |r| r.cache_entries),
    ("hydradns_cache_capacity", "gauge", |r| r.cache_capacity),
    ("hydradns_blocklist_names", "gauge", |r| r.blocklist_names),
    ("hydradns_allowlist_names", "gauge", |r| r.allowlist_names),
    ("hydradns_lists_bytes", "gauge", |r| r.lists_bytes),
    ("hydradns_lists_flash_bytes_written_total", "counter", |r| r.lists_flash_bytes_written),
    ("hydradns_lists_flash_files_written_total", "counter", |r| r.lists_flash_files_written),
    ("hydradns_querylog_enabled", "gauge", |r| u64::from(r.querylog.enabled)),
    ("hydradns_querylog_written_total", "counter", |r| r.querylog.written),
    ("hydradns_querylog_dropped_total", "counter", |r| r.querylog.dropped),
    ("hydradns_querylog_lost_total", "counter", |r| r.querylog.lost),
    ("hydradns_querylog_queued", "gauge", |r| r.querylog.queued),
    ("hydradns_querylog_flush_errors_total", "counter", |r| r.querylog.flush_errors),
    ("hydradns_querylog_flash_bytes_written_total", "counter", |r| r.querylog.flash_bytes_written),
    ("hydradns_querylog_flash_files_written_total", "counter", |r| r.querylog.flash_files_written),
    ("hydradns_blocking_paused_until_seconds", "gauge", |r| r.paused_until),
    ("hydradns_start_time_seconds", "gauge", |r| crate::sys::unix_now().saturating_sub(r.uptime_s)),
];

/// The whole exposition, ending in a newline.
pub fn render(status: &Status) -> String {
    let r = status.report();
    let mut t = Text(String::with_capacity(8192));
    t.family("hydradns_build_info", "gauge");
    t.sample("hydradns_build_info", &[("version", env!("CARGO_PKG_VERSION"))], &1);
    for (name, kind, value) in SCALARS {
        t.family(name, kind);
        t.sample(name, &[], &value(&r));
    }

    let c = &r.counters;
    t.family("hydradns_queries_total", "counter");
    t.sample("hydradns_queries_total", &[("proto", "udp")], &c.udp_queries);
    t.sample("hydradns_queries_total", &[("proto", "tcp")], &c.tcp_queries);
    // Every other counter of `hydradns stats`, under its own name.
    for (name, v) in c.pairs().into_iter().skip(2) {
        let metric = format!("hydradns_{name}_total");
        t.family(&metric, "counter");
        t.sample(&metric, &[], &v);
    }

    let w = &status.workers;
    t.family("hydradns_query_types_total", "counter");
    for (slot, name) in QTYPES.iter().map(|q| q.1).chain(["other"]).enumerate() {
        t.sample(
            "hydradns_query_types_total",
            &[("qtype", name)],
            &w.iter().map(|w| w.qtypes[slot].load(Relaxed)).sum::<u64>(),
        );
    }
    t.family("hydradns_responses_total", "counter");
    for (o, outcome) in Outcome::ALL.iter().enumerate() {
        for (rc, rcode) in RCODES.iter().enumerate() {
            let n: u64 = w.iter().map(|w| w.answers[o][rc].load(Relaxed)).sum();
            // Counters only grow: a series, once there, stays.
            if n > 0 {
                t.sample("hydradns_responses_total", &[("result", outcome.as_str()), ("rcode", rcode)], &n);
            }
        }
    }

    let (below, count, sum_us) = below_powers_of_two(w.iter().map(|w| &w.latency), LE_POWERS);
    t.family("hydradns_request_duration_seconds", "histogram");
    for (k, n) in LE_POWERS.zip(below) {
        t.sample("hydradns_request_duration_seconds_bucket", &[("le", &Secs(1 << k).to_string())], &n);
    }
    t.sample("hydradns_request_duration_seconds_bucket", &[("le", "+Inf")], &count);
    t.sample("hydradns_request_duration_seconds_sum", &[], &Secs(sum_us));
    t.sample("hydradns_request_duration_seconds_count", &[], &count);

    t.family("hydradns_list_entries", "gauge");
    for l in &r.lists {
        t.sample("hydradns_list_entries", &[("list", &l.name), ("kind", &l.kind)], &(l.blocks + l.allows));
    }

    // From the servers themselves: the report's average loses the sum.
    let servers = status.engine.snapshot.load().servers();
    let ups: Vec<(String, &Server)> = servers.iter().map(|s| (s.spec.to_string(), &**s)).collect();
    fn addr<'a>(u: &'a (String, &Server)) -> &'a str {
        &u.0
    }
    t.each("hydradns_upstream_up", "gauge", &ups, "upstream", addr, |u| u64::from(!u.1.health.is_down()));
    t.each("hydradns_upstream_answers_total", "counter", &ups, "upstream", addr, |u| u.1.answers.load(Relaxed));
    t.each("hydradns_upstream_timeouts_total", "counter", &ups, "upstream", addr, |u| u.1.timeouts.load(Relaxed));
    t.each("hydradns_upstream_errors_total", "counter", &ups, "upstream", addr, |u| u.1.errors.load(Relaxed));
    t.each("hydradns_upstream_mismatched_total", "counter", &ups, "upstream", addr, |u| u.1.mismatched.load(Relaxed));
    let tls = |u: &(String, &Server)| u.1.link.as_ref().map_or(0, |l| l.shared.handshakes.load(Relaxed));
    t.each("hydradns_upstream_handshakes_total", "counter", &ups, "upstream", addr, tls);
    t.family("hydradns_upstream_reply_seconds_total", "counter");
    for (a, s) in &ups {
        t.sample("hydradns_upstream_reply_seconds_total", &[("upstream", a)], &Secs(s.latency_us.load(Relaxed)));
    }

    // Only with a group's own upstreams (see `upstream_sets` in the report).
    let sets = &r.upstream_sets;
    if !sets.is_empty() {
        t.each("hydradns_upstream_set_queries_total", "counter", sets, "set", |s| &s.name, |s| s.queries);
        t.each("hydradns_upstream_set_failures_total", "counter", sets, "set", |s| &s.name, |s| s.failed);
        t.family("hydradns_upstream_set_seconds_total", "counter");
        for s in snapshot_sets(status).iter() {
            t.sample("hydradns_upstream_set_seconds_total", &[("set", &s.0)], &Secs(s.1));
        }
    }

    let g = &r.groups;
    t.each("hydradns_group_blocked_total", "counter", g, "group", |g| &g.name, |g| g.blocked);
    t.each("hydradns_group_active", "gauge", g, "group", |g| &g.name, |g| u64::from(g.active));
    t.each("hydradns_group_paused_until_seconds", "gauge", g, "group", |g| &g.name, |g| g.paused_until);
    t.0
}

/// Each upstream set's name and summed latency, µs: the report's average loses the sum.
fn snapshot_sets(status: &Status) -> Vec<(String, u64)> {
    let snap = status.engine.snapshot.load();
    let main = ("main".to_string(), snap.sets.main_counters().latency_us.load(Relaxed));
    let own = snap.sets.own().iter().map(|s| (s.name.to_string(), s.counters.latency_us.load(Relaxed)));
    std::iter::once(main).chain(own).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_labels_are_written_as_the_format_wants() {
        let shown: Vec<String> =
            [16, 1_000_000, 4_194_304, 0, 1_500_000].iter().map(|&us| Secs(us).to_string()).collect();
        assert_eq!(shown, ["0.000016", "1", "4.194304", "0", "1.5"]);
        let mut t = Text(String::new());
        t.sample("m", &[("list", "a \"b\"\\c\nd"), ("kind", "x")], &7);
        t.sample("n", &[], &0);
        assert_eq!(t.0, "m{list=\"a \\\"b\\\"\\\\c\\nd\",kind=\"x\"} 7\nn 0\n");
    }
}
