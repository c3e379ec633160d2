//! The UDP receive loop of one worker.
//!
//! Blocked, cached and malformed queries are answered inline, in the order
//! they arrive, from one reused output buffer. A miss becomes a task on the
//! worker's executor; a worker runs at most [`MAX_MISS_TASKS`] of them, and a
//! miss beyond that is answered SERVFAIL at once.

use std::cell::Cell;
use std::net::UdpSocket;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smol::{Async, LocalExecutor, Timer};

use crate::query::{Engine, Origin, Step, Transport};
use crate::stats::Counters;

/// Receive buffer: larger than any query a client sends over UDP in practice
/// (EDNS queries are a few hundred bytes); a longer datagram is cut and gets FORMERR.
const RECV_BUF: usize = 4096;
/// Miss tasks per worker. Each holds a few KiB while it waits upstream, so
/// this bounds a worker's memory under a flood of unique names.
pub const MAX_MISS_TASKS: usize = 1024;

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

/// Serves one UDP socket until the executor stops.
pub async fn serve(
    sock: UdpSocket,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    ex: Rc<LocalExecutor<'static>>,
    slots: Rc<TaskSlots>,
) {
    let sock = match Async::new(sock) {
        Ok(s) => Rc::new(s),
        Err(e) => {
            log::error!("cannot register UDP socket: {e}");
            return;
        }
    };
    let mut buf = vec![0u8; RECV_BUF];
    let mut out = Vec::with_capacity(RECV_BUF);
    loop {
        let (n, peer) = match sock.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                // Transient (e.g. ENOMEM); don't spin on a persistent one.
                log::debug!("udp receive error: {e}");
                Timer::after(Duration::from_millis(10)).await;
                continue;
            }
        };
        Counters::bump(&stats.udp_queries);
        let origin = Origin { client: peer.ip(), received: Instant::now(), transport: Transport::Udp };
        match engine.handle(&buf[..n], &origin, &mut out, &stats) {
            Step::Reply => {
                let _ = sock.send_to(&out, peer).await;
            }
            Step::Drop => {}
            Step::Resolve(miss) => {
                let Some(slot) = slots.take(MAX_MISS_TASKS) else {
                    engine.refuse_miss(&miss, &mut out, &stats);
                    let _ = sock.send_to(&out, peer).await;
                    continue;
                };
                let (sock, engine, stats) = (sock.clone(), engine.clone(), stats.clone());
                ex.spawn(async move {
                    let _slot = slot;
                    let mut out = Vec::new();
                    engine.resolve(miss, &mut out, &stats).await;
                    let _ = sock.send_to(&out, peer).await;
                })
                .detach();
            }
        }
    }
}
