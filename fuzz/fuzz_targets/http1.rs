//! A DoH server's bytes on an HTTP/1.1 connection after one request: any
//! head, chunking, trailers and body, fed in three reads. An error ends the
//! connection, never a panic; unread input stays within one message's worth.
#![no_main]

use hydradns::config::upstream::Upstream;
use hydradns::upstream::https::{Http1, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Upstream::Encrypted(endpoint)) = Upstream::parse("https://dns.example/dns-query") else { return };
    let target = Target::new(&endpoint);
    let mut h = Http1::default();
    let mut out = Vec::new();
    h.request(&target, &[0u8; 29], &mut out);
    let (mut input, mut events) = (Vec::new(), Vec::new());
    let third = data.len() / 3;
    for piece in [&data[..third], &data[third..2 * third], &data[2 * third..]] {
        input.extend_from_slice(piece);
        if h.read(&mut input, &mut events).is_err() {
            return;
        }
        if h.room() && !h.finished() {
            h.request(&target, &[0u8; 29], &mut out);
        }
    }
});
