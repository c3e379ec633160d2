//! The query log's copy on flash: what reaches flash at a flush, and how a
//! torn or foreign copy is found and set aside.
//!
//! The live database sits on tmpfs (RAM): cheap to write, gone at reboot.
//! The copy at `flash_path` is an SQLite database with the live one's
//! `queries` and `totals` tables, so `sqlite3` and the readers open it as
//! they open the live one. Every `flush_interval` and at stop it receives,
//! in one transaction, only the rows added since the last flush, loses the
//! rows past `retention`, and takes the live totals; a flush with no new
//! rows writes nothing at all (the expired rows wait for the next one). Until issue 46 every flush copied the
//! whole database (≈ 27 MB an hour for a household at a week's retention);
//! docs/how-it-works.md has the measured bytes of both.
//!
//! The copy keeps SQLite's rollback journal (`journal_mode=DELETE`,
//! `synchronous=FULL`), not WAL: appended pages past the old end of the file
//! need no journal, so a flush writes its new rows once plus a few pages,
//! where WAL writes every page twice (once to the log, once at the
//! checkpoint). A power cut at any moment leaves the journal SQLite rolls
//! back at the next open: the last good copy or the new one, never a torn
//! file. `max_size` holds on flash as in RAM, through SQLite's page limit.
//!
//! At start, a missing live database (a reboot) is restored from the copy,
//! through SQLite so a journal left by a power cut is rolled back first. A
//! copy that is not a database, fails SQLite's check or holds tables that
//! are not ours is renamed aside (`<flash_path>.corrupt-<time>`, with its
//! journal), logged, and a fresh copy started: never deleted, never fatal.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use super::LogCounters;
use super::writer::{ID_SEQ_BITS, SCHEMA, code, delete_oldest_tenth, is_corrupt, migrate};
use crate::config::QueryLogConfig;

/// The live database's columns, in the order both tables declare them: a
/// copy an older version wrote gains the newer ones in place ([`migrate`])
/// before any row is copied, so the lists match by name, not position.
const COLUMNS: &str = "id, ts, client, name, qtype, outcome, rcode, upstream, list, latency_us, mac, client_name";

/// Columns every version's `queries` table had: a table without them is not ours.
const BASE_COLUMNS: [&str; 10] =
    ["id", "ts", "client", "name", "qtype", "outcome", "rcode", "upstream", "list", "latency_us"];

/// Times a flush makes room (deletes the oldest tenth) when the copy is at
/// `max_size`, before it gives up until the next flush.
const MAKE_ROOM_TRIES: usize = 10;

/// SQLite's own side files of a database: the rollback journal this version
/// uses, the WAL and its index an older version's whole-database copy carried.
const SIDE_FILES: [&str; 3] = ["-journal", "-wal", "-shm"];

fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tmp");
    PathBuf::from(p)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// Why a flash copy could not be opened.
#[derive(Debug)]
enum OpenError {
    /// Not ours to use: not a database, damaged, or another program's tables.
    Unusable(String),
    /// The file system said no (permissions, read-only, I/O error): nothing is set aside.
    Io(String),
}

/// Opens the copy at `path` for a flush, creating it (0600) if missing.
/// `check`: run SQLite's `quick_check`, which reads the whole file, so only
/// at the first flush of a run and at restore.
fn try_open(path: &Path, max_size: u64, check: bool) -> Result<Connection, OpenError> {
    crate::sys::private_file(path).map_err(|e| OpenError::Io(format!("{}: {e}", path.display())))?;
    for side in SIDE_FILES {
        // SQLite creates these with the database's own mode; an older
        // version's copy may have left them world-readable.
        let side = with_suffix(path, side);
        if side.exists() {
            let _ = crate::sys::private_file(&side);
        }
    }
    let sql = |e: rusqlite::Error| {
        if is_corrupt(&e) { OpenError::Unusable(e.to_string()) } else { OpenError::Io(e.to_string()) }
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(sql)?;
    // Someone reading the copy with sqlite3 holds a shared lock; wait a little for it.
    conn.busy_timeout(Duration::from_secs(5)).map_err(sql)?;
    // The first read of the file rolls back a journal a power cut left.
    // An older version's copy was a WAL database: this turns it into a
    // rollback one once, keeping its rows.
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0)).map_err(sql)?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(OpenError::Io(format!("journal_mode stays {mode}")));
    }
    // FULL: the journal is on flash before the database is touched, which is
    // what makes a power cut mid-commit roll back rather than tear.
    conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
    if check {
        let ok: String = conn.pragma_query_value(None, "quick_check", |r| r.get(0)).map_err(sql)?;
        if ok != "ok" {
            return Err(OpenError::Unusable(format!("quick_check: {ok}")));
        }
    }
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT IN ('queries', 'totals')",
            [],
            |r| r.get(0),
        )
        .map_err(sql)?;
    let has_queries: bool = conn
        .query_row("SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'queries')", [], |r| {
            r.get(0)
        })
        .map_err(sql)?;
    if tables > 0 {
        return Err(OpenError::Unusable(format!("{tables} tables that are not the query log's")));
    }
    if has_queries && let Some(c) = BASE_COLUMNS.iter().find(|c| !super::read::has_column(&conn, c)) {
        return Err(OpenError::Unusable(format!("its queries table has no column {c}")));
    }
    conn.execute_batch(SCHEMA).map_err(sql)?;
    migrate(&conn).map_err(sql)?;
    let page_size: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0)).map_err(sql)?;
    let max_pages = (max_size / page_size.max(512) as u64).max(16);
    conn.pragma_update(None, "max_page_count", max_pages as i64).map_err(sql)?;
    Ok(conn)
}

/// Renames an unusable copy and its side files to `<path>.corrupt-<time>`;
/// returns the new name. Never deletes: the owner may want what is in it.
fn set_aside(path: &Path) -> PathBuf {
    let aside = with_suffix(path, &format!(".corrupt-{}", crate::sys::unix_now()));
    let _ = std::fs::rename(path, &aside);
    for side in SIDE_FILES {
        let from = with_suffix(path, side);
        if from.exists() {
            // A journal left beside a fresh copy would be "rolled back" into it.
            let _ = std::fs::rename(&from, with_suffix(&aside, side));
        }
    }
    aside
}

/// [`try_open`], setting an unusable copy aside and starting a fresh one.
fn open(path: &Path, max_size: u64, check: bool) -> Result<Connection, String> {
    match try_open(path, max_size, check) {
        Ok(c) => Ok(c),
        Err(OpenError::Io(e)) => Err(format!("open {}: {e}", path.display())),
        Err(OpenError::Unusable(why)) => {
            let aside = set_aside(path);
            log::warn!(
                "query log: the flash copy {} is unusable ({why}); moved to {} and started afresh",
                path.display(),
                aside.display()
            );
            try_open(path, max_size, false).map_err(|e| match e {
                OpenError::Io(e) | OpenError::Unusable(e) => format!("open {}: {e}", path.display()),
            })
        }
    }
}

/// Restores the live database from the flash copy if the live one is
/// missing (after a reboot); returns whether it did. Through SQLite's backup
/// into a temporary file and a rename: the flash copy's journal, if a power
/// cut left one, is rolled back first, and a crash halfway leaves no partial
/// live database.
pub fn restore_if_missing(live: &Path, flash: &Path, max_size: u64) -> Result<bool, String> {
    if live.exists() || !flash.exists() {
        return Ok(false);
    }
    let src = open(flash, max_size, true)?;
    let rows: i64 = src.query_row("SELECT count(*) FROM queries", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    if rows == 0 {
        return Ok(false);
    }
    let tmp = tmp_path(live);
    let _ = std::fs::remove_file(&tmp);
    crate::sys::private_file(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    {
        let mut dst = Connection::open(&tmp).map_err(|e| format!("open {}: {e}", tmp.display()))?;
        let backup = Backup::new(&src, &mut dst).map_err(|e| format!("restore: {e}"))?;
        match backup.step(-1).map_err(|e| format!("restore: {e}"))? {
            StepResult::Done => {}
            other => return Err(format!("restore did not finish: {other:?}")),
        }
    }
    std::fs::rename(&tmp, live).map_err(|e| format!("rename to {}: {e}", live.display()))?;
    Ok(true)
}

/// What one flush did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Rows added to the copy.
    pub added: u64,
    /// Rows deleted from it: past `retention`, or the oldest to stay under `max_size`.
    pub deleted: u64,
    /// Whether anything was written (false: the copy was already current).
    pub wrote: bool,
}

/// Brings the flash copy up to date with `cfg.path` as of `now_ms` (Unix
/// ms). `check`: check the copy's integrity first (see [`try_open`]).
pub fn flush(cfg: &QueryLogConfig, now_ms: u64, check: bool) -> Result<Flushed, String> {
    if !cfg.path.exists() {
        return Err(format!("{} does not exist", cfg.path.display()));
    }
    let live = cfg.path.to_str().ok_or_else(|| format!("{} is not UTF-8", cfg.path.display()))?;
    let mut conn = open(&cfg.flash_path, cfg.max_size, check)?;
    // Read-write although it only reads: the last flush runs after the writer
    // has closed, and only a read-write last connection removes the -wal and
    // -shm files on close instead of leaving them behind on tmpfs.
    conn.execute("ATTACH ?1 AS live", [live]).map_err(|e| format!("attach {live}: {e}"))?;
    let cutoff = (now_ms.saturating_sub(cfg.retention.as_millis() as u64) as i64) << ID_SEQ_BITS;
    let done = bring_up_to_date(&mut conn, cutoff).map_err(|e| e.to_string());
    let _ = conn.execute_batch("DETACH live");
    done
}

/// The flush's one transaction, or none when there is nothing to do.
fn bring_up_to_date(conn: &mut Connection, cutoff: i64) -> rusqlite::Result<Flushed> {
    // Row ids only grow (the writer keeps them so), so "new" is "above the
    // copy's newest": no state to keep between flushes or across restarts.
    let newest: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM main.queries", [], |r| r.get(0))?;
    // Rows the live writer has not yet deleted for their age are not copied.
    let from = newest.max(cutoff - 1);
    let new: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM live.queries WHERE id > ?1)", [from], |r| r.get(0))?;
    if !new {
        // An idle gateway's flush writes nothing, not even a journal. Rows
        // that expired meanwhile go with the next flush that has new ones:
        // deleting them alone would cost about their own size on flash every
        // hour of an idle day (6.4 MB a day after a week at 50,000 queries a
        // day, bench/flash.sh), for rows that never leave the router and
        // that the live database, which every reader reads, has already lost.
        return Ok(Flushed::default());
    }
    let mut made_room = 0u64;
    for _ in 0..MAKE_ROOM_TRIES {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let deleted = tx.execute("DELETE FROM main.queries WHERE id < ?1", [cutoff])? as u64;
        let inserted = tx.execute(
            &format!("INSERT INTO main.queries ({COLUMNS}) SELECT {COLUMNS} FROM live.queries WHERE id > ?1"),
            [from],
        );
        match inserted {
            Ok(added) => {
                tx.execute(
                    "INSERT OR REPLACE INTO main.totals (outcome, count) SELECT outcome, count FROM live.totals",
                    [],
                )?;
                tx.commit()?;
                return Ok(Flushed { added: added as u64, deleted: deleted + made_room, wrote: true });
            }
            Err(e) if code(&e) == Some(ErrorCode::DiskFull) => {
                // At max_size (or the flash is full): undo, free the oldest
                // tenth in a transaction of its own, and try again.
                drop(tx);
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                made_room += delete_oldest_tenth(&tx)? as u64;
                tx.commit()?;
            }
            Err(e) => return Err(e),
        }
    }
    Err(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
        Some(format!("no room for the new rows under max_size after deleting {made_room}")),
    ))
}

/// What the flusher is told.
enum Command {
    /// Copy now and exit.
    FinalFlush,
}

/// The thread that keeps the flash copy up to date.
pub struct Flusher {
    tx: Sender<Command>,
    thread: JoinHandle<()>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One flush, logged and counted. `checked`: the copy's integrity was
/// checked in this run already. The bytes this thread wrote are the flush's
/// flash wear: the thread writes nothing else.
fn flush_counted(cfg: &QueryLogConfig, counters: &LogCounters, checked: &mut bool) {
    let before = crate::sys::thread_write_bytes();
    let result = flush(cfg, now_ms(), !*checked);
    let bytes = crate::sys::thread_write_bytes().zip(before).map_or(0, |(a, b)| a.saturating_sub(b));
    counters.flash_bytes.fetch_add(bytes, Relaxed);
    match result {
        Ok(done) => {
            *checked = true;
            counters.last_flush_unix.store(crate::sys::unix_now(), Relaxed);
            if done.wrote {
                counters.flushes.fetch_add(1, Relaxed);
                log::info!(
                    "query log copied to {} ({} new rows, {} deleted, {} KiB written)",
                    cfg.flash_path.display(),
                    done.added,
                    done.deleted,
                    bytes / 1024
                );
            } else {
                log::debug!("query log: nothing new for {}", cfg.flash_path.display());
            }
        }
        Err(e) => {
            counters.flush_errors.fetch_add(1, Relaxed);
            log::error!("query log: copy to flash failed, previous copy kept: {e}");
        }
    }
}

impl Flusher {
    /// Starts the thread; a zero `flush_interval` means only the final copy at stop.
    pub fn spawn(cfg: QueryLogConfig, counters: Arc<LogCounters>) -> std::io::Result<Flusher> {
        // An older version's copy interrupted by a crash left its temporary file behind.
        let _ = std::fs::remove_file(tmp_path(&cfg.flash_path));
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new().name("hydradns-flush".into()).spawn(move || {
            crate::sys::lower_thread_priority();
            let every = cfg.flush_interval;
            let wait = if every.is_zero() { Duration::from_secs(u32::MAX as u64) } else { every };
            let mut checked = false;
            loop {
                match rx.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => flush_counted(&cfg, &counters, &mut checked),
                    Ok(Command::FinalFlush) => {
                        flush_counted(&cfg, &counters, &mut checked);
                        return;
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })?;
        Ok(Flusher { tx, thread })
    }

    /// Writes the last copy and waits for it.
    pub fn finish(self) {
        let _ = self.tx.send(Command::FinalFlush);
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hydradns-flash-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn cfg(d: &Path) -> QueryLogConfig {
        QueryLogConfig { path: d.join("live/q.db"), flash_path: d.join("flash/q.db"), ..QueryLogConfig::default() }
    }

    /// Adds `n` rows at `ts` ms (ids as the writer makes them) and bumps the totals.
    fn add(conn: &Connection, ts: i64, n: i64) {
        for i in 0..n {
            conn.execute(
                "INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us) VALUES (?1, ?2, 'c', 'n', 1, 'cached', 0, 5)",
                [(ts << ID_SEQ_BITS) + i, ts],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO totals VALUES ('cached', ?1) ON CONFLICT(outcome) DO UPDATE SET count = count + ?1",
            [n],
        )
        .unwrap();
    }

    fn count(path: &Path) -> i64 {
        let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        c.query_row("SELECT count(*) FROM queries", [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn flush_then_restore_round_trip() {
        let d = dir("rt");
        let c = cfg(&d);
        let now = now_ms() as i64;
        let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
        add(&conn, now, 3);
        let done = flush(&c, now as u64, true).unwrap();
        assert_eq!(done, Flushed { added: 3, deleted: 0, wrote: true });
        assert_eq!(count(&c.flash_path), 3);
        // Only what is new goes the next time; nothing new, nothing written.
        add(&conn, now + 1, 2);
        assert_eq!(flush(&c, now as u64, false).unwrap().added, 2);
        assert_eq!(flush(&c, now as u64, false).unwrap(), Flushed::default());
        assert!(!with_suffix(&c.flash_path, "-journal").exists(), "no journal left behind");
        drop(conn);
        std::fs::remove_file(&c.path).unwrap();
        assert!(restore_if_missing(&c.path, &c.flash_path, c.max_size).unwrap());
        assert!(!restore_if_missing(&c.path, &c.flash_path, c.max_size).unwrap(), "only when missing");
        assert_eq!(count(&c.path), 5);
        // The final flush at shutdown runs after the writer closed: it must
        // not leave the WAL side files behind.
        super::super::writer::open(&c.path, 1 << 20).unwrap();
        flush(&c, now as u64, false).unwrap();
        for side in ["q.db-wal", "q.db-shm"] {
            assert!(!d.join("live").join(side).exists(), "{side} left behind");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn retention_and_max_size_hold_on_flash() {
        let d = dir("ret");
        let mut c = cfg(&d);
        let now = now_ms() as i64;
        let conn = super::super::writer::open(&c.path, 1 << 30).unwrap();
        let old = now - 8 * 86_400_000;
        add(&conn, old, 10);
        assert_eq!(flush(&c, old as u64, true).unwrap().added, 10, "copied while young");
        add(&conn, now, 10);
        let done = flush(&c, now as u64, false).unwrap();
        assert_eq!((done.added, done.deleted), (10, 10), "the 8-day-old rows go");
        assert_eq!(flush(&c, now as u64 + 1, false).unwrap(), Flushed::default());
        // Idle a week later: everything has expired, yet nothing is written.
        let later = (now + 9 * 86_400_000) as u64;
        assert_eq!(flush(&c, later, false).unwrap(), Flushed::default(), "expired rows alone write nothing");
        assert_eq!(count(&c.flash_path), 10);
        assert_eq!(count(&c.flash_path), 10);
        // A copy at max_size keeps the newest rows.
        c.max_size = 64 * 1024;
        for k in 1..=40 {
            add(&conn, now + k, 100);
            flush(&c, now as u64, false).unwrap();
        }
        assert!(std::fs::metadata(&c.flash_path).unwrap().len() <= 64 * 1024);
        let newest: i64 = Connection::open(&c.flash_path)
            .unwrap()
            .query_row("SELECT max(id) FROM queries", [], |r| r.get(0))
            .unwrap();
        assert_eq!(newest, ((now + 40) << ID_SEQ_BITS) + 99);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn unusable_copies_are_set_aside_not_deleted() {
        let d = dir("aside");
        let c = cfg(&d);
        let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
        add(&conn, now_ms() as i64, 2);
        std::fs::create_dir_all(c.flash_path.parent().unwrap()).unwrap();
        for junk in [b"not a database at all, but a long enough text to look like one".to_vec(), foreign_db(&d)] {
            std::fs::write(&c.flash_path, &junk).unwrap();
            assert_eq!(flush(&c, now_ms(), true).unwrap().added, 2);
            assert_eq!(count(&c.flash_path), 2);
            let aside: Vec<PathBuf> = std::fs::read_dir(d.join("flash"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().contains(".corrupt-"))
                .collect();
            assert_eq!(aside.len(), 1, "{aside:?}");
            assert_eq!(std::fs::read(&aside[0]).unwrap(), junk, "kept as it was");
            for f in std::fs::read_dir(d.join("flash")).unwrap() {
                let p = f.unwrap().path();
                if p.to_string_lossy().contains(".corrupt-") {
                    std::fs::remove_file(p).unwrap();
                }
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A valid SQLite file of another program's.
    fn foreign_db(d: &Path) -> Vec<u8> {
        let p = d.join("foreign.db");
        let c = Connection::open(&p).unwrap();
        c.execute_batch("CREATE TABLE accounts (name TEXT); INSERT INTO accounts VALUES ('x');").unwrap();
        drop(c);
        std::fs::read(p).unwrap()
    }

    /// A whole-database copy the previous version wrote (WAL mode, backup
    /// API) is taken over with its rows: restored, then added to.
    #[test]
    fn a_previous_versions_copy_is_taken_over() {
        let d = dir("old");
        let c = cfg(&d);
        let now = now_ms() as i64;
        {
            let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
            add(&conn, now, 7);
            std::fs::create_dir_all(c.flash_path.parent().unwrap()).unwrap();
            let mut dst = Connection::open(&c.flash_path).unwrap();
            Backup::new(&conn, &mut dst).unwrap().step(-1).unwrap();
        }
        std::fs::remove_file(&c.path).unwrap();
        assert!(restore_if_missing(&c.path, &c.flash_path, c.max_size).unwrap());
        let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
        add(&conn, now + 1, 1);
        assert_eq!(flush(&c, now as u64, true).unwrap().added, 1, "only the new row");
        assert_eq!(count(&c.flash_path), 8);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_flush_keeps_the_old_copy() {
        let d = dir("keep");
        let mut c = cfg(&d);
        c.flash_path = d.join("q.db");
        c.path = d.join("missing.db");
        std::fs::write(&c.flash_path, b"old copy").unwrap();
        assert!(flush(&c, now_ms(), true).is_err());
        assert_eq!(std::fs::read(&c.flash_path).unwrap(), b"old copy");
        let _ = std::fs::remove_dir_all(&d);
    }
}
