//! The client a forwarder names in a query's EDNS options.
//!
//! dnsmasq in front of us (`dnsmasq_mode upstream`, OpenWrt's default) sends
//! every query from 127.0.0.1; with `add-subnet=32,128` it adds the client's
//! address as EDNS Client Subnet (RFC 7871, option 8) and with `add-mac` its
//! hardware address (option 65001, six raw bytes; `add-mac=text` uses option
//! 65073 with `aa:bb:cc:dd:ee:ff`, `add-mac=base64` option 65073 too). Only a
//! whole address counts as a client (a /24 names a network, Pi-hole and
//! Blocky agree), and never an unspecified one (0.0.0.0/32 is how a client
//! asks an authority to leave its address out, RFC 7871 §7.1.2). A loopback
//! address is the router itself asking through dnsmasq: it is taken as said,
//! but rate-limited like any client (only a query whose own source is
//! loopback and that names no one is exempt, [`crate::ratelimit`]).
//! `add-mac=base64` is not read: its alphabet is dnsmasq's own, and Pi-hole
//! never took it either; it still counts as a MAC option below.
//!
//! A client's own options. What dnsmasq 2.90 (Debian's) forwards for a LAN
//! client C with MAC m that sends options of its own (X, Y forged addresses,
//! f a forged MAC), measured with a capturing upstream; always one OPT:
//!
//! | client sends | `add-subnet=32,128 add-mac` | `… add-mac=text` or `=base64` | `strip-subnet strip-mac` + either |
//! |---|---|---|---|
//! | nothing | 65001 m, ECS C | 65073 m, ECS C | 65001/65073 m, ECS C |
//! | ECS X | ECS X, 65001 m | ECS X, 65073 m | the same |
//! | ECS X, ECS Y | ECS X, ECS Y, 65001 m | ECS X, ECS Y, 65073 m | the same |
//! | 65001 f | 65001 f, ECS C | 65001 f, 65073 m, ECS C | the same |
//! | 65073 f (text or base64) | 65073 f, 65001 m, ECS C | 65073 f, ECS C | the same |
//!
//! Without `strip-*`, dnsmasq adds an option only when the query has none
//! with that code, at the end (MAC before ECS), and passes the client's own
//! through in their order: a lone forged ECS or same-form MAC arrives alone
//! and cannot be told from dnsmasq's, so OpenWrt's init script runs it with
//! `stripsubnet`/`stripmac`. With them only dnsmasq's own arrive, one of
//! each. (A client without a neighbour entry, on loopback, gets no MAC.)
//! Two ECS, or two MAC options in any mix of forms, therefore only ever
//! reach us when a client forged one, and the last is not the forwarder's
//! when both had one code: [`named`] names no one then, and the query is
//! turned away ([`Repeated`]).
//!
//! None of these options leave with the upstream query: it is built afresh
//! with an OPT of our own ([`crate::upstream::build_query`]), and the cache
//! key never held them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::mac::parse_mac;
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

/// A query carrying two Client Subnet options, or two MAC options (65001
/// and 65073 alike): a client's own passed through by a forwarder that does
/// not strip them. Which one is the forwarder's cannot be told, so neither
/// is taken, nor the packet's source (the forwarder, which the rate limit
/// exempts): the query is turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeated;

/// Reads the options of an OPT record whose RDATA is `msg[start..end]`
/// (framing already checked by [`crate::wire::parse_query`]; anything that
/// does not fit is skipped, never trusted). An option of a kind is counted
/// whether or not it names anyone: a second one is [`Repeated`].
pub fn named(msg: &[u8], start: usize, end: usize) -> Result<Named, Repeated> {
    const SUBNET: u8 = 1;
    const HARDWARE: u8 = 2;
    let mut n = Named::default();
    let mut seen = 0u8;
    let mut p = start;
    while p + 4 <= end {
        let (Some(code), Some(len)) = (u16_at(msg, p), u16_at(msg, p + 2)) else { break };
        let data = match msg.get(p + 4..p + 4 + len as usize) {
            Some(d) if p + 4 + (len as usize) <= end => d,
            _ => break,
        };
        let kind = match code {
            ECS => {
                n.ip = subnet_client(data);
                SUBNET
            }
            MAC_RAW => {
                n.mac = <[u8; 6]>::try_from(data).ok();
                HARDWARE
            }
            MAC_TEXT => {
                n.mac = parse_mac(data);
                HARDWARE
            }
            _ => 0,
        };
        if seen & kind != 0 {
            return Err(Repeated);
        }
        seen |= kind;
        p += 4 + len as usize;
    }
    Ok(n)
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

    fn said(options: &[Vec<u8>]) -> Result<Named, Repeated> {
        let rdata = options.concat();
        named(&rdata, 0, rdata.len())
    }

    fn read(options: &[Vec<u8>]) -> Named {
        said(options).unwrap()
    }

    #[test]
    fn dnsmasq_add_subnet_and_add_mac() {
        // add-subnet=32,128 from 192.168.1.50, add-mac from 02:00:5e:10:00:01.
        let n = read(&[opt(ECS, &[0, 1, 32, 0, 192, 168, 1, 50]), opt(MAC_RAW, &[2, 0, 0x5e, 0x10, 0, 1])]);
        assert_eq!(n.ip, Some("192.168.1.50".parse().unwrap()));
        assert_eq!(crate::mac::mac_text(&n.mac.unwrap()), "02:00:5e:10:00:01");
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
        assert_eq!(named(&bad, 0, bad.len()), Ok(Named::default()));
    }

    const C: [u8; 8] = [0, 1, 32, 0, 192, 168, 1, 50];
    const X: [u8; 8] = [0, 1, 32, 0, 192, 168, 1, 51];
    const M: [u8; 6] = [2, 0, 0x5e, 0x10, 0, 1];
    const F: [u8; 6] = [2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];

    #[test]
    fn one_of_each_in_either_order_among_other_options() {
        // strip-subnet strip-mac: dnsmasq's MAC, then its ECS.
        let both = Named { ip: Some("192.168.1.50".parse().unwrap()), mac: Some(M) };
        assert_eq!(read(&[opt(MAC_RAW, &M), opt(ECS, &C)]), both);
        assert_eq!(read(&[opt(ECS, &C), opt(MAC_RAW, &M)]), both);
        // A cookie and padding are neither.
        let cookie = opt(10, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(read(&[cookie.clone(), opt(MAC_TEXT, b"02:00:5e:10:00:01"), opt(12, &[0; 4]), opt(ECS, &C)]), both);
        assert_eq!(read(&[cookie.clone(), cookie]), Named::default());
    }

    #[test]
    fn two_subnets_or_two_macs_in_any_form_are_repeated() {
        // What dnsmasq forwards without strip-subnet/strip-mac for a client
        // that brought its own (see the module's table): the last is not
        // always dnsmasq's, so no order is trusted.
        let b64 = opt(MAC_TEXT, b"AgBeEAAB");
        let cases: [&[Vec<u8>]; 9] = [
            &[opt(ECS, &X), opt(ECS, &C), opt(MAC_RAW, &M)],
            &[opt(ECS, &C), opt(ECS, &X)],
            &[opt(MAC_RAW, &F), opt(MAC_RAW, &M)],
            &[opt(MAC_RAW, &F), opt(MAC_TEXT, b"02:00:5e:10:00:01"), opt(ECS, &C)],
            &[opt(MAC_TEXT, b"02:aa:bb:cc:dd:ee"), opt(MAC_RAW, &M), opt(ECS, &C)],
            &[opt(MAC_RAW, &F), b64.clone(), opt(ECS, &C)],
            &[b64.clone(), opt(MAC_TEXT, b"02:00:5e:10:00:01")],
            // An option that names no one still counts: a /24 or a 0.0.0.0/32
            // beside a whole address, a MAC of the wrong length beside a good one.
            &[opt(ECS, &[0, 1, 24, 0, 192, 168, 1]), opt(ECS, &C)],
            &[opt(MAC_RAW, &[1, 2, 3]), opt(ECS, &[0, 1, 32, 0, 0, 0, 0, 0]), opt(MAC_RAW, &M)],
        ];
        for (i, options) in cases.iter().enumerate() {
            assert_eq!(said(options), Err(Repeated), "case {i}");
        }
        // A repeat past the first two options is found too.
        assert_eq!(said(&[opt(ECS, &C), opt(10, &[0; 8]), opt(12, &[0; 2]), opt(ECS, &C)]), Err(Repeated));
    }
}
