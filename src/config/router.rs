//! The router around the gateway: force DNS (what fw4 is told to redirect
//! and reject) and fail-open (what happens when the daemon stops
//! answering). Options of `config hydradns 'main'`; the daemon itself reads
//! none of them: the init script gets them through `check-config --shell`
//! and the watchdog (`hydradns watchdog`) through [`super::Config`].

use std::net::IpAddr;

use super::{ConfigError, SectionReader, uci};

/// Ports `force_dns_port` names by default: plain DNS (redirected) and DNS
/// over TLS or QUIC (rejected, so clients fall back to plain DNS at once).
pub const DEFAULT_PORTS: [u16; 2] = [53, 853];

/// How the router keeps every device's DNS going through the gateway, and
/// what it does when the gateway fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    /// Redirect the zones' port 53 to the router and reject their other
    /// `ports` (`force_dns`; off unless the config says so, as the shipped
    /// one does: a rule nobody asked for must not appear on an upgrade).
    pub force_dns: bool,
    /// `force_dns_port`: 53 is redirected, every other port rejected.
    pub ports: Vec<u16>,
    /// `force_dns_zone`: fw4 zones whose clients are held to the router.
    pub zones: Vec<String>,
    /// `force_dns_exempt`: clients left alone (a LAN DNS server, a test laptop).
    pub exempt: Vec<Exempt>,
    /// `fail_open`: when the daemon does not answer, dnsmasq answers from
    /// the WAN's resolvers (unfiltered) instead of the network having no DNS.
    pub fail_open: bool,
}

/// One `force_dns_exempt` entry, in the form fw4 reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exempt {
    /// An IPv4 address or network, `a.b.c.d` or `a.b.c.d/n`.
    V4(String),
    /// An IPv6 address or network.
    V6(String),
    /// A hardware address, `aa:bb:cc:dd:ee:ff`.
    Mac(String),
}

impl Default for Router {
    fn default() -> Self {
        Router {
            force_dns: false,
            ports: DEFAULT_PORTS.to_vec(),
            zones: vec!["lan".into()],
            exempt: Vec::new(),
            fail_open: true,
        }
    }
}

/// Which of a section's list options have replaced their defaults.
#[derive(Debug, Default)]
pub(super) struct Replaced {
    ports: bool,
    zones: bool,
}

impl Exempt {
    /// `192.0.2.7`, `192.0.2.0/28`, `2001:db8::7/128` or `02:00:5e:10:00:01`
    /// (`-` also separates), normalised.
    pub fn parse(s: &str) -> Option<Exempt> {
        if let Some(mac) = crate::mac::parse_mac(s.as_bytes()) {
            return Some(Exempt::Mac(crate::mac::mac_text(&mac)));
        }
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().ok()?)),
            None => (s, None),
        };
        let ip: IpAddr = addr.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let text = match prefix {
            Some(p) if p > max => return None,
            Some(p) => format!("{ip}/{p}"),
            None => ip.to_string(),
        };
        Some(if ip.is_ipv4() { Exempt::V4(text) } else { Exempt::V6(text) })
    }
}

impl SectionReader<'_> {
    /// Reads `v` if it is one of this module's options; false if it is not.
    pub(super) fn router(&self, r: &mut Router, replaced: &mut Replaced, v: &uci::Value) -> Result<bool, ConfigError> {
        match v.key.as_str() {
            "force_dns" => r.force_dns = self.boolean(v)?,
            "force_dns_port" => {
                if !replaced.ports {
                    r.ports.clear();
                    replaced.ports = true;
                }
                // One option may hold several, as https-dns-proxy writes them.
                for word in v.value.split_whitespace() {
                    match word.parse::<u16>() {
                        Ok(p) if p > 0 => {
                            if !r.ports.contains(&p) {
                                r.ports.push(p)
                            }
                        }
                        _ => return Err(self.bad(v, "a port from 1 to 65535")),
                    }
                }
            }
            "force_dns_zone" => {
                if !replaced.zones {
                    r.zones.clear();
                    replaced.zones = true;
                }
                // fw4's zone names: letters, digits, '_' and '-', at most 11 bytes
                // (its chain names are built from them).
                let ok = !v.value.is_empty()
                    && v.value.len() <= 11
                    && v.value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if !ok {
                    return Err(self.bad(v, "a firewall zone name (e.g. lan)"));
                }
                if !r.zones.contains(&v.value) {
                    r.zones.push(v.value.clone());
                }
            }
            "force_dns_exempt" => {
                let e = Exempt::parse(v.value.trim())
                    .ok_or_else(|| self.bad(v, "an IP address, a network (CIDR) or a MAC address"))?;
                if !r.exempt.contains(&e) {
                    r.exempt.push(e);
                }
            }
            "fail_open" => r.fail_open = self.boolean(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Router {
    /// The `check-config --shell` lines of these settings, in values that
    /// need no quoting (every one was validated above).
    pub fn shell(&self) -> String {
        let words = |f: fn(&Exempt) -> Option<&str>| self.exempt.iter().filter_map(f).collect::<Vec<_>>().join(" ");
        let ports: Vec<String> = self.ports.iter().map(u16::to_string).collect();
        format!(
            "hydradns_force_dns={}\nhydradns_force_dns_port='{}'\nhydradns_force_dns_zone='{}'\n\
             hydradns_force_dns_exempt4='{}'\nhydradns_force_dns_exempt6='{}'\nhydradns_force_dns_exempt_mac='{}'\n\
             hydradns_fail_open={}\n",
            u8::from(self.force_dns),
            ports.join(" "),
            self.zones.join(" "),
            words(|e| if let Exempt::V4(s) = e { Some(s) } else { None }),
            words(|e| if let Exempt::V6(s) = e { Some(s) } else { None }),
            words(|e| if let Exempt::Mac(s) = e { Some(s) } else { None }),
            u8::from(self.fail_open),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::Config;

    fn main(lines: &str) -> Result<Router, ConfigError> {
        Config::parse("f", &format!("config hydradns 'main'\n{lines}")).map(|c| c.router)
    }

    #[test]
    fn defaults_hold_the_lan_to_port_53_only_when_asked() {
        let r = main("").unwrap();
        assert_eq!(r, Router::default());
        assert!(!r.force_dns && r.fail_open);
        assert_eq!(r.ports, [53, 853]);
        assert_eq!(r.zones, ["lan"]);
    }

    #[test]
    fn lists_replace_their_defaults_and_exemptions_are_sorted_by_kind() {
        let r = main(
            "\toption force_dns '1'\n\tlist force_dns_port '53'\n\tlist force_dns_port '853 5353'\n\
             \tlist force_dns_zone 'lan'\n\tlist force_dns_zone 'guest'\n\
             \tlist force_dns_exempt '192.0.2.7'\n\tlist force_dns_exempt '2001:DB8::7'\n\
             \tlist force_dns_exempt '02-00-5E-10-00-01'\n\tlist force_dns_exempt '192.0.2.0/28'\n\
             \toption fail_open '0'\n",
        )
        .unwrap();
        assert!(r.force_dns && !r.fail_open);
        assert_eq!(r.ports, [53, 853, 5353]);
        assert_eq!(r.zones, ["lan", "guest"]);
        assert_eq!(
            r.shell(),
            "hydradns_force_dns=1\nhydradns_force_dns_port='53 853 5353'\nhydradns_force_dns_zone='lan guest'\n\
             hydradns_force_dns_exempt4='192.0.2.7 192.0.2.0/28'\nhydradns_force_dns_exempt6='2001:db8::7'\n\
             hydradns_force_dns_exempt_mac='02:00:5e:10:00:01'\nhydradns_fail_open=0\n"
        );
    }

    #[test]
    fn bad_values_name_their_line() {
        for (line, what) in [
            ("\tlist force_dns_port '0'\n", "a port"),
            ("\tlist force_dns_port '53 x'\n", "a port"),
            ("\tlist force_dns_zone 'lan zone'\n", "a firewall zone"),
            ("\tlist force_dns_zone 'averylongzonename'\n", "a firewall zone"),
            ("\tlist force_dns_exempt '192.0.2.7/33'\n", "an IP address"),
            ("\tlist force_dns_exempt 'laptop'\n", "an IP address"),
            ("\tlist force_dns_exempt '192.0.2.7; reboot'\n", "an IP address"),
            ("\toption fail_open 'maybe'\n", "a boolean"),
        ] {
            let e = main(&format!("\toption force_dns '1'\n{line}")).unwrap_err();
            assert_eq!(e.line, 3, "{line}: {e}");
            assert!(e.message.contains(what), "{line}: {e}");
        }
    }
}
