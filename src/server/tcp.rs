//! DNS over TCP (RFC 7766): length-prefixed messages, several per connection.
//!
//! Queries on one connection are read in order; those answered inline are
//! written at once, misses resolve concurrently (up to [`MAX_PIPELINE`] per
//! connection) and are written as they complete, so a slow name does not hold
//! up the ones behind it. Each frame is written whole under a per-connection
//! lock. A connection that sends nothing for the idle timeout, or takes that
//! long to finish a message, is closed; connections over the cap (overall,
//! or the client's own), or from a client outside `allow_client`, are
//! closed on accept.

use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering::Relaxed};
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
        }
    }

    /// Takes a place for a connection from `client`, held until the [`Open`] drops.
    pub fn admit(self: &Arc<Limits>, client: IpAddr) -> Result<Open, Refused> {
        if self.open.fetch_add(1, Relaxed) >= self.max {
            self.open.fetch_sub(1, Relaxed);
            return Err(Refused::Full);
        }
        let slot = client_hash(self.seed, client).map(|h| (h % CLIENT_SLOTS as u64) as usize);
        if let Some(i) = slot
            && self.clients[i].fetch_add(1, Relaxed) >= self.per_client
        {
            self.clients[i].fetch_sub(1, Relaxed);
            self.open.fetch_sub(1, Relaxed);
            return Err(Refused::ClientFull);
        }
        Ok(Open { limits: self.clone(), slot })
    }
}

/// Holds a connection's places in the counts until the connection task ends.
#[derive(Debug)]
pub struct Open {
    limits: Arc<Limits>,
    slot: Option<usize>,
}

impl Drop for Open {
    fn drop(&mut self) {
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
        let open = match limits.admit(peer.ip()) {
            Ok(open) => open,
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
            let idle = open.limits.idle;
            let _open = open;
            serve_conn(stream, peer.ip(), engine, stats, ex2, idle).await;
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
    idle: Duration,
) {
    let stream = Rc::new(stream);
    let lock = Rc::new(Mutex::new(()));
    // Each finished miss task sends one token, so the reader knows how many are pending.
    let (done_tx, done_rx) = bounded::<()>(MAX_PIPELINE);
    let mut pending = 0usize;
    let mut msg = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(512);
    loop {
        match read_frame(&stream, idle, &mut msg).await {
            Ok(()) => {}
            Err(ReadEnd::Closed) => break,
            Err(ReadEnd::TimedOut) => {
                Counters::bump(&stats.tcp_timeouts);
                break;
            }
        }
        Counters::bump(&stats.tcp_queries);
        let origin = Origin { client, mac: None, received: Instant::now(), transport: Transport::Tcp };
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
        let (stream, lock, engine, stats, done) =
            (stream.clone(), lock.clone(), engine.clone(), stats.clone(), done_tx.clone());
        ex.spawn(async move {
            let mut out = Vec::new();
            let early = |stale: Vec<u8>| -> smol::future::BoxedLocal<()> {
                let (stream, lock) = (stream.clone(), lock.clone());
                Box::pin(async move { send_or_hang_up(&stream, &lock, &stale, idle).await })
            };
            if engine.resolve(miss, &mut out, &stats, &early).await {
                send_or_hang_up(&stream, &lock, &out, idle).await;
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
