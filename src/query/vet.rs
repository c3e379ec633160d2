//! What an upstream reply passes before it is cached and answered: TTLs
//! clamped, CNAME cloaking (a first-party name pointing into a blocked
//! domain) and DNS rebinding (a public name answered with a LAN address).

use super::*;

/// What the CNAMEs of an answer lead to ([`Engine::cnames`]).
pub(super) struct Cnames {
    /// The list that blocks one of them for this client.
    pub(super) blocked: Option<u16>,
    /// No group's list blocks any of them.
    pub(super) pass_all: bool,
}

/// The list name logged for answers blocked by rebind protection.
pub const REBIND_LIST: &str = "rebind-protection";

/// The answer that replaces a blocked upstream answer (CNAME cloaking,
/// rebinding): the block answer, cached as one, logged with `list`.
pub(super) fn blocked_instead(
    q: &Query,
    snap: &Snapshot,
    upstream: SocketAddr,
    list: Option<Arc<str>>,
) -> Option<Resolved> {
    let mut answer = Vec::new();
    snap.policy.write_block_answer(q, &mut answer);
    let stored = Stored::from_response(&answer, snap.min_ttl, snap.max_ttl)?;
    Some(Resolved { stored: Arc::new(stored), upstream, blocked_by: list, cnames_pass_all: true, dnssec: None })
}

impl Engine {
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
        let mut r = Resolved { stored, upstream, blocked_by: None, cnames_pass_all: true, dnssec: None };
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
    pub(super) fn inspect_rebind(
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
