//! Encrypted upstreams' connections: one TLS connection per upstream,
//! kept open and shared by every query to it, carrying DNS over TLS
//! (RFC 7858) or DNS over HTTPS (RFC 8484, [`super::https`]).
//!
//! Each link's [`Connection`] sits behind a lock: the thread with a query
//! writes it there (or queues it until the connection is made), and the
//! connections' thread ([`super::runtime`]) reads the replies and keeps
//! the deadlines. Queries are written as they come, each under a key of
//! its own: for DoT a message ID (pipelined,
//! RFC 7766 §6.2.1.1), for DoH an HTTP/2 stream (many at once) or the one
//! HTTP/1.1 request in flight (ID 0 on the wire). It hands each reply back
//! to its query by that key, in whatever order the server answers, with
//! the query's own ID restored: to a receive thread's [`Inbox`], or to a
//! task on the async path.
//!
//! - No connection is made until a query needs one; it is closed after
//!   [`IDLE_CLOSE`] without queries, and a server may close it sooner.
//!   Connecting and the handshake run on a short-lived thread of their own
//!   (blocking, with timeouts), so a slow server never holds up the others.
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
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustls::ClientConnection;
use smol::channel::{Sender, bounded};
use smol::future::FutureExt;

use super::TryError;
use super::bootstrap::Addresses;
use super::connect::{Conn, Failure, connect, report};
use super::http2;
use super::https::{self, Http1, Refusal, Target};
use super::runtime::{self, Command};
use crate::config::upstream::{Endpoint, Scheme};
use crate::wire::header;

/// Queries one upstream's connection holds (waiting to be written, or
/// written and unanswered); more fail at once, and the resolution moves
/// on to the next server.
const IN_HAND: usize = 192;
/// Queries written and unanswered on one connection; the rest wait.
const MAX_PIPELINE: usize = 128;
/// A connection without queries for this long is closed.
const IDLE_CLOSE: Duration = Duration::from_secs(60);
/// Outstanding queries and no reply for this long: the connection is dead.
pub const NO_REPLY_DROP: Duration = Duration::from_secs(15);
/// Largest DNS message over a stream.
pub const MAX_MESSAGE: usize = 65_535;
/// Rounds of [`fill`] per readable event: 4 × [`MAX_MESSAGE`] and more
/// before the thread looks at its other connections.
const FILL_ROUNDS: usize = 4;
/// At most one log line per this long about one upstream's failures.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(60);

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

/// What a link's connection tells the rest of the gateway.
#[derive(Debug, Default)]
pub struct Shared {
    /// Completed TLS handshakes.
    pub handshakes: AtomicU64,
    /// Replies whose ID matched no outstanding query.
    pub stray: AtomicU64,
    /// Queries handed over and not yet answered or failed (≤ [`IN_HAND`]).
    in_hand: AtomicUsize,
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

/// A query for a link's connection.
pub struct Request {
    query: Vec<u8>,
    reply: ReplyTo,
    /// Already written on a connection that ended before the reply.
    retried: bool,
    /// Times a DoH server said it did not process it (GOAWAY, REFUSED_STREAM):
    /// it goes again at most [`MAX_UNPROCESSED`] times, so a server that
    /// refuses everything cannot keep a query going round.
    unprocessed: u8,
}

/// Re-sends of one query that a DoH server did not process.
const MAX_UNPROCESSED: u8 = 3;

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
            ReplyTo::Inbox(inbox, port, id) => {
                inbox.push((port, id, reply.ok()));
            }
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
/// this mailbox's eventfd in its `epoll` beside its upstream sockets, so
/// an encrypted miss costs that thread one wake-up for its reply, as a
/// plain one does.
pub type Inbox = runtime::Mailbox<Delivery>;

/// A link's connection, shared by the threads that write queries on it
/// and the connections' thread, which reads the replies and keeps time.
pub struct LinkInner {
    /// Unique for the process: the connection's key and epoll token.
    pub id: u64,
    pub connection: Mutex<Connection>,
}

impl std::fmt::Debug for LinkInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "link {}", self.id)
    }
}

/// An encrypted upstream's end of its connection.
#[derive(Debug)]
pub struct Link {
    inner: Arc<LinkInner>,
    endpoint: Arc<Endpoint>,
    /// The connections' thread knows this link (it could be started).
    known: bool,
    /// Counters and state the connection keeps.
    pub shared: Arc<Shared>,
}

impl Link {
    /// A link to `endpoint`; nothing connects until the first query.
    pub fn new(endpoint: Arc<Endpoint>) -> Link {
        static IDS: AtomicU64 = AtomicU64::new(1);
        let shared = Arc::new(Shared::default());
        let id = IDS.fetch_add(1, Relaxed);
        let connection = Mutex::new(Connection::new(id, endpoint.clone(), shared.clone()));
        let inner = Arc::new(LinkInner { id, connection });
        // The connections' thread learns of the link before any of its
        // sockets can be in that thread's epoll set. (It waits without a
        // timer while no connection is open: an unused link costs nothing.)
        let known = runtime::post(Command::Watch(inner.clone()));
        Link { inner, endpoint, known, shared }
    }

    /// The address the link connects to, for the query log: the last
    /// connected, else the first pinned (unspecified while neither is known).
    pub fn peer(&self) -> SocketAddr {
        let endpoint = &self.endpoint;
        self.shared.peer().unwrap_or_else(|| {
            SocketAddr::new(endpoint.pins.first().copied().unwrap_or(IpAddr::from([0, 0, 0, 0])), endpoint.port)
        })
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

    /// Writes `query`, padded, on the connection from the calling thread
    /// (or queues it there until the connection is made): no hand-off to
    /// the connections' thread, which only reads replies and keeps time.
    fn submit(&self, query: &[u8], reply: ReplyTo) -> Result<(), TryError> {
        let in_hand = &self.shared.in_hand;
        if in_hand.fetch_add(1, Relaxed) >= IN_HAND {
            in_hand.fetch_sub(1, Relaxed);
            return Err(TryError::Io);
        }
        let epoll = runtime::epoll();
        let (true, Some(epoll), Ok(mut connection)) = (self.known, epoll, self.inner.connection.lock()) else {
            in_hand.fetch_sub(1, Relaxed);
            return Err(TryError::Io);
        };
        let mut query = query.to_vec();
        super::padding::pad(&mut query);
        connection.query(epoll, Request { query, reply, retried: false, unprocessed: 0 });
        Ok(())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // The server left the config: its connection closes once idle.
        if self.known {
            runtime::post(Command::Gone(self.inner.id));
        }
    }
}

/// Writes what TLS has to send. `Ok(true)`: the socket is full.
fn flush(tls: &mut ClientConnection, sock: &TcpStream) -> Result<bool, Failure> {
    while tls.wants_write() {
        match tls.write_tls(&mut &*sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::Io(e)),
        }
    }
    Ok(false)
}

/// How far [`fill`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filled {
    /// The socket has nothing more now.
    Drained,
    /// `input` reached its limit: the framing must take from it first.
    Full,
    /// The server closed the stream.
    Ended,
}

/// Reads what the socket holds through TLS, and the plaintext into
/// `input`, a record at a time: TLS refuses to read more while too much
/// plaintext waits unread, which a burst of pipelined replies can reach.
/// Stops once `input` holds `limit` bytes, so a server sending without end
/// costs that much memory and no more (the socket stays readable: the
/// level-triggered epoll comes back for the rest).
fn fill(tls: &mut ClientConnection, sock: &TcpStream, input: &mut Vec<u8>, limit: usize) -> Result<Filled, Failure> {
    let mut buf = [0u8; 4096];
    loop {
        if input.len() >= limit {
            return Ok(Filled::Full);
        }
        let eof = match tls.read_tls(&mut &*sock) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Filled::Drained),
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
            return Ok(Filled::Ended);
        }
    }
}

/// What became of a request, as a framing reports it.
#[derive(Debug)]
pub enum Event {
    /// The reply to the request with this key.
    Reply(u32, Vec<u8>),
    /// DoH: the server answered it with something that is not a DNS reply.
    Refused(u32, Refusal),
    /// DoH: the server did not process it (HTTP/2 GOAWAY or REFUSED_STREAM):
    /// it may be sent again, on a new connection.
    Unprocessed(u32),
}

/// How queries and replies travel on a connection.
enum Framing {
    /// DoT: each message after its length; keys are wire IDs.
    Dot,
    /// DoH over HTTP/2.
    H2(Box<http2::Session>),
    /// DoH over HTTP/1.1.
    H1(Http1),
}

impl Framing {
    /// Whether another request may be written now (`written`: in flight).
    fn room(&self, written: usize) -> bool {
        match self {
            Framing::Dot => written < MAX_PIPELINE,
            Framing::H2(s) => s.room(),
            Framing::H1(h) => h.room(),
        }
    }

    /// The server takes no requests at all now: what waits for room
    /// would wait until the connection closed idle.
    fn refusing(&self) -> bool {
        match self {
            Framing::H2(s) => s.refusing(),
            Framing::Dot | Framing::H1(_) => false,
        }
    }

    /// The most plaintext that may wait unread once the framing has taken
    /// every whole message: part of one message (DoT), of one frame
    /// (HTTP/2), of one response (HTTP/1.1). More is a server that never
    /// ends what it sends.
    fn max_unread(&self) -> usize {
        match self {
            Framing::Dot => 2 + MAX_MESSAGE,
            Framing::H2(_) => 9 + http2::MAX_FRAME,
            Framing::H1(_) => https::MAX_INPUT,
        }
    }

    /// The server will take nothing more on this connection, and nothing
    /// is in flight on it: close it (and make a new one for what waits).
    fn finished(&self) -> bool {
        match self {
            Framing::Dot => false,
            Framing::H2(s) => s.finished(),
            Framing::H1(h) => h.finished(),
        }
    }
}

/// DoT: every whole message in `input`, keyed by its wire ID.
fn dot_replies(input: &mut Vec<u8>, events: &mut Vec<Event>) -> Result<(), Failure> {
    let mut at = 0;
    let mut result = Ok(());
    while let Some(len) = input.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize) {
        let Some(msg) = input.get(at + 2..at + 2 + len) else { break };
        if len < 12 {
            result = Err(Failure::Framing);
            break;
        }
        events.push(Event::Reply(u32::from(header::id(msg)), msg.to_vec()));
        at += 2 + len;
    }
    input.drain(..at);
    result
}

/// A query written on the connection, waiting for its reply.
struct Outstanding {
    /// The query's own ID, restored on the reply.
    id: u16,
    request: Request,
}

impl Outstanding {
    /// The request as it was handed in, its own ID back, to be sent again.
    fn unsent(self) -> Request {
        let mut r = self.request;
        r.query[..2].copy_from_slice(&self.id.to_be_bytes());
        r
    }
}

/// One upstream's connection as the connections' thread drives it.
pub struct Connection {
    /// The link's id: epoll token and the connector thread's address.
    id: u64,
    endpoint: Arc<Endpoint>,
    shared: Arc<Shared>,
    conn: Option<Conn>,
    framing: Framing,
    /// DoH: where requests go.
    target: Option<Target>,
    /// `None` while lent to a connector thread: connecting.
    addrs: Option<Addresses>,
    /// Queries waiting for the connection, or for room in the pipeline.
    carry: VecDeque<Request>,
    /// By key: DoT wire ID, HTTP/2 stream, HTTP/1.1 request number.
    outstanding: FxHashMap<u32, Outstanding>,
    next_id: u16,
    /// Plaintext read and not yet a whole message.
    input: Vec<u8>,
    /// Plaintext to write (requests, HTTP/2's acknowledgements).
    output: Vec<u8>,
    events: Vec<Event>,
    /// Since when the oldest outstanding query has waited without any reply.
    waiting_since: Instant,
    idle_since: Instant,
    /// The socket was full: waiting until it is writable.
    write_blocked: bool,
    logged: Option<Instant>,
    /// The link left the config: close once nothing is in hand.
    gone: bool,
}

impl Connection {
    /// Link `id`'s connection to `endpoint`, not connected.
    fn new(id: u64, endpoint: Arc<Endpoint>, shared: Arc<Shared>) -> Connection {
        let addrs = Some(Addresses::new(&endpoint));
        let target = (endpoint.scheme == Scheme::Https).then(|| Target::new(&endpoint));
        Connection {
            id,
            endpoint,
            shared,
            conn: None,
            framing: Framing::Dot,
            target,
            addrs,
            carry: VecDeque::new(),
            outstanding: FxHashMap::default(),
            next_id: super::random_id(),
            input: Vec::new(),
            output: Vec::new(),
            events: Vec::new(),
            waiting_since: Instant::now(),
            idle_since: Instant::now(),
            write_blocked: false,
            logged: None,
            gone: false,
        }
    }

    /// A query to send.
    pub fn query(&mut self, epoll: &OwnedFd, request: Request) {
        self.carry.push_back(request);
        self.pump(epoll);
    }

    /// The link left the config.
    pub fn gone(&mut self, epoll: &OwnedFd) {
        self.gone = true;
        self.pump(epoll);
    }

    /// Nothing left to do: the thread forgets it.
    pub fn finished(&self) -> bool {
        self.gone && self.conn.is_none() && self.addrs.is_some() && self.carry.is_empty() && self.outstanding.is_empty()
    }

    /// Answers (or drops) a request and gives its place back.
    fn complete(&self, request: Request, reply: Result<Vec<u8>, TryError>) {
        self.shared.in_hand.fetch_sub(1, Relaxed);
        request.reply.send(reply);
    }

    /// Connects if queries wait and nothing is connected; writes what
    /// waits if connected; closes a gone link's idle connection.
    fn pump(&mut self, epoll: &OwnedFd) {
        if self.conn.is_none() {
            if !self.carry.is_empty() {
                self.start_connecting();
            }
            return;
        }
        if self.gone && self.carry.is_empty() && self.outstanding.is_empty() {
            return self.close(epoll);
        }
        if self.framing.finished() && self.outstanding.is_empty() {
            self.close(epoll);
            if !self.carry.is_empty() {
                self.start_connecting();
            }
            return;
        }
        if let Err(why) = self.write_waiting().and_then(|()| self.flush(epoll)) {
            self.lost(epoll, why);
        }
    }

    /// Lends the addresses to a connector thread (unless one has them).
    fn start_connecting(&mut self) {
        let Some(mut addrs) = self.addrs.take() else { return };
        self.shared.set(State::Connecting);
        let (id, endpoint) = (self.id, self.endpoint.clone());
        let started = std::thread::Builder::new().name("hydradns-dot-up".into()).spawn(move || {
            let result = connect(&endpoint, &mut addrs);
            runtime::post(Command::Connected(id, Box::new((result, addrs))));
        });
        if let Err(e) = started {
            self.addrs = Some(Addresses::new(&self.endpoint));
            self.failed_to_connect(Failure::Io(e));
        }
    }

    /// The connector thread is done.
    pub fn connected(&mut self, epoll: &OwnedFd, result: Result<Conn, Failure>, addrs: Addresses) {
        self.addrs = Some(addrs);
        let conn = match result {
            Ok(c) => c,
            Err(why) => return self.failed_to_connect(why),
        };
        let token = EventData::new_u64(self.id);
        if let Err(e) = epoll::add(epoll, &conn.sock, token, EventFlags::IN) {
            return self.failed_to_connect(Failure::Io(e.into()));
        }
        let shared = &self.shared;
        if let Ok(mut p) = shared.peer.lock() {
            *p = Some(conn.peer);
        }
        shared.handshakes.fetch_add(1, Relaxed);
        shared.set(State::Connected);
        self.output.clear();
        self.framing = match (&self.target, conn.tls.alpn_protocol()) {
            (None, _) => Framing::Dot,
            (Some(_), Some(b"h2")) => Framing::H2(Box::new(http2::Session::start(&mut self.output))),
            // http/1.1, or a server that does not do ALPN.
            (Some(_), _) => Framing::H1(Http1::default()),
        };
        self.conn = Some(conn);
        self.write_blocked = false;
        // A new buffer, not the last connection's emptied one: that one
        // may have grown to a whole response, and a link is idle most of
        // its life.
        self.input = Vec::new();
        self.idle_since = Instant::now();
        self.pump(epoll);
    }

    /// Whatever waits now would wait for the same failure.
    fn failed_to_connect(&mut self, why: Failure) {
        self.shared.set(State::Failed);
        report(&self.endpoint, &mut self.logged, "cannot connect", &why);
        for r in std::mem::take(&mut self.carry) {
            self.complete(r, Err(TryError::Io));
        }
    }

    /// Writes waiting queries while the framing has room, and whatever
    /// else it has to say.
    fn write_waiting(&mut self) -> Result<(), Failure> {
        if self.conn.is_none() {
            return Ok(());
        }
        while self.framing.room(self.outstanding.len()) {
            let Some(mut request) = self.carry.pop_front() else { break };
            let max = if self.target.is_some() { https::MAX_QUERY } else { MAX_MESSAGE };
            if request.reply.is_closed() || request.query.len() < 12 || request.query.len() > max {
                self.complete(request, Err(TryError::Io));
                continue;
            }
            let id = header::id(&request.query);
            if self.target.is_some() {
                // DoH: ID 0 on the wire (RFC 8484 §4.1), for caches between.
                request.query[..2].copy_from_slice(&[0, 0]);
            }
            let key = match (&mut self.framing, &self.target) {
                (Framing::H2(session), Some(target)) => session.request(target, &request.query, &mut self.output),
                (Framing::H1(h1), Some(target)) => h1.request(target, &request.query, &mut self.output),
                _ => {
                    while self.outstanding.contains_key(&u32::from(self.next_id)) {
                        self.next_id = self.next_id.wrapping_add(1);
                    }
                    let wire_id = self.next_id;
                    self.next_id = self.next_id.wrapping_add(1);
                    request.query[..2].copy_from_slice(&wire_id.to_be_bytes());
                    self.output.extend_from_slice(&(request.query.len() as u16).to_be_bytes());
                    self.output.extend_from_slice(&request.query);
                    u32::from(wire_id)
                }
            };
            if self.outstanding.is_empty() {
                self.waiting_since = Instant::now();
            }
            self.outstanding.insert(key, Outstanding { id, request });
        }
        if self.framing.refusing() && !self.carry.is_empty() {
            // "This server cannot serve us now": each query fails at once
            // and moves on to the next server, instead of waiting out its
            // timeout for room that does not come (the connection is kept,
            // in case the server raises its limit).
            report(
                &self.endpoint,
                &mut self.logged,
                "refused queries",
                &Failure::Protocol("the server allows no streams"),
            );
            for r in std::mem::take(&mut self.carry) {
                self.complete(r, Err(TryError::Io));
            }
        }
        let Some(conn) = self.conn.as_mut().filter(|_| !self.output.is_empty()) else { return Ok(()) };
        let written = conn.tls.writer().write_all(&self.output);
        self.output.clear();
        written.map_err(Failure::Io)
    }

    /// Sends what TLS holds; watches for room when the socket is full.
    fn flush(&mut self, epoll: &OwnedFd) -> Result<(), Failure> {
        let Some(conn) = self.conn.as_mut() else { return Ok(()) };
        let blocked = flush(&mut conn.tls, &conn.sock)?;
        if blocked != self.write_blocked {
            self.write_blocked = blocked;
            let flags = if blocked { EventFlags::IN | EventFlags::OUT } else { EventFlags::IN };
            epoll::modify(epoll, &conn.sock, EventData::new_u64(self.id), flags).map_err(|e| Failure::Io(e.into()))?;
        }
        Ok(())
    }

    /// The socket is readable or writable (or failed).
    pub fn ready(&mut self, epoll: &OwnedFd) {
        let limit = self.framing.max_unread();
        // A few rounds of reading and taking replies; a server that keeps
        // the socket full gets the rest at the next wake-up, after the
        // thread's other connections.
        for _ in 0..FILL_ROUNDS {
            let Some(conn) = self.conn.as_mut() else { return };
            let filled = match fill(&mut conn.tls, &conn.sock, &mut self.input, limit) {
                Ok(filled) => filled,
                Err(why) => return self.lost(epoll, why),
            };
            match self.replies() {
                Ok(0) => {}
                Ok(_) => {
                    self.waiting_since = Instant::now();
                    if self.outstanding.is_empty() {
                        self.idle_since = Instant::now();
                    }
                }
                Err(why) => return self.lost(epoll, why),
            }
            if self.input.len() > limit {
                return self.lost(epoll, Failure::Protocol("more unread input than one message"));
            }
            match filled {
                Filled::Ended => return self.lost(epoll, Failure::Closed),
                Filled::Drained => break,
                Filled::Full => {}
            }
        }
        // Room in the pipeline, or in the socket, or TLS has something to say.
        self.pump(epoll);
    }

    /// Hands every complete reply in `input` to its query; how many.
    fn replies(&mut self) -> Result<usize, Failure> {
        let mut events = std::mem::take(&mut self.events);
        let read = match &mut self.framing {
            Framing::Dot => dot_replies(&mut self.input, &mut events),
            Framing::H2(session) => session.read(&mut self.input, &mut self.output, &mut events),
            Framing::H1(h1) => h1.read(&mut self.input, &mut events),
        };
        let mut answered = 0;
        for event in events.drain(..) {
            match event {
                Event::Reply(key, mut reply) => match self.outstanding.remove(&key) {
                    Some(o) => {
                        reply[..2].copy_from_slice(&o.id.to_be_bytes());
                        self.complete(o.request, Ok(reply));
                        answered += 1;
                    }
                    None => {
                        self.shared.stray.fetch_add(1, Relaxed);
                    }
                },
                Event::Refused(key, why) => {
                    if let Some(o) = self.outstanding.remove(&key) {
                        report(&self.endpoint, &mut self.logged, "refused a query", &Failure::Refused(why));
                        self.complete(o.request, Err(TryError::Io));
                        answered += 1;
                    }
                }
                Event::Unprocessed(key) => {
                    if let Some(o) = self.outstanding.remove(&key) {
                        let mut r = o.unsent();
                        if r.unprocessed >= MAX_UNPROCESSED || r.reply.is_closed() {
                            self.complete(r, Err(TryError::Io));
                        } else {
                            r.unprocessed += 1;
                            self.carry.push_front(r);
                        }
                    }
                }
            }
        }
        self.events = events;
        read.map(|()| answered)
    }

    /// When the connection must be looked at again: idle too long, or no
    /// reply for too long.
    pub fn deadline(&self) -> Option<Instant> {
        self.conn.as_ref()?;
        Some(if self.outstanding.is_empty() {
            self.idle_since + IDLE_CLOSE
        } else {
            self.waiting_since + NO_REPLY_DROP
        })
    }

    /// The deadline passed.
    pub fn expire(&mut self, epoll: &OwnedFd, now: Instant) {
        match self.deadline() {
            Some(at) if at <= now && self.outstanding.is_empty() => self.close(epoll),
            Some(at) if at <= now => self.lost(epoll, Failure::Timeout("waiting for a reply")),
            _ => {}
        }
    }

    /// Closes an idle connection politely.
    fn close(&mut self, epoll: &OwnedFd) {
        if let Some(mut conn) = self.conn.take() {
            if let Framing::H2(session) = &self.framing {
                self.output.clear();
                session.goodbye(&mut self.output);
                let _ = conn.tls.writer().write_all(&self.output);
            }
            conn.tls.send_close_notify();
            let _ = flush(&mut conn.tls, &conn.sock);
            let _ = epoll::delete(epoll, &conn.sock);
        }
        self.release_buffers();
        self.shared.set(State::Idle);
    }

    /// Gives back what the ended connection's buffers grew to.
    fn release_buffers(&mut self) {
        self.input = Vec::new();
        self.output = Vec::new();
        self.framing = Framing::Dot;
    }

    /// The connection ended under its queries: each unanswered one is
    /// written once more on a new connection, made at once.
    fn lost(&mut self, epoll: &OwnedFd, why: Failure) {
        if let Some(conn) = self.conn.take() {
            let _ = epoll::delete(epoll, &conn.sock);
        }
        self.release_buffers();
        self.shared.set(State::Idle);
        let retry: Vec<Request> = self.outstanding.drain().map(|(_, o)| o.unsent()).collect();
        for mut r in retry {
            if r.retried || r.reply.is_closed() {
                self.complete(r, Err(TryError::Io));
            } else {
                r.retried = true;
                self.carry.push_front(r);
            }
        }
        if !matches!(why, Failure::Closed) || !self.carry.is_empty() {
            report(&self.endpoint, &mut self.logged, "connection lost", &why);
        }
        self.pump(epoll);
    }
}
