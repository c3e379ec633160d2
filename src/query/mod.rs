//! One query's journey: parse → cache → policy → upstream → answer.
//!
//! The cache comes first, but a hit skips the policy only when the lists
//! that passed its name are still the current ones (see
//! [`Snapshot::generation`]) and passed it for every client, whatever its
//! groups; otherwise the policy decides for this client as if there were
//! no cache, the CNAMEs in the cached answer included. So one cached answer
//! serves every group, and no client gets another group's verdict.
//!
//! [`Engine::handle`] runs synchronously on the worker that received the
//! packet and finishes every query that needs no network (errors, blocks,
//! cache hits) without waiting on anything. Only a miss leaves it, as a
//! [`Miss`] that the server resolves in a task of its own with
//! [`Engine::resolve`].
//!
//! Configuration and lists live in one immutable [`Snapshot`] behind an
//! `ArcSwap`: each query loads the current one without a lock, and a reload
//! swaps in a complete new one while queries in flight finish on the old.
//!
//! Here: the [`Engine`], what a query carries ([`Origin`], [`Step`]) and
//! how an answer is counted and logged. Each path has its file:
//! `snapshot` (what a query consults), `handle` (admission, local names,
//! cache, lists), `alias` (CNAME chains: local aliases, safe search),
//! `miss` (in flight, upstream tries, the answer), `vet` (what a reply
//! passes: CNAME cloaking, rebinding), `refresh` (serve-stale, prefetch).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use smol::channel::Receiver;

use crate::access::{self, AccessList, DenyAction};
use crate::answer::Stored;
use crate::cache::{self, Cache, Stale};
use crate::client;
use crate::client::rules::{ClientRules, Learned};
use crate::config::groups::DEFAULT;
use crate::config::groups::GroupLog;
use crate::config::{BlockMode, Config};
use crate::dnssec::{KeyCache, TrustAnchors};
use crate::domain::SEP;
use crate::policy::domainset::name_key;
use crate::policy::exceptions::Exceptions;
use crate::policy::pause::Pause;
use crate::policy::records::{Alias, Local, Records};
use crate::policy::schedule::Schedules;
use crate::policy::{BYPASS_NAMES, Policy, Verdict};
use crate::querylog::{Entry, Logger};
use crate::ratelimit::RateLimiter;
use crate::stats::Counters;
use crate::stats::Outcome;
use crate::upstream::clock::ClockGate;
use crate::upstream::sets::{self, Sets};
use crate::upstream::{self, Failover, Group, Inflight, Join, Lead, Resolution, Resolved, Server, TryError};
use crate::wire::{self, HEADER_LEN, MAX_NAME_LEN, Query, Reject, flags, header, rcode};

mod alias;
pub mod dnssec;
pub mod exceptions;
mod handle;
mod memo;
mod miss;
mod refresh;
mod snapshot;
mod vet;
pub mod why;

pub use miss::{Begin, Led, Miss};
pub use snapshot::Snapshot;
pub use vet::REBIND_LIST;

/// What the server should do after [`Engine::handle`].
#[derive(Debug)]
pub enum Step {
    /// Send the answer now in the output buffer.
    Reply,
    /// Send nothing.
    Drop,
    /// Resolve upstream; the answer comes from [`Engine::resolve`].
    Resolve(Miss),
    /// Send the answer in the output buffer now (a stale or cached one),
    /// then resolve the miss to refresh the cache, answering no one.
    Refresh(Miss),
}

/// How the answer travels back: it decides the size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Limited by the client's EDNS size; larger answers get TC=1.
    Udp,
    /// Up to 65,535 bytes.
    Tcp,
}

/// Sends a client the stale answer it gets while its miss is still being
/// resolved ([`Engine::resolve_led`]). One type for every transport, so the
/// miss's future is compiled once; the box is made only for that rare answer.
pub type Early<'a> = &'a dyn Fn(Vec<u8>) -> smol::future::BoxedLocal<()>;

/// Where a query came from and when it arrived.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// The client's address: the packet's source, or the client a trusted
    /// forwarder named ([`crate::client`]).
    pub client: IpAddr,
    /// Its hardware address, when a trusted forwarder gave it.
    pub mac: Option<[u8; 6]>,
    /// Arrival time: latency is measured from here.
    pub received: Instant,
    /// How the answer goes back.
    pub transport: Transport,
    /// This is the safe host's half of a safe search answer: counted and
    /// logged once, as the client's question, when the CNAME goes before it
    /// ([`Engine::splice_alias`]).
    pub safe_search: bool,
}

/// What is known about an answer when it is recorded.
struct Answered<'a> {
    qname: &'a [u8],
    qtype: u16,
    outcome: Outcome,
    upstream: Option<SocketAddr>,
    list: Option<Arc<str>>,
    /// The group's upstream set that answered (`None`: the main one).
    set: Option<Arc<str>>,
    /// What DNSSEC validation decided (`None`: not validated).
    dnssec: Option<crate::querylog::Dnssec>,
}

impl<'a> Answered<'a> {
    fn of(q: &Query<'a>, outcome: Outcome) -> Answered<'a> {
        Answered { qname: q.qname, qtype: q.qtype, outcome, upstream: None, list: None, set: None, dnssec: None }
    }

    fn unparsed() -> Answered<'a> {
        Answered { qname: &[], qtype: 0, outcome: Outcome::Local, upstream: None, list: None, set: None, dnssec: None }
    }
}

/// Room for one query's keys while [`Engine::handle_in`] answers it: a
/// receive thread keeps one, where [`Engine::handle`] makes a fresh one, a
/// 515-byte `memset` each time (77 instructions of a cache hit's 1,816:
/// `bench/instructions.py --by-function --scenarios hits`).
pub struct Scratch {
    /// The cache key ([`cache::key`]).
    key: [u8; cache::MAX_KEY_LEN],
    /// The name's reversed-label key ([`wire::reversed_key_folded`]).
    name: [u8; MAX_NAME_LEN],
    /// A receive thread's recent clients' rules ([`Scratch::remembering`]).
    memo: Option<Box<memo::RuleMemo>>,
}

impl Scratch {
    /// Zeroed room; what a query writes it reads back, and nothing else.
    pub fn new() -> Scratch {
        Scratch { key: [0; cache::MAX_KEY_LEN], name: [0; MAX_NAME_LEN], memo: None }
    }

    /// Room that also remembers recent clients' `config client` rules
    /// ([`memo`]): for a thread that keeps it across queries.
    pub fn remembering() -> Scratch {
        Scratch { memo: Some(Box::default()), ..Scratch::new() }
    }
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch::new()
    }
}

/// The query engine shared by all workers.
#[derive(Debug)]
pub struct Engine {
    /// Current configuration and lists.
    pub snapshot: ArcSwap<Snapshot>,
    /// Misses being resolved, for coalescing.
    inflight: Arc<Inflight>,
    /// The query log, when enabled.
    log: Option<Logger>,
    /// Held by whoever builds the next snapshot from the current one (the
    /// lists thread, the main thread when resolv_file changes), so neither
    /// undoes the other's change; queries never take it.
    writer: std::sync::Mutex<()>,
    /// Prefetches in flight.
    prefetching: Arc<std::sync::atomic::AtomicUsize>,
    /// Blocking paused until (`hydradns pause`); kept across reloads.
    pub pause: Pause,
    /// Exceptions with an end (`hydradns allow`, `block`); kept across
    /// reloads, and across restarts in a file.
    pub exceptions: Exceptions,
    /// MACs and hostnames of the devices, for `config client` rules that
    /// need them: replaced through [`Engine::set_learned`].
    learned: ArcSwap<Learned>,
    /// Raised with each new `learned`: what a [`memo::RuleMemo`] entry was found with.
    learned_version: AtomicU64,
    /// The current rules need [`Engine::learned`] kept up to date. Read by
    /// the job that does so without loading the snapshot: a thread that
    /// loads it once joins the list every cache insert's store walks
    /// (`arc_swap`'s debt list; +143 instructions a miss, callgrind).
    pub learning: AtomicBool,
    /// Rung when a new snapshot turns [`Engine::learning`] on, so the job
    /// that keeps the table current need not wake to look for that.
    learning_bell: (smol::channel::Sender<()>, smol::channel::Receiver<()>),
    /// The list name logged for `block_bypass` answers.
    bypass: Arc<str>,
    /// Some group's `querylog` is not `full`: each entry looks up its client's groups.
    log_private: AtomicBool,
}

impl Engine {
    /// An engine serving `snapshot`, recording answers into `log` if given.
    pub fn new(snapshot: Snapshot, log: Option<Logger>) -> Engine {
        Engine::with_exceptions(snapshot, log, Exceptions::new())
    }

    /// [`Engine::new`] with `exceptions` in force from the start (those a
    /// previous run left: [`exceptions::restore`]). Given here, not swapped
    /// in after: dropping the empty table's `ArcSwap` would put this thread
    /// on the list every cache insert walks (see [`Engine::learning`]).
    pub fn with_exceptions(snapshot: Snapshot, log: Option<Logger>, exceptions: Exceptions) -> Engine {
        // What `follow_groups` does on a reload, without its load of
        // `learned`: a load would put this thread on arc_swap's debt list
        // (see `learning`).
        let learned = ArcSwap::from_pointee(learn(&snapshot));
        let learning = AtomicBool::new(snapshot.clients.needs_learning());
        let log_private = AtomicBool::new(snapshot.policy.groups.logs_vary());
        if let Some(log) = &log {
            log.set_client_names(client::names::configured_names(&snapshot.config.clients));
        }
        Engine {
            snapshot: ArcSwap::from_pointee(snapshot),
            inflight: Arc::default(),
            log,
            writer: Default::default(),
            prefetching: Arc::default(),
            pause: Pause::default(),
            exceptions,
            learned,
            learned_version: AtomicU64::new(1),
            learning,
            learning_bell: smol::channel::bounded(1),
            bypass: Arc::from("block_bypass"),
            log_private,
        }
    }

    /// Returns once a reload has turned [`Engine::learning`] on.
    pub async fn learning_started(&self) {
        let _ = self.learning_bell.1.recv().await;
    }

    /// The query log handle, if logging is on.
    pub fn logger(&self) -> Option<&Logger> {
        self.log.as_ref()
    }

    /// Counts the answer's latency and queues its log entry.
    fn done(&self, origin: &Origin, a: Answered<'_>, out: &[u8], stats: &Counters) -> Step {
        if origin.safe_search {
            // Counted and logged as the client's question once spliced.
            return Step::Reply;
        }
        let latency_us = origin.received.elapsed().as_micros().min(u32::MAX as u128) as u32;
        stats.latency.record(latency_us as u64);
        let rcode = if out.len() >= wire::HEADER_LEN { header::rcode(out) } else { 0 };
        Counters::bump(&stats.qtypes[crate::stats::qtype_slot(a.qtype)]);
        Counters::bump(&stats.answers[a.outcome as usize][crate::stats::rcode_slot(rcode)]);
        if let Some(log) = &self.log {
            let keep = if self.log_private.load(Relaxed) { self.log_kept(origin) } else { GroupLog::Full };
            if keep == GroupLog::None {
                return Step::Reply;
            }
            let anonymous = keep == GroupLog::Anonymous;
            let mut name = [0u8; MAX_NAME_LEN];
            let len = a.qname.len().min(MAX_NAME_LEN);
            name[..len].copy_from_slice(&a.qname[..len]);
            log.log(Entry {
                at: origin.received,
                client: origin.client,
                mac: if anonymous { None } else { origin.mac },
                anonymous,
                name,
                name_len: len as u8,
                qtype: a.qtype,
                outcome: a.outcome,
                rcode,
                upstream: a.upstream,
                list: a.list,
                upstream_set: a.set,
                dnssec: a.dnssec,
                latency_us,
            });
        }
        Step::Reply
    }

    /// What the log keeps of `origin`'s client: the most private `querylog`
    /// of the groups it is in (whether or not inside their schedules).
    #[cold]
    #[inline(never)]
    fn log_kept(&self, origin: &Origin) -> GroupLog {
        let snap = self.snapshot.load();
        let member = if snap.clients.is_empty() {
            DEFAULT
        } else {
            let learned = self.learned.load();
            snap.clients.groups(snap.clients.find(origin.client, origin.mac, &learned))
        };
        snap.policy.groups.log_of(member)
    }

    /// Installs the snapshot `next` makes of the current one, if it makes
    /// one; queries already running keep the old one. Writers take turns, so
    /// each builds on the other's work; `next` should only assemble, never
    /// download or build lists. True when a snapshot was installed: a log
    /// line that says what changed goes after this, so that whoever reads
    /// it (a test, an owner) finds the change already in force.
    pub fn update(&self, next: impl FnOnce(&Arc<Snapshot>) -> Option<Snapshot>) -> bool {
        let _turn = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(snapshot) = next(&self.snapshot.load_full()) else { return false };
        self.follow_groups(&snapshot);
        self.snapshot.store(Arc::new(snapshot));
        true
    }

    /// [`Engine::update`] for a change of settings only: the lists and the
    /// cache stay (the network's resolvers, the machine's networks).
    pub fn update_config(&self, change: impl FnOnce(&Config) -> Option<Config>) -> bool {
        self.update(|old| change(&old.config).map(|cfg| Snapshot::new(Arc::new(cfg), old.policy.clone(), Some(old))))
    }

    /// The devices' MACs and hostnames now, as the client rules use them.
    pub fn learned(&self) -> arc_swap::Guard<Arc<Learned>> {
        self.learned.load()
    }

    /// Puts `learned` in force; remembered rules found with the one before go stale.
    pub fn set_learned(&self, learned: Arc<Learned>) {
        self.learned.store(learned);
        self.learned_version.fetch_add(1, Relaxed);
    }

    /// Carries what is kept per group and client over to `snapshot`'s groups and rules.
    #[inline(never)]
    fn follow_groups(&self, snapshot: &Snapshot) {
        // Group pauses are kept by name; this config may number them anew.
        self.pause.renumber(&snapshot.policy.groups);
        // So are exceptions; their devices and services are looked up anew.
        self.recompile_exceptions(snapshot);
        // New client rules match from their first query, not the next look at the files.
        if !self.learned.load().is_for(&snapshot.clients) {
            self.set_learned(Arc::new(learn(snapshot)));
        }
        let needed = snapshot.clients.needs_learning();
        if needed && !self.learning.swap(needed, Relaxed) {
            // Full means one ring is already waiting: that is enough.
            let _ = self.learning_bell.0.try_send(());
        } else {
            self.learning.store(needed, Relaxed);
        }
        self.log_private.store(snapshot.policy.groups.logs_vary(), Relaxed);
        if let Some(log) = &self.log {
            log.set_client_names(client::names::configured_names(&snapshot.config.clients));
        }
    }
}

/// What the router's files say about the devices, for `snap`'s client
/// rules (nothing when no rule needs a MAC or a hostname).
fn learn(snap: &Snapshot) -> Learned {
    if !snap.clients.needs_learning() {
        return Learned::default();
    }
    let c = &snap.config;
    let mut book = client::names::NameBook::router(&c.leases_file, &c.ethers_file);
    book.refresh(Instant::now());
    Learned::new(&snap.clients, &book)
}

/// The groups whose lists apply to one client now.
#[derive(Debug, Clone, Copy)]
struct Groups {
    /// Its groups inside their schedules.
    on: u64,
    /// Those of them paused.
    paused: u64,
    /// The upstream set its misses go to ([`sets::Sets::of`]).
    set: u8,
}

impl Groups {
    /// The groups whose lists block for it.
    #[inline]
    fn active(&self) -> u64 {
        self.on & !self.paused
    }
}

/// What a cache entry records when the lists did not pass its name for
/// every client: some group's list blocks the name or a CNAME in its answer
/// (or did, but for a pause), so each hit looks at the lists for its own
/// client (no [`Snapshot::passed`] value is ever this).
const UNCHECKED: u64 = u64::MAX;

/// TTL of the RFC 8482 answer to ANY (the RFC suggests a long one; Cloudflare uses 3789).
const ANY_TTL: u32 = 3789;

fn fit(out: &mut Vec<u8>, q: &Query, transport: Transport, stats: &Counters) {
    if transport == Transport::Udp && wire::build::fit(out, q, q.udp_limit()) {
        Counters::bump(&stats.truncated);
    }
}
