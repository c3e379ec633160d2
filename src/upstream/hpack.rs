//! HPACK (RFC 7541), as much as a DNS-over-HTTPS client needs: a decoder
//! for whatever a server's encoder sends (static and dynamic table, table
//! size updates, Huffman strings), and an encoder that writes every header
//! as a plain literal, which any decoder must take and which leaves the
//! server's dynamic table alone.
//!
//! Every connection has its own decoder; it must see every header block
//! the server sends, in order, even for streams we have given up on, or
//! its table drifts from the server's.

use std::collections::VecDeque;

/// The dynamic table size we allow (the protocol's default; we never
/// advertise another).
pub const TABLE_SIZE: usize = 4096;

/// RFC 7541 Appendix A.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Static table indices the encoder uses.
pub mod index {
    pub const AUTHORITY: usize = 1;
    pub const METHOD_GET: usize = 2;
    pub const PATH: usize = 4;
    pub const SCHEME_HTTPS: usize = 7;
    pub const ACCEPT: usize = 19;
}

/// Code lengths of the Huffman code of RFC 7541 Appendix B, symbols 0–255
/// and EOS (256). The code is canonical (codes of one length are
/// consecutive, in symbol order, shorter codes first), so the lengths
/// alone define it.
const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12,
    10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6,
    5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22,
    22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20,
    22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28,
    27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28,
    27, 27, 27, 27, 27, 26, 30,
];
const LONGEST: usize = 30;

/// The canonical code's tables, built at compile time: per length, how
/// many codes, the first code, and where its symbols start in `symbols`.
struct Canonical {
    count: [u32; LONGEST + 1],
    first: [u32; LONGEST + 1],
    start: [u16; LONGEST + 1],
    symbols: [u16; 257],
}

const HUFFMAN: Canonical = {
    let mut c =
        Canonical { count: [0; LONGEST + 1], first: [0; LONGEST + 1], start: [0; LONGEST + 1], symbols: [0; 257] };
    let mut s = 0;
    while s < 257 {
        c.count[HUFFMAN_LENGTHS[s] as usize] += 1;
        s += 1;
    }
    let (mut code, mut at, mut len) = (0u32, 0u16, 1);
    while len <= LONGEST {
        code = (code + c.count[len - 1]) << 1;
        c.first[len] = code;
        c.start[len] = at;
        at += c.count[len] as u16;
        len += 1;
    }
    let mut next = c.start;
    let mut s = 0;
    while s < 257 {
        let len = HUFFMAN_LENGTHS[s] as usize;
        c.symbols[next[len] as usize] = s as u16;
        next[len] += 1;
        s += 1;
    }
    c
};

/// Bytes of names and values one header block may decode to. Indexed
/// fields are handed out in place, but each still costs its reader, and a
/// literal naming a table entry copies that name: a 16 KiB block of 1-byte
/// references to a 4 KiB entry was 64 MiB of copying (1.6 MB of blocks,
/// 6.7 GB). 64 KiB is four blocks' worth, where a DoH reply's headers take
/// a few hundred bytes.
pub const MAX_DECODED: usize = 65_536;

/// A header block the decoder refuses: the connection cannot go on (its
/// table would no longer match the server's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Decodes `data` (a Huffman-coded string) onto `out`.
fn huffman(data: &[u8], out: &mut Vec<u8>) -> Result<(), Malformed> {
    let h = &HUFFMAN;
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in data {
        for bit in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> bit) & 1);
            len += 1;
            if len > LONGEST {
                return Err(Malformed);
            }
            let k = code.wrapping_sub(h.first[len]);
            if k < h.count[len] {
                let sym = h.symbols[h.start[len] as usize + k as usize];
                if sym == 256 {
                    return Err(Malformed);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            }
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones (EOS's first bits).
    if len >= 8 || code != (1 << len) - 1 {
        return Err(Malformed);
    }
    Ok(())
}

/// Reads an integer with an `n`-bit prefix (RFC 7541 §5.1) at `*at`.
fn integer(block: &[u8], at: &mut usize, n: u8) -> Result<usize, Malformed> {
    let mask = (1usize << n) - 1;
    let first = *block.get(*at).ok_or(Malformed)? as usize & mask;
    *at += 1;
    if first < mask {
        return Ok(first);
    }
    let mut value = mask;
    let mut shift = 0;
    loop {
        let b = *block.get(*at).ok_or(Malformed)?;
        *at += 1;
        // Nothing in a header block is near 2^28: longer is an attack or garbage.
        if shift > 21 {
            return Err(Malformed);
        }
        value += ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Reads a string literal (§5.2) at `*at` onto `out` (emptied first).
fn string(block: &[u8], at: &mut usize, out: &mut Vec<u8>) -> Result<(), Malformed> {
    let coded = *block.get(*at).ok_or(Malformed)? & 0x80 != 0;
    let len = integer(block, at, 7)?;
    let raw = block.get(*at..*at + len).ok_or(Malformed)?;
    *at += len;
    out.clear();
    if coded {
        return huffman(raw, out);
    }
    out.extend_from_slice(raw);
    Ok(())
}

/// A dynamic table entry: name and value.
type Field = (Box<[u8]>, Box<[u8]>);

/// One connection's HPACK decoder.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first: index 62 is `table[0]`.
    table: VecDeque<Field>,
    /// Sum of the entries' sizes (name + value + 32 each).
    size: usize,
    /// The table's size limit now (≤ [`TABLE_SIZE`]).
    max: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder { table: VecDeque::new(), size: 0, max: TABLE_SIZE, name: Vec::new(), value: Vec::new() }
    }
}

impl Decoder {
    /// Decodes one header block, calling `header` with each field in order.
    /// A block that decodes to more than [`MAX_DECODED`] bytes is refused.
    pub fn decode(&mut self, block: &[u8], mut header: impl FnMut(&[u8], &[u8])) -> Result<(), Malformed> {
        let mut at = 0;
        let mut decoded = 0usize;
        let mut spend = |n: usize| {
            decoded += n;
            if decoded > MAX_DECODED { Err(Malformed) } else { Ok(()) }
        };
        while let Some(&b) = block.get(at) {
            if b & 0x80 != 0 {
                // Indexed field: read in place, never copied.
                let i = integer(block, &mut at, 7)?;
                let (name, value) = lookup(&self.table, i)?;
                spend(name.len() + value.len())?;
                header(name, value);
                continue;
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update.
                let max = integer(block, &mut at, 5)?;
                if max > TABLE_SIZE {
                    return Err(Malformed);
                }
                self.max = max;
                self.evict(0);
                continue;
            } else {
                // Literal: with incremental indexing (01), without (0000) or never indexed (0001).
                let indexing = b & 0xc0 == 0x40;
                let i = integer(block, &mut at, if indexing { 6 } else { 4 })?;
                if i == 0 {
                    string(block, &mut at, &mut self.name)?;
                } else {
                    // Copied: inserting this field may evict the entry it names.
                    let (name, _) = lookup(&self.table, i)?;
                    spend(name.len())?;
                    self.name.clear();
                    self.name.extend_from_slice(name);
                }
                string(block, &mut at, &mut self.value)?;
                spend(if i == 0 { self.name.len() } else { 0 } + self.value.len())?;
                if indexing {
                    self.insert();
                }
            }
            header(&self.name, &self.value);
        }
        Ok(())
    }

    /// Adds the scratch field to the dynamic table (§4.4): too big for it
    /// empties it.
    fn insert(&mut self) {
        let size = self.name.len() + self.value.len() + 32;
        self.evict(size);
        if size <= self.max {
            self.table.push_front((self.name.as_slice().into(), self.value.as_slice().into()));
            self.size += size;
        }
    }

    /// Drops the oldest entries until `room` more fits.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else { break };
            self.size -= n.len() + v.len() + 32;
        }
    }
}

/// Entry `i` of the static table (1–61) or of `table` (62 on): name, value.
fn lookup(table: &VecDeque<Field>, i: usize) -> Result<(&[u8], &[u8]), Malformed> {
    match i {
        0 => Err(Malformed),
        1..=61 => Ok((STATIC[i - 1].0.as_bytes(), STATIC[i - 1].1.as_bytes())),
        _ => table.get(i - 62).map(|(n, v)| (&n[..], &v[..])).ok_or(Malformed),
    }
}

/// Writes an integer with an `n`-bit prefix, the prefix's other bits `flags`.
fn put_integer(out: &mut Vec<u8>, flags: u8, n: u8, mut value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    value -= mask;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes a dynamic table size update (the block's first field).
pub fn put_table_size(out: &mut Vec<u8>, size: usize) {
    put_integer(out, 0x20, 5, size);
}

/// Writes a field from the static table by index.
pub fn put_indexed(out: &mut Vec<u8>, i: usize) {
    put_integer(out, 0x80, 7, i);
}

/// Writes a field as a literal without indexing, its name the static
/// table's entry `name`; `value` in pieces (written one after the other).
pub fn put_literal(out: &mut Vec<u8>, name: usize, value: &[&[u8]]) {
    put_integer(out, 0x00, 4, name);
    put_integer(out, 0x00, 7, value.iter().map(|v| v.len()).sum());
    for v in value {
        out.extend_from_slice(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn decode(d: &mut Decoder, block: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(&hex(block), |n, v| {
            out.push((String::from_utf8(n.to_vec()).unwrap(), String::from_utf8(v.to_vec()).unwrap()))
        })
        .unwrap();
        out
    }

    fn fields(f: &[(&str, &str)]) -> Vec<(String, String)> {
        f.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn huffman_strings_of_the_rfc() {
        // RFC 7541 C.4.1 and C.6.1.
        let mut out = Vec::new();
        huffman(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"), &mut out).unwrap();
        assert_eq!(out, b"www.example.com");
        out.clear();
        huffman(&hex("d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"), &mut out).unwrap();
        assert_eq!(out, b"Mon, 21 Oct 2013 20:13:21 GMT");
        // Padding longer than 7 bits, padding of zeros, and EOS itself are refused.
        assert!(huffman(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff ff"), &mut Vec::new()).is_err());
        assert!(huffman(&hex("f1e3 c2e5 f23a 6ba0 ab90 f400"), &mut Vec::new()).is_err());
        assert!(huffman(&hex("ffff fffc"), &mut Vec::new()).is_err());
    }

    #[test]
    fn every_symbol_decodes_to_itself() {
        // Encode each byte with the canonical code rebuilt from the lengths, then decode.
        for (sym, &len) in HUFFMAN_LENGTHS[..256].iter().enumerate() {
            let h = &HUFFMAN;
            let len = len as usize;
            let k =
                (h.start[len]..h.start[len] + h.count[len] as u16).position(|i| h.symbols[i as usize] as usize == sym);
            let code = h.first[len] + k.unwrap() as u32;
            // Code, then ones to the byte boundary.
            let pad = (8 - len % 8) % 8;
            let bits = ((code as u64) << pad) | ((1 << pad) - 1);
            let bytes: Vec<u8> = (0..(len + pad) / 8).rev().map(|i| (bits >> (8 * i)) as u8).collect();
            let mut out = Vec::new();
            huffman(&bytes, &mut out).unwrap();
            assert_eq!(out, [sym as u8], "symbol {sym}");
        }
        // Two codes of the RFC's table, spelled out there: '0' = 00000, 'a' = 00011.
        assert_eq!((HUFFMAN.first[5], HUFFMAN.symbols[HUFFMAN.start[5] as usize]), (0, b'0' as u16));
        assert_eq!(HUFFMAN.symbols[HUFFMAN.start[5] as usize + 3], b'a' as u16);
    }

    #[test]
    fn response_blocks_of_the_rfc_with_huffman_and_eviction() {
        // RFC 7541 C.6: three responses, table size 256, evictions.
        let mut d = Decoder { max: 256, ..Decoder::default() };
        let first = decode(
            &mut d,
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 \
             63c7 8f0b 97c8 e9ae 82ae 43d3",
        );
        assert_eq!(
            first,
            fields(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
        assert_eq!(d.size, 222);
        let second = decode(&mut d, "4883 640e ffc1 c0bf");
        assert_eq!(second[0], (":status".into(), "307".into()));
        assert_eq!(second[3], ("location".into(), "https://www.example.com".into()));
        assert_eq!(d.size, 222);
        let third = decode(
            &mut d,
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 \
             b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        );
        assert_eq!(third[0], (":status".into(), "200".into()));
        assert_eq!(third[5].0, "set-cookie");
        assert_eq!(d.size, 215);
        assert_eq!(d.table.len(), 3);
    }

    #[test]
    fn table_size_updates_and_mistakes() {
        let mut d = Decoder::default();
        decode(&mut d, "4882 6402"); // :status 302 indexed
        assert_eq!(d.table.len(), 1);
        decode(&mut d, "20"); // size 0: empties the table
        assert_eq!((d.table.len(), d.size), (0, 0));
        assert!(d.decode(&hex("be"), |_, _| {}).is_err(), "index 62 with an empty table");
        assert!(d.decode(&hex("3fe21f"), |_, _| {}).is_err(), "a size over the limit");
        assert!(d.decode(&hex("80"), |_, _| {}).is_err(), "index 0");
        assert!(d.decode(&hex("0f"), |_, _| {}).is_err(), "a cut integer");
        assert!(d.decode(&hex("0088"), |_, _| {}).is_err(), "a string longer than the block");
        assert!(d.decode(&hex("ffffffffffff7f"), |_, _| {}).is_err(), "an integer too large");
    }

    /// One 4 KiB table entry, then a 16 KiB block referring to it byte by
    /// byte: 64 MiB of fields from one block, once copied one by one.
    #[test]
    fn a_block_decodes_to_a_bounded_number_of_bytes() {
        let mut d = Decoder::default();
        let mut block = vec![0x40, 0x01, b'x'];
        put_integer(&mut block, 0x00, 7, 4000);
        block.extend(std::iter::repeat_n(b'v', 4000));
        d.decode(&block, |_, _| {}).unwrap();
        assert_eq!(d.table.len(), 1);
        let refs = vec![0xbe; 16_384]; // index 62, again and again
        let mut seen = 0;
        assert!(d.decode(&refs, |n, v| seen += n.len() + v.len()).is_err());
        assert!(seen <= MAX_DECODED, "{seen} bytes handed out");
        // The same entry named by literals (each copying its name) too.
        let mut d = Decoder::default();
        let mut big_name = vec![0x40];
        put_integer(&mut big_name, 0x00, 7, 4000);
        big_name.extend(std::iter::repeat_n(b'n', 4000));
        big_name.push(0);
        d.decode(&big_name, |_, _| {}).unwrap();
        let literals: Vec<u8> = std::iter::repeat_n([0x0f, 0x2f, 0x00], 5000).flatten().collect();
        assert!(d.decode(&literals, |_, _| {}).is_err());
        // A block within the bound decodes, from the same table.
        let mut d = Decoder::default();
        d.decode(&block, |_, _| {}).unwrap();
        let mut n = 0;
        d.decode(&[0xbe; 16], |_, v| n += v.len()).unwrap();
        assert_eq!(n, 16 * 4000);
    }

    #[test]
    fn the_encoders_literals_decode() {
        let mut block = Vec::new();
        put_indexed(&mut block, index::METHOD_GET);
        put_indexed(&mut block, index::SCHEME_HTTPS);
        put_literal(&mut block, index::AUTHORITY, &[b"dns.example"]);
        let long = vec![b'a'; 300];
        put_literal(&mut block, index::PATH, &[b"/dns-query?dns=", &long]);
        put_literal(&mut block, index::ACCEPT, &[b"application/dns-message"]);
        let mut d = Decoder::default();
        let mut got = Vec::new();
        d.decode(&block, |n, v| got.push((n.to_vec(), v.len()))).unwrap();
        let names: Vec<&[u8]> = got.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, [&b":method"[..], b":scheme", b":authority", b":path", b"accept"]);
        assert_eq!(got[3].1, 315);
        assert!(d.table.is_empty(), "nothing indexed");
    }
}
