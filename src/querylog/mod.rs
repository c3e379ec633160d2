//! The query log: every answered query becomes one row in SQLite, without
//! ever slowing an answer down.
//!
//! Workers hand a fixed-size [`Entry`] to [`Logger::log`], a non-blocking
//! push into one bounded queue (its slots are allocated once, at start);
//! when the queue is full the entry is dropped and counted. One
//! writer thread owns the database and commits batches (see [`writer`]); a
//! flusher thread adds the new rows to the copy on flash now and then (see
//! [`flash`]). The CLI
//! reads the same database (see [`read`]).
//!
//! The writer never parks on the queue: a parked receiver would make every
//! push wake it, a syscall per query on the workers. It sleeps on a
//! [`doorbell`] that loggers ring only when it matters (the first entry
//! after a quiet spell, a full batch), so an idle gateway's writer sleeps.
//!
//! The queue is a bare [`ConcurrentQueue`], not an async channel: a
//! channel's send tells its (here never-used) waiting receivers and streams,
//! two mutex round trips and two fences per logged query on the workers.

pub mod devices;
pub mod doorbell;
pub mod flash;
pub mod history;
pub mod read;
pub mod writer;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Instant;

use concurrent_queue::{ConcurrentQueue, PushError};

use crate::config::QueryLogConfig;
use crate::stats::Outcome;
use crate::wire::MAX_NAME_LEN;

/// One answered query. Fixed size, no heap of its own (the list name is a
/// shared `Arc`), so queueing it allocates nothing.
#[derive(Debug, Clone)]
pub struct Entry {
    /// When the query arrived.
    pub at: Instant,
    /// Who asked.
    pub client: IpAddr,
    /// Question name, wire format as the client sent it; `name_len` bytes used.
    pub name: [u8; MAX_NAME_LEN],
    /// Used bytes of `name` (0 when the question could not be read).
    pub name_len: u8,
    /// Question type.
    pub qtype: u16,
    /// How it was answered.
    pub outcome: Outcome,
    /// Response code sent.
    pub rcode: u8,
    /// Upstream server that answered, for forwarded queries.
    pub upstream: Option<SocketAddr>,
    /// List that blocked it.
    pub list: Option<Arc<str>>,
    /// The group's upstream set that answered it; `None`: the main upstreams.
    pub upstream_set: Option<Arc<str>>,
    /// What DNSSEC validation decided for a validated miss; `None`: not
    /// validated (no validating set, a CD client, a cache hit).
    pub dnssec: Option<Dnssec>,
    /// Time from arrival to answer, µs.
    pub latency_us: u32,
    /// The client's hardware address, when a trusted forwarder gave it.
    pub mac: Option<[u8; 6]>,
    /// Its group logs it `anonymous`: the row keeps no address, MAC or name.
    pub anonymous: bool,
}

pub use crate::answer::Dnssec;

impl Entry {
    /// The question name as dotted text, lowercase, with unusual bytes escaped as `\DDD`.
    pub fn name_text(&self) -> String {
        wire_name_text(&self.name[..self.name_len as usize])
    }
}

/// Dotted text of a wire-format name (no compression), lowercase.
pub fn wire_name_text(wire: &[u8]) -> String {
    let mut out = String::with_capacity(wire.len());
    push_wire_name(wire, &mut out);
    out
}

/// Appends the dotted text of a wire-format name to `out` (the writer reuses one buffer).
pub fn push_wire_name(wire: &[u8], out: &mut String) {
    let start = out.len();
    let mut p = 0;
    while let Some(&len) = wire.get(p) {
        if len == 0 {
            break;
        }
        let Some(label) = wire.get(p + 1..p + 1 + len as usize) else { break };
        if out.len() > start {
            out.push('.');
        }
        for &b in label {
            match b.to_ascii_lowercase() {
                c @ (b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'*') => out.push(c as char),
                c => {
                    use std::fmt::Write;
                    let _ = write!(out, "\\{c:03}");
                }
            }
        }
        p += 1 + len as usize;
    }
    if out.len() == start {
        out.push('.');
    }
}

/// What the log has done since start.
#[derive(Debug, Default)]
pub struct LogCounters {
    /// Entries committed to the database.
    pub written: AtomicU64,
    /// Entries dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Entries lost to database errors (full disk, read-only, corrupt).
    pub lost: AtomicU64,
    /// Flushes that wrote to flash (one with nothing new writes nothing and is not counted).
    pub flushes: AtomicU64,
    /// Copies to flash that failed (the previous copy stays).
    pub flush_errors: AtomicU64,
    /// Unix time (s) the flash copy was last known current; 0 if never.
    pub last_flush_unix: AtomicU64,
    /// Bytes the flushes wrote to flash since start (the flusher thread's
    /// `write_bytes`: data and SQLite's journal, not the file system's own metadata).
    pub flash_bytes: AtomicU64,
    /// Files the flushes wrote to flash since start: per flush that wrote,
    /// the copy and its rollback journal (made and removed each time).
    pub flash_files: AtomicU64,
}

/// The workers' handle: cheap to clone, never blocks.
#[derive(Debug, Clone)]
pub struct Logger {
    /// The bounded queue to the writer.
    tx: Arc<ConcurrentQueue<Entry>>,
    /// The writer's slot for the config's names of devices.
    names: crate::client::names::Configured,
    /// Wakes the writer when it waits for entries.
    door: Arc<doorbell::Doorbell>,
    /// Shared counters.
    pub counters: Arc<LogCounters>,
}

impl Logger {
    /// Queues an entry, or drops and counts it when the queue is full.
    #[inline]
    pub fn log(&self, entry: Entry) {
        if let Err(PushError::Full(_)) = self.tx.push(entry) {
            self.counters.dropped.fetch_add(1, Relaxed);
        }
        let _ = self.door.queued(|| self.tx.len());
    }

    /// Gives the writer the names the config gives devices (at start and on every reload).
    pub fn set_client_names(&self, names: Vec<crate::client::names::Known>) {
        *self.names.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(names);
    }

    /// Asks the writer to commit what is queued now; returns the request's
    /// number for [`Logger::committed`]. For readers, who should not wait out
    /// a batch interval to see the queries they just made.
    pub fn ask_commit(&self) -> u64 {
        self.door.ask_commit()
    }

    /// Has commit request `asked` been done (or the writer stopped)?
    pub fn committed(&self, asked: u64) -> bool {
        self.door.committed(asked) || self.tx.is_closed()
    }

    /// Entries waiting now.
    pub fn queued(&self) -> usize {
        self.tx.len()
    }

    /// Queue capacity.
    pub fn capacity(&self) -> usize {
        self.tx.capacity().unwrap_or(0)
    }
}

/// The running writer and flusher threads.
pub struct QueryLog {
    /// Handle for the workers.
    pub logger: Logger,
    writer: Option<JoinHandle<()>>,
    flusher: Option<flash::Flusher>,
}

impl QueryLog {
    /// Restores the live database from the flash copy if it is gone (after a reboot),
    /// then starts the writer and the flusher. Database problems are logged
    /// and counted by the threads, never returned: DNS starts regardless.
    pub fn start(cfg: &QueryLogConfig, names: crate::client::names::NameBook) -> std::io::Result<QueryLog> {
        match flash::restore_if_missing(&cfg.path, &cfg.flash_path, cfg.max_size) {
            Ok(true) => log::info!("query log restored from {}", cfg.flash_path.display()),
            Ok(false) => {}
            Err(e) => log::warn!("query log: cannot restore {}: {e}", cfg.flash_path.display()),
        }
        let tx = Arc::new(ConcurrentQueue::bounded(cfg.queue_size));
        let rx = tx.clone();
        let counters = Arc::new(LogCounters::default());
        let door = Arc::new(doorbell::Doorbell::new(cfg.batch_size));
        let slot = names.configured();
        let writer = writer::spawn(cfg.clone(), names, rx, door.clone(), counters.clone())?;
        let flusher = flash::Flusher::spawn(cfg.clone(), counters.clone())?;
        Ok(QueryLog {
            logger: Logger { tx, names: slot, door, counters },
            writer: Some(writer),
            flusher: Some(flusher),
        })
    }

    /// Stops taking entries, lets the writer commit what is queued, then
    /// writes a last flash copy. Called on SIGTERM.
    pub fn shutdown(mut self) {
        self.logger.tx.close();
        self.logger.door.ring();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        if let Some(f) = self.flusher.take() {
            f.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_text() {
        assert_eq!(wire_name_text(b"\x03WWW\x07Example\x03com\x00"), "www.example.com");
        assert_eq!(wire_name_text(b"\x00"), ".");
        assert_eq!(wire_name_text(b""), ".");
        assert_eq!(wire_name_text(b"\x03a.b\x00"), "a\\046b");
        assert_eq!(wire_name_text(b"\x05ab"), ".", "cut-off label ignored");
    }

    #[test]
    fn entries_are_fixed_size() {
        // A queued entry must not own heap memory beyond the shared list name.
        assert!(std::mem::size_of::<Entry>() < 400, "{}", std::mem::size_of::<Entry>());
    }
}
