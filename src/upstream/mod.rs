//! Forwarding: sending a miss to upstream servers and judging their replies.
//!
//! Two drivers share the rules here: UDP receive threads forward their own
//! misses through a [`mux::Mux`] (many tries over a few sockets, one
//! `epoll`), and the async path ([`Group::resolve`]) serves TCP clients and
//! the retries over TCP. Both go through [`Failover`] for the server order.
//!
//! In the async path each try uses a UDP socket of its own (the kernel picks a random source
//! port) connected to the server, and a random ID from the kernel's CSPRNG. A
//! reply counts only if it comes from that server (the connected socket
//! filters the rest), carries our ID, our question, and parses; anything else
//! is ignored while the try's timer runs. A socket whose try got its answer
//! goes back to a small idle pool and serves up to [`SOCKET_USES`] tries, one
//! at a time: opening, registering and closing a socket cost a miss more CPU
//! than the rest of it (measured: 16 % of the server's CPU in a mix with 10 %
//! misses). The port stays unpredictable off the path, as the upstream, not
//! an authoritative server an attacker runs, is all that sees it; a try that
//! times out or fails drops its socket, and a stray late reply on a reused
//! socket fails the ID check like any forgery. A truncated reply is retried over TCP
//! to the same server. Servers are tried in order starting from the last one
//! that answered; when all fail the caller answers SERVFAIL, so a miss never
//! takes longer than `timeout × servers` (plus one TCP retry).
//!
//! [`Inflight`] makes identical concurrent misses share one upstream query
//! (`inflight.rs`); `reply.rs` builds our query and judges a reply.

pub mod bootstrap;
pub mod clock;
pub mod connect;
pub mod health;
pub mod hpack;
pub mod http2;
pub mod https;
mod inflight;
pub mod mux;
pub mod padding;
mod reply;
pub mod resolv;
pub mod runtime;
pub mod sets;
pub mod tls;

pub use inflight::{Inflight, Join, Lead, Resolution, Resolved};
pub use reply::{build_query, is_reply_to};

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use smol::channel::{Receiver, Sender, bounded};
use smol::future::FutureExt;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use smol::{Async, Timer};

use crate::answer::Stored;
use crate::config::upstream::{Strategy, Upstream};
use crate::wire::{self, EDNS_UDP_SIZE, HEADER_LEN, Query, flags, header, rcode, rtype};

/// Receive buffer for UDP replies: we advertise 1232, some servers send more.
const UDP_REPLY_BUF: usize = 4096;
/// Tries one upstream socket serves before it is closed for a fresh port.
const SOCKET_USES: u32 = 64;
/// Idle sockets kept per server; more are closed.
const MAX_IDLE_SOCKETS: usize = 64;

/// A connected socket between tries, with the tries it has served.
#[derive(Debug)]
struct IdleSocket {
    sock: Async<UdpSocket>,
    uses: u32,
}

/// One upstream server and its counters.
#[derive(Debug)]
pub struct Server {
    /// What the config names.
    pub spec: Upstream,
    /// Where a plain server listens (for an encrypted one: its first pinned
    /// address, else unspecified; see [`Server::peer`]).
    pub addr: SocketAddr,
    /// An encrypted server's connection.
    pub link: Option<tls::Link>,
    /// Replies accepted.
    pub answers: AtomicU64,
    /// Tries that got no usable reply in time.
    pub timeouts: AtomicU64,
    /// Tries that failed at once (connection refused, send error).
    pub errors: AtomicU64,
    /// Stray or forged replies ignored (wrong ID or question, garbage).
    pub mismatched: AtomicU64,
    /// Sum of reply latencies, µs, for the average.
    pub latency_us: AtomicU64,
    /// Down after failures in a row: skipped but for a probe now and then.
    pub health: health::Health,
    /// Recent reply time, µs (a moving average; 0: not known yet). A try
    /// that gets nothing doubles it. `parallel` asks the two lowest.
    pub rtt_us: AtomicU32,
    /// Connected sockets between tries (see the module notes).
    idle: Mutex<Vec<IdleSocket>>,
}

impl Server {
    /// A plain server with zeroed counters.
    pub fn new(addr: SocketAddr) -> Server {
        Server::from_spec(&Upstream::Plain(addr))
    }

    /// A server with zeroed counters; an encrypted one connects at its first query.
    pub fn from_spec(spec: &Upstream) -> Server {
        let (addr, link) = match spec {
            Upstream::Plain(a) => (*a, None),
            Upstream::Encrypted(e) => {
                let ip = e.pins.first().copied().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
                (SocketAddr::new(ip, e.port), Some(tls::Link::new(e.clone())))
            }
        };
        Server {
            spec: spec.clone(),
            addr,
            link,
            answers: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            mismatched: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
            health: health::Health::default(),
            rtt_us: AtomicU32::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle socket, or a fresh one connected to this server.
    fn socket(&self) -> Result<IdleSocket, TryError> {
        if let Some(s) = self.idle.lock().ok().and_then(|mut idle| idle.pop()) {
            return Ok(s);
        }
        let sock = UdpSocket::bind(unspecified_for(&self.addr)).map_err(|_| TryError::Io)?;
        sock.connect(self.addr).map_err(|_| TryError::Io)?;
        Ok(IdleSocket { sock: Async::new(sock).map_err(|_| TryError::Io)?, uses: 0 })
    }

    /// Takes back a socket whose try got its answer, unless it is used up.
    fn put_back(&self, mut s: IdleSocket) {
        s.uses += 1;
        if s.uses < SOCKET_USES
            && let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE_SOCKETS
        {
            idle.push(s);
        }
    }

    /// The address that answered, for the query log and the answer's
    /// origin: an encrypted server's is the one it connected to last.
    pub fn peer(&self) -> SocketAddr {
        self.link.as_ref().map_or(self.addr, tls::Link::peer)
    }

    /// Idle sockets held (for tests).
    #[cfg(test)]
    fn idle_sockets(&self) -> usize {
        self.idle.lock().map(|i| i.len()).unwrap_or(0)
    }
}

/// Servers tried in order for one kind of name (the defaults, or one forward rule).
#[derive(Debug)]
pub struct Group {
    /// The servers, in configured order (at most [`MAX_SERVERS`]), the
    /// fallbacks last.
    pub servers: Vec<Arc<Server>>,
    /// How many of `servers` are upstreams; the rest are fallbacks, asked
    /// in order only once every upstream has been tried.
    primary: usize,
    /// Index of the server to try first: the last one that answered.
    preferred: AtomicUsize,
    /// How a resolution picks its first server.
    strategy: Strategy,
    /// Whether the AD bit of a plain server's answer is passed on. Anyone
    /// on the path of plain DNS can set it, so by default it is cleared,
    /// as dnsmasq does unless told `proxy-dnssec` (`trust_upstream_ad`);
    /// an encrypted server's is kept: its channel is authenticated, so its
    /// AD says what the resolver the owner chose says (RFC 6840 §5.8).
    trust_plain_ad: bool,
}

/// Servers per group: a resolution marks the ones it tried in a `u64`.
pub const MAX_SERVERS: usize = 64;

/// Why a try produced no reply.
#[derive(Debug)]
pub enum TryError {
    /// The timer ran out.
    Timeout,
    /// The socket failed (e.g. ICMP port unreachable).
    Io,
}

impl Group {
    /// A group of plain servers (the first [`MAX_SERVERS`]), reusing
    /// `Server`s (their counters and health) from `known`.
    pub fn new(addrs: &[SocketAddr], known: &[Arc<Server>], strategy: Strategy) -> Group {
        let specs: Vec<Upstream> = addrs.iter().map(|a| Upstream::Plain(*a)).collect();
        Group::with_fallbacks(&specs, &[], known, strategy)
    }

    /// A group over `upstreams`, with plain `fallbacks` after them.
    pub fn with_fallbacks(
        upstreams: &[Upstream],
        fallbacks: &[Upstream],
        known: &[Arc<Server>],
        strategy: Strategy,
    ) -> Group {
        let servers: Vec<Arc<Server>> = upstreams
            .iter()
            .chain(fallbacks)
            .take(MAX_SERVERS)
            .map(|u| known.iter().find(|s| s.spec == *u).cloned().unwrap_or_else(|| Arc::new(Server::from_spec(u))))
            .collect();
        let primary = upstreams.len().min(servers.len());
        Group { servers, primary, preferred: AtomicUsize::new(0), strategy, trust_plain_ad: false }
    }

    /// This group, passing on plain servers' AD bit when `trust` (see [`Group::trust_plain_ad`]).
    pub fn trusting_plain_ad(mut self, trust: bool) -> Group {
        self.trust_plain_ad = trust;
        self
    }

    /// Whether server `idx` is a fallback.
    pub fn is_fallback(&self, idx: usize) -> bool {
        idx >= self.primary
    }

    /// Resolves `q` through the servers. Returns the first good reply, else the
    /// last error reply (SERVFAIL, REFUSED…) if any server gave one, else
    /// `None`; with the address of the server that sent it.
    pub async fn resolve(&self, q: &Query<'_>, timeout: Duration) -> Option<(Vec<u8>, SocketAddr)> {
        self.resolve_from(q, timeout, &mut self.failover(), None).await
    }

    /// Goes on with a resolution another driver started (see [`mux`]):
    /// `truncated` is the server whose UDP reply had TC set, asked again over TCP first.
    pub async fn resolve_from(
        &self,
        q: &Query<'_>,
        timeout: Duration,
        failover: &mut Failover,
        mut truncated: Option<usize>,
    ) -> Option<(Vec<u8>, SocketAddr)> {
        loop {
            let started = Instant::now();
            if let Some(idx) = truncated.take() {
                let reply = self.try_server(idx, q, timeout, true).await;
                if let Some(done) = failover.record(self, idx, reply, started) {
                    return Some(done);
                }
                continue;
            }
            let Some(a) = failover.next(self) else { return failover.fallback() };
            let Some(b) = (failover.width() > 1).then(|| failover.next(self)).flatten() else {
                let reply = self.try_server(a, q, timeout, false).await;
                if let Some(done) = failover.record(self, a, reply, started) {
                    return Some(done);
                }
                continue;
            };
            // `parallel`: both at once; the first good answer wins and the
            // other try is dropped, an error answer waits for the other.
            let mut fa = std::pin::pin!(self.try_server(a, q, timeout, false));
            let mut fb = std::pin::pin!(self.try_server(b, q, timeout, false));
            let (first, reply) = std::future::poll_fn(|cx| {
                if let std::task::Poll::Ready(r) = fa.as_mut().poll(cx) {
                    return std::task::Poll::Ready((a, r));
                }
                fb.as_mut().poll(cx).map(|r| (b, r))
            })
            .await;
            if let Some(done) = failover.record(self, first, reply, started) {
                failover.lost(self, if first == a { b } else { a }, started);
                return Some(done);
            }
            let (second, reply) = if first == a { (b, fb.await) } else { (a, fa.await) };
            if let Some(done) = failover.record(self, second, reply, started) {
                return Some(done);
            }
        }
    }

    /// One try of server `idx` (over TCP at once if `over_tcp`, else UDP
    /// and TCP when the reply is truncated).
    async fn try_server(
        &self,
        idx: usize,
        q: &Query<'_>,
        timeout: Duration,
        over_tcp: bool,
    ) -> Result<Vec<u8>, TryError> {
        let server = &self.servers[idx];
        let query = build_query(q, random_id());
        if let Some(link) = &server.link {
            let reply = link.query(&query, timeout).await?;
            if is_reply_to(&reply, header::id(&query), q) {
                return Ok(reply);
            }
            server.mismatched.fetch_add(1, Relaxed);
            return Err(TryError::Io);
        }
        if over_tcp {
            return try_tcp(server, &query, q, timeout).await;
        }
        let reply = try_udp(server, &query, q, timeout).await;
        match &reply {
            Ok(r) if header::flags(r) & flags::TC != 0 => try_tcp(server, &query, q, timeout).await,
            _ => reply,
        }
    }

    /// A fresh resolution's place in the server order.
    pub fn failover(&self) -> Failover {
        let n = self.primary.max(1);
        let first = match self.strategy {
            Strategy::Failover | Strategy::Parallel => self.preferred.load(Relaxed) % n,
            Strategy::Random => (random_id() as usize) % n,
        };
        Failover { first, tried: 0, any_up: false, parallel: self.strategy == Strategy::Parallel, fallback: None }
    }
}

/// Where one resolution stands: which servers it has tried and the error
/// reply to fall back on. Both drivers (the async one above and the UDP
/// loop's [`mux`]) go through it, so they fail over alike: servers in order
/// from the last one that answered (or a random one, see [`Strategy`]),
/// skipping those that are down ([`health`]) unless all are; SERVFAIL,
/// REFUSED or NOTIMP moves on but is kept in case no one does better; a
/// timeout or error moves on and, on the preferred server, makes the next
/// one preferred.
#[derive(Debug)]
pub struct Failover {
    first: usize,
    /// Bit `i`: server `i` has been tried.
    tried: u64,
    /// A server that was not down has been tried: down ones are then left out.
    any_up: bool,
    /// `parallel`: the first two servers are the fastest, and tried at once.
    parallel: bool,
    fallback: Option<(Vec<u8>, SocketAddr)>,
}

impl Failover {
    /// How many tries to keep in flight: two while a `parallel`
    /// resolution starts, else one.
    pub fn width(&self) -> usize {
        if self.parallel && self.tried.count_ones() < 2 { 2 } else { 1 }
    }

    /// The next server to try, or `None` when every one worth a try has been.
    pub fn next(&mut self, group: &Group) -> Option<usize> {
        let n = group.primary;
        let (tried, first) = (self.tried, self.first);
        let untried = move || (0..n).map(move |k| (first + k) % n).filter(move |&i| tried & 1 << i == 0);
        let mut pick = None;
        if self.parallel && tried.count_ones() < 2 {
            // The fastest of those up (ties keep the failover order): a
            // scan, where a sort's code was most of this feature's bytes.
            pick = untried()
                .filter(|&i| !group.servers[i].health.is_down())
                .enumerate()
                .min_by_key(|&(place, i)| (group.servers[i].rtt_us.load(Relaxed), place))
                .map(|(_, i)| i);
            self.any_up |= pick.is_some();
        }
        if pick.is_none() {
            for i in untried() {
                if group.servers[i].health.try_now() {
                    self.any_up = true;
                    pick = Some(i);
                    break;
                }
                // Down: tried only when every server is (none up was tried).
                if !self.any_up && group.servers[..n].iter().all(|s| s.health.is_down()) {
                    pick = Some(i);
                    break;
                }
            }
        }
        // Every upstream tried: the fallbacks, in order, once each.
        let tried = self.tried;
        let i = pick.or_else(|| (n..group.servers.len()).find(|&i| tried & 1 << i == 0))?;
        self.tried |= 1 << i;
        Some(i)
    }

    /// Records a try of server `idx` that began at `started`. Returns the
    /// reply when it ends the resolution.
    pub fn record(
        &mut self,
        group: &Group,
        idx: usize,
        outcome: Result<Vec<u8>, TryError>,
        started: Instant,
    ) -> Option<(Vec<u8>, SocketAddr)> {
        let server = &group.servers[idx];
        let n = group.primary;
        match outcome {
            Ok(mut r) => {
                if server.link.is_none() && !group.trust_plain_ad {
                    let f = header::flags(&r);
                    header::set_flags(&mut r, f & !flags::AD);
                }
                server.answers.fetch_add(1, Relaxed);
                if server.health.answered() {
                    log::info!("upstream {}: answers again", server.spec);
                }
                let took = started.elapsed().as_micros() as u64;
                server.latency_us.fetch_add(took, Relaxed);
                let rtt = server.rtt_us.load(Relaxed);
                let took = took.min(u32::MAX as u64) as u32;
                server.rtt_us.store(if rtt == 0 { took } else { rtt - rtt / 8 + took / 8 }, Relaxed);
                let rc = header::rcode(&r);
                if rc == rcode::SERVFAIL || rc == rcode::REFUSED || rc == rcode::NOTIMP {
                    // A SERVFAIL is often the name's own fault (a broken
                    // zone); REFUSED and NOTIMP say the server will not serve us.
                    if rc != rcode::SERVFAIL && server.health.log_refusal() {
                        let what = if rc == rcode::REFUSED { "REFUSED" } else { "NOTIMP" };
                        log::warn!(
                            "upstream {}: answered {what}; the next server is asked (logged at most once a minute)",
                            server.spec
                        );
                    }
                    self.fallback = Some((r, server.peer()));
                    return None;
                }
                if group.is_fallback(idx) {
                    fallback_used(server.addr);
                } else if idx != self.first {
                    group.preferred.store(idx, Relaxed);
                }
                return Some((r, server.peer()));
            }
            Err(TryError::Timeout) => server.timeouts.fetch_add(1, Relaxed),
            Err(TryError::Io) => server.errors.fetch_add(1, Relaxed),
        };
        if server.health.failed() {
            log::warn!(
                "upstream {}: no answer to {} tries in a row ({}); skipped, tried again every {} s",
                server.spec,
                health::FAILS_TO_DOWN,
                if matches!(outcome, Err(TryError::Timeout)) { "timed out" } else { "errors" },
                health::PROBE_EVERY.as_secs()
            );
        }
        let rtt = server.rtt_us.load(Relaxed);
        server.rtt_us.store(rtt.saturating_mul(2).max(started.elapsed().as_micros() as u32), Relaxed);
        if idx == self.first && n > 1 {
            group.preferred.store((idx + 1) % n, Relaxed);
        }
        None
    }

    /// Server `idx`'s try, begun at `started`, was dropped because another
    /// answered first: it is at least that slow, so `parallel` ranks it behind.
    pub fn lost(&self, group: &Group, idx: usize, started: Instant) {
        let server = &group.servers[idx];
        let took = started.elapsed().as_micros().min(u32::MAX as u128) as u32 + 1;
        if server.rtt_us.load(Relaxed) < took {
            server.rtt_us.store(took, Relaxed);
        }
    }

    /// The best error reply seen, once every server has been tried.
    pub fn fallback(&mut self) -> Option<(Vec<u8>, SocketAddr)> {
        self.fallback.take()
    }
}

/// Says, at most once a minute, that a fallback answered: the upstreams
/// all failed, and that name went out in the clear to `addr`.
fn fallback_used(addr: SocketAddr) {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = crate::sys::unix_now();
    let last = LAST.load(Relaxed);
    if now >= last + 60 && LAST.compare_exchange(last, now, Relaxed, Relaxed).is_ok() {
        log::warn!("every upstream failed; answered by fallback {addr} (logged at most once a minute)");
    }
}

fn unspecified_for(addr: &SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

async fn try_udp(server: &Server, query: &[u8], q: &Query<'_>, timeout: Duration) -> Result<Vec<u8>, TryError> {
    let id = header::id(query);
    let pooled = server.socket()?;
    let sock = &pooled.sock;
    let attempt = async {
        sock.send(query).await.map_err(|_| TryError::Io)?;
        let mut buf = vec![0u8; UDP_REPLY_BUF];
        loop {
            let n = sock.recv(&mut buf).await.map_err(|_| TryError::Io)?;
            if is_reply_to(&buf[..n], id, q) {
                buf.truncate(n);
                return Ok(buf);
            }
            server.mismatched.fetch_add(1, Relaxed);
        }
    };
    let result = attempt.or(expire(timeout)).await;
    if result.is_ok() {
        server.put_back(pooled);
    }
    result
}

async fn try_tcp(server: &Server, query: &[u8], q: &Query<'_>, timeout: Duration) -> Result<Vec<u8>, TryError> {
    let id = header::id(query);
    let attempt = async {
        let mut stream = Async::<TcpStream>::connect(server.addr).await.map_err(|_| TryError::Io)?;
        let mut framed = Vec::with_capacity(query.len() + 2);
        framed.extend_from_slice(&(query.len() as u16).to_be_bytes());
        framed.extend_from_slice(query);
        stream.write_all(&framed).await.map_err(|_| TryError::Io)?;
        loop {
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).await.map_err(|_| TryError::Io)?;
            let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
            stream.read_exact(&mut buf).await.map_err(|_| TryError::Io)?;
            if is_reply_to(&buf, id, q) {
                return Ok(buf);
            }
            server.mismatched.fetch_add(1, Relaxed);
        }
    };
    attempt.or(expire(timeout)).await
}

async fn expire<T>(after: Duration) -> Result<T, TryError> {
    Timer::after(after).await;
    Err(TryError::Timeout)
}

thread_local! {
    /// Kernel randomness fetched 128 bytes at a time: one syscall per 64 IDs.
    static RANDOM: RefCell<([u8; 128], usize)> = const { RefCell::new(([0; 128], 128)) };
}

/// An unpredictable query ID.
pub fn random_id() -> u16 {
    RANDOM.with(|r| {
        let mut r = r.borrow_mut();
        let (buf, used) = &mut *r;
        if *used + 2 > buf.len() {
            if rustix::rand::getrandom(&mut buf[..], rustix::rand::GetRandomFlags::empty()).is_err() {
                // Without getrandom, fall back to the std hasher's per-process random keys.
                use std::hash::{BuildHasher, RandomState};
                let v = RandomState::new().hash_one(Instant::now());
                buf[..8].copy_from_slice(&v.to_ne_bytes());
            }
            *used = 0;
        }
        let id = u16::from_ne_bytes([buf[*used], buf[*used + 1]]);
        *used += 2;
        id
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::upstream_answer;
    use crate::wire::{parse_query, tests::query};

    #[test]
    fn ids_vary() {
        let ids: std::collections::HashSet<u16> = (0..1000).map(|_| random_id()).collect();
        assert!(ids.len() > 900);
    }

    /// A server on loopback that answers every query (or none), first
    /// sending `forge` replies with other IDs, and records the source port of
    /// each query, and counts the queries it has sent its replies for (a
    /// test that needs them all on its socket waits for that count, not for
    /// some time). Also serves the mux's tests.
    pub(super) fn fake_server(answer: bool, forge: usize) -> (SocketAddr, Arc<Mutex<Vec<u16>>>, Arc<AtomicUsize>) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = sock.local_addr().unwrap();
        let ports = Arc::new(Mutex::new(Vec::new()));
        let replied = Arc::new(AtomicUsize::new(0));
        let (seen, sent) = (ports.clone(), replied.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while let Ok((n, peer)) = sock.recv_from(&mut buf) {
                seen.lock().unwrap().push(peer.port());
                let good = upstream_answer(&buf[..n], &[60], true);
                for i in 0..forge {
                    let mut bad = good.clone();
                    bad[..2].copy_from_slice(&(header::id(&good) ^ (i as u16 + 1)).to_be_bytes());
                    let _ = sock.send_to(&bad, peer);
                }
                if answer {
                    let _ = sock.send_to(&good, peer);
                }
                sent.fetch_add(1, Relaxed);
            }
        });
        (addr, ports, replied)
    }

    #[test]
    fn sockets_are_reused_a_bounded_number_of_times() {
        let (addr, ports, _) = fake_server(true, 0);
        let group = Group::new(&[addr], &[], Strategy::Failover);
        let m = query(5, "www.example", rtype::A, None);
        let q = parse_query(&m).unwrap();
        for _ in 0..(SOCKET_USES + 6) {
            assert!(smol::block_on(group.resolve(&q, Duration::from_secs(10))).is_some());
        }
        let ports = ports.lock().unwrap().clone();
        assert_eq!(ports.len(), SOCKET_USES as usize + 6);
        assert!(ports[..SOCKET_USES as usize].iter().all(|&p| p == ports[0]), "one socket, reused");
        assert!(ports[SOCKET_USES as usize..].iter().all(|&p| p != ports[0]), "then a fresh port");
        assert_eq!(group.servers[0].idle_sockets(), 1);
    }

    #[test]
    fn a_socket_that_timed_out_is_not_reused() {
        let (addr, ports, _) = fake_server(false, 0);
        let group = Group::new(&[addr], &[], Strategy::Failover);
        let m = query(5, "www.example", rtype::A, None);
        let q = parse_query(&m).unwrap();
        for _ in 0..3 {
            assert!(smol::block_on(group.resolve(&q, Duration::from_millis(50))).is_none());
        }
        assert_eq!(group.servers[0].idle_sockets(), 0);
        let ports = ports.lock().unwrap().clone();
        assert_eq!(ports.len(), 3);
        assert!(ports[0] != ports[1] && ports[1] != ports[2], "a fresh port each time: {ports:?}");
    }
}
