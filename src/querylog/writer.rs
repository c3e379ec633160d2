//! The one thread that writes the query log.
//!
//! It owns the SQLite connection and commits entries in batches of
//! `batch_size`, or whatever arrived within `batch_interval`, one
//! transaction per batch with a cached prepared statement, plus one update of
//! the per-outcome totals. Housekeeping (retention) runs at most once a
//! minute, and only when the oldest row is due to go: an idle gateway's
//! writer sleeps until an entry comes or a row expires. The
//! database is held under `max_size` by SQLite's own page limit: an insert
//! that hits it deletes the oldest tenth and tries again.
//!
//! Errors never reach DNS. A full, read-only or vanished database costs the
//! batch (counted as lost) and a rate-limited log line; the connection is
//! reopened a few seconds later. A corrupt database is moved aside and a
//! fresh one started.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use concurrent_queue::ConcurrentQueue;
use rusqlite::{Connection, ErrorCode, OpenFlags, params};
use rustc_hash::FxHashMap;

use crate::client::names::NameBook;

use super::doorbell::{Doorbell, Wake};
use super::{Entry, LogCounters};
use crate::config::QueryLogConfig;
use crate::stats::Outcome;

/// Retention's granularity: housekeeping runs at most this often.
const HOUSEKEEPING: Duration = Duration::from_secs(60);
/// Wait before reopening a database that failed.
const REOPEN_AFTER: Duration = Duration::from_secs(5);
/// At most one error line per kind per this long, so a broken disk cannot flood syslog.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(60);
/// WAL pages before a checkpoint: keeps the -wal file (also in RAM) near 1 MiB.
const WAL_AUTOCHECKPOINT: u32 = 256;

/// Rows per INSERT statement: one statement per row spends most of its time
/// on statement overhead, not on the rows. A power of two (see [`INSERTS`]).
const ROWS_PER_INSERT: usize = 64;
/// Low bits of a row id that number entries within one millisecond.
pub const ID_SEQ_BITS: u32 = 12;

/// The tables. A row id is `(unix ms << 12) | sequence`: ids follow time, so
/// a time range is a rowid range and needs no index to maintain (the writer
/// keeps ids strictly increasing). `ts` repeats the time in plain
/// milliseconds for people reading the table. `totals` holds counts per
/// outcome over the database's life.
pub const SCHEMA: &str = concat!(
    "CREATE TABLE IF NOT EXISTS queries ",
    queries_columns!(),
    ";\nCREATE TABLE IF NOT EXISTS totals ",
    totals_columns!(),
    ";\n"
);

/// The `queries` table's columns, for a table of that shape under another
/// name (the flash copy's slices).
pub const QUERIES_COLUMNS: &str = queries_columns!();
/// The `totals` table's columns.
pub const TOTALS_COLUMNS: &str = totals_columns!();

macro_rules! totals_columns {
    () => {
        "(outcome TEXT PRIMARY KEY, count INTEGER NOT NULL)"
    };
}
use totals_columns;

macro_rules! queries_columns {
    () => {
        "(
    id INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,
    client TEXT NOT NULL,
    name TEXT NOT NULL,
    qtype INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    rcode INTEGER NOT NULL,
    upstream TEXT,
    list TEXT,
    latency_us INTEGER NOT NULL,
    mac TEXT,
    client_name TEXT,
    upstream_set TEXT,
    dnssec TEXT
)"
    };
}
use queries_columns;

/// Columns later versions added, with their types: a database an older
/// version wrote gains them in place and keeps its rows (they read NULL).
const ADDED_COLUMNS: [(&str, &str); 4] =
    [("mac", "TEXT"), ("client_name", "TEXT"), ("upstream_set", "TEXT"), ("dnssec", "TEXT")];

pub(super) fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    migrate_table(conn, "queries").map(|_| ())
}

/// [`migrate`] for table `table` (ours: `queries` or a flash slice);
/// whether it gained a column.
pub(super) fn migrate_table(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    let mut added = false;
    for (column, kind) in ADDED_COLUMNS {
        if !super::read::table_has_column(conn, table, column) {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
            added = true;
        }
    }
    Ok(added)
}

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
pub fn spawn(
    cfg: QueryLogConfig,
    names: NameBook,
    rx: Arc<ConcurrentQueue<Entry>>,
    door: Arc<Doorbell>,
    counters: Arc<LogCounters>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("hydradns-log".into()).spawn(move || {
        crate::sys::lower_thread_priority();
        Writer::new(cfg, counters, names).run(rx, &door)
    })
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
    /// Last row id given out; ids only grow.
    last_id: i64,
    /// Where this batch's text already holds each address: a network has few
    /// clients and fewer upstreams, and formatting an address costs more than
    /// SQLite's insert of the row (callgrind: 1,400 of 8,000 instructions an entry).
    clients: FxHashMap<IpAddr, Range<usize>>,
    /// Devices' names from the DHCP leases and /etc/ethers.
    names: NameBook,
    upstreams: FxHashMap<SocketAddr, Range<usize>>,
}

/// Opens (creating if needed) the live database with the writer's settings.
pub fn open(path: &Path, max_size: u64) -> rusqlite::Result<Connection> {
    // 0600 in a 0700 directory: the log is every device's DNS history. A
    // failure here is SQLite's to report, with the path, when it opens.
    let _ = crate::sys::private_file(path);
    // Only the writer thread uses this connection: SQLite's own mutex is pure overhead.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
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
    migrate(&conn)?;
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

pub(super) fn code(e: &rusqlite::Error) -> Option<ErrorCode> {
    e.sqlite_error_code()
}

pub(super) fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(code(e), Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase))
}

/// Moves a damaged database (and its WAL) aside so a fresh one can start.
fn move_aside(path: &Path) -> PathBuf {
    let stamp = crate::sys::unix_now();
    let aside = path.with_extension(format!("corrupt-{stamp}"));
    let _ = std::fs::rename(path, &aside);
    for ext in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(ext);
        let _ = std::fs::remove_file(PathBuf::from(side));
    }
    aside
}

/// The address of no one, in the client's family.
fn unspecified(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// Client address as stored: cut to /24 or /48 when anonymizing.
fn client_ip(ip: IpAddr, anonymize: bool) -> IpAddr {
    match (ip, anonymize) {
        (IpAddr::V4(a), true) => {
            let o = a.octets();
            IpAddr::V4(std::net::Ipv4Addr::new(o[0], o[1], o[2], 0))
        }
        (IpAddr::V6(a), true) => {
            let s = a.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0))
        }
        (ip, false) => ip,
    }
}

impl Writer {
    fn new(cfg: QueryLogConfig, counters: Arc<LogCounters>, names: NameBook) -> Writer {
        let base_wall_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Writer {
            cfg,
            counters,
            conn: None,
            retry_at: None,
            errors: RateLimited::default(),
            base_wall_ms,
            base_instant: Instant::now(),
            last_id: 0,
            clients: FxHashMap::default(),
            upstreams: FxHashMap::default(),
            names,
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
                // Continue after the newest row, whatever the clock says (it may have stepped back).
                self.last_id = c.query_row("SELECT coalesce(max(id), 0) FROM queries", [], |r| r.get(0)).unwrap_or(0);
                self.conn = Some(c);
                self.retry_at = None;
            }
            Err(e) => {
                self.errors.error(&format!("cannot open {}: {e}", path.display()));
                self.retry_at = Some(Instant::now() + REOPEN_AFTER);
            }
        }
    }

    /// Commits full batches at once and a partial one when its first entry
    /// has waited `batch_interval` or a reader asks; in between it sleeps on
    /// the doorbell, and with nothing queued until the next entry or housekeeping.
    ///
    /// While entries keep coming below the batch size (a router's usual
    /// load), a partial batch costs one wake-up, not two: after writing one
    /// it sleeps a whole interval without waiting for the next entry's ring,
    /// and whatever came meanwhile is due when it wakes. Only an interval
    /// that brought nothing sends it back to sleeping until an entry comes.
    fn run(mut self, rx: Arc<ConcurrentQueue<Entry>>, door: &Doorbell) {
        self.connect();
        // Entries past retention may have waited on flash through a long power-off.
        let mut next_housekeeping = self.housekeeping();
        let mut batch: Vec<Entry> = Vec::with_capacity(self.cfg.batch_size);
        // When the oldest entry waiting was first seen.
        let mut first_seen: Option<Instant> = None;
        loop {
            // A reader's request counts from the doorbell's own tally, so one
            // made while the writer opened the database (or kept its
            // retention) is answered on the first pass.
            let commit_asked = door.commit_asked();
            let asked = !door.committed(commit_asked);
            let closed = rx.is_closed();
            let due = asked || first_seen.is_some_and(|t| t.elapsed() >= self.cfg.batch_interval);
            let mut wrote = false;
            while rx.len() >= self.cfg.batch_size || ((due || closed) && !rx.is_empty()) {
                while batch.len() < self.cfg.batch_size {
                    match rx.pop() {
                        Ok(e) => batch.push(e),
                        Err(_) => break,
                    }
                }
                self.write(&batch);
                batch.clear();
                first_seen = None;
                wrote = true;
            }
            if asked {
                door.commit_done(commit_asked);
            }
            if closed && rx.is_empty() {
                break;
            }
            if wrote && next_housekeeping.is_none() {
                // Rows again: the next housekeeping finds when the oldest goes.
                next_housekeeping = Some(Instant::now() + HOUSEKEEPING);
            }
            if next_housekeeping.is_some_and(|t| t <= Instant::now()) {
                next_housekeeping = self.housekeeping();
            }
            // Sleeping "forever" is a sleep of a year: the doorbell takes a duration.
            let until_housekeeping = next_housekeeping
                .map_or(Duration::from_secs(366 * 86_400), |t| t.saturating_duration_since(Instant::now()));
            if rx.is_empty() && !wrote {
                // Nothing came since the last wake-up: sleep until something does.
                first_seen = None;
                door.arm(Wake::Any);
                // An entry queued before the bell was armed rang nothing.
                if rx.is_empty() && !rx.is_closed() {
                    door.sleep(until_housekeeping);
                }
            } else {
                // A partial batch waits out its interval; right after a write
                // the next one is expected, and its interval starts now.
                let seen = *first_seen.get_or_insert_with(Instant::now);
                door.arm(Wake::Full);
                if rx.len() < self.cfg.batch_size && !rx.is_closed() {
                    door.sleep(self.cfg.batch_interval.saturating_sub(seen.elapsed()).min(until_housekeeping));
                }
            }
            door.disarm();
            if first_seen.is_none() && !rx.is_empty() {
                first_seen = Some(Instant::now());
            }
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
        let mut rows: Vec<Row> = Vec::with_capacity(batch.len());
        // All text of the batch in one buffer: no allocation per row.
        let mut text = String::with_capacity(batch.len() * 48);
        self.clients.clear();
        self.upstreams.clear();
        self.names.refresh(Instant::now());
        for e in batch {
            let ts = self.unix_ms(e.at);
            // Entries from different workers may arrive slightly out of time order.
            self.last_id = ((ts as i64) << ID_SEQ_BITS).max(self.last_id + 1);
            // A group's `querylog anonymous` keeps no part of the address, not even the /24.
            let client =
                if e.anonymous { unspecified(e.client) } else { client_ip(e.client, self.cfg.anonymize_clients) };
            let client = self.clients.entry(client).or_insert_with(|| append_display(&mut text, client)).clone();
            let upstream =
                e.upstream.map(|u| self.upstreams.entry(u).or_insert_with(|| append_display(&mut text, u)).clone());
            let name = append(&mut text, |t| {
                if e.name_len > 0 {
                    super::push_wire_name(&e.name[..e.name_len as usize], t);
                }
            });
            // Anonymized clients keep no hardware address or name either.
            let (mac, client_name) = if self.cfg.anonymize_clients || e.anonymous {
                (None, None)
            } else {
                let mac = self.names.mac(e.client, e.mac);
                let name = self.names.name(e.client, mac).map(|n| append(&mut text, |t| t.push_str(n)));
                let mac = mac.map(|m| append(&mut text, |t| t.push_str(&crate::mac::mac_text(&m))));
                (mac, name)
            };
            rows.push(Row {
                id: self.last_id,
                ts: ts as i64,
                client,
                name,
                qtype: e.qtype,
                outcome: e.outcome,
                rcode: e.rcode,
                upstream,
                list: e.list.clone(),
                latency_us: e.latency_us,
                mac,
                client_name,
                upstream_set: e.upstream_set.clone(),
                dnssec: e.dnssec,
            });
        }
        let Some(conn) = self.conn.as_mut() else {
            self.counters.lost.fetch_add(n, Relaxed);
            return;
        };
        let mut result = insert(conn, &rows, &text);
        if let Err(e) = &result
            && code(e) == Some(ErrorCode::DiskFull)
        {
            // At max_size (or the disk is full): make room from the oldest end and retry once.
            result = delete_oldest_tenth(conn).and_then(|_| insert(conn, &rows, &text));
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

    /// Deletes the rows past `retention`; returns when the oldest row left
    /// goes (not sooner than [`HOUSEKEEPING`] from now), or None when there
    /// is no row (the next write schedules it again).
    fn housekeeping(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let retry = Some(now + HOUSEKEEPING);
        let Some(conn) = self.conn.as_ref() else { return retry };
        let now_ms = self.unix_ms(now);
        let cutoff = now_ms.saturating_sub(self.cfg.retention.as_millis() as u64);
        if let Err(e) = conn.execute("DELETE FROM queries WHERE id < ?1", params![(cutoff as i64) << ID_SEQ_BITS]) {
            self.errors.error(&format!("retention: {e}"));
            return retry;
        }
        // The rowid's minimum is one step down the table's b-tree.
        let oldest: Option<i64> = match conn.query_row("SELECT min(id) FROM queries", [], |r| r.get(0)) {
            Ok(v) => v,
            Err(_) => return retry,
        };
        let oldest_ms = (oldest? >> ID_SEQ_BITS).max(0) as u64;
        let goes_in = Duration::from_millis((oldest_ms + self.cfg.retention.as_millis() as u64).saturating_sub(now_ms));
        Some(now + goes_in.max(HOUSEKEEPING))
    }
}

/// An entry in the form it is stored; text fields are ranges of the batch's text buffer.
struct Row {
    id: i64,
    ts: i64,
    client: Range<usize>,
    name: Range<usize>,
    qtype: u16,
    outcome: Outcome,
    rcode: u8,
    upstream: Option<Range<usize>>,
    list: Option<Arc<str>>,
    latency_us: u32,
    mac: Option<Range<usize>>,
    client_name: Option<Range<usize>>,
    upstream_set: Option<Arc<str>>,
    dnssec: Option<super::Dnssec>,
}

/// Appends `f`'s output to `text` and returns where it landed.
fn append(text: &mut String, f: impl FnOnce(&mut String)) -> Range<usize> {
    let start = text.len();
    f(text);
    start..text.len()
}

/// Appends `v`'s text to `text` and returns where it landed.
fn append_display(text: &mut String, v: impl std::fmt::Display) -> Range<usize> {
    use std::fmt::Write;
    append(text, |t| {
        let _ = write!(t, "{v}");
    })
}

/// INSERTs of 1, 2, 4 … [`ROWS_PER_INSERT`] rows. A batch goes in as full
/// chunks, then the rest in powers of two, so these few statements cover
/// every batch size and all stay prepared. A statement per remainder size
/// was prepared anew most batches: at 2,000 QPS that made the writer's cost
/// per entry swing by a third between runs (callgrind).
static INSERTS: LazyLock<Vec<String>> =
    LazyLock::new(|| (0..=ROWS_PER_INSERT.ilog2()).map(|k| insert_sql(1 << k)).collect());

/// Values per row of an INSERT ([`insert_sql`]); 64 rows stay under
/// SQLite's 999 parameters.
const COLUMNS: usize = 14;

/// `OR FAIL`: with the default `ABORT` a statement writing many rows must be
/// able to undo just itself, so SQLite keeps a statement journal, a copy of
/// every page it touches (a quarter of the writer's instructions per entry,
/// callgrind). Nothing here can conflict (ids only grow, every NOT NULL
/// column is given), and a failed batch rolls back its whole transaction.
fn insert_sql(rows: usize) -> String {
    let mut sql = String::from(
        "INSERT OR FAIL INTO queries (id, ts, client, name, qtype, outcome, rcode, upstream, list, latency_us, mac, client_name, upstream_set, dnssec) VALUES ",
    );
    for i in 0..rows {
        sql.push_str(if i == 0 { "(?,?,?,?,?,?,?,?,?,?,?,?,?,?)" } else { ",(?,?,?,?,?,?,?,?,?,?,?,?,?,?)" });
    }
    sql
}

fn insert(conn: &mut Connection, rows: &[Row], text: &str) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut per_outcome = [0i64; Outcome::ALL.len()];
        let mut rest = rows;
        while !rest.is_empty() {
            let k = rest.len().min(ROWS_PER_INSERT).ilog2();
            let (chunk, tail) = rest.split_at(1 << k);
            rest = tail;
            let mut stmt = tx.prepare_cached(&INSERTS[k as usize])?;
            for (i, r) in chunk.iter().enumerate() {
                let p = i * COLUMNS;
                stmt.raw_bind_parameter(p + 1, r.id)?;
                stmt.raw_bind_parameter(p + 2, r.ts)?;
                stmt.raw_bind_parameter(p + 3, &text[r.client.clone()])?;
                stmt.raw_bind_parameter(p + 4, &text[r.name.clone()])?;
                stmt.raw_bind_parameter(p + 5, r.qtype)?;
                stmt.raw_bind_parameter(p + 6, r.outcome.as_str())?;
                stmt.raw_bind_parameter(p + 7, r.rcode)?;
                // A column with nothing to say stays unbound: a statement
                // comes from rusqlite's cache with every parameter cleared to
                // NULL, and binding NULL again cost ~220 instructions a row
                // (callgrind, `bench/instructions.py --by-function
                // --scenarios "mix, log on"`: vdbeUnbind 527 → 389,
                // bind_null 70 → 0).
                if let Some(u) = &r.upstream {
                    stmt.raw_bind_parameter(p + 8, &text[u.clone()])?;
                }
                if let Some(list) = r.list.as_deref() {
                    stmt.raw_bind_parameter(p + 9, list)?;
                }
                stmt.raw_bind_parameter(p + 10, r.latency_us)?;
                if let Some(m) = &r.mac {
                    stmt.raw_bind_parameter(p + 11, &text[m.clone()])?;
                }
                if let Some(n) = &r.client_name {
                    stmt.raw_bind_parameter(p + 12, &text[n.clone()])?;
                }
                if let Some(s) = r.upstream_set.as_deref() {
                    stmt.raw_bind_parameter(p + 13, s)?;
                }
                if let Some(d) = r.dnssec {
                    stmt.raw_bind_parameter(p + 14, d.as_str())?;
                }
                if let Some(o) = Outcome::ALL.iter().position(|o| *o == r.outcome) {
                    per_outcome[o] += 1;
                }
            }
            stmt.raw_execute()?;
            // Give a waiting worker the core between chunks: a batch is a few
            // hundred microseconds of work, a query should not wait for all of it.
            std::thread::yield_now();
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
pub(super) fn delete_oldest_tenth(conn: &Connection) -> rusqlite::Result<usize> {
    conn.execute(
        "DELETE FROM queries WHERE id <= (SELECT id FROM queries ORDER BY id
            LIMIT 1 OFFSET max(100, (SELECT count(*) FROM queries) / 10) - 1)",
        [],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymized_clients() {
        let text = |ip: &str, anon| client_ip(ip.parse().unwrap(), anon).to_string();
        assert_eq!(text("192.168.1.77", true), "192.168.1.0");
        assert_eq!(text("2001:db8:1:2:3::4", true), "2001:db8:1::");
        assert_eq!(text("192.168.1.77", false), "192.168.1.77");
    }

    /// A database the previous version wrote (no `mac` column) gains the
    /// column when opened and keeps its rows.
    #[test]
    fn an_older_database_is_migrated_in_place() {
        #![allow(clippy::unwrap_used)]
        let dir = std::env::temp_dir().join(format!("hydradns-migrate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(
                &SCHEMA.replace(",\n    mac TEXT,\n    client_name TEXT,\n    upstream_set TEXT,\n    dnssec TEXT", ""),
            )
            .unwrap();
            old.execute_batch(
                "INSERT INTO queries VALUES (1, 1, '192.168.1.2', 'old.example', 1, 'cached', 0, NULL, NULL, 5)",
            )
            .unwrap();
            assert!(old.prepare("SELECT mac FROM queries").is_err(), "the old schema has no mac");
        }
        let conn = open(&path, 1 << 20).unwrap();
        let (name, mac): (String, Option<String>) =
            conn.query_row("SELECT name, mac FROM queries", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert_eq!((name.as_str(), mac), ("old.example", None));
        drop(conn);
        open(&path, 1 << 20).unwrap(); // a second open finds the column there
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The version before issue 61's wrote no `dnssec`: its database reads
    /// as it is (the column NULL), then gains the column when opened.
    #[test]
    fn a_database_without_the_dnssec_column_reads_and_gains_it() {
        #![allow(clippy::unwrap_used)]
        let dir = std::env::temp_dir().join(format!("hydradns-migrate-dnssec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.db");
        let filter = super::super::read::LogFilter { limit: 10, ..Default::default() };
        {
            let old = Connection::open(&path).unwrap();
            old.execute_batch(&SCHEMA.replace(",\n    dnssec TEXT", "")).unwrap();
            old.execute_batch(
                "INSERT INTO queries VALUES (1, 1, '192.168.1.2', 'old.example', 1, 'forwarded', 0, NULL, NULL, 5, \
                 NULL, NULL, 'kids')",
            )
            .unwrap();
            assert!(!super::super::read::has_column(&old, "dnssec"));
            let rows = super::super::read::recent(&old, &filter).unwrap();
            assert_eq!(rows.len(), 1);
            assert_eq!((rows[0].upstream_set.as_deref(), rows[0].dnssec.as_deref()), (Some("kids"), None));
        }
        let conn = open(&path, 1 << 20).unwrap();
        assert!(super::super::read::has_column(&conn, "dnssec"));
        conn.execute_batch(
            "INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us, dnssec) \
             VALUES (2, 2, '192.168.1.2', 'new.example', 1, 'forwarded', 2, 5, 'bogus')",
        )
        .unwrap();
        let rows = super::super::read::recent(&conn, &filter).unwrap();
        let got: Vec<(&str, Option<&str>)> = rows.iter().map(|r| (r.name.as_str(), r.dnssec.as_deref())).collect();
        assert_eq!(got, [("new.example", Some("bogus")), ("old.example", None)]);
        drop(conn);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Clients and upstreams alternate within one batch; each row must keep its own.
    #[test]
    fn every_row_keeps_its_own_client_and_upstream() {
        let dir = std::env::temp_dir().join(format!("hydradns-writer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = QueryLogConfig { path: dir.join("live.db"), ..QueryLogConfig::default() };
        let none = std::path::Path::new("/nonexistent");
        let mut w = Writer::new(cfg.clone(), Arc::new(LogCounters::default()), NameBook::new(none, none, none));
        let clients: [IpAddr; 3] =
            ["192.168.1.10".parse().unwrap(), "192.168.1.11".parse().unwrap(), "fd00::1".parse().unwrap()];
        let upstreams: [Option<SocketAddr>; 3] =
            [Some("9.9.9.9:53".parse().unwrap()), None, Some("[2620:fe::fe]:53".parse().unwrap())];
        let batch: Vec<Entry> = (0..40)
            .map(|i| {
                let mut name = [0u8; crate::wire::MAX_NAME_LEN];
                let wire = format!("\u{5}host{}\u{0}", i % 10);
                name[..wire.len()].copy_from_slice(wire.as_bytes());
                Entry {
                    at: Instant::now(),
                    client: clients[i % 3],
                    name,
                    name_len: wire.len() as u8,
                    qtype: 1,
                    outcome: if upstreams[i % 3].is_some() { Outcome::Forwarded } else { Outcome::Cached },
                    rcode: 0,
                    upstream: upstreams[i % 3],
                    list: None,
                    upstream_set: None,
                    dnssec: None,
                    latency_us: i as u32,
                    mac: None,
                    anonymous: false,
                }
            })
            .collect();
        w.write(&batch);
        w.write(&batch[..7]); // a second batch starts with fresh text
        // Shifted by one, the same cached statements see NULL where the last
        // batch bound a value: nothing of that batch may stay behind.
        w.write(&batch[1..8]);
        let conn = w.conn.as_ref().unwrap();
        let mut stmt = conn.prepare("SELECT client, name, upstream, latency_us FROM queries ORDER BY id").unwrap();
        let rows: Vec<(String, String, Option<String>, u32)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let written: Vec<usize> = (0..40).chain(0..7).chain(1..8).collect();
        assert_eq!(rows.len(), written.len());
        for (k, (client, name, upstream, latency)) in rows.iter().enumerate() {
            let i = *latency as usize;
            assert_eq!(i, written[k]);
            assert_eq!(*client, clients[i % 3].to_string(), "row {k}");
            assert_eq!(*upstream, upstreams[i % 3].map(|u| u.to_string()), "row {k}");
            assert_eq!(*name, format!("host{}", i % 10), "row {k}");
        }
        drop(stmt);
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
    /// Housekeeping wakes when the oldest row goes, not every minute: an
    /// idle gateway's writer sleeps through the retention of what it holds.
    #[test]
    fn housekeeping_is_due_when_the_oldest_row_expires() {
        let dir = std::env::temp_dir().join(format!("hydradns-housekeeping-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cfg = QueryLogConfig {
            path: dir.join("live.db"),
            retention: Duration::from_secs(3600),
            ..QueryLogConfig::default()
        };
        let none = std::path::Path::new("/nonexistent");
        let mut w = Writer::new(cfg, Arc::new(LogCounters::default()), NameBook::new(none, none, none));
        w.connect();
        assert_eq!(w.housekeeping(), None, "no row: nothing to wake for");
        let now_ms = w.unix_ms(Instant::now()) as i64;
        let conn = w.conn.as_ref().unwrap();
        let row = "INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us)
                   VALUES (?1, ?2, '192.168.1.2', 'a.example', 1, 'cached', 0, 1)";
        // Two hours old (past retention), and 40 minutes old: it goes in 20.
        for age_ms in [7_200_000i64, 2_400_000] {
            let ts = now_ms - age_ms;
            conn.execute(row, params![ts << ID_SEQ_BITS, ts]).unwrap();
        }
        let due = w.housekeeping().unwrap().saturating_duration_since(Instant::now());
        assert!(due > Duration::from_secs(19 * 60) && due <= Duration::from_secs(20 * 60), "{due:?}");
        let left: i64 = w.conn.as_ref().unwrap().query_row("SELECT count(*) FROM queries", [], |r| r.get(0)).unwrap();
        assert_eq!(left, 1, "the expired row went");
        // A row about to go: not sooner than a minute from now.
        let ts = now_ms - 3_599_000;
        w.conn.as_ref().unwrap().execute(row, params![ts << ID_SEQ_BITS, ts]).unwrap();
        let due = w.housekeeping().unwrap().saturating_duration_since(Instant::now());
        assert!(due > Duration::from_secs(59) && due <= HOUSEKEEPING, "{due:?}");
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
