//! Upstream settings: how a resolution picks a server
//! (`upstream_strategy`), the `nameserver` lines of a resolv.conf, and what
//! `list upstream` names: a plain resolver (`IP[:PORT]`) or an
//! encrypted one: `tls://NAME[:PORT][#IP[,IP…]]` (DNS over TLS, RFC 7858)
//! or `https://NAME[:PORT][/PATH][#IP[,IP…]]` (DNS over HTTPS, RFC 8484).
//!
//! An encrypted upstream is a name, not an address: the certificate must
//! carry that name, and its addresses come from the `bootstrap` resolvers
//! unless they are pinned after `#`, or the name is itself an IP address.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use super::{Config, DnsmasqMode, MAX_RESOLV_BYTES, is_loop};

/// Port of DNS over TLS (RFC 7858 §3.1).
pub const TLS_PORT: u16 = 853;
/// Port of HTTPS.
pub const HTTPS_PORT: u16 = 443;
/// DoH's path when the URL names none (the one RFC 8484's examples use,
/// and the public resolvers).
const DEFAULT_PATH: &str = "/dns-query";
/// Pinned addresses per upstream: more is a config mistake.
const MAX_PINS: usize = 8;

/// One configured upstream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Upstream {
    /// UDP, and TCP when a reply is truncated.
    Plain(SocketAddr),
    /// DNS over TLS or over HTTPS.
    Encrypted(Arc<Endpoint>),
}

/// How an encrypted upstream carries DNS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// DNS over TLS: length-prefixed messages on the TLS stream.
    Tls,
    /// DNS over HTTPS: HTTP/2 or HTTP/1.1 requests, as the server's ALPN says.
    Https,
}

impl Scheme {
    /// Its URL scheme, also the transport's name in `stats`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Tls => "tls",
            Scheme::Https => "https",
        }
    }
}

/// Where an encrypted upstream is, and what its certificate must say.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub scheme: Scheme,
    /// The name the certificate must carry (or an IP address it must carry).
    pub name: Box<str>,
    /// TCP port.
    pub port: u16,
    /// Addresses used without asking the bootstrap resolvers.
    pub pins: Vec<IpAddr>,
    /// DoH: the path requests go to (empty for DoT).
    pub path: Box<str>,
}

impl Upstream {
    /// Parses `IP[:PORT]` (port 53 by default), `tls://NAME[:PORT][#IP,…]`
    /// or `https://NAME[:PORT][/PATH][#IP,…]`.
    pub fn parse(s: &str) -> Result<Upstream, String> {
        let s = s.trim();
        let endpoint = if let Some(rest) = s.strip_prefix("tls://") {
            Endpoint::parse(rest, Scheme::Tls)
        } else if let Some(rest) = s.strip_prefix("https://") {
            Endpoint::parse(rest, Scheme::Https)
        } else if s.contains("://") {
            return Err("an address, tls://NAME or https://NAME/PATH".into());
        } else {
            return super::parse_socket_addr(s, 53)
                .map(Upstream::Plain)
                .ok_or_else(|| "an address, tls://NAME or https://NAME/PATH".into());
        };
        endpoint.map(|e| Upstream::Encrypted(Arc::new(e)))
    }

    /// The address of a plain upstream.
    pub fn plain(&self) -> Option<SocketAddr> {
        match self {
            Upstream::Plain(a) => Some(*a),
            Upstream::Encrypted(_) => None,
        }
    }

    /// The transport's name, as `stats` shows it.
    pub fn transport(&self) -> &'static str {
        match self {
            Upstream::Plain(_) => "udp",
            Upstream::Encrypted(e) => e.scheme.name(),
        }
    }
}

impl Endpoint {
    /// `NAME[:PORT][#IP,…]` (DoT) or `NAME[:PORT][/PATH][#IP,…]` (DoH);
    /// `NAME` may be an IP address (`[…]` for IPv6).
    fn parse(s: &str, scheme: Scheme) -> Result<Endpoint, String> {
        let (rest, pins) = match s.split_once('#') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        let (host_port, path) = match scheme {
            Scheme::Tls => (rest, String::new()),
            Scheme::Https => match rest.find('/') {
                Some(i) => (&rest[..i], parse_path(&rest[i..])?),
                None => (rest, DEFAULT_PATH.to_string()),
            },
        };
        let (host, port) = split_port(host_port).ok_or("NAME[:PORT] after the scheme")?;
        let port = match port {
            Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or("a port from 1 to 65535")?,
            None if scheme == Scheme::Tls => TLS_PORT,
            None => HTTPS_PORT,
        };
        let ip = host.parse::<IpAddr>().ok();
        if ip.is_none() && !is_hostname(host) {
            return Err(format!("'{host}' is not a host name"));
        }
        let mut pinned = Vec::new();
        for p in pins.into_iter().flat_map(|p| p.split(',')) {
            let p = p.trim();
            let p = p.strip_prefix('[').and_then(|p| p.strip_suffix(']')).unwrap_or(p);
            pinned.push(p.parse::<IpAddr>().map_err(|_| format!("'{p}' after '#' is not an IP address"))?);
        }
        if pins.is_some() && pinned.is_empty() {
            return Err("an IP address after '#'".into());
        }
        if pinned.len() > MAX_PINS {
            return Err(format!("at most {MAX_PINS} addresses after '#'"));
        }
        if let Some(ip) = ip
            && pinned.is_empty()
        {
            pinned.push(ip);
        }
        Ok(Endpoint { scheme, name: host.to_ascii_lowercase().into(), port, pins: pinned, path: path.into() })
    }

    /// Whether the bootstrap resolvers must find its addresses.
    pub fn needs_bootstrap(&self) -> bool {
        self.pins.is_empty()
    }
}

/// A DoH path: printable URL characters only. RFC 8484's URI template
/// suffix (`{?dns}`), as providers publish it, is dropped.
fn parse_path(p: &str) -> Result<String, String> {
    let p = p.strip_suffix("{?dns}").unwrap_or(p);
    if p.len() > 512 || !p.bytes().all(|b| b.is_ascii_graphic() && !b"{}\\\"<>^`|".contains(&b)) {
        return Err(format!("'{p}' is not a URL path"));
    }
    Ok(p.to_string())
}

/// Splits `host[:port]`, `[v6][:port]` or a bare IPv6 address.
fn split_port(s: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    if s.matches(':').count() > 1 {
        return Some((s, None));
    }
    Some(match s.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    })
}

/// Letters, digits, `-` and `_` in labels of 1–63 bytes, 253 in all.
fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

impl std::str::FromStr for Upstream {
    type Err = String;
    fn from_str(s: &str) -> Result<Upstream, String> {
        Upstream::parse(s)
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Upstream::Plain(a) => a.fmt(f),
            Upstream::Encrypted(e) => e.fmt(f),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = self.scheme.name();
        if self.name.contains(':') {
            write!(f, "{scheme}://[{}]:{}{}", self.name, self.port, self.path)
        } else {
            write!(f, "{scheme}://{}:{}{}", self.name, self.port, self.path)
        }
    }
}

/// How a resolution picks the server it tries first (`upstream_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// The last one that answered, then the rest in order.
    #[default]
    Failover,
    /// One at random, then the rest in order: spreads the load.
    Random,
    /// The two with the lowest recent reply time at once; the first good
    /// answer wins (Blocky's `parallel_best`). Then the rest one by one.
    Parallel,
}

impl Strategy {
    /// The config's name for it.
    pub fn from_name(name: &str) -> Option<Strategy> {
        match name {
            "failover" => Some(Strategy::Failover),
            "random" => Some(Strategy::Random),
            "parallel" => Some(Strategy::Parallel),
            _ => None,
        }
    }
}

/// `nameserver` lines of a resolv.conf, port 53.
pub fn servers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver")).then_some(())?;
            // Drop a zone index (fe80::1%eth0): it cannot be parsed into an IpAddr.
            let ip: IpAddr = words.next()?.split('%').next()?.parse().ok()?;
            Some(SocketAddr::new(ip, 53))
        })
        .collect()
}

/// Resolver file read for upstreams when the config names none.
pub(super) const RESOLV_CONF: &str = "/etc/resolv.conf";

/// Upstreams used when neither the config nor resolv.conf gives one (Quad9, Cloudflare).
const FALLBACK_UPSTREAMS: [IpAddr; 2] = [IpAddr::V4(Ipv4Addr::new(9, 9, 9, 9)), IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1))];

impl Config {
    /// Upstreams from `resolv_file`, minus our own addresses; public
    /// resolvers while it names none (a router's WAN file is empty until the
    /// WAN is up). Called again whenever the file changes.
    pub fn upstreams_from_resolv(&mut self) {
        let (servers, from) = self.resolv_servers();
        if self.bootstrap_auto {
            self.bootstrap = servers.clone();
        }
        self.upstreams = servers.into_iter().map(Upstream::Plain).collect();
        self.upstreams_from = from;
        self.upstreams_auto = true;
    }

    /// Bootstrap resolvers from `resolv_file` (as the upstreams), unless
    /// the config names them.
    pub fn bootstrap_from_resolv(&mut self) {
        if self.bootstrap_auto {
            self.bootstrap = self.resolv_servers().0;
        }
    }

    /// `resolv_file`'s servers minus our own addresses, or the built-in
    /// public resolvers while it names none; and which it was.
    fn resolv_servers(&self) -> (Vec<SocketAddr>, String) {
        // With dnsmasq forwarding to us, the loopback resolver that
        // /etc/resolv.conf names on OpenWrt is dnsmasq itself: asking it
        // would loop. (dnsmasq binds lo's own 127.0.0.1 and ::1, not all of 127/8.)
        let dnsmasq_in_front = self.dnsmasq_mode == DnsmasqMode::Upstream;
        let is_dnsmasq = |up: &SocketAddr| {
            up.port() == 53
                && (up.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) || up.ip() == IpAddr::V6(Ipv6Addr::LOCALHOST))
        };
        let from_resolv: Vec<SocketAddr> = crate::sys::read_regular_text(&self.resolv_file, MAX_RESOLV_BYTES)
            .map(|text| servers(&text))
            .unwrap_or_default()
            .into_iter()
            .filter(|up| !self.listen.iter().any(|l| is_loop(l, up)))
            .filter(|up| !(dnsmasq_in_front && is_dnsmasq(up)))
            .collect();
        if from_resolv.is_empty() {
            (FALLBACK_UPSTREAMS.iter().map(|ip| SocketAddr::new(*ip, 53)).collect(), "built-in fallback".into())
        } else {
            (from_resolv, self.resolv_file.display().to_string())
        }
    }

    /// Whether encrypted upstreams are configured (they need the TLS
    /// settings and the bootstrap resolvers).
    pub fn has_encrypted(&self) -> bool {
        self.upstreams.iter().chain(self.groups.iter().flat_map(|g| &g.upstreams)).any(|u| u.plain().is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(s: &str) -> Endpoint {
        match Upstream::parse(s) {
            Ok(Upstream::Encrypted(e)) => (*e).clone(),
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn nameserver_lines() {
        let found = servers("# x\nnameserver 10.0.0.1\nsearch lan\nnameserver fe80::1%eth0\nnameserver\n");
        assert_eq!(found, ["10.0.0.1:53".parse().unwrap(), "[fe80::1]:53".parse().unwrap()]);
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(Upstream::parse("9.9.9.9").unwrap(), Upstream::Plain("9.9.9.9:53".parse().unwrap()));
        assert_eq!(Upstream::parse("[::1]:5353").unwrap(), Upstream::Plain("[::1]:5353".parse().unwrap()));
        let e = tls("tls://Dns.Quad9.net");
        assert_eq!((&*e.name, e.port, e.needs_bootstrap()), ("dns.quad9.net", 853, true));
        let e = tls("tls://dns.example:8853#192.0.2.1,[2001:db8::1]");
        assert_eq!(e.port, 8853);
        assert_eq!(e.pins, ["192.0.2.1".parse::<IpAddr>().unwrap(), "2001:db8::1".parse().unwrap()]);
        let e = tls("tls://1.1.1.1");
        assert_eq!((&*e.name, e.pins.len()), ("1.1.1.1", 1));
        let e = tls("tls://[2606:4700::1111]:853");
        assert_eq!((&*e.name, e.port, e.pins.len()), ("2606:4700::1111", 853, 1));
        assert_eq!(Upstream::parse("tls://dns.example:853#192.0.2.1").unwrap().to_string(), "tls://dns.example:853");
        assert_eq!(Upstream::parse("tls://[::1]:853").unwrap().to_string(), "tls://[::1]:853");
    }

    #[test]
    fn parses_doh_urls() {
        let e = tls("https://dns.example");
        assert_eq!((e.scheme, &*e.name, e.port, &*e.path), (Scheme::Https, "dns.example", 443, "/dns-query"));
        let e = tls("https://dns.google/dns-query{?dns}");
        assert_eq!(&*e.path, "/dns-query");
        let e = tls("https://127.0.0.1:8443/resolve?key=1#127.0.0.2");
        assert_eq!((e.port, &*e.path, e.pins.len()), (8443, "/resolve?key=1", 1));
        let e = tls("https://[::1]/q");
        assert_eq!((&*e.name, e.port, &*e.path), ("::1", 443, "/q"));
        let u = Upstream::parse("https://Dns.Example/dns-query#192.0.2.1").unwrap();
        assert_eq!((u.to_string(), u.transport()), ("https://dns.example:443/dns-query".into(), "https"));
    }

    #[test]
    fn refuses_mistakes() {
        for bad in [
            "tls://",
            "tls://dns example",
            "tls://dns.example:0",
            "tls://dns.example:99999",
            "tls://dns.example#",
            "tls://dns.example#not-an-ip",
            "tls://dns..example",
            "quic://dns.example",
            "https://dns.example/dns query",
            "https://dns.example:443/q<x>",
            "https:///dns-query",
            "dns.example",
        ] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }
}
