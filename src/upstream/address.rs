//! What `list upstream` names: a plain resolver (`IP[:PORT]`) or an
//! encrypted one (`tls://NAME[:PORT][#IP[,IP…]]`, RFC 7858).
//!
//! An encrypted upstream is a name, not an address: the certificate must
//! carry that name, and its addresses come from the `bootstrap` resolvers
//! unless they are pinned after `#`, or the name is itself an IP address.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Port of DNS over TLS (RFC 7858 §3.1).
pub const TLS_PORT: u16 = 853;
/// Pinned addresses per upstream: more is a config mistake.
const MAX_PINS: usize = 8;

/// One configured upstream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Upstream {
    /// UDP, and TCP when a reply is truncated.
    Plain(SocketAddr),
    /// DNS over TLS.
    Tls(Arc<Endpoint>),
}

/// Where an encrypted upstream is, and what its certificate must say.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The name the certificate must carry (or an IP address it must carry).
    pub name: Box<str>,
    /// TCP port.
    pub port: u16,
    /// Addresses used without asking the bootstrap resolvers.
    pub pins: Vec<IpAddr>,
}

impl Upstream {
    /// Parses `IP[:PORT]` (port 53 by default) or `tls://NAME[:PORT][#IP,…]`.
    pub fn parse(s: &str) -> Result<Upstream, String> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("tls://") {
            return Endpoint::parse(rest, TLS_PORT).map(|e| Upstream::Tls(Arc::new(e)));
        }
        if s.starts_with("https://") {
            return Err("DNS over HTTPS (https://) is not supported yet; use tls:// or a plain address".into());
        }
        if s.contains("://") {
            return Err("an address, or tls://NAME".into());
        }
        crate::config::parse_socket_addr(s, 53).map(Upstream::Plain).ok_or_else(|| "an address, or tls://NAME".into())
    }

    /// The address of a plain upstream.
    pub fn plain(&self) -> Option<SocketAddr> {
        match self {
            Upstream::Plain(a) => Some(*a),
            Upstream::Tls(_) => None,
        }
    }

    /// The transport's name, as `stats` shows it.
    pub fn transport(&self) -> &'static str {
        match self {
            Upstream::Plain(_) => "udp",
            Upstream::Tls(_) => "tls",
        }
    }
}

impl Endpoint {
    /// `NAME[:PORT][#IP,…]`; `NAME` may be an IP address (`[…]` for IPv6).
    fn parse(s: &str, default_port: u16) -> Result<Endpoint, String> {
        let (host_port, pins) = match s.split_once('#') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        let (host, port) = split_port(host_port).ok_or("NAME[:PORT] after tls://")?;
        let port = match port {
            Some(p) => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or("a port from 1 to 65535")?,
            None => default_port,
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
        Ok(Endpoint { name: host.to_ascii_lowercase().into(), port, pins: pinned })
    }

    /// Whether the bootstrap resolvers must find its addresses.
    pub fn needs_bootstrap(&self) -> bool {
        self.pins.is_empty()
    }
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
            Upstream::Tls(e) => write!(f, "tls://{e}"),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.contains(':') {
            write!(f, "[{}]:{}", self.name, self.port)
        } else {
            write!(f, "{}:{}", self.name, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(s: &str) -> Endpoint {
        match Upstream::parse(s) {
            Ok(Upstream::Tls(e)) => (*e).clone(),
            other => panic!("{s}: {other:?}"),
        }
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
            "https://dns.example/dns-query",
            "dns.example",
        ] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }
}
