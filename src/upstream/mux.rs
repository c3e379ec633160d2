//! Many upstream tries at once from one thread that waits in `epoll`: how a
//! UDP receive thread forwards its own misses (server/udp.rs says why).
//!
//! Tries to one server share a connected socket, a "port", until it has
//! carried [`SOCKET_USES`] of them, as the async path's pooled sockets do;
//! then it takes no new ones and closes when its last try ends. A port that
//! sits unused through an idle wait is closed too, so a server dropped by a
//! reload keeps no socket open. A try is known by (port, ID); the ID is
//! random and unique among the port's tries in flight. A datagram that
//! matches no try (late, stray or forged) is counted as mismatched and
//! dropped. One that matches goes to the caller, which checks it against the
//! question and ends the try only if it fits, so a forgery cannot end a try.
//! A send or receive error on a port (ICMP port unreachable) fails every try
//! on it, as they all went to the same server.
//!
//! A try's query is queued, not sent, and [`Mux::flush`] sends the queue at
//! the end of the caller's batch with one `sendmmsg` per port. Each lone
//! `send` to a loopback upstream cost about twice a reply's share of a
//! `sendmmsg` (perf on the 10 %-miss mix): a syscall of its own, and a
//! wake-up of the upstream that one call pays once for all its queries.
//!
//! A try to an encrypted upstream has a port of its own too, without a
//! socket: its query goes straight to the server's connection
//! ([`super::tls`]), and the reply comes back through an inbox whose
//! eventfd sits in the same `epoll`, so the thread forwards plain and
//! encrypted misses alike, deadlines and failover included.
//!
//! Replies are read the same way: one `recvmmsg` takes every datagram
//! waiting on a port, and a call that took fewer than it had room for
//! found the port drained, so no further call is made to learn that. One
//! `recv` per reply plus the one that found the port empty was 0.14 calls
//! per answered query in the 1M mix, with 10 % misses (`bench/profile.sh
//! --syscalls`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use rustix::event::Timespec;
use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::SendFlags;

use super::{SOCKET_USES, Server, UDP_REPLY_BUF, random_id, unspecified_for};
use crate::sys::RecvBatch;
use crate::wire::header;

/// Token of the caller's own socket in the epoll set; ports use their index.
pub const LISTENER: u64 = u64::MAX;
/// Token of the inbox where encrypted upstreams' replies arrive.
pub const ENCRYPTED: u64 = u64::MAX - 1;
/// Events taken per wait.
pub const EVENTS: usize = 32;
/// Replies taken from a port per `recvmmsg`.
const REPLY_BATCH: usize = 8;

/// One try in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Try {
    port: u32,
    id: u16,
}

/// What [`Mux::recv`] found on a port.
#[derive(Debug)]
pub enum Recv {
    /// A datagram with the ID of a try in flight, for the caller to check.
    Reply { slot: u32, t: Try, reply: Vec<u8> },
    /// A datagram that matched no try; counted and dropped.
    Stray,
    /// Nothing (more) to read.
    Empty,
    /// One try failed (an encrypted upstream's connection could not carry it).
    TryFailed { slot: u32, t: Try },
    /// The port failed; these tries (with their slots) ended with an error.
    Failed(Vec<(u32, Try)>),
}

/// A query waiting for [`Mux::flush`]: its try and where its bytes are in `Mux::queued_bytes`.
#[derive(Debug, Clone, Copy)]
struct Queued {
    t: Try,
    start: usize,
    len: usize,
}

#[derive(Debug)]
struct Port {
    server: Arc<Server>,
    /// `None` for an encrypted server: its tries go to its connection.
    sock: Option<UdpSocket>,
    uses: u32,
    in_flight: u32,
    /// Still takes new tries.
    current: bool,
    /// Used since the last idle sweep.
    busy: bool,
}

/// The tries of one thread and the ports they use.
#[derive(Debug)]
pub struct Mux {
    epoll: rustix::fd::OwnedFd,
    ports: Vec<Option<Port>>,
    free_ports: Vec<u32>,
    /// (port, ID) → (caller's slot, try number).
    tries: FxHashMap<(u32, u16), (u32, u32)>,
    /// Deadlines by try number; entries of tries that ended stay until they
    /// come up or the heap is compacted.
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32, u16)>>,
    max_tries: usize,
    seq: u32,
    /// The replies of the last `recvmmsg`, on port `inbox_port`.
    inbox: RecvBatch,
    inbox_port: u32,
    /// Replies of the last call not yet handed out: `inbox_next..inbox_taken`.
    inbox_next: usize,
    inbox_taken: usize,
    /// Tries whose queries wait for [`Mux::flush`], and their bytes.
    queued: Vec<Queued>,
    queued_bytes: Vec<u8>,
    /// Where encrypted upstreams' connections put replies (made at the first such try).
    tls_inbox: Option<Arc<super::tls::Inbox>>,
    /// Replies taken from `tls_inbox`, handed out one per [`Mux::recv`].
    delivered: Vec<super::tls::Delivery>,
}

impl Mux {
    /// A mux for at most `max_tries` tries in flight.
    pub fn new(max_tries: usize) -> io::Result<Mux> {
        Ok(Mux {
            epoll: epoll::create(CreateFlags::CLOEXEC)?,
            ports: Vec::new(),
            free_ports: Vec::new(),
            tries: FxHashMap::default(),
            deadlines: BinaryHeap::new(),
            max_tries,
            seq: 0,
            inbox: RecvBatch::new(REPLY_BATCH, UDP_REPLY_BUF),
            inbox_port: u32::MAX,
            inbox_next: 0,
            inbox_taken: 0,
            queued: Vec::new(),
            queued_bytes: Vec::new(),
            tls_inbox: None,
            delivered: Vec::new(),
        })
    }

    /// Adds the caller's socket to the wait set under [`LISTENER`].
    pub fn watch(&self, fd: impl AsFd) -> io::Result<()> {
        epoll::add(&self.epoll, fd, EventData::new_u64(LISTENER), EventFlags::IN)?;
        Ok(())
    }

    /// Takes the caller's socket out of the wait set again.
    pub fn unwatch(&self, fd: impl AsFd) -> io::Result<()> {
        epoll::delete(&self.epoll, fd)?;
        Ok(())
    }

    /// Tries in flight.
    pub fn in_flight(&self) -> usize {
        self.tries.len()
    }

    /// Waits for a readable socket or `timeout`; returns how many events were written.
    pub fn wait(&self, events: &mut [Event; EVENTS], timeout: Duration) -> usize {
        let ts = Timespec { tv_sec: timeout.as_secs() as _, tv_nsec: timeout.subsec_nanos() as _ };
        epoll::wait(&self.epoll, &mut events[..], Some(&ts)).unwrap_or(0)
    }

    /// Queues `query` to `server` as a try for `slot`, sent `now`, that
    /// expires after `timeout`, writing the try's ID into its first two
    /// bytes; [`Mux::flush`] sends it. `None` if no try can be started.
    pub fn send(
        &mut self,
        server: &Arc<Server>,
        query: &mut [u8],
        slot: u32,
        now: Instant,
        timeout: Duration,
    ) -> Option<Try> {
        if self.tries.len() >= self.max_tries || query.len() < 2 {
            return None;
        }
        let port = self.port_for(server)?;
        let mut id = random_id();
        while self.tries.contains_key(&(port, id)) {
            id = random_id();
        }
        query[..2].copy_from_slice(&id.to_be_bytes());
        let p = self.ports[port as usize].as_mut()?;
        p.uses += 1;
        p.busy = true;
        if p.uses >= SOCKET_USES {
            p.current = false;
        }
        p.in_flight += 1;
        self.seq = self.seq.wrapping_add(1);
        self.tries.insert((port, id), (slot, self.seq));
        self.deadlines.push(Reverse((now + timeout, self.seq, port, id)));
        if self.deadlines.len() > 4 * self.max_tries {
            let tries = &self.tries;
            self.deadlines.retain(|Reverse((_, seq, port, id))| tries.get(&(*port, *id)).is_some_and(|t| t.1 == *seq));
        }
        let t = Try { port, id };
        if let Some(link) = &server.link {
            // Encrypted: written on the upstream's connection from here, one
            // TLS write per query (no batching to gain on one stream).
            let sent = self.tls_inbox.as_ref().is_some_and(|inbox| link.send_for(query, inbox, port, id).is_ok());
            if !sent {
                self.end(t);
                return None;
            }
            return Some(t);
        }
        self.queued.push(Queued { t, start: self.queued_bytes.len(), len: query.len() });
        self.queued_bytes.extend_from_slice(query);
        Some(t)
    }

    /// Queries waiting for [`Mux::flush`].
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// Sends every queued query, one `sendmmsg` per port. A query the
    /// kernel refuses ends its try, the port takes no new ones (the error
    /// is likely an ICMP report about its server), and it is pushed to
    /// `failed` with its slot.
    pub fn flush(&mut self, failed: &mut Vec<(u32, Try)>) {
        let mut queued = std::mem::take(&mut self.queued);
        // A try that ended since it was queued (its port failed) sends nothing.
        queued.retain(|q| self.tries.contains_key(&(q.t.port, q.t.id)));
        // A handful per batch; grouping by port makes one call per server.
        queued.sort_unstable_by_key(|q| q.t.port);
        let mut run = 0;
        while run < queued.len() {
            let port = queued[run].t.port;
            let end = queued[run..].iter().position(|q| q.t.port != port).map_or(queued.len(), |n| run + n);
            let mut sent = run;
            while sent < end {
                match self.send_run(&queued[sent..end]) {
                    Ok(n) if n > 0 => sent += n,
                    Err(Errno::INTR) => {}
                    _ => {
                        // The first of the run failed; the rest may still go.
                        self.refused(queued[sent].t, failed);
                        sent += 1;
                    }
                }
            }
            run = end;
        }
        queued.clear();
        self.queued = queued;
        self.queued_bytes.clear();
    }

    /// Sends a run of queued queries to one port; how many went.
    fn send_run(&self, run: &[Queued]) -> Result<usize, Errno> {
        let Some(p) = self.ports.get(run[0].t.port as usize).and_then(Option::as_ref) else {
            return Err(Errno::BADF);
        };
        let Some(sock) = &p.sock else { return Err(Errno::BADF) };
        let bytes = run.iter().map(|q| &self.queued_bytes[q.start..q.start + q.len]);
        crate::sys::sendmmsg(sock, bytes, None, SendFlags::DONTWAIT)
    }

    /// Ends try `t`, whose query the kernel refused, and reports it.
    fn refused(&mut self, t: Try, failed: &mut Vec<(u32, Try)>) {
        let Some(&(slot, _)) = self.tries.get(&(t.port, t.id)) else { return };
        if let Some(p) = self.ports.get_mut(t.port as usize).and_then(Option::as_mut) {
            p.current = false;
        }
        self.end(t);
        failed.push((slot, t));
    }

    /// The next datagram from port `port` (an epoll token). Call it until
    /// it returns [`Recv::Empty`] or [`Recv::Failed`]: datagrams are read
    /// from the socket a batch at a time and handed out one per call.
    pub fn recv(&mut self, port: u64) -> Recv {
        if port == ENCRYPTED {
            return self.delivered();
        }
        let Some(p) = u32::try_from(port).ok().and_then(|i| self.ports.get(i as usize)?.as_ref()) else {
            return Recv::Empty;
        };
        let Some(sock) = &p.sock else { return Recv::Empty };
        let port = port as u32;
        if self.inbox_port != port || self.inbox_next == self.inbox_taken {
            // A used-up batch of this port's that had room to spare found the port drained.
            let drained = self.inbox_port == port && self.inbox_taken < REPLY_BATCH;
            self.inbox_port = u32::MAX;
            if drained {
                return Recv::Empty;
            }
            match self.inbox.recv(sock, false) {
                Ok(0) | Err(Errno::AGAIN | Errno::INTR) => return Recv::Empty,
                Ok(n) => (self.inbox_port, self.inbox_next, self.inbox_taken) = (port, 0, n),
                Err(_) => return Recv::Failed(self.fail_port(port)),
            }
        }
        let reply = self.inbox.datagram(self.inbox_next);
        self.inbox_next += 1;
        if reply.len() >= 2
            && let Some(&(slot, _)) = self.tries.get(&(port, header::id(reply)))
        {
            return Recv::Reply { slot, t: Try { port, id: header::id(reply) }, reply: reply.to_vec() };
        }
        p.server.mismatched.fetch_add(1, Relaxed);
        Recv::Stray
    }

    /// The next reply from the encrypted upstreams' inbox.
    fn delivered(&mut self) -> Recv {
        if self.delivered.is_empty()
            && let Some(inbox) = &self.tls_inbox
        {
            inbox.take(&mut self.delivered);
            // Handed out from the end: the order among them does not matter.
        }
        let Some((port, id, reply)) = self.delivered.pop() else { return Recv::Empty };
        let Some(&(slot, _)) = self.tries.get(&(port, id)) else {
            // Its try ended (timed out): a late reply.
            return Recv::Stray;
        };
        let t = Try { port, id };
        match reply {
            Some(reply) => Recv::Reply { slot, t, reply },
            None => {
                self.end(t);
                Recv::TryFailed { slot, t }
            }
        }
    }

    /// Ends a try whose reply the caller accepted.
    pub fn end(&mut self, t: Try) {
        if self.tries.remove(&(t.port, t.id)).is_some() {
            if let Some(p) = self.ports.get_mut(t.port as usize).and_then(Option::as_mut) {
                p.in_flight -= 1;
            }
            self.close_if_done(t.port);
        }
    }

    /// A try whose deadline passed by `now`, ended, with its slot; `None` when there is none.
    pub fn expired(&mut self, now: Instant) -> Option<(u32, Try)> {
        while let Some(Reverse((at, seq, port, id))) = self.deadlines.peek().copied() {
            if at > now {
                return None;
            }
            self.deadlines.pop();
            if let Some(&(slot, s)) = self.tries.get(&(port, id))
                && s == seq
            {
                // A port whose try timed out may carry a late reply into a
                // later try's ID space; let it take no more.
                if let Some(p) = self.ports.get_mut(port as usize).and_then(Option::as_mut) {
                    p.current = false;
                }
                self.end(Try { port, id });
                return Some((slot, Try { port, id }));
            }
        }
        None
    }

    /// Time until the next deadline, if any try is in flight.
    pub fn next_deadline(&mut self, now: Instant) -> Option<Duration> {
        while let Some(Reverse((at, seq, port, id))) = self.deadlines.peek().copied() {
            if self.tries.get(&(port, id)).is_some_and(|t| t.1 == seq) {
                return Some(at.saturating_duration_since(now));
            }
            self.deadlines.pop();
        }
        None
    }

    /// Whether any upstream port is open (a sweep has something to close):
    /// every slot of `ports` not listed in `free_ports` holds one.
    pub fn has_open_ports(&self) -> bool {
        self.ports.len() > self.free_ports.len()
    }

    /// Closes ports that carried nothing since the last sweep.
    pub fn sweep_idle(&mut self) {
        for i in 0..self.ports.len() {
            if let Some(p) = self.ports[i].as_mut() {
                if !p.busy && p.in_flight == 0 {
                    p.current = false;
                    self.close_if_done(i as u32);
                } else {
                    p.busy = false;
                }
            }
        }
    }

    /// The port that takes new tries to `server`, opened if there is none.
    fn port_for(&mut self, server: &Arc<Server>) -> Option<u32> {
        let found =
            self.ports.iter().position(|p| p.as_ref().is_some_and(|p| p.current && Arc::ptr_eq(&p.server, server)));
        if let Some(i) = found {
            return Some(i as u32);
        }
        let sock = match &server.link {
            Some(_) => {
                self.watch_inbox()?;
                None
            }
            None => {
                let sock = UdpSocket::bind(unspecified_for(&server.addr)).ok()?;
                sock.connect(server.addr).ok()?;
                Some(sock)
            }
        };
        let index = match self.free_ports.pop() {
            Some(i) => i,
            None => {
                self.ports.push(None);
                (self.ports.len() - 1) as u32
            }
        };
        if let Some(sock) = &sock
            && epoll::add(&self.epoll, sock, EventData::new_u64(index.into()), EventFlags::IN).is_err()
        {
            self.free_ports.push(index);
            return None;
        }
        self.ports[index as usize] =
            Some(Port { server: server.clone(), sock, uses: 0, in_flight: 0, current: true, busy: true });
        Some(index)
    }

    /// Makes the inbox and adds it to the wait set, the first time.
    fn watch_inbox(&mut self) -> Option<()> {
        if self.tls_inbox.is_none() {
            let inbox = super::tls::Inbox::new().ok()?;
            epoll::add(&self.epoll, inbox.fd(), EventData::new_u64(ENCRYPTED), EventFlags::IN).ok()?;
            self.tls_inbox = Some(Arc::new(inbox));
        }
        Some(())
    }

    /// Ends every try on a failed port; returns their slots.
    fn fail_port(&mut self, port: u32) -> Vec<(u32, Try)> {
        let ended: Vec<(u16, u32)> =
            self.tries.iter().filter(|((p, _), _)| *p == port).map(|(&(_, id), &(slot, _))| (id, slot)).collect();
        if let Some(p) = self.ports.get_mut(port as usize).and_then(Option::as_mut) {
            p.current = false;
        }
        for &(id, _) in &ended {
            self.end(Try { port, id });
        }
        self.close_if_done(port);
        ended.into_iter().map(|(id, slot)| (slot, Try { port, id })).collect()
    }

    fn close_if_done(&mut self, port: u32) {
        let done =
            self.ports.get(port as usize).and_then(Option::as_ref).is_some_and(|p| !p.current && p.in_flight == 0);
        if done && let Some(p) = self.ports[port as usize].take() {
            if let Some(sock) = &p.sock {
                let _ = epoll::delete(&self.epoll, sock);
            }
            self.free_ports.push(port);
            // What is left of its batch must not pass for a later port's under the same index.
            if self.inbox_port == port {
                self.inbox_port = u32::MAX;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(answer: bool, forge: usize) -> (Arc<Server>, Arc<std::sync::Mutex<Vec<u16>>>) {
        let (server, ports, _) = server_counting(answer, forge);
        (server, ports)
    }

    /// As [`server`], with the count of queries it has sent its replies for.
    fn server_counting(
        answer: bool,
        forge: usize,
    ) -> (Arc<Server>, Arc<std::sync::Mutex<Vec<u16>>>, Arc<std::sync::atomic::AtomicUsize>) {
        let (addr, ports, replied) = super::super::tests::fake_server(answer, forge);
        (Arc::new(Server::new(addr)), ports, replied)
    }

    /// A server on a port nobody listens on: its queries draw ICMP port unreachable.
    fn closed_server() -> Arc<Server> {
        let addr = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        Arc::new(Server::new(addr))
    }

    fn query() -> Vec<u8> {
        let m = crate::wire::tests::query(5, "www.example", crate::wire::rtype::A, None);
        super::super::build_query(&crate::wire::parse_query(&m).unwrap(), 0)
    }

    /// Waits for events and collects (slot, id) of every reply.
    fn collect(mux: &mut Mux, want: usize) -> Vec<(u32, u16)> {
        let mut got = Vec::new();
        let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; EVENTS];
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < want && Instant::now() < deadline {
            let n = mux.wait(&mut events, Duration::from_millis(100));
            for ev in &events[..n] {
                loop {
                    match mux.recv(ev.data.u64()) {
                        Recv::Reply { slot, t, reply } => {
                            assert_eq!(header::id(&reply), t.id);
                            mux.end(t);
                            got.push((slot, t.id));
                        }
                        Recv::Stray => {}
                        Recv::Empty => break,
                        Recv::Failed(slots) => panic!("failed {slots:?}"),
                        Recv::TryFailed { slot, t } => panic!("failed {slot} {t:?}"),
                    }
                }
            }
        }
        got
    }

    #[test]
    fn many_tries_share_ports_and_each_reply_finds_its_slot() {
        let (server, ports) = server(true, 2);
        let mut mux = Mux::new(1024).unwrap();
        let mut q = query();
        let n = SOCKET_USES as usize * 2 + 10;
        for slot in 0..n as u32 {
            assert!(mux.send(&server, &mut q, slot, Instant::now(), Duration::from_secs(5)).is_some());
        }
        assert_eq!(mux.in_flight(), n);
        assert_eq!(ports.lock().unwrap().len(), 0, "nothing goes before the flush");
        let mut failed = Vec::new();
        mux.flush(&mut failed);
        assert_eq!((failed.len(), mux.queued()), (0, 0));
        let mut got: Vec<u32> = collect(&mut mux, n).into_iter().map(|(s, _)| s).collect();
        got.sort_unstable();
        assert_eq!(got, (0..n as u32).collect::<Vec<_>>(), "every slot answered once");
        assert_eq!(mux.in_flight(), 0);
        assert!(server.mismatched.load(Relaxed) >= 2 * n as u64 - 8, "forged IDs counted, not taken");
        let mut distinct = ports.lock().unwrap().clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "a fresh port every {SOCKET_USES} tries");
        assert_eq!(mux.ports.iter().flatten().count(), 1, "used-up ports closed once their tries ended");
        mux.sweep_idle();
        mux.sweep_idle();
        assert_eq!(mux.ports.iter().flatten().count(), 0, "an idle port is closed");
    }

    #[test]
    fn replies_left_in_a_batch_die_with_their_port() {
        let (server, _, replied) = server_counting(true, 0);
        let mut mux = Mux::new(8).unwrap();
        let mut q = query();
        let tries: Vec<Try> = (0..3)
            .map(|slot| mux.send(&server, &mut q, slot, Instant::now(), Duration::from_secs(5)).unwrap())
            .collect();
        mux.flush(&mut Vec::new());
        // All three replies queued on the port, so one recvmmsg takes them together.
        let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; EVENTS];
        assert_eq!(mux.wait(&mut events, Duration::from_secs(5)), 1);
        // (A reply on loopback is on the socket once its send returned.)
        let end = Instant::now() + Duration::from_secs(30);
        while replied.load(Relaxed) < 3 {
            assert!(Instant::now() < end, "the server did not answer all three");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(matches!(mux.recv(0), Recv::Reply { .. }));
        assert_eq!((mux.inbox_port, mux.inbox_taken - mux.inbox_next), (0, 2), "two replies left in the batch");
        mux.ports[0].as_mut().unwrap().current = false;
        for t in tries {
            mux.end(t);
        }
        assert!(mux.ports[0].is_none(), "the port closed with its last try");
        let t = mux.send(&server, &mut q, 7, Instant::now(), Duration::from_secs(5)).unwrap();
        assert_eq!(t.port, 0, "a new port under the same index");
        assert!(matches!(mux.recv(0), Recv::Empty), "nothing of the old port's batch is handed out");
    }

    #[test]
    fn unanswered_tries_expire_in_deadline_order() {
        let (server, _) = server(false, 0);
        let mut mux = Mux::new(8).unwrap();
        let mut q = query();
        assert!(mux.send(&server, &mut q, 7, Instant::now(), Duration::from_millis(40)).is_some());
        assert!(mux.send(&server, &mut q, 3, Instant::now(), Duration::from_millis(20)).is_some());
        assert!(mux.next_deadline(Instant::now()).unwrap() <= Duration::from_millis(20));
        assert_eq!(mux.expired(Instant::now()), None);
        let later = Instant::now() + Duration::from_millis(50);
        assert_eq!(mux.expired(later).map(|e| e.0), Some(3));
        assert_eq!(mux.expired(later).map(|e| e.0), Some(7));
        assert_eq!(mux.expired(later), None);
        assert_eq!(mux.in_flight(), 0);
        for slot in 0..8 {
            assert!(mux.send(&server, &mut q, slot, Instant::now(), Duration::from_secs(1)).is_some());
        }
        assert!(mux.send(&server, &mut q, 8, Instant::now(), Duration::from_secs(1)).is_none(), "bounded");
    }

    #[test]
    fn a_refused_port_fails_its_tries() {
        let server = closed_server();
        let mut mux = Mux::new(8).unwrap();
        let mut q = query();
        assert!(mux.send(&server, &mut q, 1, Instant::now(), Duration::from_secs(5)).is_some());
        mux.flush(&mut Vec::new());
        let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; EVENTS];
        let n = mux.wait(&mut events, Duration::from_secs(2));
        assert_eq!(n, 1, "ICMP port unreachable wakes the wait");
        match mux.recv(events[0].data.u64()) {
            Recv::Failed(ended) => assert_eq!(ended.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1]),
            other => panic!("{other:?}"),
        }
        assert_eq!(mux.in_flight(), 0);
    }

    #[test]
    fn a_query_the_kernel_refuses_fails_its_try_at_the_flush() {
        let server = closed_server();
        let mut mux = Mux::new(8).unwrap();
        let mut q = query();
        let mut failed = Vec::new();
        assert!(mux.send(&server, &mut q, 1, Instant::now(), Duration::from_secs(5)).is_some());
        mux.flush(&mut failed);
        assert!(failed.is_empty());
        // The ICMP report of the first waits on the socket; the next send reports it.
        let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; EVENTS];
        assert_eq!(mux.wait(&mut events, Duration::from_secs(2)), 1);
        let t2 = mux.send(&server, &mut q, 2, Instant::now(), Duration::from_secs(5)).unwrap();
        let t3 = mux.send(&server, &mut q, 3, Instant::now(), Duration::from_secs(5)).unwrap();
        assert_eq!((t2.port, t3.port), (0, 0), "the same port, so one sendmmsg");
        mux.flush(&mut failed);
        assert_eq!(
            failed.iter().map(|f| f.0).collect::<Vec<_>>(),
            vec![2],
            "the first of the run took the error; the second went"
        );
        assert_eq!(mux.in_flight(), 2);
        assert!(!mux.ports[0].as_ref().unwrap().current, "the port takes no new tries");
    }
}
