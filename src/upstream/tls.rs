//! DNS over TLS (RFC 7858): one connection per upstream, kept open and
//! shared by every query to it.
//!
//! A task on the connections' thread ([`super::runtime`]) owns the
//! connection. Queries reach it through a bounded queue; it writes them
//! as they come (pipelined, RFC 7766 §6.2.1.1), each under an ID of its
//! own, and hands each reply back to its query by that ID, in whatever
//! order the server answers, with the query's own ID restored.
//!
//! - No connection is made until a query needs one; it is closed after
//!   [`IDLE_CLOSE`] without queries, and a server may close it sooner.
//! - When a connection ends (the server closed it, a write failed, a reset)
//!   with queries unanswered, each is written once more on a new
//!   connection; a query that already had its second chance fails.
//! - A connection that has had queries outstanding for [`NO_REPLY_DROP`]
//!   with no reply at all is dropped: after a WAN change the old one is
//!   half-open and would swallow everything written to it.
//! - Every handshake is counted ([`Shared::handshakes`]): with a
//!   connection kept open, a handshake per query would show there.

use std::collections::VecDeque;
use std::io::{self, Read as _, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConnection};
use smol::channel::{Receiver, Sender, TryRecvError, bounded};
use smol::future::FutureExt;
use smol::{Async, Timer};

use super::TryError;
use super::address::Endpoint;
use super::bootstrap::Addresses;
use super::runtime::{self, Context};
use crate::wire::header;

/// Queries waiting for the connection's task; more fail at once (and the
/// resolution moves on to the next server).
const QUEUE: usize = 64;
/// Queries written and unanswered on one connection; the rest wait in the queue.
const MAX_PIPELINE: usize = 128;
/// A connection without queries for this long is closed.
const IDLE_CLOSE: Duration = Duration::from_secs(60);
/// Outstanding queries and no reply for this long: the connection is dead.
pub const NO_REPLY_DROP: Duration = Duration::from_secs(15);
/// Connecting and the handshake take at most this long (or the upstream
/// timeout, if longer).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest DNS message over a stream.
const MAX_MESSAGE: usize = 65_535;
/// At most one log line per this long about one upstream's failures.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Where a link's connection stands, as `stats` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// No connection (none needed yet, or closed while idle).
    Idle = 0,
    /// Connecting or in the handshake.
    Connecting = 1,
    /// Connected.
    Connected = 2,
    /// The last connection attempt failed.
    Failed = 3,
}

impl State {
    /// The name `stats` uses.
    pub fn name(self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Connecting => "connecting",
            State::Connected => "connected",
            State::Failed => "failed",
        }
    }
}

/// What a link's task tells the rest of the gateway.
#[derive(Debug, Default)]
pub struct Shared {
    /// Completed TLS handshakes.
    pub handshakes: AtomicU64,
    /// Replies whose ID matched no outstanding query.
    pub stray: AtomicU64,
    /// Connections that ended with queries unanswered (each retried once).
    pub reconnects: AtomicU64,
    state: AtomicU8,
    /// The address connected to last.
    peer: Mutex<Option<SocketAddr>>,
}

impl Shared {
    /// The connection's state now.
    pub fn state(&self) -> State {
        match self.state.load(Relaxed) {
            1 => State::Connecting,
            2 => State::Connected,
            3 => State::Failed,
            _ => State::Idle,
        }
    }

    fn set(&self, s: State) {
        self.state.store(s as u8, Relaxed);
    }

    /// The address connected to last.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer.lock().ok().and_then(|p| *p)
    }
}

/// A query handed to the connection's task.
struct Request {
    query: Vec<u8>,
    reply: ReplyTo,
    /// Already written on a connection that ended before the reply.
    retried: bool,
}

/// Where a query's reply goes.
enum ReplyTo {
    /// A task waiting on the async path (TCP clients, retries).
    Task(Sender<Result<Vec<u8>, TryError>>),
    /// A UDP receive thread's inbox, tagged with its try (mux port and ID).
    Inbox(Arc<Inbox>, u32, u16),
}

impl ReplyTo {
    fn send(self, reply: Result<Vec<u8>, TryError>) {
        match self {
            ReplyTo::Task(tx) => {
                let _ = tx.try_send(reply);
            }
            ReplyTo::Inbox(inbox, port, id) => inbox.deliver(port, id, reply.ok()),
        }
    }

    /// Nobody waits any more (a receive thread's try ends by its own
    /// deadline; a late reply there is dropped as stray).
    fn is_closed(&self) -> bool {
        match self {
            ReplyTo::Task(tx) => tx.is_closed(),
            ReplyTo::Inbox(..) => false,
        }
    }
}

/// A reply for a receive thread's try: (mux port, ID, the reply or `None`: failed).
pub type Delivery = (u32, u16, Option<Vec<u8>>);

/// Replies for one UDP receive thread: its [`super::mux::Mux`] waits on
/// the eventfd in its `epoll` beside its upstream sockets, so an encrypted
/// miss costs that thread one wake-up for its reply, as a plain one does.
#[derive(Debug)]
pub struct Inbox {
    doorbell: rustix::fd::OwnedFd,
    /// (port, ID, reply; `None`: the try failed).
    queue: Mutex<Vec<Delivery>>,
}

impl Inbox {
    /// An inbox with its eventfd.
    pub fn new() -> io::Result<Inbox> {
        use rustix::event::{EventfdFlags, eventfd};
        let doorbell = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Inbox { doorbell, queue: Mutex::new(Vec::new()) })
    }

    /// The eventfd to wait on.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.doorbell.as_fd()
    }

    /// Queues a reply; rings only when the queue was empty (the reader
    /// takes the whole queue at once).
    fn deliver(&self, port: u32, id: u16, reply: Option<Vec<u8>>) {
        let Ok(mut q) = self.queue.lock() else { return };
        let ring = q.is_empty();
        q.push((port, id, reply));
        drop(q);
        if ring {
            let _ = rustix::io::write(&self.doorbell, &1u64.to_ne_bytes());
        }
    }

    /// Takes every reply queued, into `out` (emptied first). The doorbell is
    /// reset before the queue is taken, so a reply queued meanwhile rings again.
    pub fn take(&self, out: &mut Vec<Delivery>) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.doorbell, &mut count);
        out.clear();
        if let Ok(mut q) = self.queue.lock() {
            std::mem::swap(&mut *q, out);
        }
    }
}

/// An encrypted upstream's end of its connection task.
#[derive(Debug)]
pub struct Link {
    endpoint: Arc<Endpoint>,
    /// The queue to the task, made (and the task started) by the first query.
    requests: OnceLock<Sender<Request>>,
    /// Counters and state the task keeps.
    pub shared: Arc<Shared>,
}

impl Link {
    /// A link to `endpoint`; nothing connects until the first query.
    pub fn new(endpoint: Arc<Endpoint>) -> Link {
        Link { endpoint, requests: OnceLock::new(), shared: Arc::new(Shared::default()) }
    }

    /// Sends `query` (our query, with its own ID) over the connection, and
    /// waits up to `timeout` for the reply, which carries the same ID.
    pub async fn query(&self, query: &[u8], timeout: Duration) -> Result<Vec<u8>, TryError> {
        let (tx, rx) = bounded(1);
        self.submit(query, ReplyTo::Task(tx))?;
        let reply = async { rx.recv().await.unwrap_or(Err(TryError::Io)) };
        reply.or(super::expire(timeout)).await
    }

    /// Sends `query` for a receive thread's try: the reply (the try's ID
    /// restored), or `None` if it failed, arrives in `inbox` tagged with
    /// `port` and `id`. The try's deadline is the thread's to keep.
    pub fn send_for(&self, query: &[u8], inbox: &Arc<Inbox>, port: u32, id: u16) -> Result<(), TryError> {
        self.submit(query, ReplyTo::Inbox(inbox.clone(), port, id))
    }

    /// Hands `query`, padded, to the connection's task (started by the first).
    fn submit(&self, query: &[u8], reply: ReplyTo) -> Result<(), TryError> {
        let requests = self.requests.get_or_init(|| {
            let (tx, rx) = bounded(QUEUE);
            runtime::spawn(run(self.endpoint.clone(), self.shared.clone(), rx));
            tx
        });
        let mut query = query.to_vec();
        super::padding::pad(&mut query);
        requests.try_send(Request { query, reply, retried: false }).map_err(|_| TryError::Io)
    }
}

/// Why a connection failed or ended.
#[derive(Debug)]
enum Failure {
    /// Connecting, reading or writing.
    Io(io::Error),
    /// TLS refused the server (certificate, protocol).
    Tls(rustls::Error),
    /// No address to connect to.
    Resolve(String),
    /// Nothing happened in time.
    Timeout(&'static str),
    /// The server closed the connection.
    Closed,
    /// A message with a length no DNS message has.
    Framing,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Io(e) => e.fmt(f),
            Failure::Tls(rustls::Error::InvalidCertificate(e)) => write!(f, "certificate refused: {e}"),
            Failure::Tls(e) => write!(f, "TLS: {e}"),
            Failure::Resolve(e) => e.fmt(f),
            Failure::Timeout(what) => write!(f, "{what} timed out"),
            Failure::Closed => f.write_str("closed by the server"),
            Failure::Framing => f.write_str("a malformed message"),
        }
    }
}

impl Failure {
    /// Refused only for its validity dates: the clock may be wrong.
    fn is_clock(&self) -> bool {
        matches!(
            self,
            Failure::Tls(rustls::Error::InvalidCertificate(
                CertificateError::Expired
                    | CertificateError::ExpiredContext { .. }
                    | CertificateError::NotValidYet
                    | CertificateError::NotValidYetContext { .. }
            ))
        )
    }
}

/// Says why `endpoint` failed, at most once per [`LOG_EVERY`].
fn report(endpoint: &Endpoint, last: &mut Option<Instant>, what: &str, why: &Failure) {
    if last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
        return;
    }
    *last = Some(Instant::now());
    let hint = if why.is_clock() && runtime::context().is_some_and(|c| !c.clock_synced()) {
        " (the clock is not synchronised yet: certificates cannot be checked until NTP sets it)"
    } else {
        ""
    };
    log::warn!("upstream tls://{endpoint}: {what}: {why}{hint}");
}

/// The connection task: waits for a query, connects, serves until the
/// connection ends, and again; ends when the link is gone.
async fn run(endpoint: Arc<Endpoint>, shared: Arc<Shared>, requests: Receiver<Request>) {
    let mut carry: VecDeque<Request> = VecDeque::new();
    let mut addrs = Addresses::new(&endpoint);
    let mut logged = None;
    loop {
        if carry.is_empty() {
            match requests.recv().await {
                Ok(r) => carry.push_back(r),
                Err(_) => return,
            }
        }
        shared.set(State::Connecting);
        let conn = match connect(&endpoint, &mut addrs).await {
            Ok(c) => c,
            Err(why) => {
                shared.set(State::Failed);
                report(&endpoint, &mut logged, "cannot connect", &why);
                // Whatever waits now would wait for the same failure.
                for r in carry.drain(..) {
                    r.reply.send(Err(TryError::Io));
                }
                while let Ok(r) = requests.try_recv() {
                    r.reply.send(Err(TryError::Io));
                }
                continue;
            }
        };
        if let Ok(mut p) = shared.peer.lock() {
            *p = Some(conn.peer);
        }
        shared.handshakes.fetch_add(1, Relaxed);
        shared.set(State::Connected);
        let (end, closed) = serve(conn, &shared, &requests, &mut carry).await;
        shared.set(State::Idle);
        if let Some(why) = end {
            shared.reconnects.fetch_add(u64::from(!carry.is_empty()), Relaxed);
            if !matches!(why, Failure::Closed) {
                report(&endpoint, &mut logged, "connection lost", &why);
            }
        }
        if closed {
            return;
        }
    }
}

/// A connected, handshaken TLS stream.
struct Conn {
    tls: ClientConnection,
    sock: Async<TcpStream>,
    peer: SocketAddr,
}

/// Connects to the first address that takes a connection and a handshake,
/// starting with the one that worked last.
async fn connect(endpoint: &Endpoint, addrs: &mut Addresses) -> Result<Conn, Failure> {
    let ctx = runtime::context().ok_or(Failure::Resolve("no configuration".into()))?;
    let client = ctx.client.clone().map_err(Failure::Resolve)?;
    if let Err(e) = addrs.refresh(endpoint, &ctx).await
        && addrs.ips.is_empty()
    {
        return Err(Failure::Resolve(e));
    }
    let name = ServerName::try_from(endpoint.name.to_string())
        .map_err(|_| Failure::Resolve(format!("'{}' is not a name a certificate can carry", endpoint.name)))?;
    let n = addrs.ips.len();
    let mut last = Failure::Resolve("no address".into());
    for k in 0..n {
        let i = (addrs.preferred + k) % n;
        let peer = SocketAddr::new(addrs.ips[i], endpoint.port);
        match handshake(peer, &client, name.clone(), &ctx).await {
            Ok(c) => {
                addrs.preferred = i;
                return Ok(c);
            }
            // The server answered and refused: another address of it would too.
            Err(e @ Failure::Tls(_)) => return Err(e),
            Err(e) => last = e,
        }
    }
    addrs.failed();
    Err(last)
}

/// TCP connect and TLS handshake to `peer`, within the connect timeout.
async fn handshake(
    peer: SocketAddr,
    client: &Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    ctx: &Context,
) -> Result<Conn, Failure> {
    let limit = CONNECT_TIMEOUT.max(ctx.timeout);
    let attempt = async {
        let sock = Async::<TcpStream>::connect(peer).await.map_err(Failure::Io)?;
        let _ = sock.get_ref().set_nodelay(true);
        let mut tls = ClientConnection::new(client.clone(), name).map_err(Failure::Tls)?;
        while tls.is_handshaking() {
            if flush(&mut tls, &sock)? {
                sock.writable().await.map_err(Failure::Io)?;
                continue;
            }
            if !tls.is_handshaking() {
                break;
            }
            sock.readable().await.map_err(Failure::Io)?;
            if fill(&mut tls, &sock, &mut Vec::new())? == Read::Ended {
                return Err(Failure::Closed);
            }
        }
        Ok(Conn { tls, sock, peer })
    };
    attempt
        .or(async {
            Timer::after(limit).await;
            Err(Failure::Timeout("connecting"))
        })
        .await
}

/// Writes what TLS has to send. `Ok(true)`: the socket is full, wait until writable.
fn flush(tls: &mut ClientConnection, sock: &Async<TcpStream>) -> Result<bool, Failure> {
    while tls.wants_write() {
        match tls.write_tls(&mut sock.get_ref()) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(Failure::Io(e)),
        }
    }
    Ok(false)
}

/// How reading a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// Everything the socket held was read; the connection goes on.
    Drained,
    /// The server closed the stream (with or without TLS's close_notify).
    Ended,
}

/// Reads what the socket holds through TLS, and the plaintext into
/// `input`, a record at a time: TLS refuses to read more while too much
/// plaintext waits unread, which a burst of pipelined replies can reach.
fn fill(tls: &mut ClientConnection, sock: &Async<TcpStream>, input: &mut Vec<u8>) -> Result<Read, Failure> {
    let mut buf = [0u8; 4096];
    loop {
        let eof = match tls.read_tls(&mut sock.get_ref()) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Read::Drained),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Io(e)),
        };
        let state = tls.process_new_packets().map_err(Failure::Tls)?;
        let mut closed = state.peer_has_closed();
        loop {
            match tls.reader().read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        if eof || closed {
            return Ok(Read::Ended);
        }
    }
}

/// A query written on the connection, waiting for its reply.
struct Outstanding {
    /// The query's own ID, restored on the reply.
    id: u16,
    request: Request,
}

/// What woke the connection's task.
enum Event {
    Request(Option<Request>),
    Readable,
    Writable,
    Deadline,
}

/// Serves queries on `conn` until it ends. Returns why it ended (`None`:
/// closed while idle) and whether the link is gone; unanswered queries
/// that may be written again are left in `carry`.
async fn serve(
    mut conn: Conn,
    shared: &Shared,
    requests: &Receiver<Request>,
    carry: &mut VecDeque<Request>,
) -> (Option<Failure>, bool) {
    let mut outstanding: FxHashMap<u16, Outstanding> = FxHashMap::default();
    let mut next_id = super::random_id();
    let mut input: Vec<u8> = Vec::new();
    // Since when the oldest outstanding query has waited without any reply.
    let mut waiting_since = Instant::now();
    let mut idle_since = Instant::now();
    let mut link_gone = false;
    let mut failed = None;
    let mut timer_at = idle_since + IDLE_CLOSE;
    let mut timer = Timer::at(timer_at);
    let end = loop {
        // Write what is waiting, up to the pipeline's depth.
        while outstanding.len() < MAX_PIPELINE {
            let request = match carry.pop_front() {
                Some(r) => r,
                None => match requests.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Closed) => {
                        link_gone = true;
                        break;
                    }
                    Err(TryRecvError::Empty) => break,
                },
            };
            if request.reply.is_closed() || request.query.len() < 12 || request.query.len() > MAX_MESSAGE {
                continue;
            }
            while outstanding.contains_key(&next_id) {
                next_id = next_id.wrapping_add(1);
            }
            let wire_id = next_id;
            next_id = next_id.wrapping_add(1);
            let mut request = request;
            let id = header::id(&request.query);
            request.query[..2].copy_from_slice(&wire_id.to_be_bytes());
            let mut w = conn.tls.writer();
            let written =
                w.write_all(&(request.query.len() as u16).to_be_bytes()).and_then(|()| w.write_all(&request.query));
            if outstanding.is_empty() {
                waiting_since = Instant::now();
            }
            outstanding.insert(wire_id, Outstanding { id, request });
            if let Err(e) = written {
                failed = Some(Failure::Io(e));
                break;
            }
        }
        if let Some(e) = failed.take() {
            break Some(e);
        }
        if link_gone && outstanding.is_empty() {
            break None;
        }
        let blocked = match flush(&mut conn.tls, &conn.sock) {
            Ok(b) => b,
            Err(e) => break Some(e),
        };
        // One timer, moved only when the deadline comes earlier than it is
        // set for: each new timer wakes the thread that waits in the
        // reactor, and a query moves the deadline every time.
        let deadline = if outstanding.is_empty() { idle_since + IDLE_CLOSE } else { waiting_since + NO_REPLY_DROP };
        if deadline < timer_at {
            timer.set_at(deadline);
            timer_at = deadline;
        }
        let can_take = outstanding.len() < MAX_PIPELINE && !link_gone;
        let event =
            async { if can_take { Event::Request(requests.recv().await.ok()) } else { std::future::pending().await } }
                .or(async {
                    let _ = conn.sock.readable().await;
                    Event::Readable
                })
                .or(async {
                    if blocked {
                        let _ = conn.sock.writable().await;
                        Event::Writable
                    } else {
                        std::future::pending().await
                    }
                })
                .or(async {
                    (&mut timer).await;
                    Event::Deadline
                })
                .await;
        match event {
            Event::Request(Some(r)) => carry.push_back(r),
            Event::Request(None) => link_gone = true,
            Event::Writable => {}
            // Set for an earlier deadline that has moved since: set again.
            Event::Deadline if Instant::now() < deadline => {
                timer.set_at(deadline);
                timer_at = deadline;
            }
            Event::Deadline if outstanding.is_empty() => break None,
            Event::Deadline => break Some(Failure::Timeout("waiting for a reply")),
            Event::Readable => {
                let read = match fill(&mut conn.tls, &conn.sock, &mut input) {
                    Ok(r) => r,
                    Err(e) => break Some(e),
                };
                let answered = match replies(&mut input, &mut outstanding, shared) {
                    Ok(n) => n,
                    Err(e) => break Some(e),
                };
                if answered > 0 {
                    waiting_since = Instant::now();
                    if outstanding.is_empty() {
                        idle_since = Instant::now();
                    }
                }
                if read == Read::Ended {
                    break Some(Failure::Closed);
                }
            }
        }
    };
    // Say goodbye politely when it is our choice; a dead connection gets no more writes.
    if end.is_none() {
        conn.tls.send_close_notify();
        let _ = flush(&mut conn.tls, &conn.sock);
    }
    for (_, o) in outstanding.drain() {
        let mut r = o.request;
        r.query[..2].copy_from_slice(&o.id.to_be_bytes());
        if r.retried || r.reply.is_closed() {
            r.reply.send(Err(TryError::Io));
        } else {
            r.retried = true;
            carry.push_back(r);
        }
    }
    let end = match end {
        Some(Failure::Closed) if carry.is_empty() => None,
        other => other,
    };
    (end, link_gone)
}

/// Hands every complete message in `input` to its query. Returns how many
/// were answered.
fn replies(
    input: &mut Vec<u8>,
    outstanding: &mut FxHashMap<u16, Outstanding>,
    shared: &Shared,
) -> Result<usize, Failure> {
    let mut at = 0;
    let mut answered = 0;
    while let Some(len) = input.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize) {
        let Some(msg) = input.get(at + 2..at + 2 + len) else { break };
        if len < 12 {
            return Err(Failure::Framing);
        }
        match outstanding.remove(&header::id(msg)) {
            Some(o) => {
                let mut reply = msg.to_vec();
                reply[..2].copy_from_slice(&o.id.to_be_bytes());
                o.request.reply.send(Ok(reply));
                answered += 1;
            }
            None => {
                shared.stray.fetch_add(1, Relaxed);
            }
        }
        at += 2 + len;
    }
    input.drain(..at);
    Ok(answered)
}

/// The address a link connects to, for the query log: the last connected,
/// else the first pinned (unspecified while neither is known).
pub fn log_address(endpoint: &Endpoint, shared: &Shared) -> SocketAddr {
    shared.peer().unwrap_or_else(|| {
        SocketAddr::new(endpoint.pins.first().copied().unwrap_or(IpAddr::from([0, 0, 0, 0])), endpoint.port)
    })
}
