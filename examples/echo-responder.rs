//! The floor of one UDP packet in, one packet out on this machine: answers
//! every datagram with itself, QR set. Benchmarks run it beside the gateway.
//!
//!     cargo run --release --example echo-responder -- 127.0.0.1:5300
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::UdpSocket;

fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:5300".into());
    let sock = UdpSocket::bind(&addr).expect("bind");
    let mut buf = [0u8; 4096];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else { continue };
        if n >= 3 {
            buf[2] |= 0x80;
        }
        let _ = sock.send_to(&buf[..n], peer);
    }
}
