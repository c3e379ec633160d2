//! The connections' thread: every encrypted upstream's connection is
//! watched by one thread, started with the first encrypted upstream, that
//! waits in its own `epoll` on their sockets and on a doorbell (an eventfd)
//! for commands: links new and gone, connections made. It reads the
//! replies and hands each to its query's thread. Queries are not handed to
//! it: the thread that has one writes it on the connection itself, under
//! the link's lock (`LinkInner::connection`), so an encrypted miss costs
//! one wake-up of this thread (for the reply) and one of the receive
//! thread's, as a plain miss costs one. Timers are the `epoll_wait`
//! timeout: the nearest connection deadline, looked at every 5 s at most
//! while a connection is open (a query written by another thread starts
//! its 15 s no-reply clock without waking this one). With no connection
//! open it waits without a timeout: an idle gateway does not wake.
//!
//! One thread rather than a connection per receive thread: one connection
//! per server, so one handshake and one TLS session, whichever thread a miss
//! arrives on. (The first version ran the connections as async-io tasks;
//! the reactor's shared epoll cost 8 `epoll_ctl`, 2 `timerfd_settime` and a
//! futex per miss and about 180 µs of CPU; the second handed every query to
//! this thread through its doorbell, a second wake-up per miss: see
//! bench/encrypted.py in docs/benchmarks.md.)
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
use super::connect::{Conn, Failure};
use super::tls::LinkInner;
use crate::config::Config;

/// What connections read when they connect.
static CONTEXT: ArcSwapOption<Context> = ArcSwapOption::const_empty();
/// The connections' thread, started at the first link (`None`: it could not be).
static THREAD: OnceLock<Option<&'static Thread>> = OnceLock::new();
/// The doorbell's token in the thread's epoll set; connections use their link's id (from 1).
const DOORBELL: u64 = 0;
/// While a connection is open, the thread looks at deadlines at least this
/// often: queries written by other threads start a connection's 15 s
/// no-reply clock without waking it.
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// What every thread shares with the connections' thread.
struct Thread {
    commands: Mailbox<Command>,
    /// The connections' sockets (and the doorbell): any thread may change
    /// a socket's interest in it while holding the socket's link.
    epoll: OwnedFd,
}

/// What the connections' thread is asked to do.
pub enum Command {
    /// Watch a new link's connection.
    Watch(Arc<LinkInner>),
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

/// The connections' thread, started the first time it is needed.
fn thread() -> Option<&'static Thread> {
    *THREAD.get_or_init(|| start().map_err(|e| log::error!("cannot start the encrypted upstreams' thread: {e}")).ok())
}

fn start() -> io::Result<&'static Thread> {
    let commands = Mailbox::new()?;
    let epoll = epoll::create(CreateFlags::CLOEXEC)?;
    epoll::add(&epoll, commands.fd(), EventData::new_u64(DOORBELL), EventFlags::IN)?;
    // Made once and kept for the process's life, by the thread and every link.
    let t: &'static Thread = Box::leak(Box::new(Thread { commands, epoll }));
    std::thread::Builder::new().name("hydradns-tls".into()).spawn(move || serve(t))?;
    Ok(t)
}

/// Hands `command` to the connections' thread, starting it the first
/// time. False if there is no such thread (no eventfd, no thread).
pub fn post(command: Command) -> bool {
    thread().is_some_and(|t| t.commands.push(command))
}

/// The connections' epoll set, for a thread writing on a connection.
pub fn epoll() -> Option<&'static OwnedFd> {
    thread().map(|t| &t.epoll)
}

/// The connections' thread: reads replies, makes connections it is told
/// were made, closes idle and silent ones.
fn serve(t: &'static Thread) {
    let epoll = &t.epoll;
    let mut links: FxHashMap<u64, Arc<LinkInner>> = FxHashMap::default();
    let mut events = [Event { flags: EventFlags::empty(), data: EventData::new_u64(0) }; 32];
    let mut taken = Vec::new();
    loop {
        let now = Instant::now();
        let timeout = links.values().filter_map(|l| l.connection.lock().ok()?.deadline()).min().map(|at| {
            // Rounded up: waking a hair early would only wait again.
            let d = at.saturating_duration_since(now).min(LOOK_EVERY) + Duration::from_millis(1);
            Timespec { tv_sec: d.as_secs() as _, tv_nsec: d.subsec_nanos() as _ }
        });
        let n = match epoll::wait(epoll, &mut events[..], timeout.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(e) => return log::error!("encrypted upstreams: epoll failed: {e}"),
        };
        for ev in &events[..n] {
            match ev.data.u64() {
                DOORBELL => {
                    t.commands.take(&mut taken);
                    for command in taken.drain(..) {
                        match command {
                            Command::Watch(link) => {
                                links.insert(link.id, link);
                            }
                            Command::Connected(id, done) => {
                                if let Some(mut c) = links.get(&id).and_then(|l| l.connection.lock().ok()) {
                                    let (result, addrs) = *done;
                                    c.connected(epoll, result, addrs);
                                }
                            }
                            Command::Gone(id) => {
                                if let Some(mut c) = links.get(&id).and_then(|l| l.connection.lock().ok()) {
                                    c.gone(epoll);
                                }
                            }
                        }
                    }
                }
                id => {
                    if let Some(mut c) = links.get(&id).and_then(|l| l.connection.lock().ok()) {
                        c.ready(epoll);
                    }
                }
            }
        }
        let now = Instant::now();
        links.retain(|_, l| match l.connection.lock() {
            Ok(mut c) => {
                c.expire(epoll, now);
                !c.finished()
            }
            Err(_) => false,
        });
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
/// snapshot's bootstrap servers and clock.
pub fn configure(config: &Config, bootstrap: &[Arc<Server>], clock: &Arc<ClockGate>) {
    let old = CONTEXT.load_full();
    // Both settings come from the trust anchors: built again together, only
    // when `ca_file` changed.
    let (client, https_client) = match &old {
        Some(o) if o.ca_file == config.ca_file && o.client.is_ok() => (o.client.clone(), o.https_client.clone()),
        _ => {
            let client = client_config(config);
            let https = client.as_ref().map(with_alpn).map_err(Clone::clone);
            (client, https)
        }
    };
    if let Err(e) = &client {
        log::error!("encrypted upstreams cannot verify certificates: {e}");
    }
    CONTEXT.store(Some(Arc::new(Context {
        client,
        https_client,
        bootstrap: bootstrap.to_vec(),
        timeout: config.upstream_timeout,
        ca_file: config.ca_file.clone(),
        clock: clock.clone(),
    })));
}

/// `client` offering HTTP/2, then HTTP/1.1, for DNS over HTTPS.
fn with_alpn(client: &Arc<ClientConfig>) -> Arc<ClientConfig> {
    let mut c = (**client).clone();
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(c)
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
