//! A DoH server's bytes on an HTTP/2 connection after one request: frames
//! of any kind, sizes and order, fed in two reads. An error ends the
//! connection, never a panic; what stays unread is at most one frame.
#![no_main]

use hydradns::config::upstream::Upstream;
use hydradns::upstream::http2::Session;
use hydradns::upstream::https::Target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Upstream::Encrypted(endpoint)) = Upstream::parse("https://dns.example/dns-query") else { return };
    let target = Target::new(&endpoint);
    let mut out = Vec::new();
    let mut s = Session::start(&mut out);
    s.request(&target, &[0u8; 29], &mut out);
    let (mut input, mut events) = (Vec::new(), Vec::new());
    let half = data.len() / 2;
    for piece in [&data[..half], &data[half..]] {
        input.extend_from_slice(piece);
        if s.read(&mut input, &mut out, &mut events).is_err() {
            return;
        }
        // A frame header and at most a 16 KiB frame wait for the rest.
        assert!(input.len() <= 9 + (16 << 10), "{} bytes unread", input.len());
    }
    let _ = (s.room(), s.refusing(), s.finished());
});
