//! The query log's copy on flash.
//!
//! The live database sits on tmpfs (RAM): cheap to write, gone at reboot.
//! Every `flush_interval` and at stop a consistent copy goes to flash with
//! SQLite's online backup, read through its own connection so the writer
//! keeps going: backup into `<flash>.tmp`, fsync, rename over the old copy,
//! fsync the directory. A power cut at any moment leaves the old copy or the
//! new one, never a torn file. At start, a missing live database (a reboot)
//! is restored from the flash copy.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use super::LogCounters;

fn tmp_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".tmp");
    PathBuf::from(p)
}

/// Copies the flash copy to the live path if the live database is missing.
/// Returns whether it did. The copy goes through a temporary file and a
/// rename, so a crash halfway cannot leave a partial live database.
pub fn restore_if_missing(live: &Path, flash: &Path) -> std::io::Result<bool> {
    if live.exists() || !flash.exists() {
        return Ok(false);
    }
    if let Some(dir) = live.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = tmp_path(live);
    std::fs::copy(flash, &tmp)?;
    std::fs::rename(&tmp, live)?;
    Ok(true)
}

/// Writes a consistent copy of `live` to `flash`; returns its size in bytes.
pub fn flush(live: &Path, flash: &Path) -> Result<u64, String> {
    if !live.exists() {
        return Err(format!("{} does not exist", live.display()));
    }
    // Read-write although it only reads: the last flush runs after the writer
    // has closed, and only a read-write last connection removes the -wal and
    // -shm files on close instead of leaving them behind on tmpfs.
    let src = Connection::open_with_flags(live, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| format!("open {}: {e}", live.display()))?;
    src.busy_timeout(Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let dir = flash.parent().ok_or("flash path has no directory")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let tmp = tmp_path(flash);
    let _ = std::fs::remove_file(&tmp);
    {
        let mut dst = Connection::open(&tmp).map_err(|e| format!("open {}: {e}", tmp.display()))?;
        let backup = Backup::new(&src, &mut dst).map_err(|e| format!("backup: {e}"))?;
        // All pages in one step: one read transaction, one consistent
        // snapshot. Smaller steps would restart whenever the writer commits.
        match backup.step(-1).map_err(|e| format!("backup: {e}"))? {
            StepResult::Done => {}
            other => return Err(format!("backup did not finish: {other:?}")),
        }
    }
    let file = std::fs::File::open(&tmp).map_err(|e| e.to_string())?;
    file.sync_all().map_err(|e| format!("fsync {}: {e}", tmp.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    std::fs::rename(&tmp, flash).map_err(|e| format!("rename to {}: {e}", flash.display()))?;
    // The rename itself must reach the disk, or a power cut could bring the old name back.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(size)
}

/// What the flusher is told.
enum Command {
    /// Copy now and exit.
    FinalFlush,
}

/// The thread that refreshes the flash copy.
pub struct Flusher {
    tx: Sender<Command>,
    thread: JoinHandle<()>,
}

fn flush_counted(live: &Path, flash: &Path, counters: &LogCounters) {
    match flush(live, flash) {
        Ok(bytes) => {
            counters.flushes.fetch_add(1, Relaxed);
            counters.last_flush_unix.store(crate::sys::unix_now(), Relaxed);
            log::info!("query log copied to {} ({} KiB)", flash.display(), bytes / 1024);
        }
        Err(e) => {
            counters.flush_errors.fetch_add(1, Relaxed);
            log::error!("query log: copy to flash failed, previous copy kept: {e}");
        }
    }
}

impl Flusher {
    /// Starts the thread; `every` zero means only the final copy at stop.
    pub fn spawn(
        live: PathBuf,
        flash: PathBuf,
        every: Duration,
        counters: Arc<LogCounters>,
    ) -> std::io::Result<Flusher> {
        // A copy interrupted by a crash leaves its temporary file behind.
        let _ = std::fs::remove_file(tmp_path(&flash));
        let (tx, rx) = channel();
        let thread = std::thread::Builder::new().name("hydradns-flush".into()).spawn(move || {
            crate::sys::lower_thread_priority();
            let wait = if every.is_zero() { Duration::from_secs(u32::MAX as u64) } else { every };
            loop {
                match rx.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => flush_counted(&live, &flash, &counters),
                    Ok(Command::FinalFlush) => {
                        flush_counted(&live, &flash, &counters);
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

    #[test]
    fn flush_then_restore_round_trip() {
        let d = dir("rt");
        let live = d.join("live/q.db");
        let flash = d.join("flash/q.db");
        let conn = super::super::writer::open(&live, 1 << 20).unwrap();
        conn.execute("INSERT INTO queries (ts, client, name, qtype, outcome, rcode, latency_us) VALUES (1, 'c', 'n', 1, 'cached', 0, 5)", []).unwrap();
        assert!(flush(&live, &flash).unwrap() > 0);
        assert!(!tmp_path(&flash).exists());
        drop(conn);
        std::fs::remove_file(&live).unwrap();
        assert!(restore_if_missing(&live, &flash).unwrap());
        assert!(!restore_if_missing(&live, &flash).unwrap(), "only when missing");
        let back = Connection::open(&live).unwrap();
        let n: i64 = back.query_row("SELECT count(*) FROM queries", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
        drop(back);
        // The final flush at shutdown runs after the writer closed: it must
        // not leave the WAL side files behind.
        flush(&live, &flash).unwrap();
        for side in ["q.db-wal", "q.db-shm"] {
            assert!(!d.join("live").join(side).exists(), "{side} left behind");
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_flush_keeps_the_old_copy() {
        let d = dir("keep");
        let flash = d.join("q.db");
        std::fs::write(&flash, b"old copy").unwrap();
        assert!(flush(&d.join("missing.db"), &flash).is_err());
        assert_eq!(std::fs::read(&flash).unwrap(), b"old copy");
        let _ = std::fs::remove_dir_all(&d);
    }
}
