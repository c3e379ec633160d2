//! The kernel's IPv6 neighbour table: the MAC of a client on a local link
//! that asks over IPv6. `/proc/net/arp` holds IPv4 only, and there is no
//! /proc file for IPv6, so this asks the kernel over rtnetlink (an
//! `RTM_GETNEIGH` dump, what `ip -6 neigh` does) — a few hundred bytes of
//! code instead of a process spawned every look.
//!
//! Read where the ARP table is ([`super::names::NameBook`]), every few
//! seconds at most, never on the query path.

use std::net::{IpAddr, Ipv6Addr};

use crate::netlink;

const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `NUD_INCOMPLETE | NUD_FAILED | NUD_NOARP`: no usable hardware address.
const NUD_UNUSABLE: u16 = 0x01 | 0x20 | 0x40;
/// `struct ndmsg`.
const NDMSG: usize = 12;
/// `AF_INET6` as `ndm_family` holds it.
const AF_INET6: u8 = 10;

/// Every IPv6 neighbour with a usable Ethernet address. Empty if the kernel
/// cannot be asked (no netlink in a jail): clients are then known by address.
pub fn ipv6() -> Vec<(IpAddr, [u8; 6])> {
    dump().unwrap_or_default()
}

fn dump() -> std::io::Result<Vec<(IpAddr, [u8; 6])>> {
    let mut out = Vec::new();
    netlink::dump(RTM_GETNEIGH, NDMSG, AF_INET6, &mut |kind, body| out.extend(usable(kind, body)))?;
    Ok(out)
}

/// The address and Ethernet address of one message of a neighbour dump,
/// if it is a neighbour with a usable one.
fn usable(kind: u16, body: &[u8]) -> Option<(IpAddr, [u8; 6])> {
    let (_, ip, mac) = entry(kind, body)?;
    Some((ip, mac?))
}

/// One message of a neighbour dump: its link's index, its address, and its
/// Ethernet address if it has a usable one.
fn entry(kind: u16, body: &[u8]) -> Option<(u32, IpAddr, Option<[u8; 6]>)> {
    if kind != RTM_NEWNEIGH || body.len() < NDMSG {
        return None;
    }
    let link = u32::from_ne_bytes([body[4], body[5], body[6], body[7]]);
    let state = u16::from_ne_bytes([body[8], body[9]]);
    let (mut ip, mut mac) = (None, None);
    for (kind, data) in netlink::attributes(&body[NDMSG..]) {
        match (kind, data.len()) {
            (NDA_DST, 16) => ip = <[u8; 16]>::try_from(data).ok().map(|a| IpAddr::V6(Ipv6Addr::from(a))),
            (NDA_DST, 4) => ip = <[u8; 4]>::try_from(data).ok().map(IpAddr::from),
            (NDA_LLADDR, 6) => mac = <[u8; 6]>::try_from(data).ok(),
            _ => {}
        }
    }
    Some((link, ip?, mac.filter(|m| state & NUD_UNUSABLE == 0 && *m != [0; 6])))
}

const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
/// `struct rtmsg`.
const RTMSG: usize = 12;
const RTA_OIF: u16 = 4;
const RTN_UNICAST: u8 = 1;

/// The addresses of the neighbours that are not the house's devices: those
/// on the links a default route leaves by (the ISP's side: its gateway, a
/// modem, the devices behind an ISP's box), which the router's own lookups
/// fill in, and those with one of this machine's own hardware addresses
/// (the router itself, as its own advertisements may put it there). Empty
/// when the kernel cannot be asked. A default route over several links at
/// once (multipath) names none of them.
pub fn not_devices() -> Vec<IpAddr> {
    let mut links = Vec::new();
    let _ = netlink::dump(RTM_GETROUTE, RTMSG, 0, &mut |kind, body| links.extend(default_route_link(kind, body)));
    let mut own = Vec::new();
    let _ = netlink::dump(RTM_GETLINK, IFINFOMSG, 0, &mut |kind, body| own.extend(link_address(kind, body)));
    let mut out = Vec::new();
    let _ = netlink::dump(RTM_GETNEIGH, NDMSG, 0, &mut |kind, body| {
        if let Some((link, ip, mac)) = entry(kind, body) {
            if links.contains(&link) || mac.is_some_and(|m| own.contains(&m)) {
                out.push(ip);
            }
        }
    });
    out
}

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
/// `struct ifinfomsg`.
const IFINFOMSG: usize = 16;
const IFLA_ADDRESS: u16 = 1;

/// A link's Ethernet address, if the message is a link with one.
fn link_address(kind: u16, body: &[u8]) -> Option<[u8; 6]> {
    if kind != RTM_NEWLINK || body.len() < IFINFOMSG {
        return None;
    }
    netlink::attributes(&body[IFINFOMSG..])
        .find_map(|(kind, data)| (kind == IFLA_ADDRESS).then(|| <[u8; 6]>::try_from(data).ok())?)
        .filter(|m| *m != [0; 6])
}

/// The link a default route (`0.0.0.0/0`, `::/0`, with or without a source
/// prefix) leaves by, if the message is one.
fn default_route_link(kind: u16, body: &[u8]) -> Option<u32> {
    if kind != RTM_NEWROUTE || body.len() < RTMSG || body[1] != 0 || body[7] != RTN_UNICAST {
        return None;
    }
    netlink::attributes(&body[RTMSG..])
        .find_map(|(kind, data)| (kind == RTA_OIF).then(|| <[u8; 4]>::try_from(data).ok().map(u32::from_ne_bytes))?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The body of one `RTM_NEWNEIGH` as the kernel writes it: ndmsg,
    /// NDA_DST, NDA_LLADDR.
    fn neigh(ip: &str, mac: [u8; 6], state: u16) -> Vec<u8> {
        let mut m = vec![0u8; NDMSG];
        m[0] = AF_INET6;
        m[8..10].copy_from_slice(&state.to_ne_bytes());
        m.extend_from_slice(&20u16.to_ne_bytes());
        m.extend_from_slice(&NDA_DST.to_ne_bytes());
        m.extend_from_slice(&ip.parse::<Ipv6Addr>().unwrap().octets());
        m.extend_from_slice(&10u16.to_ne_bytes());
        m.extend_from_slice(&NDA_LLADDR.to_ne_bytes());
        m.extend_from_slice(&mac);
        m.extend_from_slice(&[0, 0]);
        m
    }

    #[test]
    fn usable_entries_are_read() {
        let mut out = Vec::new();
        let neighbour = |kind, body: &[u8], out: &mut Vec<(IpAddr, [u8; 6])>| out.extend(usable(kind, body));
        neighbour(RTM_NEWNEIGH, &neigh("fd00::50", [2, 0, 0x5e, 0x10, 0, 1], 0x02), &mut out);
        neighbour(RTM_NEWNEIGH, &neigh("fd00::51", [2, 0, 0x5e, 0x10, 0, 2], 0x01), &mut out);
        neighbour(RTM_NEWNEIGH, &neigh("fe80::1", [2, 0, 0x5e, 0x10, 0, 3], 0x04), &mut out);
        neighbour(RTM_GETNEIGH, &neigh("fe80::2", [2, 0, 0x5e, 0x10, 0, 4], 0x04), &mut out);
        let want: Vec<(IpAddr, [u8; 6])> = vec![
            ("fd00::50".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 1]),
            ("fe80::1".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 3]),
        ];
        assert_eq!(out, want, "an incomplete entry and another message are left out");
        // Cut short: no panic, and only a whole entry (the last padding is
        // not needed) is read.
        let whole = neigh("fd00::52", [2, 0, 0x5e, 0x10, 0, 4], 0x02);
        for cut in 0..whole.len() {
            neighbour(RTM_NEWNEIGH, &whole[..cut], &mut out);
        }
        let whole_entry: (IpAddr, [u8; 6]) = ("fd00::52".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 4]);
        assert!(out[2..].iter().all(|e| *e == whole_entry), "{out:?}");
    }

    /// The body of one `RTM_NEWROUTE`: rtmsg (destination prefix `dst_len`,
    /// type `kind`) and RTA_OIF.
    fn route(dst_len: u8, kind: u8, link: u32) -> Vec<u8> {
        let mut m = vec![0u8; RTMSG];
        m[1] = dst_len;
        m[7] = kind;
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&RTA_OIF.to_ne_bytes());
        m.extend_from_slice(&link.to_ne_bytes());
        m
    }

    #[test]
    fn a_default_route_names_its_link() {
        assert_eq!(default_route_link(RTM_NEWROUTE, &route(0, RTN_UNICAST, 7)), Some(7));
        assert_eq!(default_route_link(RTM_NEWROUTE, &route(24, RTN_UNICAST, 7)), None, "not a default route");
        assert_eq!(default_route_link(RTM_NEWROUTE, &route(0, 2, 7)), None, "a local route");
        assert_eq!(default_route_link(RTM_GETROUTE, &route(0, RTN_UNICAST, 7)), None);
        let whole = route(0, RTN_UNICAST, 7);
        for cut in 0..whole.len() {
            assert_eq!(default_route_link(RTM_NEWROUTE, &whole[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn a_link_gives_its_ethernet_address() {
        let link = |mac: &[u8]| {
            let mut m = vec![0u8; IFINFOMSG];
            m.extend_from_slice(&((4 + mac.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&IFLA_ADDRESS.to_ne_bytes());
            m.extend_from_slice(mac);
            m.resize(m.len().next_multiple_of(4), 0);
            m
        };
        assert_eq!(link_address(RTM_NEWLINK, &link(&[2, 0, 0x5e, 0, 0, 7])), Some([2, 0, 0x5e, 0, 0, 7]));
        assert_eq!(link_address(RTM_NEWLINK, &link(&[0; 6])), None, "loopback's");
        assert_eq!(link_address(RTM_NEWLINK, &link(&[0; 4])), None, "not Ethernet");
        assert_eq!(link_address(RTM_GETLINK, &link(&[2, 0, 0x5e, 0, 0, 7])), None);
    }

    /// Run by the test below inside a network namespace it made: a LAN link
    /// with a device on it, and a WAN link with the default route's gateway.
    #[test]
    #[ignore = "run inside a namespace by reads_what_the_kernel_holds"]
    fn in_a_namespace_with_one_neighbour() {
        let want: (IpAddr, [u8; 6]) = ("fd00::5".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 5]);
        assert!(ipv6().contains(&want), "{:?}", ipv6());
        let mut wan = not_devices();
        wan.sort();
        let gateway: IpAddr = "198.51.100.1".parse().unwrap();
        let gateway6: IpAddr = "fe80::1".parse().unwrap();
        let own: IpAddr = "fe80::7".parse().unwrap();
        assert_eq!(wan, vec![gateway, gateway6, own], "the WAN link's neighbours and the router itself, not the LAN's");
    }

    #[test]
    fn reads_what_the_kernel_holds() {
        // A namespace of our own: a LAN link with two devices and an entry
        // of the link's own MAC, a WAN link with the default route's
        // gateway; needs root, unshare and ip (CI has them), else says so and passes.
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "ip link add v0 type veth peer name v1 && ip link set v0 address 02:00:5e:10:00:07 && ip link set v0 up && \
             ip -6 neigh add fd00::5 lladdr 02:00:5e:10:00:05 dev v0 nud permanent && \
             ip neigh add 192.168.1.5 lladdr 02:00:5e:10:00:06 dev v0 nud permanent && \
             ip -6 neigh add fe80::7 lladdr 02:00:5e:10:00:07 dev v0 nud permanent && \
             ip link add w0 type veth peer name w1 && ip link set w0 up && \
             ip addr add 198.51.100.2/24 dev w0 && ip route add default via 198.51.100.1 dev w0 && \
             ip neigh add 198.51.100.1 lladdr 02:00:5e:10:00:01 dev w0 nud permanent && \
             ip -6 neigh add fe80::1 lladdr 02:00:5e:10:00:01 dev w0 nud permanent && \
             exec '{}' --exact client::neighbours::tests::in_a_namespace_with_one_neighbour --ignored",
            exe.display()
        );
        match std::process::Command::new("unshare").args(["-n", "sh", "-c", &script]).output() {
            Ok(o) if rustix::process::geteuid().is_root() => {
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(
                    o.status.success() && text.contains("1 passed"),
                    "{text}{}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            _ => eprintln!("skipped: needs root and unshare"),
        }
    }

    #[test]
    fn the_kernel_answers_the_dump() {
        // Whatever this machine's table holds: the request is understood and
        // the dump ends (an error here would make `ipv6` return nothing).
        assert!(dump().is_ok());
    }
}
