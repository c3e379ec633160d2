//! Queries over time for `hydradns stats --history` and LuCI's chart: the
//! last 24 hours in 10-minute buckets, allowed and blocked, from the query
//! log.
//!
//! Bounded and indexed: one SQL statement over the rowid range of the last
//! 24 hours (ids follow time, see the writer), grouped into at most 144
//! buckets; nothing is kept between calls. Buckets are aligned to Unix time
//! (multiples of 600 s), oldest first, and the current, unfinished one is
//! the last; a bucket without queries is there with zeros, so a chart has
//! no gaps to guess about.

use nanoserde::{DeJson, SerJson};
use rusqlite::Connection;

/// Seconds per bucket.
pub const BUCKET_S: u64 = 600;
/// Buckets in a history: 24 hours.
pub const BUCKETS: u64 = 144;

/// One bucket of `hydradns stats --history --json`.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct Bucket {
    /// Unix seconds of its start, a multiple of [`BUCKET_S`].
    pub start: u64,
    /// Queries not blocked (answered, forwarded, failed, …).
    pub allowed: u64,
    /// Queries blocked (lists, services, `block_bypass`).
    pub blocked: u64,
}

/// `hydradns stats --history --json`.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct History {
    pub schema: u64,
    /// Oldest first; the last holds `now`.
    pub buckets: Vec<Bucket>,
}

/// The history at Unix time `now_s`, read from `conn` (the writer's schema).
pub fn history(conn: &Connection, now_s: u64) -> Result<History, String> {
    let last = now_s / BUCKET_S * BUCKET_S;
    let first = last.saturating_sub((BUCKETS - 1) * BUCKET_S);
    let mut buckets: Vec<Bucket> =
        (0..BUCKETS).map(|i| Bucket { start: first + i * BUCKET_S, allowed: 0, blocked: 0 }).collect();
    if super::read::has_table(conn) {
        // Rows stamped past the current bucket (a clock set back) are left
        // out rather than piled into it.
        let (from, to) = (super::read::id_at(first * 1000), super::read::id_at((last + BUCKET_S) * 1000));
        let sql = format!(
            "SELECT (id >> {}) / {} AS b, count(*), sum(outcome = 'blocked') FROM queries \
             WHERE id >= ?1 AND id < ?2 GROUP BY b",
            super::writer::ID_SEQ_BITS,
            BUCKET_S * 1000
        );
        let mut stmt = conn.prepare(&sql).map_err(|e| e.to_string())?;
        let rows = stmt
            .query_map((from, to), |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
            .map_err(|e| e.to_string())?;
        for row in rows {
            let (b, n, blocked) = row.map_err(|e| e.to_string())?;
            let at = (b as u64 * BUCKET_S).wrapping_sub(first) / BUCKET_S;
            if let Some(bucket) = buckets.get_mut(at as usize) {
                bucket.blocked = blocked as u64;
                bucket.allowed = (n - blocked) as u64;
            }
        }
    }
    Ok(History { schema: crate::stats::SCHEMA, buckets })
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An in-memory log with the writer's tables (the devices' tests use it too).
    pub(crate) fn log() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::querylog::writer::SCHEMA).unwrap();
        conn
    }

    /// A row at Unix milliseconds `ms` (the `seq`-th in that millisecond).
    fn add(conn: &Connection, ms: u64, seq: i64, outcome: &str) {
        let id = crate::querylog::read::id_at(ms) | seq;
        conn.execute(
            "INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us) \
             VALUES (?1, ?2, '192.0.2.10', 'a.example', 1, ?3, 0, 10)",
            (id, ms as i64, outcome),
        )
        .unwrap();
    }

    // A time 200 s into its bucket.
    const NOW: u64 = 1_796_433_800;

    #[test]
    fn an_empty_log_is_144_zero_buckets_ending_with_the_current_one() {
        let h = history(&log(), NOW).unwrap();
        assert_eq!(h.buckets.len(), 144);
        assert_eq!(h.buckets.last().unwrap().start, NOW / 600 * 600);
        assert_eq!(h.buckets[0].start, NOW / 600 * 600 - 143 * 600);
        assert!(h.buckets.windows(2).all(|w| w[1].start == w[0].start + 600));
        assert!(h.buckets.iter().all(|b| b.allowed == 0 && b.blocked == 0));
        // No table yet (the writer has not made it): the same.
        let bare = Connection::open_in_memory().unwrap();
        assert_eq!(history(&bare, NOW).unwrap(), h);
        let json = h.serialize_json();
        assert!(
            json.starts_with(&format!(
                "{{\"schema\":1,\"buckets\":[{{\"start\":{},\"allowed\":0,\"blocked\":0}}",
                h.buckets[0].start
            )),
            "{json}"
        );
    }

    #[test]
    fn bucket_edges() {
        let conn = log();
        let last = NOW / 600 * 600;
        // The last millisecond of the bucket before, and the first of the current one.
        add(&conn, last * 1000 - 1, 4095, "blocked");
        add(&conn, last * 1000, 0, "forwarded");
        add(&conn, last * 1000, 1, "cached");
        add(&conn, NOW * 1000, 0, "blocked");
        let h = history(&conn, NOW).unwrap();
        let cur = &h.buckets[143];
        assert_eq!((cur.start, cur.allowed, cur.blocked), (last, 2, 1));
        let before = &h.buckets[142];
        assert_eq!((before.start, before.allowed, before.blocked), (last - 600, 0, 1));
        assert_eq!(h.buckets.iter().map(|b| b.allowed + b.blocked).sum::<u64>(), 4);
    }

    #[test]
    fn only_the_last_24_hours_count_and_nothing_from_the_future() {
        let conn = log();
        let first = NOW / 600 * 600 - 143 * 600;
        // Older than the first bucket: retained by the log, not in the history.
        add(&conn, first * 1000 - 1, 0, "blocked");
        add(&conn, (first - 86_400) * 1000, 0, "forwarded");
        // The first bucket's first millisecond.
        add(&conn, first * 1000, 0, "forwarded");
        // Past the current bucket (a clock set back since): left out.
        add(&conn, (NOW / 600 * 600 + 600) * 1000, 0, "blocked");
        let h = history(&conn, NOW).unwrap();
        assert_eq!((h.buckets[0].allowed, h.buckets[0].blocked), (1, 0));
        assert_eq!(h.buckets.iter().map(|b| b.allowed + b.blocked).sum::<u64>(), 1);
        // A day later the same rows are all outside.
        let h = history(&conn, NOW + 86_400 + 600).unwrap();
        assert!(h.buckets.iter().all(|b| b.allowed + b.blocked == 0));
    }
}
