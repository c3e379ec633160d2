//! DNS over HTTPS (RFC 8484): what a request and a reply look like, and
//! HTTP/1.1 for servers that do not speak HTTP/2 (ALPN picks; HTTP/2 is
//! in [`super::http2`]). The TLS connection, its reuse and its failures
//! are [`super::tls`]'s, as for DNS over TLS.
//!
//! Requests are GETs of `PATH?dns=BASE64URL` with the message ID 0 (so
//! caches between can share replies; the query's own ID is restored on
//! the reply). A reply counts only with status 200 and the content type
//! `application/dns-message`: a captive portal's or a proxy's HTML page
//! is not an answer.

use std::fmt;

use super::connect::Failure;
use super::tls::Event;
use crate::config::upstream::Endpoint;

/// The media type of a DNS message (RFC 8484 §6).
pub const DNS_MESSAGE: &str = "application/dns-message";
/// Queries longer than this are not sent over DoH: the URL would pass
/// the limits servers put on it (DNS queries are a few hundred bytes).
pub const MAX_QUERY: usize = 4096;
/// An HTTP/1.1 response head longer than this ends the connection.
const MAX_HEAD: usize = 16_384;
/// Chunked encoding's bytes around a body: chunk-size lines, their
/// extensions, CRLFs and trailers. 16 KiB is a chunk per 100 bytes of the
/// largest message with room to spare; servers send one or two chunks.
const MAX_CHUNKING: usize = 16_384;
/// The most an HTTP/1.1 connection holds unread, whatever the reader is
/// waiting for (a head's end, a chunk-size line's, a trailer's, the rest
/// of a body): one head, one body as long as [`Http1::read`] waits for,
/// and the chunking around it. A server that sends more without ending a
/// response loses the connection; before, a chunk-size line without CRLF
/// or endless trailers grew the buffer by ~60 MB a second.
pub const MAX_INPUT: usize = MAX_HEAD + (super::tls::MAX_MESSAGE + MAX_HEAD) + MAX_CHUNKING;
/// A chunk-size line (size and extensions) longer than this is refused.
const MAX_CHUNK_LINE: usize = 1024;
/// Hex digits of a chunk size: 8 say up to 4 GiB, past anything a DNS
/// message needs, and a longer run is refused before any arithmetic.
const MAX_CHUNK_DIGITS: usize = 8;

/// Why a DoH server's response is not a DNS reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A status other than 200.
    Status(u16),
    /// Not `application/dns-message`.
    ContentType,
    /// Shorter than a DNS header, or longer than a DNS message can be.
    Length,
    /// HTTP/2: the server reset the stream with this code.
    Reset(u32),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Status(s) => write!(f, "HTTP status {s}"),
            Refusal::ContentType => write!(f, "a reply that is not {DNS_MESSAGE}"),
            Refusal::Length => f.write_str("a reply of a length no DNS message has"),
            Refusal::Reset(code) => write!(f, "the request reset by the server (code {code})"),
        }
    }
}

/// Whether a Content-Type value names a DNS message (parameters allowed).
pub fn is_dns_message(value: &[u8]) -> bool {
    let media = value.split(|&b| b == b';').next().unwrap_or_default();
    media.trim_ascii().eq_ignore_ascii_case(DNS_MESSAGE.as_bytes())
}

/// Whether a finished response is a DNS reply.
pub fn judge(status: u16, dns_message: bool, too_long: bool, len: usize) -> Result<(), Refusal> {
    if status != 200 {
        Err(Refusal::Status(status))
    } else if !dns_message {
        Err(Refusal::ContentType)
    } else if too_long || len < 12 {
        Err(Refusal::Length)
    } else {
        Ok(())
    }
}

/// Where requests go: the `:authority` (or `Host`) and the path.
#[derive(Debug, Clone)]
pub struct Target {
    pub authority: String,
    pub path: String,
}

impl Target {
    /// The target of an `https://` upstream.
    pub fn new(endpoint: &Endpoint) -> Target {
        let host = if endpoint.name.contains(':') { format!("[{}]", endpoint.name) } else { endpoint.name.to_string() };
        let authority = if endpoint.port == 443 { host } else { format!("{host}:{}", endpoint.port) };
        Target { authority, path: endpoint.path.to_string() }
    }

    /// Writes `PATH?dns=…` (or `&dns=` after a query the path has) for `query`.
    pub fn put_path(&self, query: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(self.path.as_bytes());
        out.extend_from_slice(if self.path.contains('?') { b"&dns=" } else { b"?dns=" });
        base64url(query, out);
    }
}

/// Base64 with the URL alphabet and no padding (RFC 8484 §4.1).
fn base64url(data: &[u8], out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for chunk in data.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(chunk.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(chunk.get(2).copied().unwrap_or(0));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]);
        }
    }
}

/// HTTP/1.1: one request at a time on a kept-alive connection (servers
/// handle pipelining unevenly; HTTP/2 is what carries many at once).
#[derive(Debug, Default)]
pub struct Http1 {
    /// The request waiting for its response.
    waiting: Option<u32>,
    next: u32,
    /// The server said `Connection: close`, or sent a body we cannot delimit.
    closing: bool,
}

/// A response head, as far as we care.
struct Head {
    status: u16,
    dns_message: bool,
    length: Option<usize>,
    chunked: bool,
    close: bool,
}

impl Http1 {
    /// Whether a request may go now.
    pub fn room(&self) -> bool {
        self.waiting.is_none() && !self.closing
    }

    /// The server will close: nothing more goes on this connection.
    pub fn finished(&self) -> bool {
        self.closing && self.waiting.is_none()
    }

    /// Queues a GET of `query` on `out`; the request's key.
    pub fn request(&mut self, target: &Target, query: &[u8], out: &mut Vec<u8>) -> u32 {
        out.extend_from_slice(b"GET ");
        target.put_path(query, out);
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(target.authority.as_bytes());
        out.extend_from_slice(b"\r\nAccept: ");
        out.extend_from_slice(DNS_MESSAGE.as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        self.next = self.next.wrapping_add(1);
        self.waiting = Some(self.next);
        self.next
    }

    /// Takes every whole response from `input`. What stays is part of one,
    /// and at most [`MAX_INPUT`] bytes of it.
    pub fn read(&mut self, input: &mut Vec<u8>, events: &mut Vec<Event>) -> Result<(), Failure> {
        self.responses(input, events)?;
        if input.len() > MAX_INPUT {
            return Err(Failure::Protocol("a response too long"));
        }
        Ok(())
    }

    fn responses(&mut self, input: &mut Vec<u8>, events: &mut Vec<Event>) -> Result<(), Failure> {
        loop {
            let Some(end) = input.windows(4).position(|w| w == b"\r\n\r\n") else {
                return if input.len() > MAX_HEAD {
                    Err(Failure::Protocol("a response head too long"))
                } else {
                    Ok(())
                };
            };
            let head = parse_head(&input[..end])?;
            let body_at = end + 4;
            if (100..200).contains(&head.status) {
                input.drain(..body_at);
                continue;
            }
            let Some(key) = self.waiting else { return Err(Failure::Protocol("a response nobody asked for")) };
            let (body, used) = if head.chunked {
                match dechunk(&input[body_at..])? {
                    Some(b) => b,
                    None => return Ok(()),
                }
            } else {
                let len = head.length.ok_or(Failure::Protocol("a response without a length"))?;
                // Judged before any arithmetic: a Content-Length near
                // usize::MAX once wrapped `body_at + len`.
                if len > super::tls::MAX_MESSAGE + MAX_HEAD {
                    return Err(Failure::Protocol("a body too long"));
                }
                match input.get(body_at..body_at + len) {
                    Some(b) => (b.to_vec(), len),
                    None => return Ok(()),
                }
            };
            input.drain(..body_at + used);
            self.waiting = None;
            self.closing |= head.close;
            let too_long = body.len() > super::tls::MAX_MESSAGE;
            events.push(match judge(head.status, head.dns_message, too_long, body.len()) {
                Ok(()) => Event::Reply(key, body),
                Err(why) => Event::Refused(key, why),
            });
        }
    }
}

/// Reads the status line and the headers we need.
fn parse_head(head: &[u8]) -> Result<Head, Failure> {
    let bad = Failure::Protocol("a malformed response head");
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().ok_or(Failure::Protocol("an empty response"))?;
    let mut parts = status_line.splitn(3, |&b| b == b' ');
    let version = parts.next().unwrap_or_default();
    let status = parts.next().and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| s.parse::<u16>().ok());
    let (true, Some(status)) = (version.starts_with(b"HTTP/1."), status) else { return Err(bad) };
    let mut h = Head { status, dns_message: false, length: None, chunked: false, close: version == b"HTTP/1.0" };
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else { return Err(bad) };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-type") {
            h.dns_message = is_dns_message(value);
        } else if name.eq_ignore_ascii_case(b"content-length") {
            h.length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            if h.length.is_none() {
                return Err(bad);
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            h.chunked = value.eq_ignore_ascii_case(b"chunked");
            if !h.chunked {
                return Err(Failure::Protocol("a transfer encoding other than chunked"));
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            h.close = value.eq_ignore_ascii_case(b"close");
        }
    }
    Ok(h)
}

/// A chunked body (RFC 9112 §7.1), once all of it is there: the body and
/// the bytes it took. Trailers are skipped, [`MAX_HEAD`] bytes of them at most.
fn dechunk(data: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Failure> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(eol) = data[at..].windows(2).position(|w| w == b"\r\n") else {
            return if data.len() - at > MAX_CHUNK_LINE {
                Err(Failure::Protocol("a chunk-size line too long"))
            } else {
                Ok(None)
            };
        };
        if eol > MAX_CHUNK_LINE {
            return Err(Failure::Protocol("a chunk-size line too long"));
        }
        let size_field = data[at..at + eol].split(|&b| b == b';').next().unwrap_or_default();
        let size = chunk_size(size_field.trim_ascii()).ok_or(Failure::Protocol("a malformed chunk"))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, then an empty line.
            let trailers = at;
            loop {
                if at - trailers > MAX_HEAD {
                    return Err(Failure::Protocol("trailers too long"));
                }
                let Some(eol) = data[at..].windows(2).position(|w| w == b"\r\n") else {
                    return if data.len() - trailers > MAX_HEAD {
                        Err(Failure::Protocol("trailers too long"))
                    } else {
                        Ok(None)
                    };
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, at)));
                }
            }
        }
        // `size` has at most 8 hex digits, so neither sum can overflow.
        if body.len() + size > super::tls::MAX_MESSAGE {
            return Err(Failure::Protocol("a body too long"));
        }
        let Some(chunk) = data.get(at..at + size) else { return Ok(None) };
        if data.get(at + size..at + size + 2).is_none() {
            return Ok(None);
        }
        body.extend_from_slice(chunk);
        at += size + 2;
    }
}

/// A chunk size (RFC 9112 §7.1): 1 to [`MAX_CHUNK_DIGITS`] hex digits.
/// `from_str_radix` alone took a `+` sign and sizes up to `usize::MAX`,
/// which the additions after it overflowed.
fn chunk_size(field: &[u8]) -> Option<usize> {
    if field.is_empty() || field.len() > MAX_CHUNK_DIGITS {
        return None;
    }
    field.iter().try_fold(0usize, |n, &b| Some(n << 4 | (b as char).to_digit(16)? as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target { authority: "dns.example".into(), path: "/dns-query".into() }
    }

    #[test]
    fn base64url_of_rfc_8484s_example() {
        // RFC 8484 §4.1.1: www.example.com A, ID 0.
        let q = b"\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x07example\x03com\x00\x00\x01\x00\x01";
        let mut out = Vec::new();
        target().put_path(q, &mut out);
        assert_eq!(out, b"/dns-query?dns=AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA2NvbQAAAQAB");
        for (data, want) in [(&b""[..], ""), (b"f", "Zg"), (b"fo", "Zm8"), (b"foo", "Zm9v"), (b"\xfb\xff", "-_8")] {
            let mut out = Vec::new();
            base64url(data, &mut out);
            assert_eq!(out, want.as_bytes());
        }
        let t = Target { authority: "x".into(), path: "/q?key=1".into() };
        let mut out = Vec::new();
        t.put_path(b"f", &mut out);
        assert_eq!(out, b"/q?key=1&dns=Zg");
    }

    #[test]
    fn content_types() {
        assert!(is_dns_message(b"application/dns-message"));
        assert!(is_dns_message(b"Application/DNS-Message; charset=binary"));
        assert!(!is_dns_message(b"text/html"));
        assert!(!is_dns_message(b"application/dns-json"));
    }

    fn reply(h1: &mut Http1, input: &[u8]) -> Result<Vec<Event>, Failure> {
        let mut input = input.to_vec();
        let mut events = Vec::new();
        h1.read(&mut input, &mut events)?;
        Ok(events)
    }

    #[test]
    fn http1_lengths_chunks_and_refusals() {
        let mut h1 = Http1::default();
        let mut out = Vec::new();
        let key = h1.request(&target(), b"\0\0", &mut out);
        assert!(out.starts_with(b"GET /dns-query?dns=AAA HTTP/1.1\r\nHost: dns.example\r\n"));
        assert!(!h1.room());
        let body = [7u8; 12];
        let mut resp =
            b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\nContent-Length: 12\r\n\r\n".to_vec();
        // Half a response is not one yet.
        assert!(reply(&mut h1, &resp).unwrap().is_empty());
        resp.extend_from_slice(&body);
        match reply(&mut h1, &resp).unwrap().as_slice() {
            [Event::Reply(k, b)] => assert_eq!((*k, b.as_slice()), (key, &body[..])),
            other => panic!("{other:?}"),
        }
        assert!(h1.room());
        let key = h1.request(&target(), b"\0\0", &mut out);
        let chunked = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/dns-message\r\n\
                        transfer-encoding: chunked\r\nconnection: close\r\n\r\n5\r\n\x07\x07\x07\x07\x07\r\n7;x=y\r\n\
                        \x07\x07\x07\x07\x07\x07\x07\r\n0\r\n\r\n";
        match reply(&mut h1, chunked).unwrap().as_slice() {
            [Event::Reply(k, b)] => assert_eq!((*k, b.as_slice()), (key, &body[..])),
            other => panic!("{other:?}"),
        }
        assert!(h1.finished(), "Connection: close");

        let mut h1 = Http1::default();
        h1.request(&target(), b"\0\0", &mut out);
        let html = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 12\r\n\r\n<html></html";
        assert!(matches!(reply(&mut h1, html).unwrap()[..], [Event::Refused(_, Refusal::ContentType)]));
        h1.request(&target(), b"\0\0", &mut out);
        let missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(reply(&mut h1, missing).unwrap()[..], [Event::Refused(_, Refusal::Status(404))]));
        assert!(reply(&mut h1, missing).is_err(), "a response nobody asked for");
        assert!(reply(&mut Http1::default(), b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }

    /// Whatever the reader waits for, it holds at most [`MAX_INPUT`]: the
    /// end of a chunk-size line, of the trailers, of a head.
    /// Each of these once waited for more without limit.
    #[test]
    fn unread_input_is_bounded_whatever_the_reader_waits_for() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\nTransfer-Encoding: chunked\r\n\r\n";
        let cases: [(&[u8], &[u8]); 4] = [
            (head, b"0"),
            (head, b"1;a"),
            (&[&head[..], b"1\r\nx\r\n0\r\n"].concat(), b"X-Trailer: yes\r\n"),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", b"X-Header: yes\r\n"),
        ];
        for (start, unit) in cases {
            let mut h1 = Http1::default();
            h1.request(&target(), b"\0\0", &mut Vec::new());
            let mut input = start.to_vec();
            let mut events = Vec::new();
            let mut refused = false;
            // Fed the way the connection reads: 4 KiB at a time.
            for _ in 0..(4 * MAX_INPUT / 4096) {
                let to = input.len() + 4096;
                while input.len() < to {
                    input.extend_from_slice(unit);
                }
                if h1.read(&mut input, &mut events).is_err() {
                    refused = true;
                    break;
                }
                assert!(input.len() <= MAX_INPUT, "{}", String::from_utf8_lossy(unit));
            }
            assert!(refused && events.is_empty(), "{}: {}", String::from_utf8_lossy(unit), input.len());
        }
    }

    /// Sizes near `usize::MAX` once overflowed the reader's additions (a
    /// panic with overflow checks, a wrapped length without).
    #[test]
    fn huge_sizes_are_refused_without_overflow() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\n";
        for (framing, size) in [
            (&b"Transfer-Encoding: chunked\r\n\r\n"[..], &b"1\r\nx\r\nffffffffffffffff\r\nx\r\n0\r\n\r\n"[..]),
            (b"Transfer-Encoding: chunked\r\n\r\n", b"fffffffffffffff0\r\n"),
            (b"Transfer-Encoding: chunked\r\n\r\n", b"+c\r\n0123456789ab\r\n0\r\n\r\n"),
            (b"Transfer-Encoding: chunked\r\n\r\n", b"000000001\r\nx\r\n0\r\n\r\n"),
            (b"Content-Length: 18446744073709551615\r\n\r\n", b"x"),
            (b"Content-Length: 18446744073709551600\r\n\r\n", b"x"),
        ] {
            let mut h1 = Http1::default();
            h1.request(&target(), b"\0\0", &mut Vec::new());
            let input = [&head[..], framing, size].concat();
            assert!(reply(&mut h1, &input).is_err(), "{}", String::from_utf8_lossy(&input));
        }
        assert_eq!(chunk_size(b"1F"), Some(31));
        assert_eq!(chunk_size(b"ffffffff"), Some(0xffff_ffff));
    }
}
