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

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use smol::channel::Receiver;

use crate::access::{self, AccessList, DenyAction};
use crate::cache::{self, Cache, Stale, Stored};
use crate::client;
use crate::client::rules::{ClientRules, Learned};
use crate::config::groups::GroupLog;
use crate::config::{BlockMode, Config};
use crate::policy::domainset::{SEP, name_key};
use crate::policy::groups::DEFAULT;
use crate::policy::pause::Pause;
use crate::policy::records::{Alias, Local, Records};
use crate::policy::schedule::Schedules;
use crate::policy::{BYPASS_NAMES, Policy, Verdict};
use crate::querylog::{Entry, Logger, Outcome};
use crate::ratelimit::RateLimiter;
use crate::stats::Counters;
use crate::upstream::clock::ClockGate;
use crate::upstream::{self, Failover, Group, Inflight, Join, Lead, Resolution, Resolved, Server, TryError};
use crate::wire::{self, HEADER_LEN, MAX_NAME_LEN, Query, Reject, flags, header, rcode};

mod refresh;

/// Source of [`Snapshot::generation`].
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// Everything a query consults, swapped whole on reload.
#[derive(Debug)]
pub struct Snapshot {
    /// Unique to this snapshot: a cache entry whose name these lists passed
    /// carries it, and a hit on it skips the blocklist lookup.
    pub generation: u64,
    /// Block and allow lists and the block answer style.
    pub policy: Arc<Policy>,
    /// The answer cache (kept across reloads unless its size changes).
    pub cache: Arc<Cache>,
    /// Default upstreams.
    pub upstreams: Group,
    /// Conditional forwarding: reversed-label domain key → its servers.
    pub forwards: Vec<(Box<[u8]>, Arc<Group>)>,
    /// `plain_domain` keys: while the clock is not known good, names under
    /// them go to `bootstrap` (see `upstream::clock`). Empty without
    /// encrypted upstreams.
    plain_until_synced: Vec<Box<[u8]>>,
    /// The bootstrap resolvers, as the group those names use.
    bootstrap: Group,
    /// Whether the clock is known good (kept across reloads).
    pub clock: Arc<ClockGate>,
    /// Per-try upstream timeout.
    pub timeout: Duration,
    /// Seconds after expiry a cached answer may still be served stale (0: never).
    pub stale_for: u32,
    /// Refresh names in use before they expire (kept here beside the rest
    /// a hit reads, not behind the config's pointer).
    pub prefetch: bool,
    /// TTL clamps for cached answers.
    pub min_ttl: u32,
    /// See `min_ttl`.
    pub max_ttl: u32,
    /// The config this snapshot was built from.
    pub config: Arc<Config>,
    /// Local names, answered before everything else.
    pub records: Arc<Records>,
    /// Which `config client` a client is, and its groups.
    pub clients: Arc<ClientRules>,
    /// Which scheduled groups are outside their window now.
    pub schedules: Arc<Schedules>,
    /// Reversed-label keys of the `rebind_allow` domains.
    rebind_allow: Vec<Box<[u8]>>,
    /// Addresses an upstream answer may not put under a public name.
    rebind_ranges: AccessList,
    /// The per-client rate limit, when one is set (kept across reloads that leave it alone).
    ratelimit: Option<Arc<RateLimiter>>,
}

impl Snapshot {
    /// What a cache entry records when these lists pass its name for every
    /// client (see [`crate::policy::Checked::uniform`]), `allowed` when an allowlist did:
    /// the generation shifted left one, that flag in bit 0 (see [`cache::Hit`]).
    #[inline]
    pub fn passed(&self, allowed: bool) -> u64 {
        self.generation << 1 | allowed as u64
    }

    /// Builds a snapshot, reusing `previous`'s cache (if the size is unchanged)
    /// and upstream counters.
    #[inline(never)]
    pub fn new(config: Arc<Config>, policy: Arc<Policy>, previous: Option<&Snapshot>) -> Snapshot {
        let cache = match previous {
            Some(p) if p.config.cache_size == config.cache_size => p.cache.clone(),
            _ => Arc::new(Cache::new(config.cache_size)),
        };
        let known: Vec<Arc<Server>> = previous.map(|p| p.servers()).unwrap_or_default();
        let forwards = config
            .forwards
            .iter()
            .flat_map(|f| {
                let group = Arc::new(
                    Group::new(&f.servers, &known, config.upstream_strategy)
                        .trusting_plain_ad(config.trust_upstream_ad),
                );
                f.domains.iter().filter_map(move |d| Some((name_key(d)?.into_boxed_slice(), group.clone())))
            })
            .collect();
        let rebind_allow = config.rebind_allow.iter().filter_map(|d| Some(name_key(d)?.into_boxed_slice())).collect();
        let ratelimit = match previous {
            Some(p) if (p.config.ratelimit, p.config.ratelimit_burst) == (config.ratelimit, config.ratelimit_burst) => {
                p.ratelimit.clone()
            }
            _ => (config.ratelimit > 0).then(|| {
                let burst = if config.ratelimit_burst > 0 {
                    config.ratelimit_burst
                } else {
                    config.ratelimit.saturating_mul(2)
                };
                Arc::new(RateLimiter::new(config.ratelimit, burst))
            }),
        };
        let records = match previous {
            Some(p) if p.config.records == config.records => p.records.clone(),
            _ => Arc::new(Records::new(&config.records)),
        };
        let clients = Arc::new(ClientRules::new(&config.clients, &policy.groups));
        let schedules = Arc::new(Schedules::new(&policy.groups, &config.time_synced_file));
        let clock = match previous {
            Some(p) if p.clock.marker() == config.clock_marker() => p.clock.clone(),
            _ => Arc::new(ClockGate::new(config.clock_marker())),
        };
        let encrypted = config.has_encrypted();
        let plain_until_synced = match encrypted {
            true => config.plain_domains.iter().filter_map(|d| Some(name_key(d)?.into_boxed_slice())).collect(),
            false => Vec::new(),
        };
        // The bootstrap servers keep their counters and sockets across
        // reloads, whether or not they answered clients (and were in `known`).
        let bootstrap = match (encrypted, previous) {
            (true, Some(p)) => Group::new(&config.bootstrap, &p.bootstrap.servers, upstream::Strategy::Failover),
            (true, None) => Group::new(&config.bootstrap, &[], upstream::Strategy::Failover),
            (false, _) => Group::new(&[], &[], upstream::Strategy::Failover),
        }
        .trusting_plain_ad(config.trust_upstream_ad);
        if encrypted {
            upstream::runtime::configure(&config, &bootstrap.servers, &clock);
        }
        Snapshot {
            plain_until_synced,
            bootstrap,
            clock,
            generation: GENERATIONS.fetch_add(1, Relaxed),
            records,
            clients,
            schedules,
            ratelimit,
            rebind_ranges: access::rebind_ranges(),
            policy,
            rebind_allow,
            cache,
            upstreams: Group::with_fallbacks(&config.upstreams, &config.fallbacks, &known, config.upstream_strategy)
                .trusting_plain_ad(config.trust_upstream_ad),
            forwards,
            timeout: config.upstream_timeout,
            stale_for: if config.serve_stale { config.stale_max_age } else { 0 },
            prefetch: config.prefetch,
            min_ttl: config.min_ttl,
            max_ttl: config.max_ttl,
            config,
        }
    }

    /// Every upstream server, defaults first, without duplicates (the
    /// bootstrap resolvers included, when they answer clients).
    pub fn servers(&self) -> Vec<Arc<Server>> {
        let mut all: Vec<Arc<Server>> = self.upstreams.servers.clone();
        let bootstrap = (!self.plain_until_synced.is_empty()).then_some(&self.bootstrap);
        for g in self.forwards.iter().map(|(_, g)| &**g).chain(bootstrap) {
            for s in &g.servers {
                if !all.iter().any(|a| Arc::ptr_eq(a, s)) {
                    all.push(s.clone());
                }
            }
        }
        all
    }

    /// Is `key` under a domain that rebind protection leaves alone: a
    /// `rebind_allow` entry, or a `config forward` rule (local names by design)?
    fn rebind_exempt(&self, key: &[u8]) -> bool {
        let covers = |d: &[u8]| key.starts_with(d) && (key.len() == d.len() || key[d.len()] == SEP);
        self.forwards.iter().any(|(d, _)| covers(d)) || self.rebind_allow.iter().any(|d| covers(d))
    }

    /// The most specific forward rule covering a name, by index; one past
    /// the rules: the bootstrap resolvers (a `plain_domain` name while the
    /// clock is not known good).
    fn forward_for(&self, key: &[u8]) -> Option<usize> {
        let covers = |d: &[u8]| key.starts_with(d) && (key.len() == d.len() || key[d.len()] == SEP);
        let rule = self
            .forwards
            .iter()
            .enumerate()
            .filter(|(_, (d, _))| covers(d))
            .max_by_key(|(_, (d, _))| d.len())
            .map(|(i, _)| i);
        if rule.is_none() && self.plain_until_synced.iter().any(|d| covers(d)) && !self.clock.synced() {
            return Some(self.forwards.len());
        }
        rule
    }

    /// The servers of forward rule `forward`, the bootstrap resolvers one
    /// past the rules, or the defaults.
    fn group(&self, forward: Option<usize>) -> &Group {
        match forward {
            Some(i) if i == self.forwards.len() => &self.bootstrap,
            Some(i) => self.forwards.get(i).map_or(&self.upstreams, |(_, g)| g),
            None => &self.upstreams,
        }
    }
}

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

/// A query that has to go upstream, owned so it can outlive the receive buffer.
///
/// It carries what `handle` already worked out (the parsed query, the
/// name's reversed key, the cache key shared with the in-flight table), so
/// no later step parses, folds or copies them again: that took a miss from
/// 10,118 to 8,974 instructions (`bench/instructions.py --by-function
/// --scenarios misses`: three parses, two name-key passes and two
/// allocations fewer).
pub struct Miss {
    /// Who asked, when, over what.
    origin: Origin,
    /// The client's message, then the reversed-label key of its name
    /// ([`wire::reversed_key`], already made for the policy check and
    /// needed again for forward rules and the reply's checks): one
    /// allocation for both.
    bytes: Box<[u8]>,
    /// Where the message ends in `bytes`.
    msg_len: usize,
    /// The parsed message, so no step of the miss parses it again.
    layout: wire::Layout,
    /// Its cache key, shared with the in-flight table (see [`Inflight::join`]).
    key: Arc<[u8]>,
    /// Hash of the key.
    hash: u64,
    /// An allowlist passed the name (cached with the answer, see [`Snapshot::generation`]).
    allowed: bool,
    /// The lists pass the name for every client ([`crate::policy::Checked::uniform`]): its answer may be marked so.
    uniform: bool,
    /// The client's groups whose lists apply, for the CNAMEs in its answer.
    groups: u64,
    /// The snapshot the query started on, so a reload mid-flight changes nothing for it.
    snapshot: Arc<Snapshot>,
    /// The expired answer to fall back on (serve-stale), if the cache held one.
    stale: Option<Stale>,
    /// The client has its answer already (a stale or cached one): resolving
    /// only refreshes the cache.
    quiet: bool,
    /// Held while this miss is a prefetch: counts it against the cap.
    prefetch_slot: Option<refresh::PrefetchSlot>,
    /// The list that would have blocked it, had blocking not been paused.
    paused: Option<u16>,
    /// The local alias whose outside target this miss resolves.
    alias: Option<Box<Alias>>,
}

impl std::fmt::Debug for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Miss").field("msg", &self.msg()).field("hash", &self.hash).finish_non_exhaustive()
    }
}

impl Miss {
    /// A miss for `q` (the message `msg`), its cache key `key` and hash,
    /// and its name's reversed-label key `name_key`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        origin: &Origin,
        msg: &[u8],
        q: &Query,
        key: &[u8],
        name_key: &[u8],
        hash: u64,
        checked: (bool, bool, u64),
        snap: arc_swap::Guard<Arc<Snapshot>>,
    ) -> Miss {
        let (allowed, uniform, groups) = checked;
        let mut bytes = Vec::with_capacity(msg.len() + name_key.len());
        bytes.extend_from_slice(msg);
        bytes.extend_from_slice(name_key);
        Miss {
            origin: *origin,
            bytes: bytes.into_boxed_slice(),
            msg_len: msg.len(),
            layout: q.layout(),
            key: key.into(),
            hash,
            allowed,
            uniform,
            groups,
            snapshot: arc_swap::Guard::into_inner(snap),
            stale: None,
            quiet: false,
            prefetch_slot: None,
            paused: None,
            alias: None,
        }
    }

    /// The client's message.
    fn msg(&self) -> &[u8] {
        self.bytes.get(..self.msg_len).unwrap_or_default()
    }

    /// The client's query, as [`Engine::handle`] parsed it.
    fn query(&self) -> Option<Query<'_>> {
        self.layout.over(self.msg())
    }

    /// The reversed-label key of the name asked for.
    fn name_key(&self) -> &[u8] {
        self.bytes.get(self.msg_len..).unwrap_or_default()
    }
}

/// What [`Engine::begin`] made of a miss.
pub enum Begin {
    /// This thread resolves it: try upstreams, then [`Engine::finish`].
    Lead(Led),
    /// The same key is in flight: its outcome arrives on the channel ([`Engine::wait`]).
    Wait(Miss, Receiver<Resolution>),
    /// The answer (SERVFAIL: too many misses in flight, or a stale one) is already written.
    Answered,
    /// Nothing to send: a refresh that another is already doing, or that
    /// found too many misses in flight.
    Dropped,
}

/// A miss this thread leads, with what its upstream tries need.
pub struct Led {
    miss: Miss,
    /// Completes the in-flight entry other askers wait on (on drop: SERVFAIL to them).
    lead: Lead,
    /// The `config forward` rule whose servers resolve it, if any.
    forward: Option<usize>,
    /// The servers tried so far.
    failover: Failover,
    /// Our query, built once; each try writes its own ID into the first two bytes.
    query: Vec<u8>,
}

impl Led {
    /// The servers that resolve this miss.
    pub fn group(&self) -> &Group {
        self.miss.snapshot.group(self.forward)
    }

    /// How long one try may take.
    pub fn timeout(&self) -> Duration {
        self.miss.snapshot.timeout
    }

    /// The client's query.
    pub fn query(&self) -> Option<Query<'_>> {
        self.miss.query()
    }

    /// Records the outcome of a try of server `idx` (see [`Failover::record`]).
    pub fn record(
        &mut self,
        idx: usize,
        outcome: Result<Vec<u8>, TryError>,
        started: Instant,
    ) -> Option<(Vec<u8>, SocketAddr)> {
        self.failover.record(self.miss.snapshot.group(self.forward), idx, outcome, started)
    }

    /// The best error reply seen, once every server has been tried.
    pub fn fallback(&mut self) -> Option<(Vec<u8>, SocketAddr)> {
        self.failover.fallback()
    }

    /// Server `idx`'s try lost the race to another's answer (see [`Failover::lost`]).
    pub fn lost(&self, idx: usize, started: Instant) {
        self.failover.lost(self.miss.snapshot.group(self.forward), idx, started);
    }

    /// The servers, with the failover state and query to try the next one (borrowed together).
    pub fn next_try(&mut self) -> (&Group, &mut Failover, &mut [u8]) {
        (self.miss.snapshot.group(self.forward), &mut self.failover, &mut self.query)
    }
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
}

impl<'a> Answered<'a> {
    fn of(q: &Query<'a>, outcome: Outcome) -> Answered<'a> {
        Answered { qname: q.qname, qtype: q.qtype, outcome, upstream: None, list: None }
    }

    fn unparsed() -> Answered<'a> {
        Answered { qname: &[], qtype: 0, outcome: Outcome::Local, upstream: None, list: None }
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
}

impl Scratch {
    /// Zeroed room; what a query writes it reads back, and nothing else.
    pub fn new() -> Scratch {
        Scratch { key: [0; cache::MAX_KEY_LEN], name: [0; MAX_NAME_LEN] }
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
    /// MACs and hostnames of the devices, for `config client` rules that need them.
    pub learned: ArcSwap<Learned>,
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
            learned,
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

    /// Answers `msg` into `out` if that needs no network.
    pub fn handle(&self, msg: &[u8], origin: &Origin, out: &mut Vec<u8>, stats: &Counters) -> Step {
        self.handle_in(&mut Scratch::new(), msg, origin, out, stats)
    }

    /// [`Engine::handle`] with the caller's [`Scratch`] for the query's keys.
    pub fn handle_in(
        &self,
        scratch: &mut Scratch,
        msg: &[u8],
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        let snap = self.snapshot.load();
        let parsed = wire::parse_query(msg);
        // A trusted forwarder's query is admitted, answered and logged as the
        // client its options name. Only a query with options costs the check.
        let named;
        let (origin, by_name) = match parsed.as_ref().ok().and_then(|q| q.edns).filter(|e| e.has_options()) {
            Some(e) if snap.config.trusted_proxy.allows(origin.client) => {
                match client::edns::named(msg, e.options_at as usize, e.options_end as usize) {
                    Ok(n) => {
                        named = Origin { client: n.ip.unwrap_or(origin.client), mac: n.mac, ..*origin };
                        (&named, n.ip.is_some())
                    }
                    // A client's own option beside the forwarder's: nobody
                    // can say who asks, so it is turned away like a client
                    // outside `allow_client`.
                    Err(client::edns::Repeated) => {
                        Counters::bump(&stats.denied);
                        return self.turn_away(snap.config.deny_action, msg, origin, out, stats);
                    }
                }
            }
            _ => (origin, false),
        };
        // Before any answer, FORMERR included: a client turned away gets only `deny_action`.
        if let Some(step) = self.admit(&snap, msg, origin, by_name, out, stats) {
            return step;
        }
        let q = match parsed {
            Ok(q) => q,
            Err(Reject::Drop) => {
                Counters::bump(&stats.dropped);
                return Step::Drop;
            }
            Err(Reject::FormErr) => {
                Counters::bump(&stats.formerr);
                wire::build::rejection(out, msg, rcode::FORMERR);
                return self.done(origin, Answered::unparsed(), out, stats);
            }
            Err(Reject::NotImp) => {
                Counters::bump(&stats.notimp);
                wire::build::rejection(out, msg, rcode::NOTIMP);
                return self.done(origin, Answered::unparsed(), out, stats);
            }
        };
        self.answer_query(scratch, snap, msg, &q, origin, out, stats)
    }

    /// [`Engine::handle_in`] from the parsed query on: local names, cache,
    /// lists, then a miss. Also the second half of a local alias whose target
    /// is outside ([`Engine::alias`]).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn answer_query(
        &self,
        scratch: &mut Scratch,
        snap: arc_swap::Guard<Arc<Snapshot>>,
        msg: &[u8],
        q: &Query,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        let q = *q;
        if q.edns.is_some_and(|e| e.version > 0) {
            Counters::bump(&stats.badvers);
            wire::build::start(out, &q, rcode::NOERROR);
            wire::build::finish(out, q.edns, [0, 0, 0], true);
            return self.done(origin, Answered::of(&q, Outcome::Local), out, stats);
        }
        let Scratch { key: key_buf, name: name_key } = scratch;
        let k = cache::key(&q, key_buf);
        let key = &key_buf[..k];
        // The owner's own names beat the lists and the cache (nothing local is cached).
        if !snap.records.is_empty() {
            match snap.records.answer(&q, &key[..q.qname.len()], out) {
                Local::No => {}
                Local::Answered => {
                    Counters::bump(&stats.local_records);
                    fit(out, &q, origin.transport, stats);
                    return self.done(origin, Answered::of(&q, Outcome::Record), out, stats);
                }
                Local::Outside(alias) => {
                    Counters::bump(&stats.local_records);
                    drop(snap);
                    return self.alias(scratch, alias, &q, origin, out, stats);
                }
            }
        }
        if snap.config.block_bypass && BYPASS_NAMES.iter().any(|n| n.eq_ignore_ascii_case(q.qname)) {
            return self.bypass(&snap, &q, origin, out, stats);
        }
        let hash = snap.cache.hash(key);
        let hit = snap.cache.find(key, hash, origin.received, snap.stale_for);
        // A name these very lists passed for everyone when it was cached needs no lookup.
        if let Some(hit) = hit.as_ref().filter(|h| !h.is_stale()) {
            let checked = hit.checked();
            if checked >> 1 == snap.generation {
                if checked & 1 != 0 {
                    Counters::bump(&stats.allowed);
                }
                let step = self.cached(hit, &q, origin, out, stats, None);
                if snap.prefetch && hit.claim_prefetch() {
                    let n = wire::reversed_key_folded(&key[..q.qname.len()], name_key);
                    let passed = (checked & 1 != 0, true, DEFAULT);
                    let miss = Miss::new(origin, msg, &q, key, &name_key[..n], hash, passed, snap);
                    return self.prefetch(miss, stats).unwrap_or(step);
                }
                return step;
            }
        }
        // The cache key starts with the name, folded already.
        let n = wire::reversed_key_folded(&key[..q.qname.len()], name_key);
        let groups = self.groups_of(&snap, origin);
        let checked = snap.policy.check(&name_key[..n], groups.on);
        let mut paused = None;
        let allowed = match checked.verdict {
            Verdict::Blocked { source } => {
                // With some of the client's groups paused, only the others' lists block.
                let now = if groups.paused == 0 {
                    checked.verdict
                } else {
                    snap.policy.check(&name_key[..n], groups.active()).verdict
                };
                if let Verdict::Blocked { source } = now {
                    return self.block(&snap, &q, source, groups.active(), origin, out, stats);
                }
                Counters::bump(&stats.paused);
                paused = Some(source);
                false
            }
            Verdict::Allowed { .. } => {
                Counters::bump(&stats.allowed);
                true
            }
            Verdict::SafeSearch { target } => {
                // Paused groups' safe search is paused with their lists.
                let now = if groups.paused == 0 {
                    checked.verdict
                } else {
                    snap.policy.check(&name_key[..n], groups.active()).verdict
                };
                // Other types than these go on as unlisted.
                let rewritten =
                    matches!(q.qtype, wire::rtype::A | wire::rtype::AAAA | wire::rtype::HTTPS | wire::rtype::SVCB);
                if let Verdict::SafeSearch { target } = now
                    && rewritten
                    && q.qclass == wire::CLASS_IN
                {
                    return self.safe_search(scratch, &snap, target, &q, origin, out, stats);
                }
                let _ = target;
                false
            }
            Verdict::Pass => false,
        };
        if q.qtype == wire::rtype::ANY && !snap.config.any_forward {
            // RFC 8482: one small synthesized HINFO instead of everything the
            // name has, so ANY cannot turn a small spoofed query into a large
            // reply aimed at someone else.
            wire::build::start(out, &q, rcode::NOERROR);
            wire::build::record(out, wire::rtype::HINFO, ANY_TTL, b"\x07RFC8482\x00");
            wire::build::finish(out, q.edns, [1, 0, 0], false);
            fit(out, &q, origin.transport, stats);
            return self.done(origin, Answered::of(&q, Outcome::Local), out, stats);
        }
        let passed = (allowed, checked.uniform, groups.active());
        if let Some(hit) = &hit
            && !hit.is_stale()
        {
            // The answer's CNAMEs, for this client's groups: it was cached
            // under older lists, or some group's list blocks a name in it.
            let cnames = self.cnames(&snap, hit.message(), &name_key[..n], groups.active());
            if let Some(source) = cnames.blocked {
                Counters::bump(&stats.cname_blocked);
                return self.block(&snap, &q, source, groups.active(), origin, out, stats);
            }
            if let Some(source) = paused {
                // Answered as if unlisted; the entry stays unpassed.
                return self.cached(hit, &q, origin, out, stats, Some(snap.policy.source_arc(source)));
            }
            // These lists pass it too; for every client, the next hit skips them.
            if checked.uniform && cnames.pass_all {
                hit.set_checked(snap.passed(allowed));
            }
            let step = self.cached(hit, &q, origin, out, stats, None);
            if snap.prefetch && hit.claim_prefetch() {
                let miss = Miss::new(origin, msg, &q, key, &name_key[..n], hash, passed, snap);
                return self.prefetch(miss, stats).unwrap_or(step);
            }
            return step;
        }
        // Expired but servable: answered now if the client is not to wait
        // (or a refresh failed a moment ago), else kept for the miss to fall back on.
        let (stale, quiet) = match hit.map(|h| (h.refresh_held(), h.into_stale())) {
            Some((held, Some(stale))) => {
                let now = held || snap.config.stale_client_timeout.is_zero();
                if now {
                    self.answer_stale(origin, &q, &stale, (&snap, &name_key[..n], groups.active()), out, stats);
                    if held {
                        return Step::Reply;
                    }
                }
                (Some(stale), now)
            }
            _ => (None, false),
        };
        let mut miss = Miss::new(origin, msg, &q, key, &name_key[..n], hash, passed, snap);
        miss.stale = stale;
        miss.quiet = quiet;
        miss.paused = paused;
        if miss.quiet { Step::Refresh(miss) } else { Step::Resolve(miss) }
    }

    /// The groups whose lists apply to `origin`'s client now: its groups
    /// (`default` without `config client`) inside their schedules, and
    /// which of those are paused.
    #[inline]
    fn groups_of(&self, snap: &Snapshot, origin: &Origin) -> Groups {
        let member = if snap.clients.is_empty() {
            DEFAULT
        } else {
            let learned = self.learned.load();
            snap.clients.groups(snap.clients.find(origin.client, origin.mac, &learned))
        };
        let on = member & !snap.schedules.off();
        Groups { on, paused: self.pause.paused_groups() & on }
    }

    /// A search host for a client with safe search: A and AAAA get a CNAME
    /// to the safe host (index `target` in [`crate::policy::safesearch::TARGETS`])
    /// followed by its addresses, asked like any query; HTTPS and SVCB get
    /// NODATA.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn safe_search(
        &self,
        scratch: &mut Scratch,
        snap: &Snapshot,
        target: u8,
        q: &Query,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        let ttl = snap.config.block_ttl;
        let host = crate::policy::safesearch::TARGETS.get(target as usize).copied().unwrap_or_default();
        let mut name = Vec::with_capacity(host.len() + 2);
        let addresses = matches!(q.qtype, wire::rtype::A | wire::rtype::AAAA);
        if addresses && wire::build::push_name(&mut name, host).is_some() {
            let alias = Alias::safe_search(q, &name, ttl);
            return self.alias(scratch, alias, q, origin, out, stats);
        }
        Counters::bump(&stats.safe_search);
        if addresses {
            // No safe host to name (cannot happen with the table's names).
            wire::build::start(out, q, rcode::SERVFAIL);
            wire::build::finish(out, q.edns, [0, 0, 0], false);
        } else {
            wire::build::start(out, q, rcode::NOERROR);
            wire::build::negative_soa(out, ttl);
            wire::build::finish(out, q.edns, [0, 1, 0], false);
        }
        fit(out, q, origin.transport, stats);
        self.done(origin, Answered::of(q, Outcome::SafeSearch), out, stats)
    }

    /// NXDOMAIN for a name that tells clients to keep to this resolver
    /// (`block_bypass`). Rare: out of the answer path's line.
    #[cold]
    #[inline(never)]
    fn bypass(&self, snap: &Snapshot, q: &Query, origin: &Origin, out: &mut Vec<u8>, stats: &Counters) -> Step {
        Counters::bump(&stats.blocked);
        snap.policy.write_block_answer_as(BlockMode::NxDomain, q, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Blocked);
        a.list = Some(self.bypass.clone());
        self.done(origin, a, out, stats)
    }

    /// Answers a name list `source` blocks for a client whose groups `active` apply.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn block(
        &self,
        snap: &Snapshot,
        q: &Query,
        source: u16,
        active: u64,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        Counters::bump(&stats.blocked);
        self.count_block(snap, source, active, stats);
        snap.policy.write_block_answer_as(snap.policy.mode_for(source, active), q, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Blocked);
        a.list = snap.policy.source_arc(source);
        self.done(origin, a, out, stats)
    }

    /// Counts a block under the group whose list it was.
    #[inline]
    fn count_block(&self, snap: &Snapshot, source: u16, active: u64, stats: &Counters) {
        if let Some(g) = snap.policy.group_of(source, active) {
            Counters::bump(&stats.groups.blocked[g]);
        }
    }

    /// A local alias whose chain leaves the local names: the target is asked
    /// like any query (cache, lists, upstream) with the client's ID, flags and
    /// EDNS, and its answer goes after the chain ([`Alias::splice`]): at once
    /// when it needs no network, else when the miss ends ([`Engine::spliced`]).
    /// Logged as the query for the target.
    fn alias(
        &self,
        scratch: &mut Scratch,
        alias: Alias,
        q: &Query,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        let mut msg = Vec::with_capacity(HEADER_LEN + alias.target.len() + 15);
        msg.extend_from_slice(&q.msg[..HEADER_LEN]);
        header::set_counts(&mut msg, [1, 0, 0, 0]);
        msg.extend_from_slice(&alias.target);
        msg.extend_from_slice(&q.qtype.to_be_bytes());
        msg.extend_from_slice(&q.qclass.to_be_bytes());
        // Our OPT with the client's DO bit; its UDP size is read from `target` below.
        wire::build::finish(&mut msg, q.edns, [0, 0, 0], false);
        // Built here, not parsed: a second caller of parse_query would take
        // it out of line from handle_in (+127 instructions a cache hit).
        let question_end = HEADER_LEN + alias.target.len() + 4;
        let target = Query {
            msg: &msg,
            id: q.id,
            flags: q.flags,
            qname: &msg[HEADER_LEN..HEADER_LEN + alias.target.len()],
            qtype: q.qtype,
            qclass: q.qclass,
            question_end,
            edns: q.edns.map(|e| wire::Edns { options_at: msg.len() as u16, options_end: msg.len() as u16, ..e }),
        };
        let snap = self.snapshot.load();
        let inner = Origin { safe_search: alias.safe_search, ..*origin };
        match self.answer_query(scratch, snap, &msg, &target, &inner, out, stats) {
            Step::Reply => {
                self.splice_alias(&alias, origin, q.edns, q.udp_limit(), out, stats);
                Step::Reply
            }
            Step::Drop => Step::Drop,
            // The answer written now is a stale or cached one; the refresh answers no one.
            Step::Refresh(miss) => {
                self.splice_alias(&alias, origin, q.edns, q.udp_limit(), out, stats);
                Step::Refresh(miss)
            }
            Step::Resolve(mut miss) => {
                miss.alias = Some(Box::new(alias));
                Step::Resolve(miss)
            }
        }
    }

    /// Writes the stale answer a miss carries for its client, chain first
    /// for a local alias's target. False if it carries none.
    pub(super) fn stale_for_client(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) -> bool {
        let (Some(q), Some(s)) = (miss.query(), &miss.stale) else { return false };
        self.answer_stale(&miss.origin, &q, s, (&miss.snapshot, miss.name_key(), miss.groups), out, stats);
        self.spliced(miss, out, stats);
        true
    }

    /// Puts a local alias's chain before the answer just written for its
    /// outside target, if `miss` is one.
    pub(super) fn spliced(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) {
        if let (Some(alias), Some(q)) = (&miss.alias, miss.query()) {
            self.splice_alias(alias, &miss.origin, q.edns, q.udp_limit(), out, stats);
        }
    }

    /// [`splice`], then for safe search the count and log entry the
    /// safe host's half did not make, as the client's own question.
    fn splice_alias(
        &self,
        alias: &Alias,
        origin: &Origin,
        edns: Option<wire::Edns>,
        limit: usize,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) {
        splice(alias, edns, origin.transport, limit, out, stats);
        if alias.safe_search {
            self.safe_search_done(alias, origin, out, stats);
        }
    }

    /// Counts and logs a safe search answer as the client's question.
    #[cold]
    #[inline(never)]
    fn safe_search_done(&self, alias: &Alias, origin: &Origin, out: &[u8], stats: &Counters) {
        Counters::bump(&stats.safe_search);
        let (qname, qtype) = alias.question();
        let a = Answered { qname, qtype, outcome: Outcome::SafeSearch, upstream: None, list: None };
        self.done(&Origin { safe_search: false, ..*origin }, a, out, stats);
    }

    /// Turns `origin`'s client away (outside `allow_client`, over its rate),
    /// or `None` to go on. `by_name`: a forwarder named its address, so a
    /// loopback one is not the forwarder's own exempt query.
    #[inline(always)]
    fn admit(
        &self,
        snap: &Snapshot,
        msg: &[u8],
        origin: &Origin,
        by_name: bool,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Option<Step> {
        if (!by_name || snap.config.allow_client_given) && !snap.config.allow_client.allows(origin.client) {
            Counters::bump(&stats.denied);
            return Some(self.turn_away(snap.config.deny_action, msg, origin, out, stats));
        }
        if let Some(limit) = &snap.ratelimit
            && !limit.allow(origin.client, by_name)
        {
            Counters::bump(&stats.ratelimited);
            return Some(self.turn_away(snap.config.ratelimit_action, msg, origin, out, stats));
        }
        None
    }

    /// Answers from the cache.
    #[inline]
    /// `paused`: the list that would have blocked the name, were blocking
    /// not paused (logged with it); one function for both, so the answer is
    /// written from one place and stays inlined.
    fn cached(
        &self,
        hit: &cache::Hit,
        q: &Query,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
        paused: Option<Option<Arc<str>>>,
    ) -> Step {
        Counters::bump(&stats.cached);
        hit.write_answer(q, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Cached);
        if let Some(list) = paused {
            (a.outcome, a.list) = (Outcome::Paused, list);
        }
        self.done(origin, a, out, stats)
    }

    /// Answers a client we will not serve (outside `allow_client`, over its
    /// rate): nothing, or a header-only REFUSED, an answer no larger than the
    /// question, so there is nothing to amplify. Responses and runts get nothing.
    fn turn_away(&self, action: DenyAction, msg: &[u8], origin: &Origin, out: &mut Vec<u8>, stats: &Counters) -> Step {
        if action == DenyAction::Drop || msg.len() < HEADER_LEN || header::flags(msg) & flags::QR != 0 {
            return Step::Drop;
        }
        wire::build::header_only(out, msg, rcode::REFUSED);
        self.done(origin, Answered::unparsed(), out, stats)
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

    /// Resolves a miss upstream (or joins an identical one in flight) and
    /// writes the answer into `out`. True when there is one to send: always
    /// (SERVFAIL when nothing usable came back in time) but for a refresh,
    /// and for a client that got its stale answer through `early`.
    pub async fn resolve(&self, miss: Miss, out: &mut Vec<u8>, stats: &Counters, early: Early<'_>) -> bool {
        match self.begin(miss, out, stats) {
            Begin::Lead(led) => self.resolve_led(led, None, out, stats, early).await,
            Begin::Wait(miss, rx) => {
                self.wait(miss, rx, out, stats).await;
                true
            }
            Begin::Answered => true,
            Begin::Dropped => false,
        }
    }

    /// Finishes a miss this thread leads through the async upstream path;
    /// `truncated` is a server whose UDP reply had TC set (see [`Group::resolve_from`]).
    /// A client with an expired answer to fall back on gets it through
    /// `early` at its `stale_client_timeout` while the upstream is still
    /// being asked; the refresh then goes on without it.
    pub async fn resolve_led(
        &self,
        mut led: Led,
        truncated: Option<usize>,
        out: &mut Vec<u8>,
        stats: &Counters,
        early: Early<'_>,
    ) -> bool {
        let stale_at = led.stale_deadline();
        let mut answered_early = false;
        let Led { miss, failover, forward, .. } = &mut led;
        let reply = match miss.query() {
            Some(q) => {
                let snap = &miss.snapshot;
                let upstream = snap.group(*forward).resolve_from(&q, snap.timeout, failover, truncated);
                let mut upstream = std::pin::pin!(upstream);
                let first = match stale_at {
                    Some(at) => {
                        let reply = async { Some(upstream.as_mut().await) };
                        match smol::future::FutureExt::or(reply, async {
                            smol::Timer::at(at).await;
                            None
                        })
                        .await
                        {
                            Some(reply) => Some(reply),
                            None => {
                                let mut stale = Vec::new();
                                if self.stale_for_client(miss, &mut stale, stats) {
                                    early(stale).await;
                                    answered_early = true;
                                }
                                None
                            }
                        }
                    }
                    None => None,
                };
                match first {
                    Some(reply) => reply,
                    None => upstream.await,
                }
            }
            None => None,
        };
        led.miss.quiet |= answered_early;
        self.finish(led, reply, out, stats)
    }

    /// Waits for the miss someone else leads, then answers from its outcome.
    pub async fn wait(&self, miss: Miss, rx: Receiver<Resolution>, out: &mut Vec<u8>, stats: &Counters) {
        let resolution = rx.recv().await.ok().flatten();
        match miss.query() {
            Some(q) => self.answer(&miss, &q, resolution, out, stats),
            None => self.unparsable(&miss, out, stats),
        }
        self.spliced(&miss, out, stats);
    }

    /// The first step of a miss: lead it, join the one in flight for the same
    /// key, or (too many in flight) answer SERVFAIL into `out` at once.
    pub fn begin(&self, miss: Miss, out: &mut Vec<u8>, stats: &Counters) -> Begin {
        let Some(q) = miss.query() else {
            self.unparsable(&miss, out, stats);
            return Begin::Answered;
        };
        let snap = &miss.snapshot;
        match self.inflight.join(&miss.key, snap.config.forward_max) {
            Join::Lead(lead) => {
                Counters::bump(&stats.forwarded);
                let forward = snap.forward_for(miss.name_key());
                let group = snap.group(forward);
                let query = upstream::build_query(&q, 0);
                Begin::Lead(Led { failover: group.failover(), forward, query, lead, miss })
            }
            Join::Wait(rx) if !miss.quiet && miss.stale.is_none() => {
                Counters::bump(&stats.coalesced);
                Begin::Wait(miss, rx)
            }
            // Too many in flight, or a refresh of this name already is: a
            // stale answer now beats waiting on it, and a refresh has nothing to do.
            Join::Wait(_) | Join::Full => {
                if self.refuse_miss(&miss, out, stats) {
                    Begin::Answered
                } else {
                    Begin::Dropped
                }
            }
        }
    }

    /// Ends a miss this thread led with the reply its upstreams gave (`None`:
    /// none usable in time): vets and caches it, hands it to the clients
    /// waiting on the same key and writes the answer into `out`. False when
    /// there is nothing to send: the client already has a stale answer.
    pub fn finish(
        &self,
        mut led: Led,
        reply: Option<(Vec<u8>, SocketAddr)>,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> bool {
        let Some(alias) = led.miss.alias.take() else { return self.finish_led(led, reply, out, stats) };
        let (origin, q) = (led.miss.origin, led.miss.query());
        let (edns, limit) = (q.and_then(|q| q.edns), q.map_or(wire::PLAIN_UDP_SIZE as usize, |q| q.udp_limit()));
        let answered = self.finish_led(led, reply, out, stats);
        if answered {
            self.splice_alias(&alias, &origin, edns, limit, out, stats);
        }
        answered
    }

    fn finish_led(&self, led: Led, reply: Option<(Vec<u8>, SocketAddr)>, out: &mut Vec<u8>, stats: &Counters) -> bool {
        let Led { miss, lead, .. } = led;
        let Some(q) = miss.query() else {
            lead.complete(None);
            if miss.quiet {
                return false;
            }
            self.unparsable(&miss, out, stats);
            return true;
        };
        let snap = &miss.snapshot;
        let resolved = reply.and_then(|(r, upstream)| self.vet_reply(&q, miss.name_key(), snap, &r, upstream, stats));
        if let Some(r) = &resolved {
            let checked = if miss.uniform && r.cnames_pass_all { snap.passed(miss.allowed) } else { UNCHECKED };
            snap.cache.insert(&miss.key, miss.hash, &r.stored, checked);
        }
        lead.complete(resolved.clone());
        if let Some(s) = &miss.stale
            && refresh::failed(resolved.as_ref())
        {
            s.hold_refresh(snap.cache.now().saturating_add(refresh::RETRY_AFTER));
            if !miss.quiet {
                self.answer_stale(&miss.origin, &q, s, (snap, miss.name_key(), miss.groups), out, stats);
                return true;
            }
        }
        if miss.quiet {
            return false;
        }
        self.answer(&miss, &q, resolved, out, stats);
        true
    }

    /// Answers a miss whose message no longer parses. It parsed in `handle`,
    /// so this cannot happen, but the miss path stays total: FORMERR.
    fn unparsable(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) {
        wire::build::rejection(out, miss.msg(), rcode::FORMERR);
        self.done(&miss.origin, Answered::unparsed(), out, stats);
    }

    /// Writes a miss's answer from its outcome (`None`: SERVFAIL) and records it.
    fn answer(&self, miss: &Miss, q: &Query, resolution: Resolution, out: &mut Vec<u8>, stats: &Counters) {
        let origin = &miss.origin;
        let mut a = Answered::of(q, Outcome::Forwarded);
        match resolution {
            Some(r) => {
                let snap = &miss.snapshot;
                let cname = if r.cnames_pass_all {
                    None
                } else {
                    self.cnames(snap, r.stored.bytes(), miss.name_key(), miss.groups).blocked
                };
                a.upstream = Some(r.upstream);
                if let Some(source) = cname {
                    Counters::bump(&stats.cname_blocked);
                    self.count_block(snap, source, miss.groups, stats);
                    snap.policy.write_block_answer_as(snap.policy.mode_for(source, miss.groups), q, out);
                    a.outcome = Outcome::Blocked;
                    a.list = snap.policy.source_arc(source);
                } else {
                    r.stored.write_answer(q, 0, out);
                    if r.blocked_by.is_some() {
                        a.outcome = Outcome::Blocked;
                        a.list = r.blocked_by;
                    } else if let Some(source) = miss.paused {
                        a.outcome = Outcome::Paused;
                        a.list = snap.policy.source_arc(source);
                    }
                }
            }
            None => {
                Counters::bump(&stats.failed);
                wire::build::start(out, q, rcode::SERVFAIL);
                wire::build::finish(out, q.edns, [0, 0, 0], false);
                a.outcome = Outcome::Failed;
            }
        }
        fit(out, q, origin.transport, stats);
        self.done(origin, a, out, stats);
    }

    /// Turns a reply that [`crate::upstream::is_reply_to`] accepted into what
    /// gets cached and answered: TTLs clamped, then CNAME cloaking and
    /// rebinding checks. `asked` is the reversed-label key of `q`'s name
    /// ([`wire::reversed_key`]). `None` if its records cannot be walked.
    pub fn vet_reply(
        &self,
        q: &Query,
        asked: &[u8],
        snap: &Snapshot,
        reply: &[u8],
        upstream: SocketAddr,
        stats: &Counters,
    ) -> Option<Resolved> {
        let stored = Arc::new(Stored::from_response(reply, snap.min_ttl, snap.max_ttl)?);
        let mut r = Resolved { stored, upstream, blocked_by: None, cnames_pass_all: true };
        if snap.config.rebind_protection {
            r = self.inspect_rebind(q, asked, snap, r, stats)?;
        }
        if r.blocked_by.is_none() {
            // Whom its CNAMEs block depends on the client's groups: each
            // client's answer looks at them ([`Engine::answer`]), unless no
            // list blocks any of them.
            r.cnames_pass_all = self.cnames(snap, r.stored.bytes(), asked, 0).pass_all;
        }
        Some(r)
    }

    /// CNAME cloaking: a tracker behind a first-party name that points (by
    /// CNAME) into a blocked domain. The list of the first CNAME target in
    /// answer `msg` that the lists of groups `active` block, unless an allow
    /// entry of theirs covers the name asked for (`asked`, reversed-label);
    /// and whether no group's list blocks any target.
    pub(super) fn cnames(&self, snap: &Snapshot, msg: &[u8], asked: &[u8], active: u64) -> Cnames {
        let mut c = Cnames { blocked: None, pass_all: true };
        if !snap.config.cname_inspection {
            return c;
        }
        let mut key = [0u8; MAX_NAME_LEN];
        let [_, an, _, _] = header::counts(msg);
        let Some(mut pos) = wire::skip_name(msg, wire::HEADER_LEN).map(|p| p + 4) else { return c };
        for _ in 0..an {
            let Some(rr) = wire::read_rr(msg, pos) else { break };
            if rr.rtype == wire::rtype::CNAME
                && let Some(n) = wire::name_key_at(msg, rr.rdata_pos, &mut key)
            {
                let t = snap.policy.check(&key[..n], active);
                c.pass_all &= t.uniform;
                if let (None, Verdict::Blocked { source }) = (c.blocked, t.verdict) {
                    c.blocked = Some(source);
                }
            }
            pos = rr.end;
        }
        if c.blocked.is_some() && snap.policy.is_allowed(asked, active) {
            c.blocked = None;
        }
        c
    }

    /// DNS rebinding: a public name whose answer holds a private, loopback or
    /// link-local address lets a web page reach into the LAN. Such an answer
    /// becomes the block answer (as dnsmasq's `rebind-protection` does),
    /// unless the name is exempt (see [`Snapshot::rebind_exempt`]).
    fn inspect_rebind(
        &self,
        q: &Query,
        asked: &[u8],
        snap: &Snapshot,
        r: Resolved,
        stats: &Counters,
    ) -> Option<Resolved> {
        let msg = r.stored.bytes();
        let [_, an, _, _] = header::counts(msg);
        let mut pos = wire::skip_name(msg, wire::HEADER_LEN)? + 4;
        let mut private = false;
        for _ in 0..an {
            let rr = wire::read_rr(msg, pos)?;
            let rdata = msg.get(rr.rdata_pos..rr.end)?;
            let addr = match rr.rtype {
                wire::rtype::A => <[u8; 4]>::try_from(rdata).ok().map(IpAddr::from),
                wire::rtype::AAAA => <[u8; 16]>::try_from(rdata).ok().map(IpAddr::from),
                // A browser connects to the hints of an HTTPS record as to its addresses.
                wire::rtype::HTTPS | wire::rtype::SVCB => {
                    wire::svcb_hints(rdata, |a| private |= access::rebinds(&snap.rebind_ranges, a));
                    None
                }
                _ => None,
            };
            private |= addr.is_some_and(|a| access::rebinds(&snap.rebind_ranges, a));
            pos = rr.end;
        }
        if !private || snap.rebind_exempt(asked) {
            return Some(r);
        }
        Counters::bump(&stats.rebind_blocked);
        blocked_instead(q, snap, r.upstream, Some(Arc::from(REBIND_LIST)))
    }

    /// Installs the snapshot `next` makes of the current one, if it makes
    /// one; queries already running keep the old one. Writers take turns, so
    /// each builds on the other's work; `next` should only assemble, never
    /// download or build lists.
    pub fn update(&self, next: impl FnOnce(&Arc<Snapshot>) -> Option<Snapshot>) {
        let _turn = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(snapshot) = next(&self.snapshot.load_full()) {
            self.follow_groups(&snapshot);
            self.snapshot.store(Arc::new(snapshot));
        }
    }

    /// [`Engine::update`] for a change of settings only: the lists and the
    /// cache stay (the network's resolvers, the machine's networks).
    pub fn update_config(&self, change: impl FnOnce(&Config) -> Option<Config>) {
        self.update(|old| change(&old.config).map(|cfg| Snapshot::new(Arc::new(cfg), old.policy.clone(), Some(old))));
    }

    /// Carries what is kept per group and client over to `snapshot`'s groups and rules.
    #[inline(never)]
    fn follow_groups(&self, snapshot: &Snapshot) {
        // Group pauses are kept by name; this config may number them anew.
        self.pause.renumber(&snapshot.policy.groups);
        // New client rules match from their first query, not the next look at the files.
        if !self.learned.load().is_for(&snapshot.clients) {
            self.learned.store(Arc::new(learn(snapshot)));
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

    /// Answers SERVFAIL to a miss without resolving it (server overload), or
    /// its stale answer. False when there is nothing to send (a refresh).
    pub fn refuse_miss(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) -> bool {
        if miss.quiet {
            return false;
        }
        if !self.stale_for_client(miss, out, stats) {
            self.refuse_unanswered(miss, out, stats);
            self.spliced(miss, out, stats);
        }
        true
    }

    fn refuse_unanswered(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) {
        match miss.query() {
            Some(q) => self.overloaded(&miss.origin, &q, out, stats),
            None => {
                Counters::bump(&stats.overloaded);
                wire::build::header_only(out, miss.msg(), rcode::SERVFAIL);
                self.done(&miss.origin, Answered::unparsed(), out, stats);
            }
        }
    }

    fn overloaded(&self, origin: &Origin, q: &Query, out: &mut Vec<u8>, stats: &Counters) {
        Counters::bump(&stats.overloaded);
        wire::build::start(out, q, rcode::SERVFAIL);
        wire::build::finish(out, q.edns, [0, 0, 0], false);
        fit(out, q, origin.transport, stats);
        self.done(origin, Answered::of(q, Outcome::Failed), out, stats);
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
}

impl Groups {
    /// The groups whose lists block for it.
    #[inline]
    fn active(&self) -> u64 {
        self.on & !self.paused
    }
}

/// What the CNAMEs of an answer lead to ([`Engine::cnames`]).
pub(super) struct Cnames {
    /// The list that blocks one of them for this client.
    pub(super) blocked: Option<u16>,
    /// No group's list blocks any of them.
    pub(super) pass_all: bool,
}

/// What a cache entry records when the lists did not pass its name for
/// every client: some group's list blocks the name or a CNAME in its answer
/// (or did, but for a pause), so each hit looks at the lists for its own
/// client (no [`Snapshot::passed`] value is ever this).
const UNCHECKED: u64 = u64::MAX;

/// TTL of the RFC 8482 answer to ANY (the RFC suggests a long one; Cloudflare uses 3789).
const ANY_TTL: u32 = 3789;

/// The list name logged for answers blocked by rebind protection.
pub const REBIND_LIST: &str = "rebind-protection";

/// The answer that replaces a blocked upstream answer (CNAME cloaking,
/// rebinding): the block answer, cached as one, logged with `list`.
fn blocked_instead(q: &Query, snap: &Snapshot, upstream: SocketAddr, list: Option<Arc<str>>) -> Option<Resolved> {
    let mut answer = Vec::new();
    snap.policy.write_block_answer(q, &mut answer);
    let stored = Stored::from_response(&answer, snap.min_ttl, snap.max_ttl)?;
    Some(Resolved { stored: Arc::new(stored), upstream, blocked_by: list, cnames_pass_all: true })
}

/// [`Alias::splice`] of the answer in `out`, then the client's UDP size.
fn splice(
    alias: &Alias,
    edns: Option<wire::Edns>,
    transport: Transport,
    limit: usize,
    out: &mut Vec<u8>,
    stats: &Counters,
) {
    let inner = std::mem::take(out);
    alias.splice(&inner, edns, out);
    if transport == Transport::Udp && wire::build::fit_after(out, alias.question_end, edns, limit) {
        Counters::bump(&stats.truncated);
    }
}

fn fit(out: &mut Vec<u8>, q: &Query, transport: Transport, stats: &Counters) {
    if transport == Transport::Udp && wire::build::fit(out, q, q.udp_limit()) {
        Counters::bump(&stats.truncated);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::Config;
    use crate::policy::Policy;
    use crate::wire::rtype;

    fn engine() -> Engine {
        let cfg = Config::parse("test", "config hydradns 'main'\n\tlist upstream '127.0.0.1:9'\n").unwrap();
        let policy = Policy::load(&cfg.lists, cfg.block_mode, cfg.block_ttl);
        Engine::new(Snapshot::new(Arc::new(cfg), Arc::new(policy), None), None)
    }

    /// The reply to `q` with one record of `rtype` and `rdata`, owned by the question's name.
    fn reply(q: &Query, rtype: u16, rdata: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        wire::build::start(&mut out, q, rcode::NOERROR);
        wire::build::record(&mut out, rtype, 300, rdata);
        wire::build::finish(&mut out, None, [1, 0, 0], false);
        out
    }

    /// Whether rebinding protection replaces the answer to `name` carrying
    /// one record of `rtype` with `rdata`.
    fn rebinds(name: &str, rtype: u16, rdata: &[u8]) -> bool {
        let e = engine();
        let snap = e.snapshot.load();
        let m = wire::build::query(1, name, rtype, None).unwrap();
        let q = wire::parse_query(&m).unwrap();
        let mut asked = [0u8; MAX_NAME_LEN];
        let n = wire::reversed_key(q.qname, &mut asked);
        let r = reply(&q, rtype, rdata);
        let v = e.vet_reply(&q, &asked[..n], &snap, &r, "127.0.0.1:53".parse().unwrap(), &Counters::default());
        v.unwrap().blocked_by.is_some_and(|l| &*l == REBIND_LIST)
    }

    /// HTTPS and SVCB records' address hints are where a browser connects:
    /// a private one rebinds as an A or AAAA record does. So do IPv6
    /// addresses that carry a private IPv4 one.
    #[test]
    fn hints_and_embedded_ipv4_are_looked_at() {
        let ip6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert!(rebinds("evil.example", rtype::AAAA, &ip6("64:ff9b::c0a8:101")));
        assert!(rebinds("evil.example", rtype::AAAA, &ip6("2002:c0a8:101::1")));
        assert!(!rebinds("fine.example", rtype::AAAA, &ip6("2001:db8::1")));
        // HTTPS 1 . alpn=h2 ipv4hint=… (RFC 9460 §7.3 wire format).
        let https = |hint4: [u8; 4], hint6: [u8; 16]| {
            let mut r = vec![0, 1, 0, 0, 1, 0, 3, 2, b'h', b'2', 0, 4, 0, 4];
            r.extend_from_slice(&hint4);
            r.extend_from_slice(&[0, 6, 0, 16]);
            r.extend_from_slice(&hint6);
            r
        };
        assert!(rebinds("evil.example", rtype::HTTPS, &https([192, 168, 1, 1], ip6("2001:db8::1"))));
        assert!(rebinds("evil.example", rtype::SVCB, &https([8, 8, 8, 8], ip6("fd00::1"))));
        assert!(!rebinds("fine.example", rtype::HTTPS, &https([8, 8, 8, 8], ip6("2001:db8::1"))));
    }
}
