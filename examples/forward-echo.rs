//! The echo responder for the mix: answers each query with itself, QR set,
//! except names under `miss.example`, which it relays to an upstream and
//! back, as any forwarder must. In the benchmark's mix that is about the least
//! a server can do for the same queries (one packet pair per query, a second
//! pair per miss), so the gateway can be compared with a floor that pays for
//! the same upstream traffic. Like the echo responder: one thread, one socket
//! (the upstream's answers come back to it too), one blocking receive and one
//! send per packet, no allocation per packet.
//!
//!     cargo run --release --example forward-echo -- 127.0.0.1:5301 127.0.0.1:5399
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, UdpSocket};

use hydradns::wire;

const MISS: &[u8] = b"\x04miss\x07example\x00";

/// Whether the packet's question is a name under `miss.example`.
fn is_miss(msg: &[u8]) -> bool {
    wire::plain_name_len(msg, 12).is_some_and(|len| msg[12..12 + len].ends_with(MISS))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:5301".into());
    let upstream: SocketAddr = args.next().unwrap_or_else(|| "127.0.0.1:5399".into()).parse().expect("upstream");
    let sock = UdpSocket::bind(&addr).expect("bind");
    // Relayed queries by the ID they carry upstream: who asked, with which ID.
    // Fixed size; a wrapped ID overwrites an old entry, as a lost answer would.
    let mut pending: Vec<Option<(SocketAddr, [u8; 2])>> = vec![None; 65536];
    let mut next_id: u16 = 0;
    let mut buf = [0u8; 4096];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else { continue };
        if n < 12 {
            continue;
        }
        if peer == upstream {
            let id = u16::from_be_bytes([buf[0], buf[1]]);
            if let Some((client, orig)) = pending[usize::from(id)].take() {
                buf[..2].copy_from_slice(&orig);
                let _ = sock.send_to(&buf[..n], client);
            }
        } else if is_miss(&buf[..n]) {
            pending[usize::from(next_id)] = Some((peer, [buf[0], buf[1]]));
            buf[..2].copy_from_slice(&next_id.to_be_bytes());
            next_id = next_id.wrapping_add(1);
            let _ = sock.send_to(&buf[..n], upstream);
        } else {
            buf[2] |= 0x80;
            let _ = sock.send_to(&buf[..n], peer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_miss;

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
}
