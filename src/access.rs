//! Which clients may ask: `allow_client` CIDRs and the `deny_action` for
//! everyone else, so a port exposed to the WAN by mistake is not an open
//! resolver for the internet to abuse.

use std::net::{IpAddr, Ipv4Addr};

/// The private ranges, carrier-grade NAT, loopback, link-local and
/// unique-local IPv6 — what a home or office LAN uses: never the answer for
/// a public name (rebinding), and who may ask when the networks this machine
/// is on cannot be read (see `localnet`).
pub const PRIVATE: &[&str] = &[
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "::1/128",
    "fe80::/10",
    "fc00::/7",
];

/// The LAN ranges plus "this network" (`0.0.0.0/8`, `::`), the limited
/// broadcast address and IPv6 site-local (`fec0::/10`, deprecated by RFC
/// 3879 but still routed inside some LANs): what an upstream answer for a
/// public name must not contain (DNS rebinding protection; see [`rebinds`]).
pub fn rebind_ranges() -> AccessList {
    let mut l = AccessList::private();
    for c in ["0.0.0.0/8", "255.255.255.255/32", "::/128", "fec0::/10"] {
        let _ = l.add(c);
    }
    l
}

/// Whether an answer holding `ip` rebinds: `ip` is in `ranges`, or it is an
/// IPv6 address that reaches an IPv4 one in them: IPv4-compatible
/// (`::a.b.c.d`, deprecated, still mapped by some stacks), NAT64's
/// well-known prefix (`64:ff9b::/96`, RFC 6052: the router's NAT64 hands it
/// to that IPv4 address) and 6to4 (`2002:AABB:CCDD::/48`, RFC 3056).
/// (IPv4-mapped `::ffff:a.b.c.d` is IPv4 already to [`AccessList::allows`].)
pub fn rebinds(ranges: &AccessList, ip: IpAddr) -> bool {
    if ranges.allows(ip) {
        return true;
    }
    let IpAddr::V6(a) = ip else { return false };
    let v = u128::from(a);
    let embedded = match v {
        v if v >> 32 == 0 || v >> 32 == 0x0064_ff9b_0000_0000_0000_0000 => Some(v as u32),
        v if v >> 112 == 0x2002 => Some((v >> 80) as u32),
        _ => None,
    };
    embedded.is_some_and(|e| ranges.allows(IpAddr::V4(Ipv4Addr::from(e))))
}

/// What a client outside the allowed ranges gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyAction {
    /// A REFUSED answer (the default: a misconfigured client learns why).
    Refuse,
    /// Nothing: no reply to reflect at a spoofed source.
    Drop,
}

impl DenyAction {
    /// `refuse` or `drop`, as the config spells them.
    pub fn from_name(s: &str) -> Option<DenyAction> {
        match s {
            "refuse" => Some(DenyAction::Refuse),
            "drop" => Some(DenyAction::Drop),
            _ => None,
        }
    }
}

/// A set of address ranges, checked with a short linear scan (a handful of
/// ranges; no allocation per check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessList {
    /// (network, mask) pairs, IPv4.
    v4: Vec<(u32, u32)>,
    /// (network, mask) pairs, IPv6.
    v6: Vec<(u128, u128)>,
}

impl AccessList {
    /// A list that allows no one.
    pub fn empty() -> AccessList {
        AccessList { v4: Vec::new(), v6: Vec::new() }
    }

    /// The [`PRIVATE`] ranges.
    pub fn private() -> AccessList {
        let mut l = AccessList::empty();
        for c in PRIVATE {
            // The built-in ranges parse; a failure would only shrink the list.
            let _ = l.add(c);
        }
        l
    }

    /// 127.0.0.0/8 and ::1: this machine.
    pub fn loopback() -> AccessList {
        AccessList { v4: vec![(0x7f00_0000, 0xff00_0000)], v6: vec![(1, u128::MAX)] }
    }

    /// Adds a range: `a.b.c.d/n`, `x::y/n`, or a single address. `None` if
    /// it does not parse or the prefix is too long.
    pub fn add(&mut self, cidr: &str) -> Option<()> {
        let (addr, prefix) = match cidr.split_once('/') {
            Some((a, p)) => (a.trim().parse::<IpAddr>().ok()?, Some(p.trim().parse::<u32>().ok()?)),
            None => (cidr.trim().parse::<IpAddr>().ok()?, None),
        };
        self.add_network(addr, prefix)
    }

    /// Adds `addr`'s network of `prefix` bits (the address alone without
    /// one); `None` if the prefix is too long.
    pub fn add_network(&mut self, addr: IpAddr, prefix: Option<u32>) -> Option<()> {
        match addr {
            IpAddr::V4(a) => {
                let p = prefix.unwrap_or(32);
                if p > 32 {
                    return None;
                }
                let mask = u32::MAX.checked_shl(32 - p).unwrap_or(0);
                self.v4.push((u32::from(a) & mask, mask));
            }
            IpAddr::V6(a) => {
                let p = prefix.unwrap_or(128);
                if p > 128 {
                    return None;
                }
                let mask = u128::MAX.checked_shl(128 - p).unwrap_or(0);
                self.v6.push((u128::from(a) & mask, mask));
            }
        }
        Some(())
    }

    /// Each range once, in order: two lists of the same ranges compare equal.
    pub fn sorted(mut self) -> AccessList {
        self.v4.sort_unstable();
        self.v4.dedup();
        self.v6.sort_unstable();
        self.v6.dedup();
        self
    }

    /// Is `ip` inside one of the ranges? IPv4-mapped IPv6 addresses count as IPv4.
    #[inline]
    pub fn allows(&self, ip: IpAddr) -> bool {
        match ip.to_canonical() {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4.iter().any(|&(net, mask)| a & mask == net)
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                self.v6.iter().any(|&(net, mask)| a & mask == net)
            }
        }
    }
}

/// The ranges as `network/prefix`, comma-separated, for the log.
impl std::fmt::Display for AccessList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v4 = self.v4.iter().map(|&(net, mask)| (IpAddr::from(std::net::Ipv4Addr::from(net)), mask.count_ones()));
        let v6 = self.v6.iter().map(|&(net, mask)| (IpAddr::from(std::net::Ipv6Addr::from(net)), mask.count_ones()));
        for (i, (net, prefix)) in v4.chain(v6).enumerate() {
            write!(f, "{}{net}/{prefix}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn private_ranges_are_the_lan_and_nothing_public() {
        let l = AccessList::private();
        for a in [
            "192.168.1.20",
            "10.1.2.3",
            "172.31.255.255",
            "127.0.0.1",
            "100.64.0.1",
            "169.254.9.9",
            "::1",
            "fe80::1",
            "fd12:3456::1",
            "::ffff:192.168.1.5",
        ] {
            assert!(l.allows(ip(a)), "{a}");
        }
        for a in ["8.8.8.8", "172.32.0.1", "192.169.0.1", "2001:db8::1", "::ffff:8.8.8.8", "11.0.0.1"] {
            assert!(!l.allows(ip(a)), "{a}");
        }
    }

    #[test]
    fn rebind_ranges_are_the_lan_and_this_network() {
        let r = rebind_ranges();
        for a in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.1.1",
            "172.16.0.1",
            "192.168.1.1",
            "::",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:192.168.1.1",
        ] {
            assert!(r.allows(ip(a)), "{a}");
        }
        for a in ["1.1.1.1", "192.0.2.1", "2001:db8::1", "::2", "::ffff:8.8.8.8"] {
            assert!(!r.allows(ip(a)), "{a}");
        }
    }

    /// The forms the review found let through: the broadcast address,
    /// site-local IPv6, and IPv6 addresses that carry a private IPv4 one.
    #[test]
    fn rebinding_covers_broadcast_site_local_and_embedded_ipv4() {
        let r = rebind_ranges();
        for a in [
            "255.255.255.255",
            "fec0::1",
            "feff::1",
            "::192.168.1.1",
            "::10.0.0.1",
            "64:ff9b::192.168.1.1",
            "64:ff9b::7f00:1",
            "2002:c0a8:101::1",
            "2002:a00:1:1::5",
            "192.168.1.1",
            "::ffff:10.1.1.1",
        ] {
            assert!(rebinds(&r, ip(a)), "{a}");
        }
        for a in ["255.255.255.254", "ff02::1", "::8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1", "2001:db8::1"] {
            assert!(!rebinds(&r, ip(a)), "{a}");
        }
    }

    #[test]
    fn ranges_and_single_addresses() {
        let mut l = AccessList::empty();
        assert!(l.add("203.0.113.0/24").is_some());
        assert!(l.add("198.51.100.7").is_some());
        assert!(l.add("2001:db8::/32").is_some());
        assert!(l.allows(ip("203.0.113.200")));
        assert!(l.allows(ip("198.51.100.7")));
        assert!(!l.allows(ip("198.51.100.8")));
        assert!(l.allows(ip("2001:db8:ffff::1")));
        for bad in ["300.1.1.1/8", "10.0.0.0/33", "::/129", "lan", "10.0.0.0/x", ""] {
            assert!(AccessList::empty().add(bad).is_none(), "{bad}");
        }
        let mut all = AccessList::empty();
        all.add("0.0.0.0/0").unwrap();
        all.add("::/0").unwrap();
        assert!(all.allows(ip("8.8.8.8")) && all.allows(ip("2001:db8::1")));
        assert!(!AccessList::empty().allows(ip("127.0.0.1")));
    }

    #[test]
    fn sorted_lists_compare_and_print_their_ranges() {
        let mut a = AccessList::empty();
        let mut b = AccessList::empty();
        for c in ["2001:db8:1::/64", "192.0.2.9/24", "127.0.0.0/8"] {
            a.add(c).unwrap();
        }
        for c in ["127.0.0.1/8", "2001:db8:1::5/64", "192.0.2.0/24", "192.0.2.0/24"] {
            b.add(c).unwrap();
        }
        assert_ne!(a, b);
        let (a, b) = (a.sorted(), b.sorted());
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "127.0.0.0/8, 192.0.2.0/24, 2001:db8:1::/64");
    }
}
