//! The kernel's IPv6 neighbour table: the MAC of a client on a local link
//! that asks over IPv6. `/proc/net/arp` holds IPv4 only, and there is no
//! /proc file for IPv6, so this asks the kernel over rtnetlink (an
//! `RTM_GETNEIGH` dump, what `ip -6 neigh` does) — a few hundred bytes of
//! code instead of a process spawned every look.
//!
//! Read where the ARP table is ([`super::names::NameBook`]), every few
//! seconds at most, never on the query path.

use std::net::{IpAddr, Ipv6Addr};

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType};

const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `NUD_INCOMPLETE | NUD_FAILED | NUD_NOARP`: no usable hardware address.
const NUD_UNUSABLE: u16 = 0x01 | 0x20 | 0x40;
/// `struct nlmsghdr` and `struct ndmsg`.
const HEADER: usize = 16;
const NDMSG: usize = 12;
/// Replies read before giving up: a router's table fits in a few.
const MAX_READS: usize = 256;

/// Every IPv6 neighbour with a usable Ethernet address. Empty if the kernel
/// cannot be asked (no netlink in a jail): clients are then known by address.
pub fn ipv6() -> Vec<(IpAddr, [u8; 6])> {
    dump().unwrap_or_default()
}

fn dump() -> std::io::Result<Vec<(IpAddr, [u8; 6])>> {
    // Protocol 0, NETLINK_ROUTE (rustix takes `None` for it).
    let fd = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    let mut req = [0u8; HEADER + NDMSG];
    req[0..4].copy_from_slice(&((HEADER + NDMSG) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[HEADER] = libc_af_inet6();
    rustix::net::sendto(&fd, &req, SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    for _ in 0..MAX_READS {
        let (n, _) = rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty())?;
        if n == 0 || parse(&buf[..n.min(buf.len())], &mut out) {
            return Ok(out);
        }
    }
    Ok(out)
}

/// `AF_INET6` as `ndm_family` holds it.
fn libc_af_inet6() -> u8 {
    AddressFamily::INET6.as_raw() as u8
}

/// Adds the neighbours in one read of a dump's replies to `out`; true when
/// the dump is over (its done message, or an error).
pub fn parse(mut buf: &[u8], out: &mut Vec<(IpAddr, [u8; 6])>) -> bool {
    let u16_at = |b: &[u8], at: usize| b.get(at..at + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]));
    while buf.len() >= HEADER {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let Some(kind) = u16_at(buf, 4) else { return true };
        if len < HEADER || len > buf.len() {
            return true;
        }
        let msg = &buf[..len];
        match kind {
            NLMSG_DONE | NLMSG_ERROR => return true,
            RTM_NEWNEIGH if msg.len() >= HEADER + NDMSG => {
                let state = u16_at(msg, HEADER + 8).unwrap_or(0);
                let (mut ip, mut mac) = (None, None);
                let mut attrs = &msg[HEADER + NDMSG..];
                while let (Some(alen), Some(atype)) = (u16_at(attrs, 0), u16_at(attrs, 2)) {
                    let alen = alen as usize;
                    let Some(data) = attrs.get(4..alen.max(4)) else { break };
                    match (atype, data.len()) {
                        (NDA_DST, 16) => ip = <[u8; 16]>::try_from(data).ok().map(Ipv6Addr::from),
                        (NDA_LLADDR, 6) => mac = <[u8; 6]>::try_from(data).ok(),
                        _ => {}
                    }
                    let next = (alen.max(4) + 3) & !3;
                    attrs = attrs.get(next..).unwrap_or_default();
                }
                if let (Some(ip), Some(mac), true) = (ip, mac, state & NUD_UNUSABLE == 0) {
                    if mac != [0; 6] {
                        out.push((IpAddr::V6(ip), mac));
                    }
                }
            }
            _ => {}
        }
        buf = buf.get((len + 3) & !3..).unwrap_or_default();
    }
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// One `RTM_NEWNEIGH` as the kernel writes it: header, ndmsg, NDA_DST, NDA_LLADDR.
    fn neigh(ip: &str, mac: [u8; 6], state: u16) -> Vec<u8> {
        let mut m = vec![0u8; HEADER + NDMSG];
        m[4..6].copy_from_slice(&RTM_NEWNEIGH.to_ne_bytes());
        m[HEADER] = 10;
        m[HEADER + 8..HEADER + 10].copy_from_slice(&state.to_ne_bytes());
        m.extend_from_slice(&20u16.to_ne_bytes());
        m.extend_from_slice(&NDA_DST.to_ne_bytes());
        m.extend_from_slice(&ip.parse::<Ipv6Addr>().unwrap().octets());
        m.extend_from_slice(&10u16.to_ne_bytes());
        m.extend_from_slice(&NDA_LLADDR.to_ne_bytes());
        m.extend_from_slice(&mac);
        m.extend_from_slice(&[0, 0]);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn a_dump_reads_usable_entries_until_done() {
        let mut buf = neigh("fd00::50", [2, 0, 0x5e, 0x10, 0, 1], 0x02);
        buf.extend(neigh("fd00::51", [2, 0, 0x5e, 0x10, 0, 2], 0x01));
        buf.extend(neigh("fe80::1", [2, 0, 0x5e, 0x10, 0, 3], 0x04));
        let mut out = Vec::new();
        assert!(!parse(&buf, &mut out), "no done message yet");
        let want: Vec<(IpAddr, [u8; 6])> = vec![
            ("fd00::50".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 1]),
            ("fe80::1".parse().unwrap(), [2, 0, 0x5e, 0x10, 0, 3]),
        ];
        assert_eq!(out, want, "an incomplete entry is left out");
        let mut done = vec![0u8; 20];
        done[0..4].copy_from_slice(&20u32.to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        assert!(parse(&done, &mut out));
        // Cut short or lying about lengths: stops, no panic.
        let whole = neigh("fd00::52", [2, 0, 0x5e, 0x10, 0, 4], 0x02);
        for cut in 0..whole.len() {
            parse(&whole[..cut], &mut out);
        }
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
