//! UDP: a receive thread per socket that answers, and forwards, its own queries.
//!
//! With nothing upstream in flight the thread blocks in `recvmmsg` like the
//! simplest echo server blocks in `recvfrom`, so a packet wakes it straight
//! from the kernel: no reactor, no cross-thread wake-up, no `epoll_ctl` per
//! packet (measured with the reactor in the loop: about one futex, one
//! `epoll_ctl` and a third of an `epoll_wait` per query at 5k QPS, and a p99
//! several times the echo server's). Blocked, cached and malformed queries
//! are answered right there. The call that wakes takes whatever else is
//! already queued too, up to [`BATCH`] packets, and their answers go out
//! with one `sendmmsg`, so under load a query costs a share of two system
//! calls, where an echo server pays two. (`bench/ab.sh`, 100k list, five
//! rounds interleaved on the Intel dev VM, medians: all blocked 137k QPS
//! and 7.2 µs of CPU per query with a `recvfrom` per packet (6910a89),
//! 151k and 6.6 µs with `recvmmsg` (c01620b), the echo responder 153k; all
//! cache hits 140k and 7.0 µs, 165k and 5.9 µs, echo 143k.)
//!
//! A miss is sent upstream by this thread too, through a [`Mux`], and while
//! any is in flight the thread waits in `epoll` on the upstream ports, and
//! on its own socket too once that has run dry; replies are vetted, cached
//! and answered in the same batches. Handing misses to an executor on another thread cost about
//! 48 µs of CPU per miss (a channel wake-up, a task, a reactor
//! registration and two sends), five times a blocked answer: 40 % of the CPU
//! in a mix with 10 % misses. At most [`MAX_MISS_TASKS`] misses are in
//! flight per thread; one more is answered SERVFAIL and counted as overloaded.
//!
//! Two rare cases go to the worker's executor as [`Job`]s: a miss that joins
//! one another thread leads (it waits on a channel), and a reply with TC set
//! (the retry over TCP).

use std::cell::Cell;
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rustix::event::epoll::{Event, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::{SendFlags, SocketAddrAny};
use smol::LocalExecutor;
use smol::channel::{Receiver, Sender, TrySendError};

use crate::query::{Begin, Engine, Led, Miss, Origin, Scratch, Step, Transport};
use crate::stats::Counters;
use crate::sys;
use crate::upstream::mux::{EVENTS, LISTENER, Mux, Recv, Try};
use crate::upstream::{self, Resolution, TryError};
use crate::wire::{flags, header};

/// Receive buffer: larger than any query a client sends over UDP in practice
/// (EDNS queries are a few hundred bytes); a longer datagram is cut and gets FORMERR.
const RECV_BUF: usize = 4096;
/// Packets taken from the socket before their answers go out together.
pub const BATCH: usize = 16;
/// Misses in flight per receive thread, and tasks per worker executor. Each
/// holds under a KiB while it waits upstream, so this bounds memory under a
/// flood of unique names.
pub const MAX_MISS_TASKS: usize = 1024;
/// Jobs queued between a receive thread and its worker's executor.
pub const MISS_QUEUE: usize = 256;
/// Under load, upstream queries wait until this many are queued, or
/// [`HOLD_BATCHES`] batches have gone by, and leave with one `sendmmsg`.
const UPSTREAM_BATCH: usize = 8;
/// Batches an upstream query may wait behind while the client socket keeps
/// filling them: at most `HOLD_BATCHES × BATCH` queries' work.
const HOLD_BATCHES: u32 = 3;
/// How long a receive thread blocks while upstream ports are open but idle,
/// before it sweeps them (two sweeps close a port that carried nothing).
/// With none open it blocks until a query comes, or until stopping shuts
/// the socket's read side: an idle gateway does not wake.
const SWEEP_EVERY: Duration = Duration::from_millis(200);

/// Work the receive thread hands to the worker's executor, with where the answer goes.
pub enum Job {
    /// A miss another thread leads: wait for its outcome.
    Wait(Miss, Receiver<Resolution>, Client),
    /// A miss whose UDP reply from server `usize` was truncated: go on over TCP.
    Truncated(Led, usize, Client),
    /// A miss of a set that validates DNSSEC: the reply and the chain's
    /// DNSKEY and DS records are fetched on the executor.
    Validate(Led, Client),
}

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

/// A client of a UDP socket: its address, and the address it asked (a
/// wildcard socket's answer leaves from there; see [`sys::Local`]).
#[derive(Debug, Clone, Copy)]
pub struct Client {
    /// Where the query came from.
    addr: SocketAddr,
    /// Where it was sent ([`sys::Local::Any`] on a socket bound to one address).
    local: sys::Local,
}

/// Answers queued in one batch, and where each goes.
struct Outbox {
    replies: Vec<Vec<u8>>,
    peers: Vec<SocketAddrAny>,
    /// Each answer's source, on a wildcard socket only (else empty).
    locals: Vec<sys::Local>,
    /// The socket is a wildcard one: answers go with their source address.
    pktinfo: bool,
    len: usize,
}

impl Outbox {
    fn new(pktinfo: bool) -> Outbox {
        Outbox {
            replies: (0..BATCH).map(|_| Vec::with_capacity(512)).collect(),
            peers: Vec::with_capacity(BATCH),
            locals: Vec::with_capacity(if pktinfo { BATCH } else { 0 }),
            pktinfo,
            len: 0,
        }
    }

    /// Queues the answer just written into the next reply buffer, for `client`.
    fn push(&mut self, client: Client) {
        self.peers.push(client.addr.into());
        if self.pktinfo {
            self.locals.push(client.local);
        }
        self.len += 1;
    }

    /// Sends every queued answer; what the kernel refuses is dropped, as UDP
    /// may, and counted.
    fn flush(&mut self, sock: &UdpSocket, stats: &Counters) {
        let mut sent = 0;
        while sent < self.len {
            let result = if self.pktinfo {
                let (replies, peers) = (&self.replies[sent..self.len], &self.peers[sent..self.len]);
                sys::sendmmsg_from(sock, replies, peers, &self.locals[sent..self.len], SendFlags::empty())
            } else {
                let replies = self.replies[sent..self.len].iter().map(Vec::as_slice);
                sys::sendmmsg(sock, replies, Some(&self.peers[sent..self.len]), SendFlags::empty())
            };
            match result {
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
        self.locals.clear();
    }
}

/// A miss in flight from a receive thread.
struct Pending {
    led: Led,
    /// The client. A `SocketAddr` inside, not the 136-byte `SocketAddrAny`
    /// that `sendmmsg` takes: a miss's state is moved several times on its way.
    peer: Client,
    /// The tries in flight (two at the start of a `parallel` resolution,
    /// else at most one): handle, the server's index in the group, when sent.
    current: [Option<(Try, usize, Instant)>; 2],
}

impl Pending {
    /// Where try `t` is in `current`.
    fn find(&self, t: Try) -> Option<usize> {
        self.current.iter().position(|c| c.is_some_and(|c| c.0 == t))
    }

    fn in_flight(&self) -> usize {
        self.current.iter().flatten().count()
    }
}

/// One receive thread's state.
struct Loop {
    sock: Arc<UdpSocket>,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    jobs: Sender<Job>,
    mux: Mux,
    pending: Vec<Option<Pending>>,
    free: Vec<u32>,
    out: Outbox,
    /// Queries taken from the socket, one batch at a time.
    batch: sys::RecvBatch,
    /// Room for the keys of the query being answered.
    scratch: Scratch,
    /// Tries (with their slots) whose queued upstream query the kernel refused.
    failed: Vec<(u32, Try)>,
    /// Whether the client socket is in the epoll set: only while misses are
    /// in flight and the socket has run dry. In the set, every answer sent
    /// walks the socket's wait queue (`sock_wfree` → a write-space wake-up,
    /// under a lock with interrupts off), where an echo server pays nothing:
    /// 3.5 % of the server's samples with all names blocked (perf,
    /// `bench/profile.sh --scenario blocked`, and `--echo` for the echo
    /// server), 2.1 % in the mix, where misses are nearly always in flight
    /// (`--scenario mix --graph _raw_spin_unlock_irqrestore`). Out of the set
    /// while idle upstream or busy downstream, that cost goes for two
    /// `epoll_ctl` calls per change.
    watched: bool,
    /// Batches the queued upstream queries have waited behind so far.
    held: u32,
    /// The receive timeout now set on the socket ([`SWEEP_EVERY`] or none;
    /// zero at first, a value never set, so the first wait sets one).
    timeout: Option<Duration>,
    /// Set when the gateway stops; the socket's read side is shut then too.
    stop: Arc<AtomicBool>,
    /// When the clients of misses with an expired answer to fall back on
    /// stop waiting (serve-stale), with their slots; unordered (a reload
    /// may change the wait), and short: only expired names whose upstream
    /// is slow are here. At most one per pending miss once finished ones are
    /// swept out: bounded by [`MAX_MISS_TASKS`].
    stale_due: Vec<(Instant, u32)>,
}

/// Serves one UDP socket on the calling thread until `stop` is set.
pub fn receive_loop(
    sock: Arc<UdpSocket>,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    jobs: Sender<Job>,
    stop: Arc<AtomicBool>,
) {
    // A wildcard socket was told to say where each query was sent (sockets.rs).
    let pktinfo = sock.local_addr().is_ok_and(|a| a.ip().is_unspecified());
    let mux = match Mux::new(MAX_MISS_TASKS) {
        Ok(m) => m,
        Err(e) => {
            log::error!("cannot wait on a UDP socket: {e}");
            return;
        }
    };
    let mut r = Loop {
        sock,
        engine,
        stats,
        jobs,
        mux,
        pending: Vec::new(),
        free: Vec::new(),
        out: Outbox::new(pktinfo),
        batch: if pktinfo {
            sys::RecvBatch::new(BATCH, RECV_BUF).with_pktinfo()
        } else {
            sys::RecvBatch::new(BATCH, RECV_BUF)
        },
        scratch: Scratch::remembering(),
        failed: Vec::new(),
        watched: false,
        held: 0,
        timeout: Some(Duration::ZERO),
        stop,
        stale_due: Vec::new(),
    };
    let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; EVENTS];
    // Whether the last receive took a full batch: more are likely queued behind it.
    let mut full = false;
    while !r.stop.load(Ordering::Relaxed) {
        let taken = if r.mux.in_flight() == 0 {
            r.unwatch();
            // Nothing upstream: block in recvmmsg alone (see the module
            // notes), for good once no upstream port is left to sweep.
            if !r.block_for(r.mux.has_open_ports().then_some(SWEEP_EVERY)) {
                return;
            }
            let taken = r.receive(true);
            if taken == 0 {
                r.mux.sweep_idle();
            }
            taken
        } else {
            let now = Instant::now();
            let mut timeout = r.mux.next_deadline(now).unwrap_or(SWEEP_EVERY);
            if let Some(due) = r.stale_due.iter().map(|d| d.0).min() {
                timeout = timeout.min(due.saturating_duration_since(now));
            }
            // While batches come in full, the socket stays out of the set
            // (see `watched`) and the wait only collects upstream replies,
            // without sleeping. Once one comes in short, the socket goes in
            // (a level-triggered set reports queued queries at once); if the
            // kernel refuses, it is read every millisecond instead.
            let watched = if full {
                r.unwatch();
                timeout = Duration::ZERO;
                false
            } else {
                let watched = r.watch();
                if !watched {
                    timeout = timeout.min(Duration::from_millis(1));
                }
                watched
            };
            // Upstream queries held back (see `flush`) must not wait on a sleep.
            if r.mux.queued() > 0 {
                timeout = Duration::ZERO;
            }
            let n = r.mux.wait(&mut events, timeout);
            let mut queries = !watched;
            for ev in &events[..n] {
                match ev.data.u64() {
                    LISTENER => queries = true,
                    port => r.replies(port),
                }
            }
            if n == 0 {
                r.mux.sweep_idle();
            }
            r.expire();
            if queries { r.receive(false) } else { 0 }
        };
        full = taken == BATCH;
        r.flush(full);
    }
}

impl Loop {
    /// Puts the client socket in the epoll set, if it is not. False if the kernel refused.
    fn watch(&mut self) -> bool {
        if !self.watched {
            if let Err(e) = self.mux.watch(&*self.sock) {
                log::debug!("cannot wait on a UDP socket: {e}");
                return false;
            }
            self.watched = true;
        }
        true
    }

    /// Takes the client socket out of the epoll set, if it is in.
    fn unwatch(&mut self) {
        if self.watched {
            if let Err(e) = self.mux.unwatch(&*self.sock) {
                log::debug!("cannot stop waiting on a UDP socket: {e}");
            }
            self.watched = false;
        }
    }

    /// Takes up to [`BATCH`] queries with one `recvmmsg` (waiting for the
    /// first if `wait`) and answers or forwards each; returns how many it took.
    /// Sets how long a blocking receive may wait (`None`: until a query
    /// comes), when it changes. False if the kernel refuses.
    fn block_for(&mut self, timeout: Option<Duration>) -> bool {
        if self.timeout == timeout {
            return true;
        }
        if let Err(e) = self.sock.set_read_timeout(timeout) {
            log::error!("cannot set a receive timeout on a UDP socket: {e}");
            return false;
        }
        self.timeout = timeout;
        true
    }

    fn receive(&mut self, wait: bool) -> usize {
        let taken = match self.batch.recv(&*self.sock, wait) {
            // Woken by the shutdown at stop: what it read is not a query.
            Ok(_) if self.stop.load(Ordering::Relaxed) => return 0,
            Ok(n) => n,
            Err(Errno::AGAIN | Errno::INTR) => return 0,
            Err(e) => {
                // Transient (e.g. ENOMEM); don't spin on a persistent one.
                log::debug!("udp receive error: {e}");
                std::thread::sleep(Duration::from_millis(10));
                return 0;
            }
        };
        // One clock read per batch: the queries in it arrived together, and
        // a later one's latency includes its wait behind the earlier ones.
        let received = Instant::now();
        for i in 0..taken {
            let Some(addr) = self.batch.peer(i) else { continue };
            let client = Client { addr, local: self.batch.local(i) };
            Counters::bump(&self.stats.udp_queries);
            let origin =
                Origin { client: addr.ip(), mac: None, received, transport: Transport::Udp, safe_search: false };
            if self.out.len == BATCH {
                self.flush_replies();
            }
            let reply = &mut self.out.replies[self.out.len];
            match self.engine.handle_in(&mut self.scratch, self.batch.datagram(i), &origin, reply, &self.stats) {
                Step::Reply => self.out.push(client),
                Step::Drop => {}
                Step::Resolve(miss) => self.forward(miss, client),
                Step::Refresh(miss) => {
                    self.out.push(client);
                    self.forward(miss, client);
                }
            }
        }
        taken
    }

    /// Starts a miss: leads it upstream, hands a wait to the executor, or answers SERVFAIL.
    fn forward(&mut self, miss: Miss, peer: Client) {
        if self.out.len == BATCH {
            self.flush_replies();
        }
        let reply = &mut self.out.replies[self.out.len];
        if self.free.is_empty() && self.pending.len() >= MAX_MISS_TASKS {
            if self.engine.refuse_miss(&miss, reply, &self.stats) {
                self.out.push(peer);
            }
            return;
        }
        match self.engine.begin(miss, reply, &self.stats) {
            Begin::Validate(led) => {
                if let Err(
                    TrySendError::Full(Job::Validate(led, peer)) | TrySendError::Closed(Job::Validate(led, peer)),
                ) = self.jobs.try_send(Job::Validate(led, peer))
                {
                    // The executor's queue is full: SERVFAIL (counted as failed), as for any overload.
                    let reply = &mut self.out.replies[self.out.len];
                    if self.engine.finish(led, None, reply, &self.stats) {
                        self.out.push(peer);
                    }
                }
            }
            Begin::Lead(led) => {
                let slot = match self.free.pop() {
                    Some(slot) => slot,
                    None => {
                        self.pending.push(None);
                        (self.pending.len() - 1) as u32
                    }
                };
                if let Some(due) = led.stale_deadline() {
                    self.stale_due_push(due, slot);
                }
                self.pending[slot as usize] = Some(Pending { led, peer, current: [None; 2] });
                self.next_try(slot);
            }
            Begin::Wait(miss, rx) => {
                if let Err(
                    TrySendError::Full(Job::Wait(miss, _, peer)) | TrySendError::Closed(Job::Wait(miss, _, peer)),
                ) = self.jobs.try_send(Job::Wait(miss, rx, peer))
                    && self.engine.refuse_miss(&miss, &mut self.out.replies[self.out.len], &self.stats)
                {
                    self.out.push(peer);
                }
            }
            Begin::Answered => self.out.push(peer),
            Begin::Dropped => {}
        }
    }

    /// Queues when slot's client stops waiting, first sweeping out the
    /// deadlines of misses that ended if the queue is as long as it may be.
    fn stale_due_push(&mut self, due: Instant, slot: u32) {
        if self.stale_due.len() >= MAX_MISS_TASKS {
            let pending = &self.pending;
            self.stale_due.retain(|&(t, s)| stale_waits(pending, s, t));
        }
        self.stale_due.push((due, slot));
    }

    /// Sends slot's miss to the next servers in its order, as many as it
    /// should have in flight; ends it when none is in flight and none is left.
    fn next_try(&mut self, slot: u32) {
        let Some(p) = self.pending.get_mut(slot as usize).and_then(Option::as_mut) else { return };
        let timeout = p.led.timeout();
        let mut in_flight = p.in_flight();
        let (group, failover, query) = p.led.next_try();
        let started = Instant::now();
        while in_flight < failover.width() {
            let Some(idx) = failover.next(group) else { break };
            if let Some(t) = self.mux.send(&group.servers[idx], query, slot, started, timeout) {
                if let Some(free) = p.current.iter_mut().find(|c| c.is_none()) {
                    *free = Some((t, idx, started));
                }
                in_flight += 1;
                continue;
            }
            let _ = failover.record(group, idx, Err(TryError::Io), started);
        }
        if in_flight == 0 {
            let reply = p.led.fallback();
            self.finish(slot, reply);
        }
    }

    /// Reads every datagram waiting on an upstream port.
    fn replies(&mut self, port: u64) {
        loop {
            match self.mux.recv(port) {
                Recv::Empty => return,
                Recv::Stray => {}
                Recv::TryFailed { slot, t } => self.try_failed(slot, t, TryError::Io),
                Recv::Reply { slot, t, reply } => self.reply(slot, t, reply),
                Recv::Failed(ended) => {
                    for (slot, t) in ended {
                        self.try_failed(slot, t, TryError::Io);
                    }
                    return;
                }
            }
        }
    }

    /// A reply carrying the ID of slot's try `t`: checked, then accepted or ignored.
    fn reply(&mut self, slot: u32, t: Try, reply: Vec<u8>) {
        let Some(p) = self.pending.get_mut(slot as usize).and_then(Option::as_mut) else { return };
        let Some(k) = p.find(t) else { return };
        let Some((current, idx, started)) = p.current[k] else { return };
        let group = p.led.group();
        let fits = p.led.query().is_some_and(|q| upstream::is_reply_to(&reply, header::id(&reply), &q));
        if !fits {
            group.servers[idx].mismatched.fetch_add(1, Relaxed);
            return;
        }
        self.mux.end(current);
        p.current[k] = None;
        // Truncated: the executor retries over TCP. With its queue full, the
        // truncated answer goes to the client, which retries over TCP itself.
        if header::flags(&reply) & flags::TC != 0 && !self.jobs.is_full() {
            if let Some(p) = self.pending[slot as usize].take() {
                self.free.push(slot);
                self.end_tries(&p.led, &p.current);
                let _ = self.jobs.try_send(Job::Truncated(p.led, idx, p.peer));
            }
            return;
        }
        match p.led.record(idx, Ok(reply), started) {
            Some(done) => self.finish(slot, Some(done)),
            // An error reply: the other try in flight may do better, else the next server.
            None => self.next_try(slot),
        }
    }

    /// Ends the tries a finished miss still has in flight (the slower of a parallel pair).
    fn end_tries(&mut self, led: &Led, current: &[Option<(Try, usize, Instant)>; 2]) {
        for &(t, idx, started) in current.iter().flatten() {
            self.mux.end(t);
            led.lost(idx, started);
        }
    }

    /// Slot's try `t` ended without a reply: the other in flight, the next server, or the end.
    fn try_failed(&mut self, slot: u32, t: Try, e: TryError) {
        let Some(p) = self.pending.get_mut(slot as usize).and_then(Option::as_mut) else { return };
        let Some(k) = p.find(t) else { return };
        let Some((_, idx, started)) = p.current[k].take() else { return };
        let _ = p.led.record(idx, Err(e), started);
        self.next_try(slot);
    }

    fn expire(&mut self) {
        let now = Instant::now();
        while let Some((slot, t)) = self.mux.expired(now) {
            self.try_failed(slot, t, TryError::Timeout);
        }
        // Clients that waited long enough get the expired answer; their
        // misses go on refreshing the cache.
        let mut i = 0;
        while let Some(&(due, slot)) = self.stale_due.get(i) {
            if due > now {
                i += 1;
                continue;
            }
            self.stale_due.swap_remove(i);
            if !stale_waits(&self.pending, slot, due) {
                continue;
            }
            if self.out.len == BATCH {
                self.flush_replies();
            }
            if let Some(p) = self.pending.get_mut(slot as usize).and_then(Option::as_mut)
                && self.engine.answer_stale_now(&mut p.led, &mut self.out.replies[self.out.len], &self.stats)
            {
                let peer = p.peer;
                self.out.push(peer);
            }
        }
    }

    /// Ends slot's miss with `reply` and queues its answer.
    fn finish(&mut self, slot: u32, reply: Option<(Vec<u8>, SocketAddr)>) {
        // Taken apart at once: `led` is then a local of its own that the
        // call can take where it lies, where `p.led` beside a live `p.peer`
        // was copied again (two copies of the 400-byte slot per miss).
        let Some(Pending { led, peer, current }) = self.pending.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.free.push(slot);
        self.end_tries(&led, &current);
        if self.out.len == BATCH {
            self.flush_replies();
        }
        if self.engine.finish(led, reply, &mut self.out.replies[self.out.len], &self.stats) {
            self.out.push(peer);
        }
    }

    /// Sends what the batch queued: upstream queries first, so misses
    /// start as early as they can, then the answers.
    ///
    /// While batches come in `full`, upstream queries are held for a few of
    /// them instead and go together. Each `sendmmsg` to a sleeping
    /// upstream pays for its wake-up, and with 10 % misses a batch of 16
    /// carries one or two: waking a loopback upstream was 6.3 % of the
    /// server's samples in the mix (`bench/profile.sh --scenario mix
    /// --graph _raw_spin_unlock_irqrestore`), 2.2 % with the queries held.
    /// (Against an upstream across the WAN there is no local wake-up, but
    /// the calls saved are the same.) The wait is bounded by
    /// [`UPSTREAM_BATCH`] and [`HOLD_BATCHES`], and below saturation, where
    /// a batch does not fill, nothing is held at all.
    fn flush(&mut self, full: bool) {
        let queued = self.mux.queued();
        if queued > 0 && queued < UPSTREAM_BATCH && full && self.held < HOLD_BATCHES {
            self.held += 1;
            return self.flush_replies();
        }
        self.held = 0;
        while self.mux.queued() > 0 {
            self.mux.flush(&mut self.failed);
            // Refused: the next server's try is queued, or the miss ends.
            while let Some((slot, t)) = self.failed.pop() {
                self.try_failed(slot, t, TryError::Io);
            }
        }
        self.flush_replies();
    }

    fn flush_replies(&mut self) {
        if self.out.len > 0 {
            self.out.flush(&self.sock, &self.stats);
        }
    }
}

/// Runs the jobs a receive thread hands over on the worker's executor.
pub async fn run_jobs(
    sock: Arc<UdpSocket>,
    jobs: smol::channel::Receiver<Job>,
    engine: Arc<Engine>,
    stats: Arc<Counters>,
    ex: Rc<LocalExecutor<'static>>,
    slots: Rc<TaskSlots>,
) {
    while let Ok(job) = jobs.recv().await {
        let Some(slot) = slots.take(MAX_MISS_TASKS) else {
            let mut out = Vec::new();
            let peer = match job {
                Job::Wait(miss, _, peer) => {
                    engine.refuse_miss(&miss, &mut out, &stats);
                    peer
                }
                Job::Truncated(led, _, peer) | Job::Validate(led, peer) => {
                    engine.finish(led, None, &mut out, &stats);
                    peer
                }
            };
            // Empty when there is nothing to send (a refresh).
            send(&sock, &out, &peer, &stats);
            continue;
        };
        let (sock, engine, stats) = (sock.clone(), engine.clone(), stats.clone());
        ex.spawn(async move {
            let _slot = slot;
            let mut out = Vec::new();
            let peer = match job {
                Job::Wait(miss, rx, peer) => {
                    engine.wait(miss, rx, &mut out, &stats).await;
                    peer
                }
                Job::Truncated(led, idx, peer) => {
                    // Nothing is written when there is nothing to send (a refresh).
                    let early = |stale: Vec<u8>| -> smol::future::BoxedLocal<()> {
                        send(&sock, &stale, &peer, &stats);
                        Box::pin(std::future::ready(()))
                    };
                    engine.resolve_led(led, Some(idx), &mut out, &stats, &early).await;
                    peer
                }
                Job::Validate(led, peer) => {
                    let early = |stale: Vec<u8>| -> smol::future::BoxedLocal<()> {
                        send(&sock, &stale, &peer, &stats);
                        Box::pin(std::future::ready(()))
                    };
                    engine.resolve_led(led, None, &mut out, &stats, &early).await;
                    peer
                }
            };
            send(&sock, &out, &peer, &stats);
        })
        .detach();
    }
}

/// Whether slot's miss is the one whose client stops waiting at `due` and
/// still waits (a slot is reused by later misses, with later deadlines).
fn stale_waits(pending: &[Option<Pending>], slot: u32, due: Instant) -> bool {
    pending.get(slot as usize).and_then(Option::as_ref).is_some_and(|p| p.led.stale_deadline() == Some(due))
}

/// Sends one answer without blocking the executor (the socket itself blocks,
/// for the receive thread); a full send buffer drops it, as UDP may, and
/// it is counted.
fn send(sock: &UdpSocket, msg: &[u8], peer: &Client, stats: &Counters) {
    if !msg.is_empty() && sys::send_from(sock, msg, &peer.addr, peer.local, SendFlags::DONTWAIT).is_err() {
        Counters::bump(&stats.udp_send_failed);
    }
}
