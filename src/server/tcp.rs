//! DNS over TCP (RFC 7766): length-prefixed messages, several per connection.
//!
//! Queries on one connection are read in order; those answered inline are
//! written at once, misses resolve concurrently (up to [`MAX_PIPELINE`] per
//! connection) and are written as they complete, so a slow name does not hold
//! up the ones behind it. Each frame is written whole under a per-connection
//! lock. A connection that sends nothing for the idle timeout, or takes that
//! long to finish a message, is closed; connections over the client's own
//! cap, or from a client outside `allow_client`, are closed on accept. When
//! the overall cap is reached, the connection idle the longest (nothing
//! outstanding, waiting for a query) is closed to make room, as RFC 7766
//! §6.2.3 suggests; only when none is idle is the new one refused.

use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use smol::channel::bounded;
use smol::future::FutureExt;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::lock::Mutex;
use smol::{Async, LocalExecutor, Timer};

use crate::query::{Engine, Origin, Step, Transport};
use crate::ratelimit::{client_hash, random_seed};
use crate::stats::Counters;

/// Misses resolving at once on one connection; the reader pauses beyond it.
pub const MAX_PIPELINE: usize = 32;

/// Per-client connection counts kept; clients that share a slot share one
/// cap (stricter, never looser), and a flood of source addresses cannot
/// grow the table. 2 KiB.
const CLIENT_SLOTS: usize = 1024;

/// Connections the eviction table follows: the default cap (128) and far
/// past it; connections beyond a larger cap are not evictable. 24 bytes each.
const MAX_TRACKED: usize = 4096;

/// One open connection, as eviction sees it.
#[derive(Debug, Default)]
struct Tracked {
    /// A duplicate of its socket: shutting it down from the accepting
    /// thread wakes the connection's reader on its own thread, which ends
    /// it. `None`: a free slot, or one already evicted.
    sock: std::sync::Mutex<Option<OwnedFd>>,
    /// When it began waiting for a query with none outstanding, in ms since
    /// [`Limits::epoch`] plus one; 0 while it has work.
    idle_since: AtomicU64,
    /// Which connection holds the slot (its [`Open::tracked`] number; 0:
    /// none). An evicted connection's task lives on a moment and its slot
    /// may meanwhile hold the newcomer's socket: it must not touch that.
    owner: AtomicU64,
}

/// Limits shared by all TCP listeners.
#[derive(Debug)]
pub struct Limits {
    /// Connections open now, over all workers.
    open: AtomicUsize,
    /// Most connections allowed open.
    max: usize,
    /// Most connections one client (address, or /64) may hold open.
    per_client: u16,
    /// Open connections per client slot.
    clients: Box<[AtomicU16]>,
    seed: u64,
    /// Idle and per-message read timeout.
    pub idle: Duration,
    /// Open connections, for evicting the one idle the longest when full.
    tracked: Box<[Tracked]>,
    /// The clock `Tracked::idle_since` counts from.
    epoch: Instant,
    /// The last number given to a tracked connection.
    owners: AtomicU64,
}

/// Why a connection was closed on accept.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `tcp_max_connections` reached.
    Full,
    /// The client holds `tcp_max_per_client` already.
    ClientFull,
}

impl Limits {
    pub fn new(max: usize, per_client: usize, idle: Duration) -> Limits {
        Limits {
            open: AtomicUsize::new(0),
            max,
            per_client: per_client.min(u16::MAX as usize) as u16,
            clients: (0..CLIENT_SLOTS).map(|_| AtomicU16::new(0)).collect(),
            seed: random_seed(),
            idle,
            tracked: (0..max.min(MAX_TRACKED)).map(|_| Tracked::default()).collect(),
            epoch: Instant::now(),
            owners: AtomicU64::new(0),
        }
    }

    /// Takes a place for connection `stream` from `client`, held until the
    /// [`Open`] drops. With every place taken, the connection idle the
    /// longest is closed for it (`Ok(_, true)`); a place over the cap is
    /// held until that one's task ends, a moment later.
    pub fn admit(self: &Arc<Limits>, client: IpAddr, stream: &TcpStream) -> Result<(Open, bool), Refused> {
        let slot = client_hash(self.seed, client).map(|h| (h % CLIENT_SLOTS as u64) as usize);
        if let Some(i) = slot
            && self.clients[i].fetch_add(1, Relaxed) >= self.per_client
        {
            self.clients[i].fetch_sub(1, Relaxed);
            return Err(Refused::ClientFull);
        }
        let mut evicted = false;
        if self.open.fetch_add(1, Relaxed) >= self.max {
            evicted = self.evict_oldest_idle();
            if !evicted {
                self.open.fetch_sub(1, Relaxed);
                if let Some(i) = slot {
                    self.clients[i].fetch_sub(1, Relaxed);
                }
                return Err(Refused::Full);
            }
        }
        let tracked = stream.try_clone().ok().and_then(|dup| self.track(OwnedFd::from(dup)));
        Ok((Open { limits: self.clone(), slot, tracked }, evicted))
    }

    /// Puts a connection's socket in a free slot of the table: which one,
    /// and the connection's number there.
    fn track(&self, sock: OwnedFd) -> Option<(usize, u64)> {
        let mut sock = Some(sock);
        for (i, t) in self.tracked.iter().enumerate() {
            if let Ok(mut s) = t.sock.try_lock()
                && s.is_none()
            {
                let owner = self.owners.fetch_add(1, Relaxed) + 1;
                t.idle_since.store(0, Relaxed);
                t.owner.store(owner, Relaxed);
                *s = sock.take();
                return Some((i, owner));
            }
        }
        None
    }

    /// Shuts down the tracked connection idle the longest; false if none is idle.
    fn evict_oldest_idle(&self) -> bool {
        let oldest = self
            .tracked
            .iter()
            .map(|t| t.idle_since.load(Relaxed))
            .enumerate()
            .filter(|&(_, since)| since != 0)
            .min_by_key(|&(_, since)| since);
        let Some((i, since)) = oldest else { return false };
        let t = &self.tracked[i];
        let Ok(mut sock) = t.sock.lock() else { return false };
        // Still the same idle stretch: it did not take a query meanwhile.
        if t.idle_since.load(Relaxed) != since {
            return false;
        }
        let Some(fd) = sock.take() else { return false };
        t.idle_since.store(0, Relaxed);
        t.owner.store(0, Relaxed);
        let _ = rustix::net::shutdown(&fd, rustix::net::Shutdown::Both);
        true
    }
}

/// Holds a connection's places in the counts until the connection task ends.
#[derive(Debug)]
pub struct Open {
    limits: Arc<Limits>,
    slot: Option<usize>,
    /// Its slot in [`Limits::tracked`] and its number there, if it has one.
    tracked: Option<(usize, u64)>,
}

impl Open {
    /// Its slot, while it still holds it (not evicted).
    fn slot(&self) -> Option<&Tracked> {
        let (i, owner) = self.tracked?;
        self.limits.tracked.get(i).filter(|t| t.owner.load(Relaxed) == owner)
    }

    /// The connection waits for a query with nothing outstanding: evictable.
    fn idle(&self) {
        if let Some(t) = self.slot() {
            let ms = self.limits.epoch.elapsed().as_millis() as u64 + 1;
            t.idle_since.store(ms, Relaxed);
        }
    }

    /// The connection has work (a query read, answers outstanding).
    fn busy(&self) {
        if let Some(t) = self.slot() {
            t.idle_since.store(0, Relaxed);
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some((i, owner)) = self.tracked
            && let Some(t) = self.limits.tracked.get(i)
            && let Ok(mut s) = t.sock.lock()
            && t.owner.load(Relaxed) == owner
        {
            t.idle_since.store(0, Relaxed);
            t.owner.store(0, Relaxed);
            *s = None;
        }
        if let Some(i) = self.slot {
            self.limits.clients[i].fetch_sub(1, Relaxed);
        }
        self.limits.open.fetch_sub(1, Relaxed);
    }
}

/// Accepts connections on one listener until the executor stops.
pub async fn accept_loop(
    listener: TcpListener,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    ex: Rc<LocalExecutor<'static>>,
    limits: Arc<Limits>,
) {
    let listener = match Async::new(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("cannot register TCP listener: {e}");
            return;
        }
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors or memory: back off instead of spinning.
                log::warn!("tcp accept failed: {e}");
                Timer::after(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !engine.snapshot.load().config.allow_client.allows(peer.ip()) {
            // Closed unread: a client outside allow_client gets no resolver here.
            Counters::bump(&stats.denied);
            continue;
        }
        let open = match limits.admit(peer.ip(), stream.get_ref()) {
            Ok((open, evicted)) => {
                if evicted {
                    // Closed early for idling: counted as the idle timeout would have.
                    Counters::bump(&stats.tcp_timeouts);
                }
                open
            }
            Err(Refused::Full) => {
                Counters::bump(&stats.tcp_refused);
                continue;
            }
            Err(Refused::ClientFull) => {
                Counters::bump(&stats.tcp_client_refused);
                continue;
            }
        };
        Counters::bump(&stats.tcp_connections);
        let (engine, stats, ex2) = (engine.clone(), stats.clone(), ex.clone());
        ex.spawn(async move {
            serve_conn(stream, peer.ip(), engine, stats, ex2, Rc::new(open)).await;
        })
        .detach();
    }
}

/// Why reading a frame ended.
enum ReadEnd {
    /// Clean close or error.
    Closed,
    /// Idle or slow client.
    TimedOut,
}

async fn read_frame(stream: &Async<TcpStream>, idle: Duration, buf: &mut Vec<u8>) -> Result<(), ReadEnd> {
    let read = async {
        let mut len = [0u8; 2];
        let mut s = stream;
        s.read_exact(&mut len).await.map_err(|_| ReadEnd::Closed)?;
        buf.resize(u16::from_be_bytes(len) as usize, 0);
        s.read_exact(buf).await.map_err(|_| ReadEnd::Closed)
    };
    read.or(async {
        Timer::after(idle).await;
        Err(ReadEnd::TimedOut)
    })
    .await
}

/// Writes one length-prefixed message; false if the peer is gone or has not
/// taken it within `idle` (a client that never reads must not pin the task).
async fn write_frame(stream: &Async<TcpStream>, lock: &Mutex<()>, msg: &[u8], idle: Duration) -> bool {
    let mut frame = Vec::with_capacity(msg.len() + 2);
    frame.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    frame.extend_from_slice(msg);
    let write = async {
        let _held = lock.lock().await;
        let mut s = stream;
        s.write_all(&frame).await.is_ok()
    };
    write
        .or(async {
            Timer::after(idle).await;
            false
        })
        .await
}

/// Writes one answer; a half-written frame leaves the stream unusable, so
/// on failure it is ended for the reader too.
async fn send_or_hang_up(stream: &Async<TcpStream>, lock: &Mutex<()>, msg: &[u8], idle: Duration) {
    if !write_frame(stream, lock, msg, idle).await {
        let _ = stream.get_ref().shutdown(Shutdown::Both);
    }
}

async fn serve_conn(
    stream: Async<TcpStream>,
    client: IpAddr,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    ex: Rc<LocalExecutor<'static>>,
    open: Rc<Open>,
) {
    let idle = open.limits.idle;
    // Misses not yet answered, and whether the reader waits for a query:
    // the connection is idle (evictable) when both say so, whichever of
    // the reader and the last miss's task sees it first.
    let outstanding = Rc::new(std::cell::Cell::new(0usize));
    let reading = Rc::new(std::cell::Cell::new(false));
    let stream = Rc::new(stream);
    let lock = Rc::new(Mutex::new(()));
    // Each finished miss task sends one token, so the reader knows how many are pending.
    let (done_tx, done_rx) = bounded::<()>(MAX_PIPELINE);
    let mut pending = 0usize;
    let mut msg = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(512);
    loop {
        if outstanding.get() == 0 {
            open.idle();
        }
        reading.set(true);
        let read = read_frame(&stream, idle, &mut msg).await;
        reading.set(false);
        open.busy();
        match read {
            Ok(()) => {}
            Err(ReadEnd::Closed) => break,
            Err(ReadEnd::TimedOut) => {
                Counters::bump(&stats.tcp_timeouts);
                break;
            }
        }
        Counters::bump(&stats.tcp_queries);
        let origin =
            Origin { client, mac: None, received: Instant::now(), transport: Transport::Tcp, safe_search: false };
        let miss = match engine.handle(&msg, &origin, &mut out, &stats) {
            Step::Reply => {
                if !write_frame(&stream, &lock, &out, idle).await {
                    break;
                }
                continue;
            }
            // Garbage or a response on a stream: the client is confused; hang up.
            Step::Drop => break,
            Step::Resolve(miss) => miss,
            // A stale or cached answer now, and the cache refreshed behind
            // it by the same task a miss gets (it answers no one).
            Step::Refresh(miss) => {
                if !write_frame(&stream, &lock, &out, idle).await {
                    break;
                }
                miss
            }
        };
        if pending == MAX_PIPELINE {
            let _ = done_rx.recv().await;
            pending -= 1;
        }
        pending += 1;
        outstanding.set(outstanding.get() + 1);
        let (stream, lock, engine, stats, done) =
            (stream.clone(), lock.clone(), engine.clone(), stats.clone(), done_tx.clone());
        let (open, outstanding, reading) = (open.clone(), outstanding.clone(), reading.clone());
        ex.spawn(async move {
            let mut out = Vec::new();
            let early = |stale: Vec<u8>| -> smol::future::BoxedLocal<()> {
                let (stream, lock) = (stream.clone(), lock.clone());
                Box::pin(async move { send_or_hang_up(&stream, &lock, &stale, idle).await })
            };
            if engine.resolve(miss, &mut out, &stats, &early).await {
                send_or_hang_up(&stream, &lock, &out, idle).await;
            }
            outstanding.set(outstanding.get().saturating_sub(1));
            if outstanding.get() == 0 && reading.get() {
                open.idle();
            }
            let _ = done.try_send(());
        })
        .detach();
    }
    // Answer what was already asked before closing (RFC 7766 §6.2.4).
    while pending > 0 && done_rx.recv().await.is_ok() {
        pending -= 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A connected pair on loopback: (the server's end, the client's).
    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (listener.accept().unwrap().0, client)
    }

    /// The evicted connection's task ends after the newcomer took its slot:
    /// it must leave the newcomer's tracking alone, or the newcomer could
    /// never be evicted (nor marked idle by the old one's late miss task).
    #[test]
    fn an_evicted_connection_leaves_its_successors_slot_alone() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let limits = Arc::new(Limits::new(1, 16, Duration::from_secs(10)));
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let (a, a_client) = pair(&listener);
        let (a_open, evicted) = limits.admit(ip, &a).unwrap();
        assert!(!evicted);
        a_open.idle();
        let (c, _c_client) = pair(&listener);
        let (c_open, evicted) = limits.admit(ip, &c).unwrap();
        assert!(evicted, "a, idle, made room");
        let mut byte = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut &a_client, &mut byte).unwrap(), 0, "a was shut down");
        a_open.idle(); // a late miss task of a's
        drop(a_open);
        let (d, _d_client) = pair(&listener);
        assert_eq!(limits.admit(ip, &d).err(), Some(Refused::Full), "c has not been idle yet");
        c_open.idle();
        let (e, _e_client) = pair(&listener);
        assert!(limits.admit(ip, &e).unwrap().1, "c, still tracked, made room");
    }
}
