//! The client a forwarder names in a query's EDNS options.
//!
//! dnsmasq in front of us (`dnsmasq_mode upstream`, OpenWrt's default) sends
//! every query from 127.0.0.1; with `add-subnet=32,128` it adds the client's
//! address as EDNS Client Subnet (RFC 7871, option 8) and with `add-mac` its
//! hardware address (option 65001, six raw bytes; `add-mac=text` uses option
//! 65073 with `aa:bb:cc:dd:ee:ff`). Only a whole address counts as a client
//! (a /24 names a network, Pi-hole and Blocky agree), and never an
//! unspecified one (0.0.0.0/32 is how a client asks an authority to leave
//! its address out, RFC 7871 §7.1.2). A loopback address is the router
//! itself asking through dnsmasq, and is taken as said. `add-mac=base64` is not read: its alphabet is dnsmasq's
//! own, and Pi-hole never took it either.
//!
//! None of these options leave with the upstream query: it is built afresh
//! with an OPT of our own ([`crate::upstream::build_query`]), and the cache
//! key never held them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::wire::u16_at;

/// EDNS Client Subnet (RFC 7871).
pub const ECS: u16 = 8;
/// dnsmasq's `add-mac`: the raw hardware address.
pub const MAC_RAW: u16 = 65001;
/// dnsmasq's `add-mac=text` (Nominum's device id): `aa:bb:cc:dd:ee:ff`.
pub const MAC_TEXT: u16 = 65073;

/// What a trusted forwarder said about the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Named {
    /// The client's address, from a /32 or /128 Client Subnet.
    pub ip: Option<IpAddr>,
    /// Its hardware address.
    pub mac: Option<[u8; 6]>,
}

/// Reads the options of an OPT record whose RDATA is `msg[start..end]`
/// (framing already checked by [`crate::wire::parse_query`]; anything that
/// does not fit is skipped, never trusted).
pub fn named(msg: &[u8], start: usize, end: usize) -> Named {
    let mut n = Named::default();
    let mut p = start;
    while p + 4 <= end {
        let (Some(code), Some(len)) = (u16_at(msg, p), u16_at(msg, p + 2)) else { break };
        let data = match msg.get(p + 4..p + 4 + len as usize) {
            Some(d) if p + 4 + (len as usize) <= end => d,
            _ => break,
        };
        match code {
            ECS => n.ip = n.ip.or_else(|| subnet_client(data)),
            MAC_RAW => n.mac = n.mac.or_else(|| <[u8; 6]>::try_from(data).ok()),
            MAC_TEXT => n.mac = n.mac.or_else(|| parse_mac(data)),
            _ => {}
        }
        p += 4 + len as usize;
    }
    n
}

/// The address of a Client Subnet option that names one host.
fn subnet_client(d: &[u8]) -> Option<IpAddr> {
    let (family, prefix, addr) = (u16_at(d, 0)?, *d.get(2)?, d.get(4..)?);
    let ip = match (family, prefix) {
        (1, 32) => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(addr).ok()?)),
        (2, 128) => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(addr).ok()?)),
        _ => return None,
    };
    (!ip.is_unspecified()).then_some(ip)
}

/// `aa:bb:cc:dd:ee:ff` (or with `-`), either case.
pub fn parse_mac(text: &[u8]) -> Option<[u8; 6]> {
    if text.len() != 17 {
        return None;
    }
    let mut mac = [0u8; 6];
    for (i, b) in mac.iter_mut().enumerate() {
        let hex = std::str::from_utf8(text.get(3 * i..3 * i + 2)?).ok()?;
        *b = u8::from_str_radix(hex, 16).ok()?;
        if i < 5 && !matches!(text[3 * i + 2], b':' | b'-') {
            return None;
        }
    }
    Some(mac)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_text(mac: &[u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// One option as dnsmasq writes it (edns0.c: code, length, data).
    fn opt(code: u16, data: &[u8]) -> Vec<u8> {
        let mut o = code.to_be_bytes().to_vec();
        o.extend_from_slice(&(data.len() as u16).to_be_bytes());
        o.extend_from_slice(data);
        o
    }

    fn read(options: &[Vec<u8>]) -> Named {
        let rdata = options.concat();
        named(&rdata, 0, rdata.len())
    }

    #[test]
    fn dnsmasq_add_subnet_and_add_mac() {
        // add-subnet=32,128 from 192.168.1.50, add-mac from 02:00:5e:10:00:01.
        let n = read(&[opt(ECS, &[0, 1, 32, 0, 192, 168, 1, 50]), opt(MAC_RAW, &[2, 0, 0x5e, 0x10, 0, 1])]);
        assert_eq!(n.ip, Some("192.168.1.50".parse().unwrap()));
        assert_eq!(mac_text(&n.mac.unwrap()), "02:00:5e:10:00:01");
        let mut v6 = vec![0, 2, 128, 0];
        v6.extend_from_slice(&"fd00::50".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(read(&[opt(ECS, &v6)]).ip, Some("fd00::50".parse().unwrap()));
        let text = read(&[opt(MAC_TEXT, b"02:00:5E:10:00:01")]);
        assert_eq!(text.mac, Some([2, 0, 0x5e, 0x10, 0, 1]));
    }

    #[test]
    fn a_network_an_unspecified_address_or_a_short_option_names_no_one() {
        // add-subnet=24: dnsmasq truncates the address to the prefix.
        assert_eq!(read(&[opt(ECS, &[0, 1, 24, 0, 192, 168, 1])]).ip, None);
        assert_eq!(read(&[opt(ECS, &[0, 1, 32, 0, 0, 0, 0, 0])]).ip, None);
        assert_eq!(read(&[opt(ECS, &[0, 1, 32, 0, 192, 168])]).ip, None);
        assert_eq!(read(&[opt(MAC_RAW, &[1, 2, 3])]).mac, None);
        assert_eq!(read(&[opt(MAC_TEXT, b"AAECAwQF")]).mac, None, "base64 is not read");
        assert_eq!(read(&[opt(MAC_TEXT, b"02:00:5e:10:00:0g")]).mac, None);
        // A length running past the OPT stops the walk.
        let mut bad = opt(MAC_RAW, &[1, 2, 3, 4, 5, 6]);
        bad[3] = 9;
        assert_eq!(named(&bad, 0, bad.len()), Named::default());
    }
}
