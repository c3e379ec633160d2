//! The connections' thread: every encrypted upstream's connection lives on
//! one thread, started at the first encrypted query, that waits in its own
//! `epoll` on their sockets and on a doorbell (an eventfd) for commands:
//! queries from any thread, connections made, links gone. Timers are the
//! `epoll_wait` timeout, the nearest connection deadline. With nothing in
//! flight and no connection open it waits without a timeout: an idle
//! gateway does not wake.
//!
//! One thread rather than a connection per receive thread: one connection
//! per server, so one handshake and one TLS session, whichever thread a miss
//! arrives on. An encrypted miss costs two thread wake-ups (this thread's,
//! and the receive thread's for the reply) against a plain miss's one.
//! (The first version ran the connections as async-io tasks; the reactor's
//! shared epoll cost 8 `epoll_ctl`, 2 `timerfd_settime` and a futex per miss
//! and about 180 µs of CPU: see bench/encrypted.py in docs/benchmarks.md.)
//!
//! Also here: what connections need from the config (the TLS client
//! settings, the bootstrap resolvers), swapped in whenever a config loads.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use rustc_hash::FxHashMap;
use rustix::event::Timespec;
use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustls::ClientConfig;

use super::Server;
use super::bootstrap::Addresses;
use super::clock::ClockGate;
use super::tls::{Conn, Connection, Failure, LinkInner, Request};
use crate::config::Config;

/// What connections read when they connect.
static CONTEXT: ArcSwapOption<Context> = ArcSwapOption::const_empty();
/// The connections' thread's commands (`None`: the eventfd could not be made).
static COMMANDS: OnceLock<Option<Mailbox<Command>>> = OnceLock::new();
/// The doorbell's token in the thread's epoll set; connections use their link's id (from 1).
const DOORBELL: u64 = 0;

/// What the connections' thread is asked to do.
pub enum Command {
    /// Send a query over a link's connection.
    Query(Arc<LinkInner>, Request),
    /// A connector thread finished for link `u64`; the addresses come back.
    Connected(u64, Box<(Result<Conn, Failure>, Addresses)>),
    /// Link `u64` left the config.
    Gone(u64),
}

/// A queue another thread waits on in `epoll`: its doorbell (an eventfd)
/// rings when the queue turns non-empty, and the reader takes all of it at
/// once. The connections' thread's commands and each receive thread's
/// replies from it.
#[derive(Debug)]
pub struct Mailbox<T> {
    queue: Mutex<Vec<T>>,
    doorbell: OwnedFd,
}

impl<T> Mailbox<T> {
    /// An empty mailbox with its eventfd.
    pub fn new() -> io::Result<Mailbox<T>> {
        use rustix::event::{EventfdFlags, eventfd};
        let doorbell = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Mailbox { queue: Mutex::new(Vec::new()), doorbell })
    }

    /// The eventfd to wait on.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.doorbell.as_fd()
    }

    /// Queues `item`, ringing only when the queue was empty. False if the
    /// queue's lock is poisoned.
    pub fn push(&self, item: T) -> bool {
        let Ok(mut q) = self.queue.lock() else { return false };
        let ring = q.is_empty();
        q.push(item);
        drop(q);
        if ring {
            let _ = rustix::io::write(&self.doorbell, &1u64.to_ne_bytes());
        }
        true
    }

    /// Takes everything queued into `out` (emptied first). The doorbell is
    /// reset before the queue is taken, so an item queued meanwhile rings again.
    pub fn take(&self, out: &mut Vec<T>) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.doorbell, &mut count);
        out.clear();
        if let Ok(mut q) = self.queue.lock() {
            std::mem::swap(&mut *q, out);
        }
    }
}

/// Hands `command` to the connections' thread, starting it the first
/// time. False if there is no such thread (no eventfd, no thread).
pub fn post(command: Command) -> bool {
    let Some(commands) = COMMANDS.get_or_init(|| Mailbox::new().ok()).as_ref() else {
        return false;
    };
    static STARTED: OnceLock<bool> = OnceLock::new();
    let started = STARTED.get_or_init(|| {
        let thread = std::thread::Builder::new().name("hydradns-tls".into()).spawn(move || serve(commands));
        if let Err(e) = &thread {
            log::error!("cannot start the encrypted upstreams' thread: {e}");
        }
        thread.is_ok()
    });
    *started && commands.push(command)
}

/// The connections' thread.
fn serve(commands: &'static Mailbox<Command>) {
    let epoll = match epoll::create(CreateFlags::CLOEXEC) {
        Ok(e) => e,
        Err(e) => return log::error!("encrypted upstreams: cannot create an epoll set: {e}"),
    };
    if let Err(e) = epoll::add(&epoll, commands.fd(), EventData::new_u64(DOORBELL), EventFlags::IN) {
        return log::error!("encrypted upstreams: cannot watch the doorbell: {e}");
    }
    let mut links: FxHashMap<u64, Connection> = FxHashMap::default();
    let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; 32];
    let mut taken = Vec::new();
    loop {
        let now = Instant::now();
        let timeout = links.values().filter_map(Connection::deadline).min().map(|at| {
            // Rounded up: waking a hair early would only wait again.
            let d = at.saturating_duration_since(now) + Duration::from_millis(1);
            Timespec { tv_sec: d.as_secs() as _, tv_nsec: d.subsec_nanos() as _ }
        });
        let n = match epoll::wait(&epoll, &mut events[..], timeout.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(e) => return log::error!("encrypted upstreams: epoll failed: {e}"),
        };
        for ev in &events[..n] {
            match ev.data.u64() {
                DOORBELL => {
                    commands.take(&mut taken);
                    for command in taken.drain(..) {
                        match command {
                            Command::Query(link, request) => {
                                links.entry(link.id).or_insert_with(|| Connection::new(link)).query(&epoll, request)
                            }
                            Command::Connected(id, done) => {
                                if let Some(c) = links.get_mut(&id) {
                                    let (result, addrs) = *done;
                                    c.connected(&epoll, result, addrs);
                                }
                            }
                            Command::Gone(id) => {
                                if let Some(c) = links.get_mut(&id) {
                                    c.gone(&epoll);
                                }
                            }
                        }
                    }
                }
                id => {
                    if let Some(c) = links.get_mut(&id) {
                        c.ready(&epoll);
                    }
                }
            }
        }
        let now = Instant::now();
        for c in links.values_mut() {
            c.expire(&epoll, now);
        }
        links.retain(|_, c| !c.finished());
    }
}

/// The config's part in a connection.
#[derive(Debug)]
pub struct Context {
    /// TLS settings, or why there are none (no CA bundle).
    pub client: Result<Arc<ClientConfig>, String>,
    /// The same for DoH: ALPN offers HTTP/2, then HTTP/1.1.
    pub https_client: Result<Arc<ClientConfig>, String>,
    /// Plain resolvers that find encrypted upstreams' addresses: the
    /// snapshot's, which also answer `plain_domain` names.
    pub bootstrap: Vec<Arc<Server>>,
    /// How long one bootstrap query, connection or handshake may take.
    pub timeout: Duration,
    /// What `client` was built from.
    ca_file: PathBuf,
    /// Whether the clock is known good (the snapshot's).
    pub clock: Arc<ClockGate>,
}

/// The settings connections use now (`None` before any config named an
/// encrypted upstream).
pub fn context() -> Option<Arc<Context>> {
    CONTEXT.load_full()
}

/// Takes `config`'s settings for connections made from now on, with the
/// snapshot's bootstrap servers and clock: the TLS client is built again
/// only when `ca_file` changed.
pub fn configure(config: &Config, bootstrap: &[Arc<Server>], clock: &Arc<ClockGate>) {
    let old = CONTEXT.load_full();
    let client = match &old {
        Some(o) if o.ca_file == config.ca_file && o.client.is_ok() => o.client.clone(),
        _ => client_config(config),
    };
    if let Err(e) = &client {
        log::error!("encrypted upstreams cannot verify certificates: {e}");
    }
    let https_client = match &old {
        Some(o) if o.ca_file == config.ca_file && o.https_client.is_ok() => o.https_client.clone(),
        _ => client
            .as_ref()
            .map(|c| {
                let mut c = (**c).clone();
                c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                Arc::new(c)
            })
            .map_err(Clone::clone),
    };
    CONTEXT.store(Some(Arc::new(Context {
        client,
        https_client,
        bootstrap: bootstrap.to_vec(),
        timeout: config.upstream_timeout,
        ca_file: config.ca_file.clone(),
        clock: clock.clone(),
    })));
}

/// TLS 1.2 and 1.3 with ring, verified against the trust anchors.
fn client_config(config: &Config) -> Result<Arc<ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in crate::trust::certificates(&config.ca_file)? {
        // A certificate rustls cannot use is skipped, as the download path's
        // root store does; the others still verify.
        let _ = roots.add(rustls::pki_types::CertificateDer::from(c.der().to_vec()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(client))
}
