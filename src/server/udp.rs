//! UDP: a receive thread per socket, and the misses it hands to its worker.
//!
//! The receive thread blocks in `recvfrom` like the simplest echo server, so
//! a packet wakes it straight from the kernel: no reactor, no cross-thread
//! wake-up, no `epoll_ctl` per packet (measured with the reactor in the loop:
//! about one futex, one `epoll_ctl` and a third of an `epoll_wait` per query
//! at 5k QPS, and a p99 several times the echo server's). Blocked, cached and
//! malformed queries are answered right there. Once a packet is in, the
//! thread takes whatever else is already queued, up to [`BATCH`] packets, and
//! sends all their answers with one `sendmmsg`, so under load a query costs
//! one system call plus a share of one, fewer than an echo server's two.
//!
//! A miss goes over a bounded channel to the worker's executor, which runs
//! at most [`MAX_MISS_TASKS`] of them and sends each answer itself. A miss
//! that finds the channel or the task slots full is answered SERVFAIL at
//! once and counted as overloaded.

use std::cell::Cell;
use std::io::IoSlice;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::net::{MMsgHdr, RecvFlags, SendAncillaryBuffer, SendFlags, SocketAddrAny};
use smol::LocalExecutor;
use smol::channel::{Receiver, Sender, TrySendError};

use crate::query::{Engine, Miss, Origin, Step, Transport};
use crate::stats::Counters;

/// Receive buffer: larger than any query a client sends over UDP in practice
/// (EDNS queries are a few hundred bytes); a longer datagram is cut and gets FORMERR.
const RECV_BUF: usize = 4096;
/// Packets taken from the socket before their answers go out together.
pub const BATCH: usize = 16;
/// Miss tasks per worker. Each holds a few KiB while it waits upstream, so
/// this bounds a worker's memory under a flood of unique names.
pub const MAX_MISS_TASKS: usize = 1024;
/// Misses queued between a receive thread and its worker's executor.
pub const MISS_QUEUE: usize = 256;
/// How often a blocked receive thread looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// A miss on its way to the executor, with where its answer goes.
pub type MissJob = (Miss, SocketAddrAny);

/// Counts a worker's miss tasks; the guard gives the slot back however the task ends.
#[derive(Debug, Default)]
pub struct TaskSlots(Cell<usize>);

/// One taken slot.
pub struct SlotGuard(Rc<TaskSlots>);

impl TaskSlots {
    /// Takes a slot if fewer than `max` are taken.
    pub fn take(self: &Rc<Self>, max: usize) -> Option<SlotGuard> {
        let n = self.0.get();
        (n < max).then(|| {
            self.0.set(n + 1);
            SlotGuard(self.clone())
        })
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.0.set(self.0.0.get() - 1);
    }
}

/// Answers queued in one batch, and where each goes.
struct Outbox {
    replies: Vec<Vec<u8>>,
    peers: Vec<SocketAddrAny>,
    len: usize,
}

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            replies: (0..BATCH).map(|_| Vec::with_capacity(512)).collect(),
            peers: Vec::with_capacity(BATCH),
            len: 0,
        }
    }

    /// Sends every queued answer; what the kernel refuses is dropped, as UDP
    /// may, and counted.
    fn flush(&mut self, sock: &UdpSocket, stats: &Counters) {
        if self.len == 1 {
            // The common case below saturation: one query, one plain send, no setup.
            if rustix::net::sendto(sock, &self.replies[0], SendFlags::empty(), &self.peers[0]).is_err() {
                Counters::bump(&stats.udp_send_failed);
            }
            self.len = 0;
            self.peers.clear();
            return;
        }
        // The headers borrow the replies, so they are built per batch (three
        // small allocations shared by its 2..=BATCH answers).
        let mut sent = 0;
        while sent < self.len {
            let iovs: Vec<[IoSlice<'_>; 1]> = self.replies[sent..self.len].iter().map(|r| [IoSlice::new(r)]).collect();
            let mut controls: Vec<SendAncillaryBuffer<'_, '_, '_>> =
                (sent..self.len).map(|_| SendAncillaryBuffer::default()).collect();
            let mut msgs: Vec<MMsgHdr<'_>> = iovs
                .iter()
                .zip(controls.iter_mut())
                .zip(&self.peers[sent..self.len])
                .map(|((iov, control), peer)| MMsgHdr::new_with_addr(peer, iov, control))
                .collect();
            match rustix::net::sendmmsg(sock, &mut msgs, SendFlags::empty()) {
                Ok(n) if n > 0 => sent += n,
                Err(Errno::INTR) => {}
                // The first message failed (e.g. an unreachable peer): skip it.
                _ => {
                    Counters::bump(&stats.udp_send_failed);
                    sent += 1;
                }
            }
        }
        self.len = 0;
        self.peers.clear();
    }
}

/// Serves one UDP socket on the calling thread until `stop` is set.
pub fn receive_loop(
    sock: Arc<UdpSocket>,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    misses: Sender<MissJob>,
    stop: Arc<AtomicBool>,
) {
    if let Err(e) = sock.set_read_timeout(Some(STOP_CHECK)) {
        log::error!("cannot set a receive timeout on a UDP socket: {e}");
        return;
    }
    let mut buf = vec![0u8; RECV_BUF];
    let mut out = Outbox::new();
    while !stop.load(Ordering::Relaxed) {
        // Wait for one packet, then take what is already queued without waiting.
        let mut flags = RecvFlags::empty();
        while out.len < BATCH {
            let (n, peer) = match rustix::net::recvfrom(&*sock, &mut buf[..], flags) {
                Ok((n, _, Some(peer))) => (n.min(RECV_BUF), peer),
                Ok(_) => continue,
                Err(Errno::AGAIN | Errno::INTR) => break,
                Err(e) => {
                    // Transient (e.g. ENOMEM); don't spin on a persistent one.
                    log::debug!("udp receive error: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    break;
                }
            };
            flags = RecvFlags::DONTWAIT;
            let Ok(client) = SocketAddr::try_from(peer.clone()) else { continue };
            Counters::bump(&stats.udp_queries);
            let origin = Origin { client: client.ip(), received: Instant::now(), transport: Transport::Udp };
            let reply = &mut out.replies[out.len];
            match engine.handle(&buf[..n], &origin, reply, &stats) {
                Step::Reply => {}
                Step::Drop => continue,
                Step::Resolve(miss) => match misses.try_send((miss, peer.clone())) {
                    Ok(()) => continue,
                    Err(TrySendError::Full((miss, _)) | TrySendError::Closed((miss, _))) => {
                        engine.refuse_miss(&miss, reply, &stats);
                    }
                },
            }
            out.peers.push(peer);
            out.len += 1;
        }
        if out.len > 0 {
            out.flush(&sock, &stats);
        }
    }
}

/// Resolves the misses of one receive thread on the worker's executor.
pub async fn resolve_misses(
    sock: Arc<UdpSocket>,
    jobs: Receiver<MissJob>,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    ex: Rc<LocalExecutor<'static>>,
    slots: Rc<TaskSlots>,
) {
    while let Ok((miss, peer)) = jobs.recv().await {
        let Some(slot) = slots.take(MAX_MISS_TASKS) else {
            let mut out = Vec::new();
            engine.refuse_miss(&miss, &mut out, &stats);
            send(&sock, &out, &peer, &stats);
            continue;
        };
        let (sock, engine, stats) = (sock.clone(), engine.clone(), stats.clone());
        ex.spawn(async move {
            let _slot = slot;
            let mut out = Vec::new();
            engine.resolve(miss, &mut out, &stats).await;
            send(&sock, &out, &peer, &stats);
        })
        .detach();
    }
}

/// Sends one answer without blocking the executor (the socket itself blocks,
/// for the receive thread); a full send buffer drops it, as UDP may, and
/// it is counted.
fn send(sock: &UdpSocket, msg: &[u8], peer: &SocketAddrAny, stats: &Counters) {
    if !msg.is_empty() && rustix::net::sendto(sock, msg, SendFlags::DONTWAIT, peer).is_err() {
        Counters::bump(&stats.udp_send_failed);
    }
}
