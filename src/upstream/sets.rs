//! Upstream sets: which resolvers a client's queries go to. The main
//! upstreams (`config hydradns 'main'`) are set 0; each distinct `list
//! upstream` of a `config group` (with its `fallback_main`) is one more,
//! shared by every group that names the same list.
//!
//! A client's set is that of the first group in its `config client`'s
//! `list group` order that has one and is in force now (inside its
//! schedule); a client in no such group uses the main set. The set is part
//! of the cache key ([`crate::cache::key`]), so an answer one set gave is
//! never another's: a family resolver's block page or YouTube's restricted
//! answers stay with the group that asked for them (AdGuard Home #1301,
//! #1290, Blocky #732 served them to everyone), and groups with the same
//! list share their entries.
//!
//! A group's set has no fallback to the main one unless it says
//! `fallback_main '1'`: a kids' family resolver that is down must not
//! quietly become the unfiltered one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::{Group, Server};
use crate::config::Config;
use crate::config::groups::{GroupTable, MAX_GROUPS};
use crate::config::upstream::Upstream;

/// The main upstreams' set.
pub const MAIN: u8 = 0;

/// Most sets of the groups' own (the config refuses more).
pub use crate::config::groups::MAX_SETS;

/// What a set did: misses it resolved, those it could not, and their time.
#[derive(Debug, Default)]
pub struct SetCounters {
    /// Misses sent to this set.
    pub queries: AtomicU64,
    /// Misses that got no usable answer from it (SERVFAIL, unless stale).
    pub failed: AtomicU64,
    /// Sum of their times from arrival to the set's answer, µs.
    pub latency_us: AtomicU64,
}

impl SetCounters {
    /// Counts one miss that took `latency_us`; `ok`: it got an answer.
    pub fn record(&self, ok: bool, latency_us: u64) {
        self.queries.fetch_add(1, Relaxed);
        if !ok {
            self.failed.fetch_add(1, Relaxed);
        }
        self.latency_us.fetch_add(latency_us, Relaxed);
    }
}

/// One group's own upstreams.
#[derive(Debug)]
pub struct Set {
    /// The groups that use it, comma-separated: how `check`, `stats` and
    /// the log name it.
    pub name: Arc<str>,
    /// As configured: what makes two groups' sets one.
    pub upstreams: Vec<Upstream>,
    /// `fallback_main`: the main upstreams follow its own as fallbacks.
    pub fallback_main: bool,
    /// `option dnssec`: its answers are validated. Part of what makes two
    /// groups' sets one, so the cache key's set tells validated entries
    /// from unvalidated ones.
    pub dnssec: bool,
    /// Its servers (the main ones after its own with `fallback_main`).
    pub group: Group,
    /// Kept across reloads that keep the set.
    pub counters: Arc<SetCounters>,
}

impl Set {
    /// The same servers, fallback and validation: what makes two sets one.
    #[inline]
    pub fn same_as(&self, other: &Set) -> bool {
        self.upstreams == other.upstreams && self.fallback_main == other.fallback_main && self.dnssec == other.dnssec
    }
}

/// Every set of one config, and who uses which.
#[derive(Debug)]
pub struct Sets {
    /// Sets 1…, by number minus one.
    own: Vec<Set>,
    /// The main set's counters.
    main: Arc<SetCounters>,
    /// The main set validates (`option dnssec` in `config hydradns 'main'`).
    main_dnssec: bool,
    /// Each group's set, by its bit; [`MAIN`] for a group without upstreams.
    by_group: [u8; MAX_GROUPS],
    /// Per `config client`, in its `list group` order: (group bit, set) of
    /// its groups that have a set of their own.
    by_rule: Vec<Box<[(u8, u8)]>>,
}

impl Default for Sets {
    fn default() -> Sets {
        Sets {
            own: Vec::new(),
            main: Arc::default(),
            main_dnssec: false,
            by_group: [MAIN; MAX_GROUPS],
            by_rule: Vec::new(),
        }
    }
}

impl Sets {
    /// The sets of `cfg`, whose groups `groups` numbers. Servers in `known`
    /// (the previous snapshot's) are reused, with their connections and
    /// health; so are `previous`'s counters for a set that stays.
    pub fn new(cfg: &Config, groups: &GroupTable, known: &[Arc<Server>], previous: Option<&Sets>) -> Sets {
        Sets::build(cfg, groups, previous, |upstreams, fallbacks| {
            Group::with_fallbacks(upstreams, fallbacks, known, cfg.upstream_strategy)
                .trusting_plain_ad(cfg.trust_upstream_ad)
        })
    }

    /// Who uses which set under `cfg`, without servers (nothing connects):
    /// for `hydradns check --client`.
    pub fn layout(cfg: &Config, groups: &GroupTable) -> Sets {
        Sets::build(cfg, groups, None, |_, _| Group::new(&[], &[], cfg.upstream_strategy))
    }

    fn build(
        cfg: &Config,
        groups: &GroupTable,
        previous: Option<&Sets>,
        mut make: impl FnMut(&[Upstream], &[Upstream]) -> Group,
    ) -> Sets {
        let mut sets = Sets {
            main: previous.map(|p| p.main.clone()).unwrap_or_default(),
            main_dnssec: cfg.dnssec,
            ..Sets::default()
        };
        let main_fallbacks: Vec<Upstream> =
            cfg.upstreams.iter().cloned().chain(cfg.fallbacks.iter().map(|a| Upstream::Plain(*a))).collect();
        for g in cfg.groups.iter().filter(|g| !g.upstreams.is_empty()) {
            let Some(bit) = groups.bit(&g.name) else { continue };
            let same =
                |s: &Set| s.upstreams == g.upstreams && s.fallback_main == g.fallback_main && s.dnssec == g.dnssec;
            let at = match sets.own.iter().position(same) {
                Some(i) => {
                    let s = &mut sets.own[i];
                    s.name = format!("{},{}", s.name, g.name).into();
                    i
                }
                None => {
                    let fallbacks = if g.fallback_main { &main_fallbacks[..] } else { &[] };
                    let group = make(&g.upstreams, fallbacks);
                    let counters = previous
                        .and_then(|p| p.own.iter().find(|s| same(s)))
                        .map_or_else(Arc::default, |s| s.counters.clone());
                    let name = g.name.as_str().into();
                    sets.own.push(Set {
                        name,
                        upstreams: g.upstreams.clone(),
                        fallback_main: g.fallback_main,
                        dnssec: g.dnssec,
                        group,
                        counters,
                    });
                    sets.own.len() - 1
                }
            };
            // The config refuses more than MAX_SETS; a set past it would
            // share another's cache entries, so its group keeps the main one.
            if at >= MAX_SETS {
                sets.own.pop();
                continue;
            }
            sets.by_group[bit as usize] = (at + 1) as u8;
        }
        sets.by_rule = cfg
            .clients
            .iter()
            .map(|c| {
                let mut order: Vec<(u8, u8)> = Vec::new();
                for bit in c.groups.iter().filter_map(|n| groups.bit(n)) {
                    let set = sets.by_group[bit as usize];
                    if set != MAIN && !order.iter().any(|o| o.0 == bit as u8) {
                        order.push((bit as u8, set));
                    }
                }
                order.into_boxed_slice()
            })
            .collect();
        sets
    }

    /// No group has upstreams of its own: every client uses the main set.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }

    /// The set of a client matched by `config client` `rule` (`None`: no
    /// rule, in `default` alone), whose groups in force are `on`.
    #[inline]
    pub fn of(&self, rule: Option<usize>, on: u64) -> u8 {
        match rule {
            None => {
                let set = self.by_group[0];
                if on & 1 != 0 { set } else { MAIN }
            }
            Some(r) => self
                .by_rule
                .get(r)
                .and_then(|order| order.iter().find(|(bit, _)| on >> bit & 1 != 0))
                .map_or(MAIN, |&(_, set)| set),
        }
    }

    /// Set `set`'s own servers; `None` for the main set.
    #[inline]
    pub fn group(&self, set: u8) -> Option<&Group> {
        self.own.get(usize::from(set).checked_sub(1)?).map(|s| &s.group)
    }

    /// Whether set `set` validates DNSSEC.
    #[inline]
    pub fn validates(&self, set: u8) -> bool {
        match usize::from(set).checked_sub(1) {
            None => self.main_dnssec,
            Some(i) => self.own.get(i).is_some_and(|s| s.dnssec),
        }
    }

    /// The sets that validate (bit N: set N).
    pub fn validating(&self) -> u64 {
        (0..=self.own.len()).filter(|&i| self.validates(i as u8)).fold(0, |m, i| m | 1 << i)
    }

    /// The sets (bit N: set N) that are not what they were in `before`:
    /// another list of servers, `fallback_main` or `dnssec`, or no set at
    /// all on one side (`main_servers`: the main upstreams changed, which
    /// `fallback_main` sets follow too). Their cache entries are another
    /// resolver's, or validated under another setting.
    pub fn changed_since(&self, before: &Sets, main_servers: bool) -> u64 {
        let mut changed = u64::from(main_servers || self.main_dnssec != before.main_dnssec);
        for i in 0..self.own.len().max(before.own.len()) {
            let same = match (self.own.get(i), before.own.get(i)) {
                (Some(a), Some(b)) => a.same_as(b) && !(a.fallback_main && main_servers),
                _ => false,
            };
            if !same {
                changed |= 1 << (i + 1);
            }
        }
        changed
    }

    /// How set `set` is named: `main`, or the groups that use it.
    pub fn name(&self, set: u8) -> &str {
        match usize::from(set).checked_sub(1).and_then(|i| self.own.get(i)) {
            Some(s) => &s.name,
            None => "main",
        }
    }

    /// Set `set`'s name to store with a log row: `None` for the main set.
    pub fn log_name(&self, set: u8) -> Option<Arc<str>> {
        self.own.get(usize::from(set).checked_sub(1)?).map(|s| s.name.clone())
    }

    /// Set `set`'s counters.
    #[inline]
    pub fn counters(&self, set: u8) -> &SetCounters {
        match usize::from(set).checked_sub(1).and_then(|i| self.own.get(i)) {
            Some(s) => &s.counters,
            None => &self.main,
        }
    }

    /// The groups' own sets, in order (set 1 first).
    pub fn own(&self) -> &[Set] {
        &self.own
    }

    /// The main set's counters.
    pub fn main_counters(&self) -> &SetCounters {
        &self.main
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse("test", text).unwrap()
    }

    #[test]
    fn groups_with_the_same_list_share_a_set_and_clients_take_their_first_group_in_force() {
        let cfg = config(
            "config hydradns 'main'\n list upstream '192.0.2.1'\n\
             config group 'kids'\n list upstream '192.0.2.7'\n\
             config group 'teens'\n list upstream '192.0.2.7'\n\
             config group 'guests'\n list upstream '192.0.2.9'\n list upstream '192.0.2.10'\n\
             config group 'plain'\n\
             config client 'tablet'\n list match '192.0.2.100'\n list group 'plain'\n list group 'guests'\n list group 'kids'\n\
             config client 'tv'\n list match '192.0.2.101'\n list group 'plain'\n",
        );
        let table = GroupTable::new(&cfg);
        let sets = Sets::new(&cfg, &table, &[], None);
        assert_eq!(sets.own().len(), 2);
        assert_eq!(sets.name(1), "kids,teens");
        assert_eq!(sets.name(2), "guests");
        assert_eq!(sets.name(MAIN), "main");
        let bit = |n: &str| 1u64 << table.bit(n).unwrap();
        let all = bit("plain") | bit("guests") | bit("kids");
        // The tablet's rule lists guests before kids.
        assert_eq!(sets.of(Some(0), all), 2);
        // Guests outside its schedule: kids'.
        assert_eq!(sets.of(Some(0), all & !bit("guests")), 1);
        assert_eq!(sets.of(Some(0), bit("plain")), MAIN);
        assert_eq!(sets.of(Some(1), bit("plain")), MAIN);
        assert_eq!(sets.of(None, 1), MAIN);
        assert!(sets.group(MAIN).is_none());
        assert_eq!(sets.group(2).unwrap().servers.len(), 2);
    }

    #[test]
    fn a_set_falls_back_to_the_main_upstreams_only_when_its_group_says_so() {
        let cfg = config(
            "config hydradns 'main'\n list upstream '192.0.2.1'\n list fallback '192.0.2.2'\n\
             config group 'kids'\n list upstream '192.0.2.7'\n\
             config group 'guests'\n list upstream '192.0.2.7'\n option fallback_main '1'\n",
        );
        let sets = Sets::new(&cfg, &GroupTable::new(&cfg), &[], None);
        assert_eq!(sets.own().len(), 2, "the same list with and without fallback is two sets");
        let kids = sets.group(1).unwrap();
        assert_eq!(kids.servers.len(), 1);
        let guests = sets.group(2).unwrap();
        assert_eq!(guests.servers.len(), 3);
        assert!(!guests.is_fallback(0) && guests.is_fallback(1) && guests.is_fallback(2));
    }

    #[test]
    fn a_set_has_changed_when_its_number_now_names_other_servers_or_another_validation() {
        let sets = |text: &str| {
            let cfg = config(&format!("config hydradns 'main'\n list upstream '192.0.2.1'\n{text}"));
            Sets::new(&cfg, &GroupTable::new(&cfg), &[], None)
        };
        let kids = "config group 'kids'\n list upstream '192.0.2.7'\n";
        let guests = "config group 'guests'\n list upstream '192.0.2.9'\n";
        let before = sets(&format!("{kids}{guests}"));
        assert_eq!(sets(&format!("{kids}{guests}")).changed_since(&before, false), 0);
        assert_eq!(sets(&format!("{kids}{guests}")).changed_since(&before, true), 1);
        // Swapped: both numbers name other servers.
        assert_eq!(sets(&format!("{guests}{kids}")).changed_since(&before, false), 0b110);
        // One set gone, one more: that number changed.
        assert_eq!(sets(kids).changed_since(&before, false), 0b100);
        assert_eq!(before.changed_since(&sets(kids), false), 0b100);
        let validating = sets(&format!("option dnssec '1'\n{kids}option dnssec '1'\n{guests}"));
        assert_eq!(validating.changed_since(&before, false), 0b011);
        assert_eq!(validating.validating(), 0b011);
        // A set that falls back to the main servers follows their change.
        let falls_back = sets(&format!("{kids} option fallback_main '1'\n{guests}"));
        assert_eq!(sets(&format!("{kids} option fallback_main '1'\n{guests}")).changed_since(&falls_back, true), 0b011);
    }

    #[test]
    fn validating_and_not_validating_the_same_upstreams_are_two_sets() {
        let cfg = config(
            "config hydradns 'main'\n list upstream '192.0.2.1'\n option dnssec '1'\n\
             config group 'kids'\n list upstream '192.0.2.7'\n option dnssec '1'\n\
             config group 'teens'\n list upstream '192.0.2.7'\n\
             config group 'guests'\n list upstream '192.0.2.7'\n option dnssec '1'\n",
        );
        let sets = Sets::new(&cfg, &GroupTable::new(&cfg), &[], None);
        assert_eq!(sets.own().len(), 2);
        assert_eq!(sets.name(1), "kids,guests");
        assert_eq!(sets.name(2), "teens");
        assert!(sets.validates(MAIN) && sets.validates(1) && !sets.validates(2));
        let off = config("config hydradns 'main'\n list upstream '192.0.2.1'\n");
        assert!(!Sets::new(&off, &GroupTable::new(&off), &[], None).validates(MAIN));
    }

    #[test]
    fn a_config_with_more_sets_than_the_key_can_tell_apart_is_refused() {
        let groups = |n: usize| {
            (0..n).map(|i| format!("config group 'g{i}'\n list upstream '192.0.2.{}'\n", i + 1)).collect::<String>()
        };
        let main = "config hydradns 'main'\n list upstream '192.0.2.250'\n";
        let cfg = config(&format!("{main}{}", groups(MAX_SETS)));
        let sets = Sets::new(&cfg, &GroupTable::new(&cfg), &[], None);
        assert_eq!(sets.own().len(), MAX_SETS);
        // The last set's number still fits above the key's two flags.
        assert_eq!((MAX_SETS as u8) << 2 >> 2, MAX_SETS as u8);
        let err = Config::parse("test", &format!("{main}{}", groups(MAX_SETS + 1))).unwrap_err();
        assert!(err.message.contains("more than 63"), "{}", err.message);
    }

    #[test]
    fn the_default_group_may_have_a_set_of_its_own() {
        let cfg = config(
            "config hydradns 'main'\n list upstream '192.0.2.1'\nconfig group 'default'\n list upstream '192.0.2.7'\n",
        );
        let sets = Sets::new(&cfg, &GroupTable::new(&cfg), &[], None);
        assert_eq!(sets.of(None, 1), 1);
        assert_eq!(sets.of(None, 0), MAIN, "outside its schedule");
    }
}
