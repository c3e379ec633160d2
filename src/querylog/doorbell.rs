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

use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
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

/// The loggers' side: rings when what the writer waits for happens.
#[derive(Debug)]
pub struct Doorbell {
    /// What wakes the writer now (`AWAKE`, `ANY`, `FULL`).
    armed: AtomicU8,
    /// Entries that make a full batch.
    batch: usize,
    /// The ring; it holds one, and a ring already pending is enough.
    tx: SyncSender<()>,
}

/// The writer's side.
#[derive(Debug)]
pub struct Bell {
    rx: Receiver<()>,
}

/// A doorbell for batches of `batch` entries.
pub fn doorbell(batch: usize) -> (Doorbell, Bell) {
    let (tx, rx) = sync_channel(1);
    (Doorbell { armed: AtomicU8::new(AWAKE), batch, tx }, Bell { rx })
}

impl Doorbell {
    /// Called by a logger after queueing an entry; `queued` gives the queue's
    /// length, read only when a full batch is awaited. One atomic load when
    /// the writer is awake.
    #[inline]
    pub fn queued(&self, queued: impl FnOnce() -> usize) {
        match self.armed.load(SeqCst) {
            AWAKE => {}
            ANY => self.ring_if(ANY),
            _ if queued() >= self.batch => self.ring_if(FULL),
            _ => {}
        }
    }

    /// Rings if the writer still waits for `what`; one logger wins.
    fn ring_if(&self, what: u8) {
        if self.armed.compare_exchange(what, AWAKE, SeqCst, SeqCst).is_ok() {
            let _ = self.tx.try_send(());
        }
    }

    /// Rings whatever the writer waits for (at stop).
    pub fn ring(&self) {
        self.armed.store(AWAKE, SeqCst);
        let _ = self.tx.try_send(());
    }

    /// The writer: from now on, `what` wakes it. It must look at the queue
    /// once more after this, before [`Bell::wait`]: an entry queued just
    /// before saw no armed bell.
    pub fn arm(&self, what: Wake) {
        self.armed.store(if what == Wake::Any { ANY } else { FULL }, SeqCst);
    }

    /// The writer: it is awake again.
    pub fn disarm(&self) {
        self.armed.store(AWAKE, SeqCst);
    }
}

impl Bell {
    /// Sleeps until rung or `limit` has passed.
    pub fn wait(&self, limit: Duration) {
        let _ = self.rx.recv_timeout(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn rings_once_for_what_is_awaited_and_not_otherwise() {
        let (door, bell) = doorbell(4);
        door.queued(|| 100);
        let t = Instant::now();
        bell.wait(Duration::from_millis(50));
        assert!(t.elapsed() >= Duration::from_millis(50), "awake: nobody rings");
        door.arm(Wake::Any);
        door.queued(|| 1);
        door.queued(|| 2);
        bell.wait(Duration::from_secs(5));
        assert!(bell.rx.try_recv().is_err(), "one ring for two entries");
        door.arm(Wake::Full);
        door.queued(|| 3);
        assert!(bell.rx.try_recv().is_err(), "not a full batch yet");
        door.queued(|| 4);
        assert!(bell.rx.try_recv().is_ok(), "a full batch");
        door.queued(|| 5);
        assert!(bell.rx.try_recv().is_err(), "rung once");
    }
}
