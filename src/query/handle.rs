//! [`Engine::handle`]: what a worker answers without the network, in
//! order: who may ask, malformed queries, local names, the cache, the
//! lists (block, safe search, pause); anything else becomes a [`Miss`].

use super::exceptions::Excepted;
use super::memo::{Known, RuleMemo};
use super::*;

impl Engine {
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
    pub(super) fn answer_query(
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
        let Scratch { key: key_buf, name: name_key, memo } = scratch;
        // With groups that have upstreams of their own, the client's set is
        // part of the cache key: worked out before the cache is asked.
        let early = if snap.sets.is_empty() { None } else { Some(self.known_early(memo, &snap, origin)) };
        let k = cache::key(&q, early.map_or(sets::MAIN, |(_, known)| known.set), key_buf);
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
        // An exception with an end decides before the cache and the lists.
        let until = self.exceptions.until();
        let excepted = until != 0
            && match self.except(&snap, &q, &key[..q.qname.len()], name_key, origin, until, out, stats) {
                Excepted::No => false,
                Excepted::Allow => true,
                Excepted::Done(step) => return step,
            };
        let hash = snap.cache.hash(key);
        let hit = snap.cache.find(key, hash, origin.received, snap.stale_for);
        // A name these very lists passed for everyone when it was cached needs no lookup.
        if let Some(hit) = hit.as_ref().filter(|h| !h.is_stale()) {
            let checked = hit.checked();
            if checked >> 1 == snap.generation && !excepted {
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
        let groups = match early {
            Some((off, known)) => self.groups_of(known, off),
            None => self.groups_in(memo, &snap, origin),
        };
        // An exception's allow: no group's lists apply (nor to its CNAMEs);
        // its queries still go to the client's upstream set.
        let groups = if excepted { Groups { on: 0, paused: 0, set: groups.set } } else { groups };
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
                let paused = (Outcome::Paused, snap.policy.source_arc(source));
                return self.cached(hit, &q, origin, out, stats, Some(paused));
            }
            if excepted {
                return self.cached(hit, &q, origin, out, stats, Some((Outcome::Cached, self.exception_list())));
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
        miss.excepted = excepted;
        if miss.quiet { Step::Refresh(miss) } else { Step::Resolve(miss) }
    }

    /// What [`Engine::groups_in`] starts from, before the cache, with a
    /// group's own upstreams, and the scheduled groups out of force then:
    /// a cache hit needs only the set. The memo's answer inline (about 25
    /// instructions of a hit), the rest out of line.
    #[inline(always)]
    fn known_early(&self, memo: &mut Option<Box<RuleMemo>>, snap: &Snapshot, origin: &Origin) -> (u64, Known) {
        let off = snap.schedules.off();
        let learned = self.learned_version.load(Relaxed);
        match memo.as_deref().and_then(|m| m.get((origin.client, origin.mac), snap.generation, learned, off)) {
            Some(known) => (off, known),
            None => (off, self.known_late(memo, snap, origin, off, learned)),
        }
    }

    /// [`Engine::known_early`] when the memo does not know the client: the
    /// memo was just asked, so this works the client out and remembers it.
    #[inline(never)]
    fn known_late(
        &self,
        memo: &mut Option<Box<RuleMemo>>,
        snap: &Snapshot,
        origin: &Origin,
        off: u64,
        learned: u64,
    ) -> Known {
        let known = self.client_rule(snap, origin, off);
        if let Some(m) = memo {
            m.remember((origin.client, origin.mac), snap.generation, learned, off, known);
        }
        known
    }

    /// The groups in force for a client `known`, with scheduled groups `off` out of force.
    #[inline(always)]
    fn groups_of(&self, known: Known, off: u64) -> Groups {
        let on = known.member & !off;
        Groups { on, paused: self.pause.paused_groups() & on, set: known.set }
    }

    /// The groups whose lists apply to `origin`'s client now: its groups
    /// (`default` without `config client`) inside their schedules, and
    /// which of those are paused.
    /// With `memo`, a receive thread's, the client's rule comes from there
    /// when it holds it (see [`super::memo`]).
    #[inline(always)]
    pub(super) fn groups_in(&self, memo: &mut Option<Box<RuleMemo>>, snap: &Snapshot, origin: &Origin) -> Groups {
        let off = snap.schedules.off();
        // No `config client` (the default config): everyone in `default`, as before sets.
        if snap.clients.is_empty() {
            let on = DEFAULT & !off;
            let set = if snap.sets.is_empty() { sets::MAIN } else { snap.sets.of(None, on) };
            return Groups { on, paused: self.pause.paused_groups() & on, set };
        }
        let known = match memo {
            Some(m) => {
                let learned = self.learned_version.load(Relaxed);
                m.known((origin.client, origin.mac), snap.generation, learned, off, || {
                    self.client_rule(snap, origin, off)
                })
            }
            None => self.client_rule(snap, origin, off),
        };
        self.groups_of(known, off)
    }

    /// The rule `origin`'s client matches, its groups and its upstream set
    /// with the scheduled groups `off` out of force. Out of line: a query
    /// the memo answers (most) then saves and restores fewer registers.
    #[cold]
    #[inline(never)]
    fn client_rule(&self, snap: &Snapshot, origin: &Origin, off: u64) -> Known {
        let rule = snap.clients.find(origin.client, origin.mac, &self.learned.load());
        let member = snap.clients.groups(rule);
        let set = if snap.sets.is_empty() { sets::MAIN } else { snap.sets.of(rule, member & !off) };
        Known { rule, member, set }
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
    pub(super) fn count_block(&self, snap: &Snapshot, source: u16, active: u64, stats: &Counters) {
        if let Some(g) = snap.policy.group_of(source, active) {
            Counters::bump(&stats.groups.blocked[g]);
        }
    }

    /// Turns `origin`'s client away (outside `allow_client`, over its rate),
    /// or `None` to go on. `by_name`: a forwarder named its address, so a
    /// loopback one is not the forwarder's own exempt query.
    #[inline(always)]
    pub(super) fn admit(
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
    /// `logged`: the outcome and list logged instead of `cached` and none
    /// (`paused` and the list that would have blocked the name, were
    /// blocking not paused; `cached` and the exception that allowed it);
    /// one function for all, so the answer is written from one place and
    /// stays inlined (a second caller of the replay cost a hit 35
    /// instructions: `bench/instructions.py --by-function`).
    pub(super) fn cached(
        &self,
        hit: &cache::Hit,
        q: &Query,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
        logged: Option<(Outcome, Option<Arc<str>>)>,
    ) -> Step {
        Counters::bump(&stats.cached);
        hit.write_answer(q, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Cached);
        a.dnssec = hit.dnssec();
        if let Some(state) = a.dnssec {
            dnssec::count(state, stats);
        }
        if let Some(instead) = logged {
            (a.outcome, a.list) = instead;
        }
        self.done(origin, a, out, stats)
    }

    /// Answers a client we will not serve (outside `allow_client`, over its
    /// rate): nothing, or a header-only REFUSED, an answer no larger than the
    /// question, so there is nothing to amplify. Responses and runts get nothing.
    pub(super) fn turn_away(
        &self,
        action: DenyAction,
        msg: &[u8],
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        if action == DenyAction::Drop || msg.len() < HEADER_LEN || header::flags(msg) & flags::QR != 0 {
            return Step::Drop;
        }
        wire::build::header_only(out, msg, rcode::REFUSED);
        self.done(origin, Answered::unparsed(), out, stats)
    }
}
