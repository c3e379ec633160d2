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
    netlink::dump(RTM_GETNEIGH, NDMSG, AF_INET6, |kind, body| neighbour(kind, body, &mut out))?;
    Ok(out)
}

/// Adds the neighbour one message of a dump describes to `out`, if it has
/// a usable Ethernet address.
fn neighbour(kind: u16, body: &[u8], out: &mut Vec<(IpAddr, [u8; 6])>) {
    if kind != RTM_NEWNEIGH || body.len() < NDMSG {
        return;
    }
    let state = u16::from_ne_bytes([body[8], body[9]]);
    let (mut ip, mut mac) = (None, None);
    for (kind, data) in netlink::attributes(&body[NDMSG..]) {
        match (kind, data.len()) {
            (NDA_DST, 16) => ip = <[u8; 16]>::try_from(data).ok().map(Ipv6Addr::from),
            (NDA_LLADDR, 6) => mac = <[u8; 6]>::try_from(data).ok(),
            _ => {}
        }
    }
    if let (Some(ip), Some(mac), true) = (ip, mac, state & NUD_UNUSABLE == 0) {
        if mac != [0; 6] {
            out.push((IpAddr::V6(ip), mac));
        }
    }
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

    /// Run by the test below inside a network namespace it made, with one
    /// neighbour in the table.
    #[test]
    #[ignore = "run inside a namespace by reads_what_the_kernel_holds"]
    fn in_a_namespace_with_one_neighbour() {
        let want: (IpAddr, [u8; 6]) = ("fd00::5".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 5]);
        assert!(ipv6().contains(&want), "{:?}", ipv6());
    }

    #[test]
    fn reads_what_the_kernel_holds() {
        // A namespace of our own with a veth link and one neighbour on it;
        // needs root, unshare and ip (CI has them), else says so and passes.
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "ip link add v0 type veth peer name v1 && ip link set v0 up && \
             ip -6 neigh add fd00::5 lladdr 02:00:5e:10:00:05 dev v0 nud permanent && \
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
