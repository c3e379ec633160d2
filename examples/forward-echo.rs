//! The echo responder for the mix: answers each query with itself, QR set,
//! except names under `miss.example`, which it relays to an upstream and
//! back, as any forwarder must. In the benchmark's mix that is about the least
//! a server can do for the same queries (one packet pair per query, a second
//! pair per miss), so the gateway can be compared with a floor that pays for
//! the same upstream traffic. Like the echo responder: one thread, one socket
//! (the upstream's answers come back to it too), one blocking receive and one
//! send per packet, no allocation per packet.
//!
//! With `--batch` it takes up to 16 datagrams per `recvmmsg` and sends the
//! batch's answers and relayed queries with one `sendmmsg` each, as the
//! gateway does: the floor for a forwarder that batches its system calls
//! (the plain mode pays one call per packet, as the echo responder does).
//!
//!     cargo run --release --example forward-echo -- 127.0.0.1:5301 127.0.0.1:5399 [--batch]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, UdpSocket};

use hydradns::{sys, wire};
use rustix::net::{SendFlags, SocketAddrAny};

const MISS: &[u8] = b"\x04miss\x07example\x00";

/// Whether the packet's question is a name under `miss.example`.
fn is_miss(msg: &[u8]) -> bool {
    wire::plain_name_len(msg, 12).is_some_and(|len| msg[12..12 + len].ends_with(MISS))
}

/// Where each packet goes: the relay's one piece of state, shared by both modes.
struct Relay {
    upstream: SocketAddr,
    /// Relayed queries by the ID they carry upstream: who asked, with which ID.
    /// Fixed size; a wrapped ID overwrites an old entry, as a lost answer would.
    pending: Vec<Option<(SocketAddr, [u8; 2])>>,
    next_id: u16,
}

impl Relay {
    fn new(upstream: SocketAddr) -> Relay {
        Relay { upstream, pending: vec![None; 65536], next_id: 0 }
    }

    /// For a packet from `peer`: where it goes, the ID it goes under, and
    /// whether to set QR (an echoed query). None: dropped.
    fn route(&mut self, msg: &[u8], peer: SocketAddr) -> Option<(SocketAddr, [u8; 2], bool)> {
        if msg.len() < 12 {
            return None;
        }
        if peer == self.upstream {
            let id = u16::from_be_bytes([msg[0], msg[1]]);
            let (client, orig) = self.pending[usize::from(id)].take()?;
            Some((client, orig, false))
        } else if is_miss(msg) {
            self.pending[usize::from(self.next_id)] = Some((peer, [msg[0], msg[1]]));
            let id = self.next_id.to_be_bytes();
            self.next_id = self.next_id.wrapping_add(1);
            Some((self.upstream, id, false))
        } else {
            Some((peer, [msg[0], msg[1]], true))
        }
    }
}

/// Gives the packet in `msg` the ID and QR bit [`Relay::route`] chose.
fn rewrite(msg: &mut [u8], id: [u8; 2], qr: bool) {
    msg[..2].copy_from_slice(&id);
    if qr {
        msg[2] |= 0x80;
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:5301".into());
    let upstream: SocketAddr = args.next().unwrap_or_else(|| "127.0.0.1:5399".into()).parse().expect("upstream");
    let batched = args.next().is_some_and(|a| a == "--batch");
    let sock = UdpSocket::bind(&addr).expect("bind");
    let mut relay = Relay::new(upstream);
    if batched {
        batch_loop(&sock, relay);
    }
    let mut buf = [0u8; 4096];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else { continue };
        if let Some((to, id, qr)) = relay.route(&buf[..n], peer) {
            rewrite(&mut buf[..n], id, qr);
            let _ = sock.send_to(&buf[..n], to);
        }
    }
}

const BATCH: usize = 16;

/// The same relay, a batch at a time: one `recvmmsg` (waiting for the first
/// datagram), then one `sendmmsg` for the answers and one for the queries
/// relayed upstream.
fn batch_loop(sock: &UdpSocket, mut relay: Relay) -> ! {
    let mut batch = sys::RecvBatch::new(BATCH, 4096);
    let mut answers: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(4096)).collect();
    let mut peers: Vec<SocketAddrAny> = Vec::with_capacity(BATCH);
    let mut relayed: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(4096)).collect();
    let to_upstream: Vec<SocketAddrAny> = vec![relay.upstream.into(); BATCH];
    loop {
        let Ok(n) = batch.recv(sock, true) else { continue };
        let mut nr = 0;
        peers.clear();
        for i in 0..n {
            let (msg, Some(peer)) = (batch.datagram(i), batch.peer(i)) else { continue };
            let Some((to, id, qr)) = relay.route(msg, peer) else { continue };
            let out = if to == relay.upstream {
                nr += 1;
                &mut relayed[nr - 1]
            } else {
                peers.push(to.into());
                &mut answers[peers.len() - 1]
            };
            out.clear();
            out.extend_from_slice(msg);
            rewrite(out, id, qr);
        }
        let _ =
            sys::sendmmsg(sock, relayed[..nr].iter().map(Vec::as_slice), Some(&to_upstream[..nr]), SendFlags::empty());
        let _ = sys::sendmmsg(sock, answers[..peers.len()].iter().map(Vec::as_slice), Some(&peers), SendFlags::empty());
    }
}

#[cfg(test)]
mod tests {
    use super::{Relay, batch_loop, is_miss};
    use std::net::UdpSocket;
    use std::time::Duration;

    fn query(name: &str) -> Vec<u8> {
        hydradns::wire::build::query(1, name, 1, None).unwrap()
    }

    #[test]
    fn only_names_under_miss_example_are_relayed() {
        assert!(is_miss(&query("u7.miss.example")));
        assert!(!is_miss(&query("miss.example.com")));
        assert!(!is_miss(&query("xmiss.example")));
        assert!(!is_miss(&query("example.com")));
        assert!(!is_miss(&[0; 12]));
        assert!(!is_miss(&query("u7.miss.example")[..20]));
    }

    /// The batching relay answers a plain query with itself and relays a
    /// miss upstream under its own ID, then back to the client under the
    /// client's: a wrong yardstick would skew every figure set against it.
    #[test]
    fn the_batching_relay_echoes_and_relays_misses_both_ways() {
        let upstream = UdpSocket::bind("127.0.0.1:0").unwrap();
        upstream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let relay = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (relay_addr, upstream_addr) = (relay.local_addr().unwrap(), upstream.local_addr().unwrap());
        let ids_from_7 = Relay { next_id: 7, ..Relay::new(upstream_addr) };
        std::thread::spawn(move || batch_loop(&relay, ids_from_7));
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];

        let plain = hydradns::wire::build::query(0x1111, "example.com", 1, None).unwrap();
        client.send_to(&plain, relay_addr).unwrap();
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..2], &plain[..2]);
        assert_ne!(buf[2] & 0x80, 0, "QR set");
        assert_eq!(&buf[3..n], &plain[3..]);

        let miss = hydradns::wire::build::query(0x2222, "u1.miss.example", 1, None).unwrap();
        client.send_to(&miss, relay_addr).unwrap();
        let (n, from) = upstream.recv_from(&mut buf).unwrap();
        assert_eq!(from, relay_addr);
        assert_eq!(&buf[..2], &7u16.to_be_bytes(), "relayed under the relay's ID");
        assert_eq!(&buf[2..n], &miss[2..]);
        buf[2] |= 0x80;
        upstream.send_to(&buf[..n], relay_addr).unwrap();
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..2], &miss[..2], "back under the client's ID");
        assert_eq!(&buf[3..n], &miss[3..]);
    }
}
