//! The query log's copy on flash: what reaches flash at a flush, and how a
//! torn or foreign copy is found and set aside.
//!
//! The live database sits on tmpfs (RAM): cheap to write, gone at reboot.
//! The copy at `flash_path` is an SQLite database with the live one's
//! `totals` table and its rows in slices of time: a table per slice
//! (`queries_<first ms>`, a 24th of `retention`) and a
//! view `queries` over them all, so `sqlite3` and the readers open it as
//! they open the live one. Every `flush_interval` and at stop it receives,
//! in one transaction, only the rows added since the last flush, drops the
//! slices wholly past `retention`, and takes the live totals; a flush with
//! no new rows writes nothing at all (the expired slices wait for the next
//! one). A dropped table's pages go to SQLite's free list without being
//! copied to the journal, and the next rows reuse them; deleting the same
//! rows one by one journals every page they were on, which was most of
//! what a flush wrote (2.7 × the new rows at 50,000 queries a day, against
//! 1.x now). So rows stay on flash up to one slice past `retention` (7 h of
//! a week). Until issue 46 every flush copied the whole database (≈ 27 MB
//! an hour for a household at a week's retention); docs/how-it-works.md has
//! the measured bytes of each design.
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

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use super::LogCounters;
use super::writer::{ID_SEQ_BITS, QUERIES_COLUMNS, TOTALS_COLUMNS, code, is_corrupt, migrate, migrate_table};
use crate::config::QueryLogConfig;

/// The live database's columns, in the order both tables declare them: a
/// copy an older version wrote gains the newer ones in place ([`migrate`])
/// before any row is copied, so the lists match by name, not position.
const COLUMNS: &str =
    "id, ts, client, name, qtype, outcome, rcode, upstream, list, latency_us, mac, client_name, upstream_set, dnssec";

/// Columns every version's `queries` table had: a table without them is not ours.
const BASE_COLUMNS: [&str; 10] =
    ["id", "ts", "client", "name", "qtype", "outcome", "rcode", "upstream", "list", "latency_us"];

/// Times a flush makes room (deletes the oldest tenth) when the copy is at
/// `max_size`, before it gives up until the next flush.
const MAKE_ROOM_TRIES: usize = 10;

/// The copy's slice tables: `queries_` and the slice's first Unix ms.
const SLICE_PREFIX: &str = "queries_";

/// How long a slice of the copy is: a 24th of `retention` (7 h of a week),
/// so rows stay on flash at most that long past it, and the view is over at
/// most ~25 tables (SQLite allows 500 in one compound SELECT).
fn slice_ms(retention: Duration) -> u64 {
    (retention.as_millis() as u64 / 24).max(1000)
}

/// The slice tables of the copy, oldest first.
fn slices(conn: &Connection) -> rusqlite::Result<Vec<(u64, String)>> {
    // Oldest first by the number in the name: SQL sorts, no sort code here.
    let mut stmt = conn.prepare(
        "SELECT name FROM main.sqlite_schema WHERE type = 'table' AND name LIKE 'queries\\_%' ESCAPE '\\'
         ORDER BY CAST(substr(name, 9) AS INTEGER)",
    )?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    let mut out = Vec::new();
    for name in names {
        let name = name?;
        if let Some(start) = name.strip_prefix(SLICE_PREFIX).and_then(|n| n.parse::<u64>().ok()) {
            out.push((start, name));
        }
    }
    Ok(out)
}

/// Whether `name` is one of ours: `totals`, the view, or a slice table.
fn is_ours(name: &str) -> bool {
    name == "totals"
        || name == "queries"
        || name.strip_prefix(SLICE_PREFIX).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The slice table `name`, as the live database's `queries` is declared.
fn create_slice(conn: &Connection, name: &str) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("CREATE TABLE IF NOT EXISTS {name} {QUERIES_COLUMNS}"))
}

/// The view `queries` over every slice, made anew when the slices change.
fn make_view(conn: &Connection, slices: &[(u64, String)]) -> rusqlite::Result<()> {
    let union: Vec<String> = slices.iter().map(|(_, t)| format!("SELECT {COLUMNS} FROM main.{t}")).collect();
    conn.execute_batch(&format!(
        "DROP VIEW IF EXISTS main.queries; CREATE VIEW main.queries AS {};",
        union.join(" UNION ALL ")
    ))
}

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
    let names: Vec<(String, String)> = conn
        .prepare("SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view')")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(sql)?;
    let foreign = names.iter().filter(|(_, n)| !is_ours(n)).count();
    if foreign > 0 {
        return Err(OpenError::Unusable(format!("{foreign} tables that are not the query log's")));
    }
    if names.iter().any(|(t, n)| t == "table" && n == "queries") {
        // The previous version's copy: one `queries` table. It becomes a
        // slice of its own, named after its oldest row, trimmed by retention
        // until it is wholly past it (`bring_up_to_date`).
        if let Some(c) = BASE_COLUMNS.iter().find(|c| !super::read::has_column(&conn, c)) {
            return Err(OpenError::Unusable(format!("its queries table has no column {c}")));
        }
        migrate(&conn).map_err(sql)?;
        let oldest: Option<i64> = conn.query_row("SELECT min(id) FROM queries", [], |r| r.get(0)).map_err(sql)?;
        let start = oldest.map_or(0, |id| (id >> ID_SEQ_BITS).max(0));
        conn.execute_batch(&format!("BEGIN; ALTER TABLE queries RENAME TO {SLICE_PREFIX}{start}; COMMIT;"))
            .map_err(sql)?;
    }
    conn.execute_batch(&format!("CREATE TABLE IF NOT EXISTS totals {TOTALS_COLUMNS}")).map_err(sql)?;
    let have = slices(&conn).map_err(sql)?;
    // Slices an older version wrote gain the newer columns in place; the
    // view over them, made with its fewer columns, is made anew.
    let mut grown = false;
    for (_, table) in &have {
        grown |= migrate_table(&conn, table).map_err(sql)?;
    }
    if grown || have.is_empty() || !names.iter().any(|(t, n)| t == "view" && n == "queries") {
        let tx = conn.unchecked_transaction().map_err(sql)?;
        let have = if have.is_empty() {
            // A view needs a table to be over; the first flush's rows go to the slice of now.
            let name = format!("{SLICE_PREFIX}0");
            create_slice(&tx, &name).map_err(sql)?;
            vec![(0, name)]
        } else {
            have
        };
        make_view(&tx, &have).map_err(sql)?;
        tx.commit().map_err(sql)?;
    }
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
    // Row by row into the live schema (the copy's slices are its own shape),
    // in one transaction of a database nobody else has open yet.
    let restored = (|| -> rusqlite::Result<()> {
        src.execute("ATTACH ?1 AS live", [tmp.to_string_lossy()])?;
        src.execute_batch(&format!(
            "BEGIN; CREATE TABLE live.queries {QUERIES_COLUMNS}; CREATE TABLE live.totals {TOTALS_COLUMNS};"
        ))?;
        src.execute_batch(&format!(
            "INSERT INTO live.queries ({COLUMNS}) SELECT {COLUMNS} FROM main.queries ORDER BY id;
             INSERT INTO live.totals SELECT outcome, count FROM main.totals; COMMIT; DETACH live;"
        ))
    })();
    if let Err(e) = restored {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("restore: {e}"));
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
    let slice = slice_ms(cfg.retention);
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
    let done = bring_up_to_date(&mut conn, cutoff, slice).map_err(|e| e.to_string());
    let _ = conn.execute_batch("DETACH live");
    done
}

/// The flush's one transaction, or none when there is nothing to do.
fn bring_up_to_date(conn: &mut Connection, cutoff: i64, slice: u64) -> rusqlite::Result<Flushed> {
    // Row ids only grow (the writer keeps them so), so "new" is "above the
    // copy's newest": no state to keep between flushes or across restarts.
    // The newest slice's newest row: one step down one b-tree (a max over
    // the view would read every slice).
    let mut newest = 0i64;
    for (_, table) in slices(conn)?.iter().rev() {
        if let Some(id) =
            conn.query_row(&format!("SELECT max(id) FROM main.{table}"), [], |r| r.get::<_, Option<i64>>(0))?
        {
            newest = id;
            break;
        }
    }
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
        let mut have = slices(&tx)?;
        let before = have.clone();
        // New rows first: a slice the expired rows share with them stays.
        let inserted = insert_new(&tx, &mut have, from, slice);
        let deleted = if inserted.is_ok() { expire(&tx, &mut have, cutoff, slice)? } else { 0 };
        if inserted.is_ok() && have != before {
            make_view(&tx, &have)?;
        }
        match inserted {
            Ok(added) => {
                tx.execute(
                    "INSERT OR REPLACE INTO main.totals (outcome, count) SELECT outcome, count FROM live.totals",
                    [],
                )?;
                tx.commit()?;
                return Ok(Flushed { added, deleted: deleted + made_room, wrote: true });
            }
            Err(e) if code(&e) == Some(ErrorCode::DiskFull) => {
                // At max_size (or the flash is full): undo, free the oldest
                // tenth in a transaction of its own, and try again.
                drop(tx);
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let mut have = slices(&tx)?;
                made_room += make_room(&tx, &mut have)?;
                make_view(&tx, &have)?;
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

/// Drops the slices wholly past `cutoff` (a row id); a table longer than a
/// slice (the previous version's, or one from a longer `retention`) loses
/// its expired rows one by one instead. Returns the rows that went.
fn expire(tx: &Connection, have: &mut Vec<(u64, String)>, cutoff: i64, slice: u64) -> rusqlite::Result<u64> {
    let mut gone = 0u64;
    // The empty placeholder of a fresh copy goes as soon as rows have a slice.
    while let Some((start, table)) = have.first().cloned() {
        let newest: Option<i64> = tx.query_row(&format!("SELECT max(id) FROM main.{table}"), [], |r| r.get(0))?;
        match newest {
            Some(id) if id >= cutoff => {
                let oldest: i64 = tx.query_row(&format!("SELECT min(id) FROM main.{table}"), [], |r| r.get(0))?;
                let first_ms = ((oldest >> ID_SEQ_BITS).max(0) as u64).min(start);
                let wide = (id >> ID_SEQ_BITS).max(0) as u64 >= first_ms + slice;
                if wide && oldest < cutoff {
                    gone += tx.execute(&format!("DELETE FROM main.{table} WHERE id < ?1"), [cutoff])? as u64;
                }
                break;
            }
            Some(_) => {
                gone += tx.query_row(&format!("SELECT count(*) FROM main.{table}"), [], |r| r.get::<_, i64>(0))? as u64
            }
            None if have.len() == 1 => break,
            None => {}
        }
        tx.execute_batch(&format!("DROP TABLE main.{table}"))?;
        have.remove(0);
    }
    Ok(gone)
}

/// Copies the live rows above `from` into the slices they belong to,
/// making the slices that do not exist yet. Returns the rows copied.
fn insert_new(tx: &Connection, have: &mut Vec<(u64, String)>, from: i64, slice: u64) -> rusqlite::Result<u64> {
    let mut added = 0u64;
    let mut next: Option<i64> = tx.query_row("SELECT min(id) FROM live.queries WHERE id > ?1", [from], |r| r.get(0))?;
    while let Some(id) = next {
        let ms = (id >> ID_SEQ_BITS).max(0) as u64;
        let start = ms - ms % slice;
        let end = (((start + slice) as i64) << ID_SEQ_BITS).max(id + 1);
        let table = format!("{SLICE_PREFIX}{start}");
        if !have.iter().any(|(_, t)| *t == table) {
            create_slice(tx, &table)?;
            have.insert(have.partition_point(|(s, _)| *s < start), (start, table.clone()));
        }
        added += tx.execute(
            &format!(
                "INSERT INTO main.{table} ({COLUMNS}) SELECT {COLUMNS} FROM live.queries WHERE id > ?1 AND id >= ?2 AND id < ?3"
            ),
            [from, id, end],
        )? as u64;
        next = tx.query_row("SELECT min(id) FROM live.queries WHERE id >= ?1", [end], |r| r.get(0))?;
    }
    Ok(added)
}

/// Frees room under `max_size`: the oldest slice goes whole, or, when only
/// one is left, its oldest tenth (at least 100 rows). Returns the rows that went.
fn make_room(tx: &Connection, have: &mut Vec<(u64, String)>) -> rusqlite::Result<u64> {
    let Some((_, table)) = have.first().cloned() else { return Ok(0) };
    if have.len() > 1 {
        let n: i64 = tx.query_row(&format!("SELECT count(*) FROM main.{table}"), [], |r| r.get(0))?;
        tx.execute_batch(&format!("DROP TABLE main.{table}"))?;
        have.remove(0);
        return Ok(n as u64);
    }
    Ok(tx.execute(
        &format!(
            "DELETE FROM main.{table} WHERE id <= (SELECT id FROM main.{table} ORDER BY id
                LIMIT 1 OFFSET max(100, (SELECT count(*) FROM main.{table}) / 10) - 1)"
        ),
        [],
    )? as u64)
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
                counters.flash_files.fetch_add(2, Relaxed);
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

    fn tables(path: &Path) -> Vec<String> {
        let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        slices(&c).unwrap().into_iter().map(|(_, t)| t).collect()
    }

    /// Rows go to the slice of their time; a slice goes whole once all its
    /// rows are past retention (not row by row), and the view shows the rest.
    #[test]
    fn slices_go_whole_once_past_retention() {
        const H: i64 = 3_600_000;
        let d = dir("slices");
        let c = cfg(&d); // a week's retention: slices of 7 h
        assert_eq!(slice_ms(c.retention), 7 * H as u64);
        let base = now_ms() as i64 / (7 * H) * (7 * H);
        let week = 168 * H;
        let conn = super::super::writer::open(&c.path, 1 << 30).unwrap();
        add(&conn, base - week - 8 * H, 4);
        assert_eq!(flush(&c, (base - week - 8 * H) as u64, true).unwrap().added, 4);
        // One slice: a row that will be past retention, three that will not.
        add(&conn, base - week + H, 1);
        assert_eq!(flush(&c, (base - week + H) as u64, false).unwrap().added, 1);
        add(&conn, base - week + 4 * H, 3);
        add(&conn, base + 3 * H, 2);
        let done = flush(&c, (base + 3 * H) as u64, false).unwrap();
        assert_eq!((done.added, done.deleted), (5, 4), "the old slice went whole");
        assert_eq!(tables(&c.flash_path).len(), 2, "{:?}", tables(&c.flash_path));
        assert_eq!(count(&c.flash_path), 6, "the row 2 h past retention stays with its slice");
        add(&conn, base + 5 * H, 1);
        let done = flush(&c, (base + 5 * H) as u64, false).unwrap();
        assert_eq!((done.added, done.deleted), (1, 4), "all of that slice past retention: it goes");
        assert_eq!(count(&c.flash_path), 3);
        assert_eq!(tables(&c.flash_path).len(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The previous version's one table is trimmed row by row while it
    /// still holds rows inside retention (it is wider than a slice).
    #[test]
    fn the_previous_versions_table_is_trimmed_by_retention() {
        const H: i64 = 3_600_000;
        let d = dir("legacy");
        let c = cfg(&d);
        let now = now_ms() as i64;
        std::fs::create_dir_all(c.flash_path.parent().unwrap()).unwrap();
        {
            let old = super::super::writer::open(&c.flash_path, 1 << 30).unwrap();
            add(&old, now - 200 * H, 5);
            add(&old, now - 100 * H, 6);
        }
        let conn = super::super::writer::open(&c.path, 1 << 30).unwrap();
        add(&conn, now, 1);
        let done = flush(&c, now as u64, true).unwrap();
        assert_eq!((done.added, done.deleted), (1, 5), "past the week: gone; inside: kept");
        assert_eq!(count(&c.flash_path), 7);
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
            rusqlite::backup::Backup::new(&conn, &mut dst).unwrap().step(-1).unwrap();
        }
        std::fs::remove_file(&c.path).unwrap();
        assert!(restore_if_missing(&c.path, &c.flash_path, c.max_size).unwrap());
        let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
        add(&conn, now + 1, 1);
        assert_eq!(flush(&c, now as u64, true).unwrap().added, 1, "only the new row");
        assert_eq!(count(&c.flash_path), 8);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A sliced copy the version before the `dnssec` column wrote: its
    /// slices gain the column and its view is made anew, so it restores.
    #[test]
    fn slices_without_the_newest_column_gain_it() {
        let d = dir("slices-old");
        let c = cfg(&d);
        let now = now_ms() as i64;
        let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
        add(&conn, now, 4);
        flush(&c, now as u64, true).unwrap();
        drop(conn);
        {
            let old = Connection::open(&c.flash_path).unwrap();
            let have = slices(&old).unwrap();
            old.execute_batch("DROP VIEW queries").unwrap();
            for (_, t) in &have {
                old.execute_batch(&format!("ALTER TABLE {t} DROP COLUMN dnssec")).unwrap();
            }
            let before = COLUMNS.trim_end_matches(", dnssec");
            let union: Vec<String> = have.iter().map(|(_, t)| format!("SELECT {before} FROM {t}")).collect();
            old.execute_batch(&format!("CREATE VIEW queries AS {}", union.join(" UNION ALL "))).unwrap();
        }
        std::fs::remove_file(&c.path).unwrap();
        assert!(restore_if_missing(&c.path, &c.flash_path, c.max_size).unwrap());
        assert_eq!(count(&c.path), 4);
        let conn = super::super::writer::open(&c.path, 1 << 20).unwrap();
        add(&conn, now + 1, 1);
        assert_eq!(flush(&c, now as u64, false).unwrap().added, 1);
        assert_eq!(count(&c.flash_path), 5);
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
