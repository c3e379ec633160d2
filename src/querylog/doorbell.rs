//! How the log writer sleeps without missing work and without making
//! every logged query a wake-up.
//!
//! A writer parked on the entry channel itself would be woken by every
//! `try_send`: a futex call per query on the workers. A writer polling the
//! queue on a timer woke 40 times a second with nothing to do. Instead the
//! writer says what should wake it, and a logger rings only when that
//! happens: the first entry into an empty queue (the writer is idle, and
//! then sleeps until that entry's batch is due), or a full batch. So an idle
//! gateway's writer sleeps, and a busy one is woken about once a batch.
//!
//! Readers of the log (`hydradns log`, `top`, the LuCI page through them)
//! ask for a commit through the control socket before they read
//! ([`Doorbell::ask_commit`]), so a long `batch_interval` never hides the
//! queries someone is looking for.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::SeqCst};
use std::thread::Thread;
use std::time::Duration;

/// Nothing wakes the writer (it is awake).
const AWAKE: u8 = 0;
/// The next entry wakes it.
const ANY: u8 = 1;
/// A full batch wakes it.
const FULL: u8 = 2;

/// What the writer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The next entry.
    Any,
    /// A queue holding a full batch.
    Full,
}

/// Shared by the loggers and the writer. The ring is the writer thread's
/// own unpark (a futex word; a ring before it parks is not lost): std's
/// channels cost the aarch64 binary 6,528 bytes more for the same.
#[derive(Debug)]
pub struct Doorbell {
    /// What wakes the writer now (`AWAKE`, `ANY`, `FULL`).
    armed: AtomicU8,
    /// Entries that make a full batch.
    batch: usize,
    /// The writer thread, once it runs.
    writer: OnceLock<Thread>,
    /// Commits asked for by readers so far (a generation count).
    commits_asked: AtomicU64,
    /// The last of those the writer has done: everything queued before it
    /// was asked for is in the database.
    commits_done: AtomicU64,
}

impl Doorbell {
    /// A doorbell for batches of `batch` entries.
    pub fn new(batch: usize) -> Doorbell {
        Doorbell {
            armed: AtomicU8::new(AWAKE),
            batch,
            writer: OnceLock::new(),
            commits_asked: AtomicU64::new(0),
            commits_done: AtomicU64::new(0),
        }
    }

    /// A reader: asks the writer to commit what is queued now, whatever its
    /// batch's age. Returns the request's number for [`Doorbell::committed`].
    pub fn ask_commit(&self) -> u64 {
        let asked = self.commits_asked.fetch_add(1, SeqCst) + 1;
        self.ring();
        asked
    }

    /// A reader: has the writer done commit request `asked`?
    pub fn committed(&self, asked: u64) -> bool {
        self.commits_done.load(SeqCst) >= asked
    }

    /// The writer: the newest commit request. Read it before looking at the
    /// queue, and report it done with [`Doorbell::commit_done`] after
    /// writing what was queued then.
    pub fn commit_asked(&self) -> u64 {
        self.commits_asked.load(SeqCst)
    }

    /// The writer: requests up to `asked` are done.
    pub fn commit_done(&self, asked: u64) {
        self.commits_done.fetch_max(asked, SeqCst);
    }

    /// Called by a logger after queueing an entry; `queued` gives the queue's
    /// length, read only when a full batch is awaited. One atomic load when
    /// the writer is awake. Whether it rang.
    #[inline]
    pub fn queued(&self, queued: impl FnOnce() -> usize) -> bool {
        match self.armed.load(SeqCst) {
            AWAKE => false,
            ANY => self.ring_if(ANY),
            _ if queued() >= self.batch => self.ring_if(FULL),
            _ => false,
        }
    }

    /// Rings if the writer still waits for `what`; one logger wins.
    fn ring_if(&self, what: u8) -> bool {
        let won = self.armed.compare_exchange(what, AWAKE, SeqCst, SeqCst).is_ok();
        if won && let Some(w) = self.writer.get() {
            w.unpark();
        }
        won
    }

    /// Rings whatever the writer waits for (at stop).
    pub fn ring(&self) {
        self.armed.store(AWAKE, SeqCst);
        if let Some(w) = self.writer.get() {
            w.unpark();
        }
    }

    /// The writer: from now on, `what` wakes it. It must look at the queue
    /// once more after this, before [`Doorbell::sleep`]: an entry queued just
    /// before saw no armed bell.
    pub fn arm(&self, what: Wake) {
        let _ = self.writer.set(std::thread::current());
        self.armed.store(if what == Wake::Any { ANY } else { FULL }, SeqCst);
    }

    /// The writer: sleeps until rung or `limit` has passed (or, rarely,
    /// less: the caller looks at the queue again either way).
    pub fn sleep(&self, limit: Duration) {
        std::thread::park_timeout(limit);
    }

    /// The writer: it is awake again.
    pub fn disarm(&self) {
        self.armed.store(AWAKE, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_once_for_what_is_awaited_and_not_otherwise() {
        let door = Doorbell::new(4);
        assert!(!door.queued(|| 100), "awake: nobody rings");
        door.arm(Wake::Any);
        assert!(door.queued(|| 1), "the first entry rings");
        assert!(!door.queued(|| 2), "once");
        door.arm(Wake::Full);
        assert!(!door.queued(|| 3), "not a full batch yet");
        assert!(door.queued(|| 4), "a full batch");
        assert!(!door.queued(|| 5), "once");
        // The ring before the sleep is not lost: this returns at once.
        door.arm(Wake::Any);
        door.queued(|| 1);
        let t = std::time::Instant::now();
        door.sleep(Duration::from_secs(60));
        assert!(t.elapsed() < Duration::from_secs(10), "within a sixth of the limit: {:?}", t.elapsed());
    }

    #[test]
    fn a_commit_request_rings_and_is_answered_in_order() {
        let door = Doorbell::new(4);
        door.arm(Wake::Full);
        let first = door.ask_commit();
        assert!(!door.queued(|| 1), "the request rang already");
        let second = door.ask_commit();
        assert_eq!(door.commit_asked(), second);
        assert!(!door.committed(first));
        door.commit_done(first);
        assert!(door.committed(first) && !door.committed(second));
        door.commit_done(second);
        door.commit_done(first);
        assert!(door.committed(second), "done never goes back");
    }
}
