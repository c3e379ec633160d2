//! The networks this machine has an address on: who may ask when the config
//! sets no `allow_client`. As dnsmasq's `local-service`, a client on one of
//! our interfaces' networks is served, whatever its addresses (a LAN on the
//! ISP's global IPv6 prefix included), and a private address arriving from
//! anywhere else is not. Read from the kernel over rtnetlink at start and
//! reload, and again whenever it announces an address change
//! ([`follow`]), so a new DHCPv6 prefix or interface needs no reload.

use std::io;
use std::net::IpAddr;

use crate::access::AccessList;
use crate::netlink;

const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
/// `struct ifaddrmsg`: family, prefix length, flags, scope, interface index.
const IFADDRMSG: usize = 8;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

/// Loopback and the network of every address of every interface.
pub fn networks() -> io::Result<AccessList> {
    let mut list = AccessList::loopback();
    netlink::dump(RTM_GETADDR, IFADDRMSG, 0, &mut |kind, body| {
        if let Some(((net, prefix), local)) = network(kind, body) {
            let _ = list.add_network(net, Some(prefix));
            if let Some(local) = local {
                let _ = list.add_network(local, None);
            }
        }
    })?;
    Ok(list.sorted())
}

/// [`networks`], or the private ranges when the kernel cannot be asked (no
/// netlink in a jail), said in the log.
pub fn allowed_by_default() -> AccessList {
    // Once: every reload would say it again, and nothing changes between.
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    networks().unwrap_or_else(|e| {
        if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            log::warn!(
                "cannot read this machine's networks ({e}); serving the private ranges instead: {}",
                crate::access::PRIVATE.join(" ")
            );
        }
        AccessList::private()
    })
}

/// The network one `RTM_NEWADDR` describes, and our own address on it when
/// that is outside it: on a point-to-point link `IFA_ADDRESS` is the peer's
/// (the network reached) and `IFA_LOCAL` ours; elsewhere both are ours.
type Network = ((IpAddr, u32), Option<IpAddr>);

fn network(kind: u16, body: &[u8]) -> Option<Network> {
    if kind != RTM_NEWADDR {
        return None;
    }
    let prefix = u32::from(*body.get(1)?);
    let (mut address, mut local) = (None, None);
    for (kind, data) in netlink::attributes(body.get(IFADDRMSG..)?) {
        let ip = match data.len() {
            4 => IpAddr::from(<[u8; 4]>::try_from(data).ok()?),
            16 => IpAddr::from(<[u8; 16]>::try_from(data).ok()?),
            _ => continue,
        };
        match kind {
            IFA_ADDRESS => address = Some(ip),
            IFA_LOCAL => local = Some(ip),
            _ => {}
        }
    }
    let net = address.or(local)?;
    Some(((net, prefix), local.filter(|&l| l != net)))
}

/// Calls `changed` on a thread of its own each time the kernel announces
/// an address added, removed or renewed (the callee compares before
/// acting), until the socket fails.
pub fn follow(mut changed: impl FnMut() + Send + 'static) -> io::Result<()> {
    let events = netlink::Events::new(RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR)?;
    std::thread::Builder::new().name("hydradns-nets".into()).stack_size(64 << 10).spawn(move || {
        loop {
            if let Err(e) = events.wait() {
                log::warn!("stopped following this machine's networks: {e}");
                return;
            }
            changed();
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn addr(prefix: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut m = vec![0u8; IFADDRMSG];
        m[1] = prefix;
        for (kind, data) in attrs {
            m.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(data);
            m.resize((m.len() + 3) & !3, 0);
        }
        m
    }

    #[test]
    fn an_address_message_names_its_network() {
        let lan = addr(24, &[(IFA_ADDRESS, &[192, 0, 2, 1]), (IFA_LOCAL, &[192, 0, 2, 1])]);
        assert_eq!(network(RTM_NEWADDR, &lan), Some((("192.0.2.1".parse().unwrap(), 24), None)));
        let v6: [u8; 16] = "2001:db8:1::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
        assert_eq!(
            network(RTM_NEWADDR, &addr(64, &[(IFA_ADDRESS, &v6)])),
            Some((("2001:db8:1::1".parse().unwrap(), 64), None))
        );
        let ptp = addr(32, &[(IFA_LOCAL, &[10, 0, 0, 1]), (IFA_ADDRESS, &[10, 0, 0, 2])]);
        let ours = Some("10.0.0.1".parse().unwrap());
        assert_eq!(network(RTM_NEWADDR, &ptp), Some((("10.0.0.2".parse().unwrap(), 32), ours)), "the peer's, and ours");
        assert_eq!(network(RTM_GETADDR, &lan), None);
        for cut in 0..lan.len() {
            let _ = network(RTM_NEWADDR, &lan[..cut]);
        }
    }

    #[test]
    fn this_machine_is_on_its_loopback_network() {
        let nets = networks().unwrap();
        assert!(nets.allows("127.0.0.1".parse().unwrap()) && nets.allows("::1".parse().unwrap()));
    }
}
