//! Finding an encrypted upstream's addresses: A and AAAA queries in plain
//! to the `bootstrap` resolvers, never used for clients' queries. The
//! answer is kept for its TTL (within [`MIN_KEEP`]..[`MAX_KEEP`]); when a
//! lookup fails the last good addresses stay in use.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use super::runtime::Context;
use crate::config::upstream::Endpoint;
use crate::wire::{self, HEADER_LEN, flags, header, rcode, rtype};

/// Addresses are looked up again after at least this long…
const MIN_KEEP: Duration = Duration::from_secs(60);
/// …and at most this long.
const MAX_KEEP: Duration = Duration::from_secs(3600);
/// After a failed lookup, when the next may go.
const RETRY: Duration = Duration::from_secs(10);
/// Addresses kept per name.
const MAX_ADDRS: usize = 8;

/// One endpoint's addresses and how long they hold.
#[derive(Debug)]
pub struct Addresses {
    /// Known addresses (pinned, or the last good lookup).
    pub ips: Vec<IpAddr>,
    /// Which of them connected last: tried first.
    pub preferred: usize,
    /// When to look them up again (`None`: pinned, never).
    renew: Option<Instant>,
}

impl Addresses {
    /// The pinned addresses, or none yet.
    pub fn new(endpoint: &Endpoint) -> Addresses {
        let renew = endpoint.needs_bootstrap().then(Instant::now);
        Addresses { ips: endpoint.pins.clone(), preferred: 0, renew }
    }

    /// Looks the name up if its addresses are due; keeps the old ones on
    /// failure. Returns why the lookup failed, when it did.
    pub fn refresh(&mut self, endpoint: &Endpoint, ctx: &Context) -> Result<(), String> {
        let Some(renew) = self.renew else { return Ok(()) };
        if Instant::now() < renew && !self.ips.is_empty() {
            return Ok(());
        }
        match lookup(&endpoint.name, ctx) {
            Ok((ips, ttl)) => {
                if ips != self.ips {
                    self.preferred = 0;
                }
                self.ips = ips;
                self.renew = Some(Instant::now() + Duration::from_secs(ttl.into()).clamp(MIN_KEEP, MAX_KEEP));
                Ok(())
            }
            Err(e) => {
                self.renew = Some(Instant::now() + RETRY);
                Err(e)
            }
        }
    }

    /// None of the addresses connected: look the name up again next time.
    pub fn failed(&mut self) {
        if let Some(r) = &mut self.renew {
            *r = Instant::now();
        }
    }
}

/// A and AAAA for `name` from the bootstrap resolvers, with the lowest TTL.
fn lookup(name: &str, ctx: &Context) -> Result<(Vec<IpAddr>, u32), String> {
    let mut ips = Vec::new();
    let mut ttl = u32::MAX;
    let mut why = String::new();
    for qtype in [rtype::A, rtype::AAAA] {
        let msg = question(name, qtype).ok_or("not a name")?;
        let q = wire::parse_query(&msg).map_err(|_| "not a name")?;
        match ask(&q, ctx) {
            Some(reply) => addresses(&reply, &mut ips, &mut ttl),
            None => why = format!("no answer from the bootstrap resolvers for {name}"),
        }
    }
    ips.truncate(MAX_ADDRS);
    if ips.is_empty() {
        return Err(if why.is_empty() { format!("the bootstrap resolvers know no address for {name}") } else { why });
    }
    Ok((ips, ttl))
}

/// Asks the bootstrap resolvers in order, over UDP (TCP when truncated),
/// until one answers: the async path's own tries, blocked on here (this
/// runs on the thread that connects). Plain only, by construction: the
/// bootstrap never waits on an encrypted connection.
fn ask(q: &wire::Query<'_>, ctx: &Context) -> Option<Vec<u8>> {
    for server in &ctx.bootstrap {
        let query = super::build_query(q, super::random_id());
        let reply = smol::block_on(async {
            match super::try_udp(server, &query, q, ctx.timeout).await {
                Ok(r) if header::flags(&r) & flags::TC != 0 => super::try_tcp(server, &query, q, ctx.timeout).await,
                other => other,
            }
        });
        if let Ok(r) = reply
            && header::rcode(&r) != rcode::SERVFAIL
            && header::rcode(&r) != rcode::REFUSED
        {
            return Some(r);
        }
    }
    None
}

/// A recursive query for `name` and `qtype`.
fn question(name: &str, qtype: u16) -> Option<Vec<u8>> {
    let mut m = vec![0, 0];
    m.extend_from_slice(&flags::RD.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        m.push(u8::try_from(label.len()).ok().filter(|&l| (1..64).contains(&l))?);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&wire::CLASS_IN.to_be_bytes());
    Some(m)
}

/// Every A and AAAA in `reply`'s answer section (a CNAME chain's end
/// included), and the lowest TTL among them.
fn addresses(reply: &[u8], ips: &mut Vec<IpAddr>, ttl: &mut u32) {
    if header::rcode(reply) != 0 {
        return;
    }
    let Some(mut pos) = wire::skip_name(reply, HEADER_LEN).map(|p| p + 4) else { return };
    for _ in 0..header::counts(reply)[1] {
        let Some(rr) = wire::read_rr(reply, pos) else { return };
        let rdata = &reply[rr.rdata_pos..rr.end];
        let ip = match (rr.rtype, rdata.len()) {
            (rtype::A, 4) => Some(IpAddr::V4(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]))),
            (rtype::AAAA, 16) => <[u8; 16]>::try_from(rdata).ok().map(|b| IpAddr::V6(Ipv6Addr::from(b))),
            _ => None,
        };
        if let Some(ip) = ip
            && !ips.contains(&ip)
        {
            ips.push(ip);
            let t = &reply[rr.ttl_pos..rr.ttl_pos + 4];
            *ttl = (*ttl).min(u32::from_be_bytes([t[0], t[1], t[2], t[3]]));
        }
        pos = rr.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::tests::upstream_answer;

    #[test]
    fn reads_addresses_from_an_answer() {
        let q = question("dns.example", rtype::A).unwrap();
        assert!(wire::parse_query(&q).is_ok());
        let reply = upstream_answer(&q, &[300, 120], false);
        let (mut ips, mut ttl) = (Vec::new(), u32::MAX);
        addresses(&reply, &mut ips, &mut ttl);
        assert!(!ips.is_empty());
        assert_eq!(ttl, 120);
        assert!(question("a..b", rtype::A).is_none());
        assert!(question(&"x".repeat(64), rtype::A).is_none());
    }
}
