//! The miss path: a query that leaves the worker as a [`Miss`], joins an
//! identical one in flight or leads it through the upstream tries, and
//! gets its answer (or SERVFAIL, or the stale answer) written when it ends.

use super::*;

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
    pub(super) origin: Origin,
    /// The client's message, then the reversed-label key of its name
    /// ([`wire::reversed_key`], already made for the policy check and
    /// needed again for forward rules and the reply's checks): one
    /// allocation for both.
    pub(super) bytes: Box<[u8]>,
    /// Where the message ends in `bytes`.
    pub(super) msg_len: usize,
    /// The parsed message, so no step of the miss parses it again.
    pub(super) layout: wire::Layout,
    /// Its cache key, shared with the in-flight table (see [`Inflight::join`]).
    pub(super) key: Arc<[u8]>,
    /// Hash of the key.
    pub(super) hash: u64,
    /// An allowlist passed the name (cached with the answer, see [`Snapshot::generation`]).
    pub(super) allowed: bool,
    /// The lists pass the name for every client ([`crate::policy::Checked::uniform`]): its answer may be marked so.
    pub(super) uniform: bool,
    /// The client's groups whose lists apply, for the CNAMEs in its answer.
    pub(super) groups: u64,
    /// The snapshot the query started on, so a reload mid-flight changes nothing for it.
    pub(super) snapshot: Arc<Snapshot>,
    /// The expired answer to fall back on (serve-stale), if the cache held one.
    pub(super) stale: Option<Stale>,
    /// The client has its answer already (a stale or cached one): resolving
    /// only refreshes the cache.
    pub(super) quiet: bool,
    /// Held while this miss is a prefetch: counts it against the cap.
    pub(super) prefetch_slot: Option<refresh::PrefetchSlot>,
    /// The list that would have blocked it, had blocking not been paused.
    pub(super) paused: Option<u16>,
    /// An exception with an end allowed it (logged with it).
    pub(super) excepted: bool,
    /// The local alias whose outside target this miss resolves.
    pub(super) alias: Option<Box<Alias>>,
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
    pub(super) fn new(
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
            excepted: false,
            alias: None,
        }
    }

    /// The client's message.
    pub(super) fn msg(&self) -> &[u8] {
        self.bytes.get(..self.msg_len).unwrap_or_default()
    }

    /// The client's query, as [`Engine::handle`] parsed it.
    pub(super) fn query(&self) -> Option<Query<'_>> {
        self.layout.over(self.msg())
    }

    /// The reversed-label key of the name asked for.
    pub(super) fn name_key(&self) -> &[u8] {
        self.bytes.get(self.msg_len..).unwrap_or_default()
    }

    /// The upstream set that resolves it: its cache key's, so that what it
    /// brings back is cached where the same set's clients look.
    pub(super) fn set(&self) -> u8 {
        cache::key_set(&self.key)
    }
}

/// What [`Engine::begin`] made of a miss.
pub enum Begin {
    /// This thread resolves it: try upstreams, then [`Engine::finish`].
    Lead(Led),
    /// The same, on a set that validates DNSSEC: only through the async
    /// path ([`Engine::resolve_led`]), which fetches the chain. Told apart
    /// here, so that the UDP path's plain misses take no second look (a
    /// match guard on the 328-byte `Led` cost a copy of it per miss).
    Validate(Led),
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
    pub(super) miss: Miss,
    /// Completes the in-flight entry other askers wait on (on drop: SERVFAIL to them).
    pub(super) lead: Lead,
    /// The `config forward` rule whose servers resolve it, if any.
    pub(super) forward: Option<usize>,
    /// The servers tried so far.
    pub(super) failover: Failover,
    /// Our query, built once; each try writes its own ID into the first two bytes.
    pub(super) query: Vec<u8>,
    /// What DNSSEC validation said of the reply, on a validating set.
    pub(super) validated: Option<dnssec::Outcome>,
}

impl Led {
    /// The servers that resolve this miss.
    pub fn group(&self) -> &Group {
        self.miss.snapshot.group(self.forward, self.miss.set())
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
        self.failover.record(self.miss.snapshot.group(self.forward, self.miss.set()), idx, outcome, started)
    }

    /// The best error reply seen, once every server has been tried.
    pub fn fallback(&mut self) -> Option<(Vec<u8>, SocketAddr)> {
        self.failover.fallback()
    }

    /// Server `idx`'s try lost the race to another's answer (see [`Failover::lost`]).
    pub fn lost(&self, idx: usize, started: Instant) {
        self.failover.lost(self.miss.snapshot.group(self.forward, self.miss.set()), idx, started);
    }

    /// The servers, with the failover state and query to try the next one (borrowed together).
    pub fn next_try(&mut self) -> (&Group, &mut Failover, &mut [u8]) {
        (self.miss.snapshot.group(self.forward, self.miss.set()), &mut self.failover, &mut self.query)
    }
}

impl Engine {
    /// Resolves a miss upstream (or joins an identical one in flight) and
    /// writes the answer into `out`. True when there is one to send: always
    /// (SERVFAIL when nothing usable came back in time) but for a refresh,
    /// and for a client that got its stale answer through `early`.
    pub async fn resolve(&self, miss: Miss, out: &mut Vec<u8>, stats: &Counters, early: Early<'_>) -> bool {
        match self.begin(miss, out, stats) {
            Begin::Lead(led) | Begin::Validate(led) => self.resolve_led(led, None, out, stats, early).await,
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
        let mut validated = None;
        let reply = match miss.query() {
            Some(q) => {
                let snap = &miss.snapshot;
                let group = snap.group(*forward, miss.set());
                let validator = snap.validator(*forward, miss.set(), q.qname);
                let validated = &mut validated;
                let upstream = async move {
                    let Some((anchors, keys)) = validator else {
                        return group.resolve_from(&q, snap.timeout, failover, truncated).await;
                    };
                    let asked = dnssec::ask(&q);
                    let Ok(aq) = wire::parse_query(&asked) else { return None };
                    let (reply, from) = group.resolve_from(&aq, snap.timeout, failover, truncated).await?;
                    let checked =
                        dnssec::check(&q, reply, group, snap.timeout, anchors, keys, snap.clock.synced()).await;
                    *validated = Some(checked.outcome);
                    (!checked.reply.is_empty()).then_some((checked.reply, from))
                };
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
        led.validated = validated;
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
                let group = snap.group(forward, miss.set());
                let query = upstream::build_query(&q, 0);
                let validates = snap.validator(forward, miss.set(), q.qname).is_some();
                let led = Led { failover: group.failover(), forward, query, lead, miss, validated: None };
                if validates { Begin::Validate(led) } else { Begin::Lead(led) }
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

    pub(super) fn finish_led(
        &self,
        led: Led,
        reply: Option<(Vec<u8>, SocketAddr)>,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> bool {
        let Led { miss, lead, forward, validated, .. } = led;
        // Without a group's upstreams the main set's figures are the
        // forwarded and failed counters: no clock read for them.
        if forward.is_none() && !miss.snapshot.sets.is_empty() {
            let took = u64::try_from(miss.origin.received.elapsed().as_micros()).unwrap_or(u64::MAX);
            miss.snapshot.sets.counters(miss.set()).record(reply.is_some(), took);
        }
        let Some(q) = miss.query() else {
            lead.complete(None);
            if miss.quiet {
                return false;
            }
            self.unparsable(&miss, out, stats);
            return true;
        };
        let snap = &miss.snapshot;
        let mut resolved =
            reply.and_then(|(r, upstream)| self.vet_reply(&q, miss.name_key(), snap, &r, upstream, stats));
        if let Some(v) = validated {
            dnssec::settle(&v, resolved.as_mut());
        }
        if let Some(r) = &resolved {
            let checked = if miss.uniform && r.cnames_pass_all { snap.passed(miss.allowed) } else { UNCHECKED };
            snap.cache.insert(&miss.key, miss.hash, &r.stored, checked, snap.cache_sweep);
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
    pub(super) fn unparsable(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) {
        wire::build::rejection(out, miss.msg(), rcode::FORMERR);
        self.done(&miss.origin, Answered::unparsed(), out, stats);
    }

    /// Writes a miss's answer from its outcome (`None`: SERVFAIL) and records it.
    pub(super) fn answer(&self, miss: &Miss, q: &Query, resolution: Resolution, out: &mut Vec<u8>, stats: &Counters) {
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
                a.dnssec = r.dnssec;
                if let Some(state) = r.dnssec {
                    dnssec::count(state, stats);
                }
                if miss.set() != sets::MAIN && snap.forward_for(miss.name_key()).is_none() {
                    a.set = snap.sets.log_name(miss.set());
                }
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
                    } else if miss.excepted {
                        a.list = self.exception_list();
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

    /// Writes the stale answer a miss carries for its client, chain first
    /// for a local alias's target. False if it carries none.
    pub(super) fn stale_for_client(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) -> bool {
        let (Some(q), Some(s)) = (miss.query(), &miss.stale) else { return false };
        self.answer_stale(&miss.origin, &q, s, (&miss.snapshot, miss.name_key(), miss.groups), out, stats);
        self.spliced(miss, out, stats);
        true
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

    pub(super) fn refuse_unanswered(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) {
        match miss.query() {
            Some(q) => self.overloaded(&miss.origin, &q, out, stats),
            None => {
                Counters::bump(&stats.overloaded);
                wire::build::header_only(out, miss.msg(), rcode::SERVFAIL);
                self.done(&miss.origin, Answered::unparsed(), out, stats);
            }
        }
    }

    pub(super) fn overloaded(&self, origin: &Origin, q: &Query, out: &mut Vec<u8>, stats: &Counters) {
        Counters::bump(&stats.overloaded);
        wire::build::start(out, q, rcode::SERVFAIL);
        wire::build::finish(out, q.edns, [0, 0, 0], false);
        fit(out, q, origin.transport, stats);
        self.done(origin, Answered::of(q, Outcome::Failed), out, stats);
    }
}
