//! Answers made of a CNAME chain and the target's own answer: local
//! aliases whose target is outside, safe search (the engine's safe host),
//! and the `block_bypass` canaries.

use super::*;

impl Engine {
    /// A search host for a client with safe search: A and AAAA get a CNAME
    /// to the safe host (index `target` in [`crate::policy::safesearch::TARGETS`])
    /// followed by its addresses, asked like any query; HTTPS and SVCB get
    /// NODATA.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn safe_search(
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
    pub(super) fn bypass(
        &self,
        snap: &Snapshot,
        q: &Query,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        Counters::bump(&stats.blocked);
        snap.policy.write_block_answer_as(BlockMode::NxDomain, q, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Blocked);
        a.list = Some(self.bypass.clone());
        self.done(origin, a, out, stats)
    }

    /// A local alias whose chain leaves the local names: the target is asked
    /// like any query (cache, lists, upstream) with the client's ID, flags and
    /// EDNS, and its answer goes after the chain ([`Alias::splice`]): at once
    /// when it needs no network, else when the miss ends ([`Engine::spliced`]).
    /// Logged as the query for the target.
    pub(super) fn alias(
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

    /// Puts a local alias's chain before the answer just written for its
    /// outside target, if `miss` is one.
    pub(super) fn spliced(&self, miss: &Miss, out: &mut Vec<u8>, stats: &Counters) {
        if let (Some(alias), Some(q)) = (&miss.alias, miss.query()) {
            self.splice_alias(alias, &miss.origin, q.edns, q.udp_limit(), out, stats);
        }
    }

    /// [`splice`], then for safe search the count and log entry the
    /// safe host's half did not make, as the client's own question.
    pub(super) fn splice_alias(
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
    pub(super) fn safe_search_done(&self, alias: &Alias, origin: &Origin, out: &[u8], stats: &Counters) {
        Counters::bump(&stats.safe_search);
        let (qname, qtype) = alias.question();
        let a = Answered {
            qname,
            qtype,
            outcome: Outcome::SafeSearch,
            upstream: None,
            list: None,
            set: None,
            dnssec: None,
        };
        self.done(&Origin { safe_search: false, ..*origin }, a, out, stats);
    }
}

/// [`Alias::splice`] of the answer in `out`, then the client's UDP size.
pub(super) fn splice(
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
