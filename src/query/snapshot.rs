//! The [`Snapshot`]: everything a query consults (config, lists, cache,
//! upstream groups, client rules, schedules), built whole on each reload
//! and swapped in while queries in flight finish on the old one.

use super::*;
use crate::config::upstream::Upstream;

/// Source of [`Snapshot::generation`].
pub(super) static GENERATIONS: AtomicU64 = AtomicU64::new(1);

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
    /// The cache's sweep count once this snapshot's sweep was done: what
    /// its misses store under (see [`Cache::forget_sets`]).
    pub cache_sweep: u32,
    /// Default upstreams: the main set.
    pub upstreams: Group,
    /// The groups' own upstreams, and which client uses which.
    pub sets: Sets,
    /// Conditional forwarding: reversed-label domain key → its servers.
    pub forwards: Vec<(Box<[u8]>, Arc<Group>)>,
    /// `plain_domain` keys: while the clock is not known good, names under
    /// them go to `bootstrap` (see `upstream::clock`). Empty without
    /// encrypted upstreams.
    pub(super) plain_until_synced: Vec<Box<[u8]>>,
    /// The bootstrap resolvers, as the group those names use.
    pub(super) bootstrap: Group,
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
    pub(super) rebind_allow: Vec<Box<[u8]>>,
    /// Addresses an upstream answer may not put under a public name.
    pub(super) rebind_ranges: AccessList,
    /// The per-client rate limit, when one is set (kept across reloads that leave it alone).
    pub(super) ratelimit: Option<Arc<RateLimiter>>,
    /// DNSSEC trust anchors, when some upstream set validates.
    pub(super) anchors: Option<Arc<TrustAnchors>>,
    /// Each set's validated zone keys, by set number (the main set first);
    /// empty when no set validates. Kept across reloads that keep the set
    /// and the anchors.
    pub(super) zone_keys: Vec<Arc<KeyCache>>,
    /// Each `forwards` entry's validated zone keys (fetched from its own
    /// servers); empty when no set validates. Kept across reloads that keep
    /// the rules and the anchors.
    pub(super) forward_keys: Vec<Arc<KeyCache>>,
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
        let forwards: Vec<(Box<[u8]>, Arc<Group>)> = config
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
        let main_fallbacks: Vec<Upstream> = config.fallbacks.iter().map(|a| Upstream::Plain(*a)).collect();
        let sets = Sets::new(&config, &policy.groups, &known, previous.map(|p| &p.sets));
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
        let (anchors, zone_keys) = dnssec_state(&config, &sets, previous, &clock);
        let forward_keys = match previous {
            _ if anchors.is_none() => Vec::new(),
            Some(p) if p.config.forwards == config.forwards && opt_ptr_eq(&p.anchors, &anchors) => {
                p.forward_keys.clone()
            }
            _ => forwards.iter().map(|_| Arc::default()).collect(),
        };
        let cache_sweep = match previous {
            Some(p) if Arc::ptr_eq(&p.cache, &cache) => {
                let changed = changed_sets(p, &config, &sets, anchors.as_deref());
                if changed == 0 { cache.sweeps() } else { cache.forget_sets(changed) }
            }
            _ => cache.sweeps(),
        };
        let encrypted = config.has_encrypted();
        let plain_until_synced = match encrypted {
            true => config.plain_domains.iter().filter_map(|d| Some(name_key(d)?.into_boxed_slice())).collect(),
            false => Vec::new(),
        };
        // The bootstrap servers keep their counters and sockets across
        // reloads, whether or not they answered clients (and were in `known`).
        let bootstrap = match (encrypted, previous) {
            (true, Some(p)) => {
                Group::new(&config.bootstrap, &p.bootstrap.servers, crate::config::upstream::Strategy::Failover)
            }
            (true, None) => Group::new(&config.bootstrap, &[], crate::config::upstream::Strategy::Failover),
            (false, _) => Group::new(&[], &[], crate::config::upstream::Strategy::Failover),
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
            anchors,
            zone_keys,
            forward_keys,
            rebind_ranges: access::rebind_ranges(),
            policy,
            rebind_allow,
            cache,
            cache_sweep,
            upstreams: Group::with_fallbacks(&config.upstreams, &main_fallbacks, &known, config.upstream_strategy)
                .trusting_plain_ad(config.trust_upstream_ad),
            sets,
            forwards,
            timeout: config.upstream_timeout,
            stale_for: if config.serve_stale { config.stale_max_age } else { 0 },
            prefetch: config.prefetch,
            min_ttl: config.min_ttl,
            max_ttl: config.max_ttl,
            config,
        }
    }

    /// Whether a miss for `qname` (wire form) of upstream set `set` is
    /// validated, and with what. One that `config forward` rule `forward`
    /// sends to its own servers is validated only below a trust anchor at
    /// or under the rule's domain, the chain fetched from those servers: a
    /// private zone has no chain from the root. The bootstrap's never is.
    pub(super) fn validator(
        &self,
        forward: Option<usize>,
        set: u8,
        qname: &[u8],
    ) -> Option<(&TrustAnchors, &KeyCache)> {
        if !self.sets.validates(set) {
            return None;
        }
        let anchors = self.anchors.as_deref()?;
        let Some(rule) = forward else { return Some((anchors, self.zone_keys.get(usize::from(set))?)) };
        let (domain, _) = self.forwards.get(rule)?;
        let mut apex = [0u8; wire::MAX_NAME_LEN];
        let n = wire::reversed_key(anchors.closest(qname)?, &mut apex);
        let apex = &apex[..n];
        let own = apex.starts_with(domain) && (apex.len() == domain.len() || apex[domain.len()] == SEP);
        own.then(|| Some((anchors, self.forward_keys.get(rule)?.as_ref())))?
    }

    /// Every upstream server, defaults first, without duplicates (the
    /// bootstrap resolvers included, when they answer clients).
    pub fn servers(&self) -> Vec<Arc<Server>> {
        let mut all: Vec<Arc<Server>> = self.upstreams.servers.clone();
        let bootstrap = (!self.plain_until_synced.is_empty()).then_some(&self.bootstrap);
        let sets = self.sets.own().iter().map(|s| &s.group);
        for g in sets.chain(self.forwards.iter().map(|(_, g)| &**g)).chain(bootstrap) {
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
    pub(super) fn rebind_exempt(&self, key: &[u8]) -> bool {
        let covers = |d: &[u8]| key.starts_with(d) && (key.len() == d.len() || key[d.len()] == SEP);
        self.forwards.iter().any(|(d, _)| covers(d)) || self.rebind_allow.iter().any(|d| covers(d))
    }

    /// The most specific forward rule covering a name, by index; one past
    /// the rules: the bootstrap resolvers (a `plain_domain` name while the
    /// clock is not known good).
    pub(super) fn forward_for(&self, key: &[u8]) -> Option<usize> {
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
    /// past the rules, or upstream set `set`'s.
    pub(super) fn group(&self, forward: Option<usize>, set: u8) -> &Group {
        match forward {
            Some(i) if i == self.forwards.len() => &self.bootstrap,
            Some(i) => self.forwards.get(i).map_or(&self.upstreams, |(_, g)| g),
            None => self.sets.group(set).unwrap_or(&self.upstreams),
        }
    }
}

/// Both `None`, or the same anchors.
fn opt_ptr_eq(a: &Option<Arc<TrustAnchors>>, b: &Option<Arc<TrustAnchors>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// The upstream sets (bit N: set N) whose cached answers `config` must
/// not inherit from `previous`: those whose servers or validation changed,
/// every one if `trust_upstream_ad` or a `config forward` rule did (the
/// AD bits they hold; forwarded answers are cached under each set's
/// number), every validating one if the trust anchors did.
fn changed_sets(previous: &Snapshot, config: &Config, sets: &Sets, anchors: Option<&TrustAnchors>) -> u64 {
    let (was, now) = (&previous.config, config);
    if was.trust_upstream_ad != now.trust_upstream_ad {
        return u64::MAX;
    }
    // A forward rule's answers are cached under every set's number.
    if was.forwards != now.forwards {
        return u64::MAX;
    }
    let main_servers = was.upstreams != now.upstreams || was.fallbacks != now.fallbacks;
    let mut changed = sets.changed_since(&previous.sets, main_servers);
    if previous.anchors.as_deref() != anchors {
        changed |= sets.validating() | previous.sets.validating();
    }
    changed
}

/// The trust anchors and each set's key cache under `config`, reusing
/// `previous`'s where the anchors and the set's upstreams are the same.
/// Says in the log when validation starts (at start or by a reload) or
/// its anchors change, and, then, that signature dates wait for the clock.
fn dnssec_state(
    config: &Config,
    sets: &Sets,
    previous: Option<&Snapshot>,
    clock: &ClockGate,
) -> (Option<Arc<TrustAnchors>>, Vec<Arc<KeyCache>>) {
    let validating = config.dnssec || sets.own().iter().any(|s| s.dnssec);
    if !validating {
        return (None, Vec::new());
    }
    let before = previous.and_then(|p| p.anchors.clone());
    // The file is read again on every reload, not only when its path
    // changed: the owner edits it in place for the root's key change (or to
    // drop a key), and a reload must put what it now says in force.
    let loaded = match &config.trust_anchor_file {
        None => TrustAnchors::root(),
        Some(path) => match TrustAnchors::load(path) {
            Ok(a) => a,
            Err(e) => {
                // The start refuses such a file (server::run); a reload
                // keeps validating with the anchors it had, or fails closed.
                log::error!("DNSSEC trust anchors: {e}; the previous anchors stay in force");
                match &before {
                    Some(a) => TrustAnchors::clone(a),
                    None => TrustAnchors::root(),
                }
            }
        },
    };
    let same_anchors = previous.filter(|p| p.anchors.as_deref() == Some(&loaded));
    if same_anchors.is_none() {
        let from = config.trust_anchor_file.as_ref().map_or("built in".into(), |p| format!("from {}", p.display()));
        log::info!("DNSSEC: validating, {} trust anchors {from}", loaded.len());
    }
    if before.is_none() && !clock.synced() {
        log::warn!(
            "DNSSEC: signature dates are not checked until the clock is known good ({} missing)",
            config.clock_marker().display()
        );
    }
    let anchors = match same_anchors {
        Some(p) => p.anchors.clone(),
        None => Some(Arc::new(loaded)),
    };
    let reuse = |i: Option<usize>| -> Arc<KeyCache> {
        same_anchors.and_then(|p| i.and_then(|i| p.zone_keys.get(i).cloned())).unwrap_or_default()
    };
    let main_same = same_anchors
        .filter(|p| p.config.upstreams == config.upstreams && p.config.fallbacks == config.fallbacks)
        .map(|_| 0);
    let mut caches = vec![reuse(main_same)];
    for s in sets.own() {
        let before = same_anchors.and_then(|p| p.sets.own().iter().position(|o| o.same_as(s)).map(|i| i + 1));
        caches.push(reuse(before));
    }
    (anchors, caches)
}
