//! The benchmark's upstream: answers every A query with one address derived
//! from the name (a zone as large as the queries make it), TTL one day, and
//! every other type with an empty NOERROR answer. One thread, no allocation
//! per packet, so it stays a small fraction of a core at the rates the
//! benchmark forwards; bench/redline.py checks that from /proc.
//!
//!     cargo run --release --example bench-upstream -- 127.0.0.1:5399 [TTL | real] [COUNT_FILE]
//!
//! TTL: every answer's, in seconds. `real`: each name gets one of the TTLs
//! common on the Internet (30 s, 1, 5, 10 min, 1 h, 1 d), fixed per name.
//! COUNT_FILE: rewritten every 100 ms with the number of queries answered,
//! so a benchmark can check a server's own upstream counter against it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hydradns::wire;

/// End of the question section, or None when the packet is not one query.
fn question_end(msg: &[u8]) -> Option<usize> {
    if msg.len() < 12 || msg[4..6] != [0, 1] {
        return None;
    }
    let end = 12 + wire::plain_name_len(msg, 12)? + 4;
    (end <= msg.len()).then_some(end)
}

fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:5399".into());
    let ttl = std::env::args().nth(2);
    let real = ttl.as_deref() == Some("real");
    let fixed: u32 = ttl.filter(|t| t != "real").map_or(86_400, |t| t.parse().expect("TTL: seconds or 'real'"));
    let sock = UdpSocket::bind(&addr).expect("bind");
    let answered = Arc::new(AtomicU64::new(0));
    if let Some(path) = std::env::args().nth(3) {
        let answered = answered.clone();
        // Renamed into place, so a reader never sees a half-written count.
        let tmp = format!("{path}.tmp");
        std::thread::spawn(move || {
            loop {
                std::fs::write(&tmp, format!("{}\n", answered.load(Relaxed))).expect("count file");
                std::fs::rename(&tmp, &path).expect("count file");
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
    let mut buf = [0u8; 4096];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf[..4000]) else { continue };
        let Some(end) = question_end(&buf[..n]) else { continue };
        let qtype = u16::from_be_bytes([buf[end - 4], buf[end - 3]]);
        // QR, RD copied, RA; one question, no authority or additional data.
        buf[2] = 0x80 | (buf[2] & 0x01);
        buf[3] = 0x80;
        buf[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
        let mut len = end;
        if qtype == 1 {
            buf[7] = 1;
            let h = buf[12..end - 4]
                .iter()
                .fold(0x811c_9dc5_u32, |h, &b| (h ^ u32::from(b.to_ascii_lowercase())).wrapping_mul(0x0100_0193));
            const REAL: [u32; 6] = [30, 60, 300, 600, 3600, 86_400];
            let t = if real { REAL[(h >> 16) as usize % REAL.len()] } else { fixed }.to_be_bytes();
            let rr = [0xc0, 12, 0, 1, 0, 1, t[0], t[1], t[2], t[3], 0, 4, 198, 18, (h >> 8) as u8, h as u8];
            buf[end..end + rr.len()].copy_from_slice(&rr);
            len += rr.len();
        }
        if sock.send_to(&buf[..len], peer).is_ok() {
            answered.fetch_add(1, Relaxed);
        }
    }
}
