//! Records in zone-file text (RFC 1035 §5.1), as far as a trust anchor file
//! needs them: comments, parentheses over lines, `$ORIGIN`, `$TTL`, owners
//! absolute, relative or `@` or left blank, TTL and class in either order;
//! and the encodings DNSSEC RDATA is written in (base64, hex, base32hex).

use super::name;

/// One record's text: where it starts and its fields, RDATA still as tokens.
#[derive(Debug)]
pub(crate) struct Entry<'t> {
    /// The line the record starts on (1-based).
    pub line: usize,
    /// The owner in wire form, case as written.
    pub owner: Vec<u8>,
    /// The TTL, if written: trust anchors ignore it, the tests' zones use it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub ttl: Option<u32>,
    pub rtype: &'t str,
    pub rdata: Vec<&'t str>,
}

/// A bad record: its line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextError {
    pub line: usize,
    pub message: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, TextError> {
    Err(TextError { line, message: message.into() })
}

/// Splits a line into tokens: whitespace-separated words, a quoted string
/// as one (quotes kept), `(` and `)` as their own, nothing after `;`.
fn tokens(line: &str) -> Result<Vec<&str>, String> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\r' => i += 1,
            b';' => break,
            b'(' | b')' => {
                out.push(&line[i..i + 1]);
                i += 1;
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if i >= b.len() {
                    return Err("a quoted string is not closed".into());
                }
                i += 1;
                out.push(&line[start..i]);
            }
            _ => {
                let start = i;
                while i < b.len() && !matches!(b[i], b' ' | b'\t' | b'\r' | b';' | b'(' | b')' | b'"') {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push(&line[start..i.min(b.len())]);
            }
        }
    }
    Ok(out)
}

/// A name in zone-file text to wire form: `\.` and `\DDD` escapes, `@`
/// for the origin, relative names completed with it.
pub(crate) fn parse_name(text: &str, origin: Option<&[u8]>) -> Result<Vec<u8>, String> {
    if text == "@" {
        return origin.map(<[u8]>::to_vec).ok_or_else(|| "@ without an $ORIGIN".to_string());
    }
    if text == "." {
        return Ok(name::ROOT.to_vec());
    }
    let mut out = Vec::with_capacity(text.len() + 2);
    let mut label = Vec::with_capacity(63);
    let b = text.as_bytes();
    let mut i = 0;
    let mut absolute = false;
    while i < b.len() {
        match b[i] {
            b'.' => {
                if label.is_empty() {
                    return Err(format!("empty label in {text}"));
                }
                push_label(&mut out, &mut label)?;
                if i + 1 == b.len() {
                    absolute = true;
                }
                i += 1;
            }
            b'\\' => {
                let digits = b.get(i + 1..i + 4).filter(|d| d.iter().all(u8::is_ascii_digit));
                if let Some(d) = digits {
                    let v = (d[0] - b'0') as u32 * 100 + (d[1] - b'0') as u32 * 10 + (d[2] - b'0') as u32;
                    label.push(u8::try_from(v).map_err(|_| format!("bad escape in {text}"))?);
                    i += 4;
                } else {
                    label.push(*b.get(i + 1).ok_or_else(|| format!("a lone \\ ends {text}"))?);
                    i += 2;
                }
            }
            c => {
                label.push(c);
                i += 1;
            }
        }
    }
    if !label.is_empty() {
        push_label(&mut out, &mut label)?;
    }
    if absolute {
        out.push(0);
    } else {
        let origin = origin.ok_or_else(|| format!("{text} is relative and there is no $ORIGIN"))?;
        out.extend_from_slice(origin);
    }
    if out.len() > crate::wire::MAX_NAME_LEN {
        return Err(format!("{text} is longer than 255 bytes"));
    }
    Ok(out)
}

fn push_label(out: &mut Vec<u8>, label: &mut Vec<u8>) -> Result<(), String> {
    if label.len() > 63 {
        return Err("a label is longer than 63 bytes".into());
    }
    out.push(label.len() as u8);
    out.append(label);
    Ok(())
}

/// The records of `text`, in order. Stops at the first bad line.
pub(crate) fn entries(text: &str) -> Result<Vec<Entry<'_>>, TextError> {
    let mut out = Vec::new();
    let mut origin: Option<Vec<u8>> = None;
    let mut default_ttl: Option<u32> = None;
    let mut last_owner: Option<Vec<u8>> = None;
    // The record being gathered: its first line, whether it began with an
    // owner, its tokens, and the open parentheses.
    let mut pending: Option<(usize, bool, Vec<&str>)> = None;
    let mut depth = 0usize;
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let toks = tokens(line).or_else(|m| err(line_no, m))?;
        if pending.is_none() {
            if toks.is_empty() {
                continue;
            }
            let has_owner = !line.starts_with([' ', '\t']);
            pending = Some((line_no, has_owner, Vec::new()));
        }
        let Some((_, _, gathered)) = pending.as_mut() else { continue };
        for t in toks {
            match t {
                "(" => depth += 1,
                ")" => {
                    depth = depth.checked_sub(1).map_or_else(|| err(line_no, "a ) without its ("), Ok)?;
                }
                _ => gathered.push(t),
            }
        }
        if depth > 0 {
            continue;
        }
        let Some((start, has_owner, toks)) = pending.take() else { continue };
        if toks.is_empty() {
            continue;
        }
        match toks[0] {
            "$ORIGIN" => {
                let [_, o] = toks[..] else { return err(start, "$ORIGIN takes one name") };
                let parsed = parse_name(o, None).or_else(|m| err(start, m))?;
                origin = Some(parsed);
                continue;
            }
            "$TTL" => {
                let [_, t] = toks[..] else { return err(start, "$TTL takes one number") };
                default_ttl = Some(t.parse().or_else(|_| err(start, format!("bad $TTL {t}")))?);
                continue;
            }
            d if d.starts_with('$') => return err(start, format!("{d} is not supported")),
            _ => {}
        }
        let mut rest = &toks[..];
        let owner = if has_owner {
            let o = parse_name(rest[0], origin.as_deref()).or_else(|m| err(start, m))?;
            rest = &rest[1..];
            o
        } else {
            last_owner.clone().map_or_else(|| err(start, "the first record has no owner"), Ok)?
        };
        last_owner = Some(owner.clone());
        let mut ttl = default_ttl;
        // TTL and class, in either order (RFC 1035 §5.1).
        for _ in 0..2 {
            match rest.first() {
                Some(t) if t.bytes().all(|c| c.is_ascii_digit()) => {
                    ttl = Some(t.parse().or_else(|_| err(start, format!("bad TTL {t}")))?);
                    rest = &rest[1..];
                }
                Some(c) if c.eq_ignore_ascii_case("IN") => rest = &rest[1..],
                Some(c) if ["CH", "HS", "CS"].iter().any(|k| c.eq_ignore_ascii_case(k)) => {
                    return err(start, format!("class {c}: only IN"));
                }
                _ => {}
            }
        }
        let Some((&rtype, rdata)) = rest.split_first() else { return err(start, "no record type") };
        out.push(Entry { line: start, owner, ttl, rtype, rdata: rdata.to_vec() });
    }
    if let Some((start, _, _)) = pending {
        return err(start, "a ( is not closed");
    }
    Ok(out)
}

/// A number field of RDATA.
pub(crate) fn number<T: std::str::FromStr>(token: Option<&&str>, what: &str) -> Result<T, String> {
    let t = token.ok_or_else(|| format!("no {what}"))?;
    t.parse().map_err(|_| format!("bad {what} {t}"))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Decodes standard base64 (RFC 4648 §4), padding required where due.
pub(crate) fn base64(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    if b.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (i, chunk) in b.chunks(4).enumerate() {
        let last = i + 1 == b.len() / 4;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut v = 0u32;
        for &c in &chunk[..4 - pad] {
            v = v << 6 | BASE64.iter().position(|&a| a == c)? as u32;
        }
        v <<= 6 * pad as u32;
        let bytes = v.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Some(out)
}

/// Decodes hex (either case).
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    b.chunks(2).map(|p| Some((hex_digit(p[0])? << 4) | hex_digit(p[1])?)).collect()
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Lowercase hex.
#[cfg(test)]
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const BASE32HEX: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// Decodes base32hex without padding (RFC 4648 §7), as NSEC3 owner labels
/// and next hashed owner names are written; either case. `None` for a
/// length that leaves bits over or a character outside the alphabet.
pub(crate) fn unbase32hex(text: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut acc = 0u64;
    let mut bits = 0;
    let mut n = 0;
    for &c in text {
        let v = BASE32HEX.iter().position(|&a| a == c.to_ascii_lowercase())? as u64;
        acc = (acc << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            *out.get_mut(n)? = (acc >> bits) as u8;
            n += 1;
        }
    }
    // The bits left over must be zero padding, fewer than a byte.
    (bits < 5 && acc & ((1 << bits) - 1) == 0).then_some(n)
}

/// base32hex without padding, lowercase.
#[cfg(test)]
pub(crate) fn base32hex(bytes: &[u8]) -> String {
    let mut out = String::new();
    let (mut acc, mut bits) = (0u64, 0);
    for &b in bytes {
        acc = (acc << 8) | b as u64;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(BASE32HEX[((acc >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(BASE32HEX[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(base64("TWFu").unwrap(), b"Man");
        assert_eq!(base64("TWE=").unwrap(), b"Ma");
        assert_eq!(base64("TQ==").unwrap(), b"M");
        assert_eq!(base64("").unwrap(), b"");
        assert!(base64("TQ=").is_none());
        assert!(base64("T===").is_none());
        assert!(base64("TQ==TWFu").is_none());
        assert!(base64("TW!u").is_none());
        assert_eq!(unhex("0aFf").unwrap(), [10, 255]);
        assert!(unhex("0g").is_none());
        assert!(unhex("abc").is_none());
        let h = [0x3au8; 20];
        let text = base32hex(&h);
        assert_eq!(text.len(), 32);
        let mut out = [0u8; 20];
        assert_eq!(unbase32hex(text.to_uppercase().as_bytes(), &mut out), Some(20));
        assert_eq!(out, h);
        assert_eq!(unbase32hex(b"w", &mut out), None);
        assert_eq!(unbase32hex(&[b'0'; 40], &mut out), None, "too long for the buffer");
    }

    #[test]
    fn names() {
        let origin = parse_name("example.", None).unwrap();
        assert_eq!(parse_name("www", Some(&origin)).unwrap(), name::from_text("www.example."));
        assert_eq!(parse_name("@", Some(&origin)).unwrap(), origin);
        assert_eq!(parse_name(".", None).unwrap(), name::ROOT);
        assert_eq!(parse_name("a\\.b.", None).unwrap(), b"\x03a.b\x00");
        assert_eq!(parse_name("\\065.", None).unwrap(), b"\x01A\x00");
        assert!(parse_name("www", None).is_err());
        assert!(parse_name("a..b.", None).is_err());
        assert!(parse_name(&format!("{}.", "a".repeat(64)), None).is_err());
        assert!(parse_name(&"a.".repeat(128), None).is_err());
        assert!(parse_name("\\999.", None).is_err());
    }

    #[test]
    fn zone_text() {
        let text = "$ORIGIN example.\n$TTL 300\n; comment\n@ IN 60 DS 1 2 3 (\n ab ; inner\n cd )\n  DNSKEY 257 3 13 \"q\"\nwww 7 A 1.2.3.4\n";
        let e = entries(text).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!((e[0].line, e[0].ttl, e[0].rtype), (4, Some(60), "DS"));
        assert_eq!(e[0].rdata, ["1", "2", "3", "ab", "cd"]);
        assert_eq!(e[1].owner, name::from_text("example."));
        assert_eq!((e[1].ttl, e[1].rdata.last().copied()), (Some(300), Some("\"q\"")));
        assert_eq!(e[2].owner, name::from_text("www.example."));
        assert_eq!(entries("x. IN DS (\n1").unwrap_err().line, 1);
        assert_eq!(entries("x. IN DS 1 )").unwrap_err().line, 1);
        assert_eq!(entries("\n\n$INCLUDE other").unwrap_err().line, 3);
        assert_eq!(entries(" DS 1").unwrap_err().line, 1);
        assert_eq!(entries("x. CH TXT \"a\"").unwrap_err().line, 1);
        assert_eq!(entries("x. TXT \"a").unwrap_err().line, 1);
        assert_eq!(entries("x.").unwrap_err().line, 1);
    }
}
