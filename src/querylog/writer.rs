//! The one thread that writes the query log.
//!
//! It owns the SQLite connection and commits entries in batches of
//! `batch_size`, or whatever arrived within `batch_interval`, one
//! transaction per batch with a cached prepared statement, plus one update of
//! the per-outcome totals. Housekeeping (retention) runs once a minute. The
//! database is held under `max_size` by SQLite's own page limit: an insert
//! that hits it deletes the oldest tenth and tries again.
//!
//! Errors never reach DNS. A full, read-only or vanished database costs the
//! batch (counted as lost) and a rate-limited log line; the connection is
//! reopened a few seconds later. A corrupt database is moved aside and a
//! fresh one started.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, params};
use smol::channel::Receiver;

use super::{Entry, LogCounters, Outcome};
use crate::config::QueryLogConfig;

/// How often the writer looks at the queue. Short enough that a full batch
/// waits little; long enough to cost nothing (40 wake-ups a second).
const POLL: Duration = Duration::from_millis(25);
/// Retention and housekeeping cadence.
const HOUSEKEEPING: Duration = Duration::from_secs(60);
/// Wait before reopening a database that failed.
const REOPEN_AFTER: Duration = Duration::from_secs(5);
/// At most one error line per kind per this long, so a broken disk cannot flood syslog.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(60);
/// WAL pages before a checkpoint: keeps the -wal file (also in RAM) near 1 MiB.
const WAL_AUTOCHECKPOINT: u32 = 256;

/// The table and its index; the `totals` table holds counts per outcome over the database's life.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS queries (
    id INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,
    client TEXT NOT NULL,
    name TEXT NOT NULL,
    qtype INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    rcode INTEGER NOT NULL,
    upstream TEXT,
    list TEXT,
    latency_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS queries_ts ON queries(ts);
CREATE TABLE IF NOT EXISTS totals (outcome TEXT PRIMARY KEY, count INTEGER NOT NULL);
";

/// Logs an error at most once per [`ERROR_LOG_EVERY`], with how many were held back.
#[derive(Debug, Default)]
struct RateLimited {
    last: Option<Instant>,
    held_back: u64,
}

impl RateLimited {
    fn error(&mut self, msg: &str) {
        if self.last.is_some_and(|t| t.elapsed() < ERROR_LOG_EVERY) {
            self.held_back += 1;
            return;
        }
        if self.held_back > 0 {
            log::error!("query log: {msg} ({} similar errors held back)", self.held_back);
        } else {
            log::error!("query log: {msg}");
        }
        self.last = Some(Instant::now());
        self.held_back = 0;
    }
}

/// Starts the writer thread.
pub fn spawn(cfg: QueryLogConfig, rx: Receiver<Entry>, counters: Arc<LogCounters>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("hydradns-log".into()).spawn(move || Writer::new(cfg, counters).run(rx))
}

struct Writer {
    cfg: QueryLogConfig,
    counters: Arc<LogCounters>,
    conn: Option<Connection>,
    /// When to try opening again after a failure.
    retry_at: Option<Instant>,
    errors: RateLimited,
    /// Wall clock at `base_instant`, to turn entries' `Instant`s into Unix time without a syscall each.
    base_wall_ms: u64,
    base_instant: Instant,
}

/// Opens (creating if needed) the live database with the writer's settings.
pub fn open(path: &Path, max_size: u64) -> rusqlite::Result<Connection> {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(2))?;
    // tmpfs: durability comes from the flash copy, so skip fsyncs.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "cache_size", -1024)?; // KiB: 1 MiB of page cache
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)?;
    let page_size: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
    let max_pages = (max_size / page_size.max(512) as u64).max(16);
    conn.pragma_update(None, "max_page_count", max_pages as i64)?;
    conn.execute_batch(SCHEMA)?;
    // A damaged file often opens fine and fails later; find out now.
    let ok: String = conn.pragma_query_value(None, "quick_check", |r| r.get(0))?;
    if ok != "ok" {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            Some(format!("quick_check: {ok}")),
        ));
    }
    Ok(conn)
}

fn code(e: &rusqlite::Error) -> Option<ErrorCode> {
    e.sqlite_error_code()
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(code(e), Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase))
}

/// Moves a damaged database (and its WAL) aside so a fresh one can start.
fn move_aside(path: &Path) -> PathBuf {
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let aside = path.with_extension(format!("corrupt-{stamp}"));
    let _ = std::fs::rename(path, &aside);
    for ext in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(ext);
        let _ = std::fs::remove_file(PathBuf::from(side));
    }
    aside
}

/// Client address as stored: cut to /24 or /48 when anonymizing.
fn client_text(ip: IpAddr, anonymize: bool) -> String {
    match (ip, anonymize) {
        (IpAddr::V4(a), true) => {
            let o = a.octets();
            format!("{}.{}.{}.0", o[0], o[1], o[2])
        }
        (IpAddr::V6(a), true) => {
            let s = a.segments();
            std::net::Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0).to_string()
        }
        (ip, false) => ip.to_string(),
    }
}

impl Writer {
    fn new(cfg: QueryLogConfig, counters: Arc<LogCounters>) -> Writer {
        let base_wall_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Writer {
            cfg,
            counters,
            conn: None,
            retry_at: None,
            errors: RateLimited::default(),
            base_wall_ms,
            base_instant: Instant::now(),
        }
    }

    fn connect(&mut self) {
        if self.conn.is_some() || self.retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let path = self.cfg.path.clone();
        let result = open(&path, self.cfg.max_size).or_else(|e| {
            if is_corrupt(&e) {
                let aside = move_aside(&path);
                log::warn!(
                    "query log: {} was damaged ({e}); moved to {} and started fresh",
                    path.display(),
                    aside.display()
                );
                open(&path, self.cfg.max_size)
            } else {
                Err(e)
            }
        });
        match result {
            Ok(c) => {
                self.conn = Some(c);
                self.retry_at = None;
            }
            Err(e) => {
                self.errors.error(&format!("cannot open {}: {e}", path.display()));
                self.retry_at = Some(Instant::now() + REOPEN_AFTER);
            }
        }
    }

    fn run(mut self, rx: Receiver<Entry>) {
        self.connect();
        // Entries past retention may have waited on flash through a long power-off.
        self.housekeeping();
        let mut batch: Vec<Entry> = Vec::with_capacity(self.cfg.batch_size);
        let mut last_write = Instant::now();
        let mut last_housekeeping = Instant::now();
        loop {
            let closed = rx.is_closed();
            let due = last_write.elapsed() >= self.cfg.batch_interval;
            // Full batches at once; a partial one when its time is up or at shutdown.
            while rx.len() >= self.cfg.batch_size || ((due || closed) && !rx.is_empty()) {
                while batch.len() < self.cfg.batch_size {
                    match rx.try_recv() {
                        Ok(e) => batch.push(e),
                        Err(_) => break,
                    }
                }
                self.write(&batch);
                batch.clear();
                last_write = Instant::now();
            }
            if due {
                last_write = Instant::now();
            }
            if closed && rx.is_empty() {
                break;
            }
            if last_housekeeping.elapsed() >= HOUSEKEEPING {
                self.housekeeping();
                last_housekeeping = Instant::now();
            }
            std::thread::sleep(POLL);
        }
        if let Some(conn) = self.conn.take() {
            // Fold the WAL back so the flash copy and other readers see one file.
            let _ = conn.pragma_update(None, "wal_checkpoint", "TRUNCATE");
        }
    }

    fn unix_ms(&self, at: Instant) -> u64 {
        let delta = at.saturating_duration_since(self.base_instant).as_millis() as u64;
        self.base_wall_ms + delta
    }

    fn write(&mut self, batch: &[Entry]) {
        self.connect();
        let n = batch.len() as u64;
        let rows: Vec<Row> =
            batch.iter().map(|e| Row::new(e, self.unix_ms(e.at), self.cfg.anonymize_clients)).collect();
        let Some(conn) = self.conn.as_mut() else {
            self.counters.lost.fetch_add(n, Relaxed);
            return;
        };
        let mut result = insert(conn, &rows);
        if let Err(e) = &result
            && code(e) == Some(ErrorCode::DiskFull)
        {
            // At max_size (or the disk is full): make room from the oldest end and retry once.
            result = delete_oldest_tenth(conn).and_then(|_| insert(conn, &rows));
        }
        match result {
            Ok(()) => {
                self.counters.written.fetch_add(n, Relaxed);
            }
            Err(e) => {
                self.counters.lost.fetch_add(n, Relaxed);
                self.errors.error(&format!("{n} entries lost: {e}"));
                if is_corrupt(&e) {
                    self.conn = None;
                    let aside = move_aside(&self.cfg.path);
                    log::warn!("query log: damaged database moved to {}", aside.display());
                } else if code(&e) != Some(ErrorCode::DiskFull) {
                    // Read-only, I/O error, file removed: try a fresh connection later.
                    self.conn = None;
                    self.retry_at = Some(Instant::now() + REOPEN_AFTER);
                }
            }
        }
    }

    fn housekeeping(&mut self) {
        let Some(conn) = self.conn.as_ref() else { return };
        let cutoff = self.unix_ms(Instant::now()).saturating_sub(self.cfg.retention.as_millis() as u64);
        if let Err(e) = conn.execute("DELETE FROM queries WHERE ts < ?1", params![cutoff as i64]) {
            self.errors.error(&format!("retention: {e}"));
        }
    }
}

/// An entry in the form it is stored.
struct Row {
    ts: i64,
    client: String,
    name: String,
    qtype: u16,
    outcome: Outcome,
    rcode: u8,
    upstream: Option<String>,
    list: Option<Arc<str>>,
    latency_us: u32,
}

impl Row {
    fn new(e: &Entry, ts: u64, anonymize: bool) -> Row {
        Row {
            ts: ts as i64,
            client: client_text(e.client, anonymize),
            name: if e.name_len == 0 { String::new() } else { e.name_text() },
            qtype: e.qtype,
            outcome: e.outcome,
            rcode: e.rcode,
            upstream: e.upstream.map(|u| u.to_string()),
            list: e.list.clone(),
            latency_us: e.latency_us,
        }
    }
}

fn insert(conn: &mut Connection, rows: &[Row]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO queries (ts, client, name, qtype, outcome, rcode, upstream, list, latency_us)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        let mut per_outcome = [0i64; Outcome::ALL.len()];
        for r in rows {
            stmt.execute(params![
                r.ts,
                r.client,
                r.name,
                r.qtype,
                r.outcome.as_str(),
                r.rcode,
                r.upstream,
                r.list.as_deref(),
                r.latency_us
            ])?;
            if let Some(i) = Outcome::ALL.iter().position(|o| *o == r.outcome) {
                per_outcome[i] += 1;
            }
        }
        let mut totals = tx.prepare_cached(
            "INSERT INTO totals (outcome, count) VALUES (?1, ?2)
             ON CONFLICT(outcome) DO UPDATE SET count = count + excluded.count",
        )?;
        for (o, n) in Outcome::ALL.iter().zip(per_outcome) {
            if n > 0 {
                totals.execute(params![o.as_str(), n])?;
            }
        }
    }
    tx.commit()
}

/// Deletes the oldest tenth of the entries (at least 100).
fn delete_oldest_tenth(conn: &Connection) -> rusqlite::Result<usize> {
    conn.execute(
        "DELETE FROM queries WHERE id < (SELECT min(id) FROM queries) +
            max(100, (SELECT (max(id) - min(id)) / 10 FROM queries))",
        [],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymized_clients() {
        assert_eq!(client_text("192.168.1.77".parse().unwrap(), true), "192.168.1.0");
        assert_eq!(client_text("2001:db8:1:2:3::4".parse().unwrap(), true), "2001:db8:1::");
        assert_eq!(client_text("192.168.1.77".parse().unwrap(), false), "192.168.1.77");
    }
}
