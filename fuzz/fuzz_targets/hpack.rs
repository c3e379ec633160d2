//! A DoH server's HPACK header blocks (RFC 7541): any bytes, split into
//! blocks by the first byte, decoded on one dynamic table as a connection
//! decodes them. An error or fields, never a panic, and no block decodes to
//! more than the decoder's bound (`MAX_DECODED`, 64 KiB).
#![no_main]

use hydradns::upstream::hpack::{Decoder, MAX_DECODED};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let mut d = Decoder::default();
    let cut = usize::from(split).min(rest.len());
    for block in [&rest[..cut], &rest[cut..]] {
        let mut decoded = 0usize;
        let r = d.decode(block, |name, value| decoded += name.len() + value.len());
        assert!(decoded <= MAX_DECODED || r.is_err(), "{decoded} bytes decoded from {} bytes", block.len());
        if r.is_err() {
            break;
        }
    }
});
