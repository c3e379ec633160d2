//! How the gateway sits beside dnsmasq (`dnsmasq_mode`): behind it as its
//! upstream, in front of it on port 53 (`replace`), or neither; and the
//! address the watchdog asks to see that the LAN's queries are answered.

use super::*;

/// Reverse zones of private, shared and link-local addresses: in `replace`
/// mode these go to dnsmasq, which knows the LAN's hosts.
const PRIVATE_REVERSE_ZONES: &[&str] = &[
    "10.in-addr.arpa",
    "16.172.in-addr.arpa",
    "17.172.in-addr.arpa",
    "18.172.in-addr.arpa",
    "19.172.in-addr.arpa",
    "20.172.in-addr.arpa",
    "21.172.in-addr.arpa",
    "22.172.in-addr.arpa",
    "23.172.in-addr.arpa",
    "24.172.in-addr.arpa",
    "25.172.in-addr.arpa",
    "26.172.in-addr.arpa",
    "27.172.in-addr.arpa",
    "28.172.in-addr.arpa",
    "29.172.in-addr.arpa",
    "30.172.in-addr.arpa",
    "31.172.in-addr.arpa",
    "168.192.in-addr.arpa",
    "254.169.in-addr.arpa",
    "d.f.ip6.arpa",
    "8.e.f.ip6.arpa",
    "9.e.f.ip6.arpa",
    "a.e.f.ip6.arpa",
    "b.e.f.ip6.arpa",
];

/// How HydraDNS shares DNS with dnsmasq on OpenWrt (the init script does the dnsmasq side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DnsmasqMode {
    /// No dnsmasq arrangement (off the router, or done by hand).
    #[default]
    Off,
    /// dnsmasq keeps port 53 and forwards to us.
    Upstream,
    /// We take port 53; dnsmasq answers local names on `dnsmasq_port`.
    Replace,
}

impl Config {
    /// In `upstream` mode, where dnsmasq forwards to: our first IPv4
    /// listener reachable on 127.0.0.1, on a port dnsmasq does not hold.
    pub fn dnsmasq_server(&self) -> Option<SocketAddr> {
        self.listen
            .iter()
            .find(|l| {
                l.port() != 53
                    && (l.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) || l.ip() == IpAddr::V4(Ipv4Addr::UNSPECIFIED))
            })
            .map(|l| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), l.port()))
    }

    /// Where the daemon answers the queries that matter, for the watchdog:
    /// dnsmasq's forwarding target in `upstream` mode, else a listen address
    /// on port 53 (or the first at all), a wildcard one asked on loopback.
    /// Never 127.0.0.1 when there is another: that is the router's own
    /// resolver, which failing open in replace mode sends to dnsmasq
    /// (the init script's `router_lookups`), so a probe there would see
    /// dnsmasq answer for a daemon that does not.
    pub fn probe_addr(&self) -> SocketAddr {
        if let (DnsmasqMode::Upstream, Some(s)) = (self.dnsmasq_mode, self.dnsmasq_server()) {
            return s;
        }
        let own = |l: &&SocketAddr| l.ip() != IpAddr::V4(Ipv4Addr::LOCALHOST);
        let dns = || self.listen.iter().filter(|l| l.port() == 53);
        let l = dns().find(own).or(dns().next()).or(self.listen.first()).copied().unwrap_or(DEFAULT_LISTEN);
        match l.ip() {
            IpAddr::V4(a) if a.is_unspecified() => SocketAddr::new(Ipv4Addr::new(127, 0, 0, 2).into(), l.port()),
            IpAddr::V6(a) if a.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), l.port()),
            _ => l,
        }
    }
}

/// What the dnsmasq mode needs of the rest: `upstream` a port beside
/// dnsmasq's 53, `replace` port 53, and the LAN's names and reverse zones
/// sent on to dnsmasq, which knows them.
pub(super) fn settle(cfg: &mut Config, file: &str, sections: &[uci::Section]) -> Result<(), ConfigError> {
    if cfg.dnsmasq_mode == DnsmasqMode::Upstream && cfg.dnsmasq_server().is_none() {
        return Err(ConfigError {
            file: file.into(),
            line: line_of(sections, "dnsmasq_mode"),
            message: "dnsmasq_mode 'upstream' needs a listen address on 127.0.0.1 (or 0.0.0.0) on a port \
                      other than 53, which dnsmasq keeps"
                .into(),
        });
    }
    if cfg.dnsmasq_mode == DnsmasqMode::Replace {
        if !cfg.listen.iter().any(|l| l.port() == 53) {
            return Err(ConfigError {
                file: file.into(),
                line: line_of(sections, "dnsmasq_mode"),
                message: "dnsmasq_mode 'replace' needs a listen address on port 53".into(),
            });
        }
        if cfg.local_domains.is_empty() {
            cfg.local_domains.push("lan".into());
        }
        // dnsmasq knows the LAN's names and addresses: send them there,
        // unless the config already says where they go.
        let mut domains = cfg.local_domains.clone();
        domains.extend(PRIVATE_REVERSE_ZONES.iter().map(|z| z.to_string()));
        domains.retain(|d| !cfg.forwards.iter().any(|f| f.domains.contains(d)));
        let dnsmasq = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), cfg.dnsmasq_port);
        cfg.forwards.push(Forward { domains, servers: vec![dnsmasq] });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dnsmasq_modes() {
        let c = Config::parse("f", "config hydradns\n\toption dnsmasq_mode 'replace'\n\tlist listen '0.0.0.0:53'\n\tlist upstream '192.0.2.1'\n").unwrap();
        let fwd = c.forwards.last().unwrap();
        assert_eq!(fwd.servers, ["127.0.0.1:5354".parse().unwrap()]);
        assert!(fwd.domains.contains(&"lan".to_string()) && fwd.domains.contains(&"168.192.in-addr.arpa".to_string()));
        let e = Config::parse("f", "config hydradns\n\toption dnsmasq_mode 'replace'\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(Config::parse("f", "config hydradns\n\toption dnsmasq_mode 'sideways'\n").is_err());
        let c = Config::parse(
            "f",
            "config hydradns\n\toption dnsmasq_mode 'upstream'\n\toption enabled '1'\n\tlist upstream '192.0.2.1'\n",
        )
        .unwrap();
        assert!(c.forwards.is_empty() && c.warnings.is_empty(), "{:?}", c.warnings);
        // In upstream mode dnsmasq on 127.0.0.1:53 is in front of us, not an upstream.
        let dir = std::env::temp_dir().join(format!("hydradns-resolv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let resolv = dir.join("resolv.conf.auto");
        std::fs::write(&resolv, "nameserver 127.0.0.1\nnameserver 192.0.2.53\n").unwrap();
        let text =
            format!("config hydradns\n\toption dnsmasq_mode 'upstream'\n\toption resolv_file '{}'\n", resolv.display());
        let mut c = Config::parse("f", &text).unwrap();
        assert_eq!(c.upstreams, ["192.0.2.53:53".parse().unwrap()]);
        assert!(c.upstreams_auto);
        // Followed: the file changes, the upstreams with it.
        std::fs::write(&resolv, "nameserver 192.0.2.54\n").unwrap();
        c.upstreams_from_resolv();
        assert_eq!(c.upstreams, ["192.0.2.54:53".parse().unwrap()]);
        std::fs::write(&resolv, "").unwrap();
        c.upstreams_from_resolv();
        assert_eq!((c.upstreams.len(), c.upstreams_from.as_str()), (2, "built-in fallback"));
        let configured = Config::parse("f", &format!("{text}\tlist upstream '192.0.2.1'\n")).unwrap();
        assert!(!configured.upstreams_auto, "configured upstreams are not replaced by the file's");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn upstream_mode_needs_a_port_for_dnsmasq() {
        let up = |listen: &str| {
            Config::parse(
                "f",
                &format!(
                    "config hydradns\n\toption dnsmasq_mode 'upstream'\n\tlist listen '{listen}'\n\tlist upstream '192.0.2.1'\n"
                ),
            )
        };
        assert_eq!(up("0.0.0.0:5353").unwrap().dnsmasq_server(), Some("127.0.0.1:5353".parse().unwrap()));
        assert_eq!(up("127.0.0.1:53").unwrap_err().line, 2, "dnsmasq keeps 53");
        assert!(up("[::1]:5353").is_err(), "dnsmasq is pointed at 127.0.0.1");
    }

    #[test]
    fn the_watchdog_asks_where_the_lan_s_queries_arrive() {
        let probe = |extra: &str| {
            Config::parse("f", &format!("config hydradns\n\tlist upstream '192.0.2.1'\n{extra}")).unwrap().probe_addr()
        };
        assert_eq!(probe(""), "127.0.0.1:5353".parse().unwrap());
        assert_eq!(
            probe("\toption dnsmasq_mode 'upstream'\n\tlist listen '[::1]:5353'\n\tlist listen '0.0.0.0:5300'\n"),
            "127.0.0.1:5300".parse().unwrap()
        );
        let replace = "\toption dnsmasq_mode 'replace'\n\tlist listen '192.0.2.1:5353'\n";
        assert_eq!(probe(&format!("{replace}\tlist listen '0.0.0.0:53'\n")), "127.0.0.2:53".parse().unwrap());
        assert_eq!(probe(&format!("{replace}\tlist listen '[::]:53'\n")), "[::1]:53".parse().unwrap());
        let lan = "\tlist listen '127.0.0.1:53'\n\tlist listen '192.168.1.1:53'\n";
        assert_eq!(
            probe(&format!("{replace}{lan}")),
            "192.168.1.1:53".parse().unwrap(),
            "not the router's own resolver"
        );
        assert_eq!(probe(&format!("{replace}\tlist listen '127.0.0.1:53'\n")), "127.0.0.1:53".parse().unwrap());
    }
}
