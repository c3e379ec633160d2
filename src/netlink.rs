//! rtnetlink, the kernel's routing socket: a table dump (what `ip -6 neigh`
//! or `ip addr` print) and the address events, read without spawning `ip`.
//!
//! Messages are parsed with bounds checks only: a short or lying length ends
//! the walk, never a panic.

use std::io;
use std::os::fd::OwnedFd;

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `struct nlmsghdr`.
const HEADER: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
/// Replies read before giving up: a router's tables fit in a few.
const MAX_READS: usize = 256;
/// The largest family header a request carries (`struct ndmsg`, 12 bytes).
const MAX_REQUEST_BODY: usize = 16;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// Asks for a dump of the table `kind` (`RTM_GETNEIGH`, `RTM_GETADDR`) of
/// `family` (0 for all), whose request carries a `body_len`-byte family
/// header, and hands each reply's type and body (the bytes after its
/// header) to `each`, until the dump ends.
pub fn dump(kind: u16, body_len: usize, family: u8, each: &mut dyn FnMut(u16, &[u8])) -> io::Result<()> {
    let body_len = body_len.clamp(1, MAX_REQUEST_BODY);
    // Protocol 0, NETLINK_ROUTE (rustix takes `None` for it).
    let fd = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    let mut req = [0u8; HEADER + MAX_REQUEST_BODY];
    let len = HEADER + body_len;
    req[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&kind.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[HEADER] = family;
    rustix::net::sendto(&fd, &req[..len], SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
    let mut buf = vec![0u8; 32 * 1024];
    for _ in 0..MAX_READS {
        let (n, _) = rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty())?;
        if n == 0 || messages(&buf[..n.min(buf.len())], each) {
            return Ok(());
        }
    }
    Ok(())
}

/// Hands each message in one read to `each`; true when a dump is over (its
/// done message, an error, or a length that does not add up).
pub fn messages(mut buf: &[u8], each: &mut dyn FnMut(u16, &[u8])) -> bool {
    while buf.len() >= HEADER {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let Some(kind) = u16_at(buf, 4) else { return true };
        if len < HEADER || len > buf.len() {
            return true;
        }
        match kind {
            NLMSG_DONE | NLMSG_ERROR => return true,
            _ => each(kind, &buf[HEADER..len]),
        }
        buf = buf.get(align(len)..).unwrap_or_default();
    }
    false
}

/// The attributes (type, data) in `attrs`, a message's bytes after its
/// fixed family header.
pub fn attributes(mut attrs: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let (len, kind) = (u16_at(attrs, 0)? as usize, u16_at(attrs, 2)?);
        let data = attrs.get(4..len.max(4))?;
        attrs = attrs.get(align(len.max(4))..).unwrap_or_default();
        Some((kind, data))
    })
}

/// A socket that hears the kernel's announcements to some multicast groups
/// (`RTMGRP_*`): its reader sleeps until one comes, so it costs an idle
/// gateway no wake-up.
pub struct Events {
    fd: OwnedFd,
}

impl Events {
    /// Joins `groups`, a mask of `RTMGRP_*` bits.
    pub fn new(groups: u32) -> io::Result<Events> {
        let fd = rustix::net::socket_with(AddressFamily::NETLINK, SocketType::RAW, SocketFlags::CLOEXEC, None)?;
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, groups))?;
        Ok(Events { fd })
    }

    /// Blocks until something is announced, then reads every message that
    /// waits: the caller reads the table again rather than the messages,
    /// so an overflow (`ENOBUFS`, messages lost) is just one more change.
    pub fn wait(&self) -> io::Result<()> {
        let mut buf = [0u8; 8192];
        let mut flags = RecvFlags::empty();
        loop {
            match rustix::net::recv(&self.fd, &mut buf[..], flags) {
                Ok(_) | Err(rustix::io::Errno::NOBUFS) => flags = RecvFlags::DONTWAIT,
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = vec![0u8; HEADER];
        m[0..4].copy_from_slice(&((HEADER + body.len()) as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(body);
        m.resize(align(m.len()), 0);
        m
    }

    #[test]
    fn messages_are_walked_until_done_and_lies_stop_the_walk() {
        let mut buf = message(20, &[1, 2, 3]);
        buf.extend(message(21, &[4; 8]));
        let mut seen = Vec::new();
        assert!(!messages(&buf, &mut |k, b: &[u8]| seen.push((k, b.to_vec()))));
        assert_eq!(seen, [(20, vec![1, 2, 3]), (21, vec![4; 8])]);
        buf.extend(message(NLMSG_DONE, &[0; 4]));
        buf.extend(message(20, &[9]));
        let mut kinds = Vec::new();
        assert!(messages(&buf, &mut |k, _: &[u8]| kinds.push(k)));
        assert_eq!(kinds, [20, 21], "nothing after the done message");
        for cut in 0..buf.len() {
            messages(&buf[..cut], &mut |_, _: &[u8]| {});
        }
        let mut lying = message(20, &[1; 4]);
        lying[0..4].copy_from_slice(&4000u32.to_ne_bytes());
        assert!(messages(&lying, &mut |_, _: &[u8]| panic!("a message longer than the read")));
    }

    #[test]
    fn attributes_are_read_in_their_padding() {
        // Type 1, 4 bytes of data; type 2, 1 byte padded to 4; then a cut one.
        let attrs = [8, 0, 1, 0, 10, 11, 12, 13, 5, 0, 2, 0, 7, 0, 0, 0, 40, 0, 3, 0, 1];
        let got: Vec<(u16, Vec<u8>)> = attributes(&attrs).map(|(k, d)| (k, d.to_vec())).collect();
        assert_eq!(got, [(1, vec![10, 11, 12, 13]), (2, vec![7])]);
    }
}
