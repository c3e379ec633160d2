//! The client side of HTTP/2 (RFC 9113) that DNS over HTTPS needs, over a
//! TLS stream the connection owns: requests are GETs, so we never send
//! DATA and our side of flow control is only the window we give the server.
//!
//! Written here rather than taken from the h2 crate: h2 with the http,
//! bytes and tokio-io crates it needs cost 233 KiB of the aarch64 binary
//! (measured for issue 25), this about a tenth of it. What it leaves out
//! a DoH client does not use: server push (refused in our SETTINGS),
//! request bodies, priorities, HPACK indexing of our own headers.
//!
//! The session is a state machine over bytes: [`Session::read`] takes the
//! plaintext the server sent and queues any frames it must answer (SETTINGS
//! and PING acknowledgements, window updates) on the same output buffer as
//! [`Session::request`] writes requests to.

use rustc_hash::FxHashMap;

use super::connect::Failure;
use super::hpack::{self, Decoder};
use super::https::{self, Refusal};
use super::tls::Event;

/// Sent first on every connection (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The largest frame a server may send us (the protocol's default; we
/// never advertise more).
pub const MAX_FRAME: usize = 16_384;
/// Header blocks (a HEADERS frame and its CONTINUATIONs) larger than this
/// end the connection: DoH replies carry a handful of headers.
const MAX_BLOCK: usize = 16_384;
/// The connection's receive window: a burst of replies never waits for
/// us to open it. Each stream keeps the default 65,535, which a DNS
/// message always fits.
const WINDOW: u32 = 1 << 20;
const DEFAULT_WINDOW: u32 = 65_535;
/// The most streams open at once, whatever the server allows.
const MAX_STREAMS: usize = 128;
/// Stream IDs are 31 bits, odd for the client, never reused.
const LAST_STREAM: u32 = (1 << 31) - 1;

mod frame {
    pub(super) const DATA: u8 = 0;
    pub(super) const HEADERS: u8 = 1;
    pub(super) const RST_STREAM: u8 = 3;
    pub(super) const SETTINGS: u8 = 4;
    pub(super) const PUSH_PROMISE: u8 = 5;
    pub(super) const PING: u8 = 6;
    pub(super) const GOAWAY: u8 = 7;
    pub(super) const WINDOW_UPDATE: u8 = 8;
    pub(super) const CONTINUATION: u8 = 9;
}

mod flag {
    pub(super) const END_STREAM: u8 = 0x1;
    pub(super) const ACK: u8 = 0x1;
    pub(super) const END_HEADERS: u8 = 0x4;
    pub(super) const PADDED: u8 = 0x8;
    pub(super) const PRIORITY: u8 = 0x20;
}

mod setting {
    pub(super) const HEADER_TABLE_SIZE: u16 = 1;
    pub(super) const ENABLE_PUSH: u16 = 2;
    pub(super) const MAX_CONCURRENT_STREAMS: u16 = 3;
    pub(super) const INITIAL_WINDOW_SIZE: u16 = 4;
}

/// RST_STREAM's code for a stream the server did not process: it may be
/// sent again.
const REFUSED_STREAM: u32 = 0x7;

/// A stream waiting for its reply.
#[derive(Debug, Default)]
struct Stream {
    /// The final status (0: no final HEADERS yet).
    status: u16,
    dns_message: bool,
    body: Vec<u8>,
    too_long: bool,
}

/// One connection's HTTP/2 state.
#[derive(Debug)]
pub struct Session {
    decoder: Decoder,
    next_stream: u32,
    streams: FxHashMap<u32, Stream>,
    /// The server's MAX_CONCURRENT_STREAMS, within ours.
    max_streams: usize,
    /// GOAWAY came, or stream IDs ran out: no new streams on this connection.
    draining: bool,
    /// A header block being gathered: (stream, END_STREAM on its HEADERS).
    block_for: Option<(u32, bool)>,
    block: Vec<u8>,
    /// DATA received since our last WINDOW_UPDATE for the connection.
    unacknowledged: u32,
    /// The server lowered its HPACK table below the default: our next
    /// header block must say so (RFC 7541 §4.2), though we never index.
    table_update: Option<usize>,
    /// Reused for each request's header block and path.
    block_out: Vec<u8>,
    path: Vec<u8>,
}

impl Session {
    /// A session on a new connection; its preface is queued on `out`.
    pub fn start(out: &mut Vec<u8>) -> Session {
        out.extend_from_slice(PREFACE);
        let settings = [(setting::ENABLE_PUSH, 0u32)];
        put_frame_header(out, 6 * settings.len(), frame::SETTINGS, 0, 0);
        for (id, value) in settings {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&value.to_be_bytes());
        }
        put_window_update(out, WINDOW - DEFAULT_WINDOW);
        Session {
            decoder: Decoder::default(),
            next_stream: 1,
            streams: FxHashMap::default(),
            max_streams: MAX_STREAMS,
            draining: false,
            block_for: None,
            block: Vec::new(),
            unacknowledged: 0,
            table_update: None,
            block_out: Vec::new(),
            path: Vec::new(),
        }
    }

    /// Whether another request may go now.
    pub fn room(&self) -> bool {
        !self.draining && self.streams.len() < self.max_streams
    }

    /// The server allows no streams now (SETTINGS_MAX_CONCURRENT_STREAMS
    /// 0, RFC 9113 §6.5.2): nothing waiting for room would get it before
    /// the server says otherwise, if ever.
    pub fn refusing(&self) -> bool {
        self.max_streams == 0
    }

    /// No new streams will go on this connection, and none is open: it can close.
    pub fn finished(&self) -> bool {
        self.draining && self.streams.is_empty()
    }

    /// Queues a GET of `query` (ID already 0) on `out`; the stream's ID.
    pub fn request(&mut self, target: &https::Target, query: &[u8], out: &mut Vec<u8>) -> u32 {
        let stream = self.next_stream;
        self.next_stream += 2;
        if self.next_stream > LAST_STREAM {
            self.draining = true;
        }
        let block = &mut self.block_out;
        block.clear();
        if let Some(size) = self.table_update.take() {
            hpack::put_table_size(block, size);
        }
        hpack::put_indexed(block, hpack::index::METHOD_GET);
        hpack::put_indexed(block, hpack::index::SCHEME_HTTPS);
        hpack::put_literal(block, hpack::index::AUTHORITY, &[target.authority.as_bytes()]);
        self.path.clear();
        target.put_path(query, &mut self.path);
        hpack::put_literal(block, hpack::index::PATH, &[&self.path]);
        hpack::put_literal(block, hpack::index::ACCEPT, &[https::DNS_MESSAGE.as_bytes()]);
        put_frame_header(out, block.len(), frame::HEADERS, flag::END_HEADERS | flag::END_STREAM, stream);
        out.extend_from_slice(block);
        self.streams.insert(stream, Stream::default());
        stream
    }

    /// Takes every whole frame in `input`, queuing replies to them on
    /// `out` and what became of requests on `events`. An error ends the
    /// connection.
    pub fn read(&mut self, input: &mut Vec<u8>, out: &mut Vec<u8>, events: &mut Vec<Event>) -> Result<(), Failure> {
        let mut at = 0;
        let result = loop {
            let Some(head) = input.get(at..at + 9) else { break Ok(()) };
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & LAST_STREAM;
            if len > MAX_FRAME {
                break Err(Failure::Protocol("a frame larger than allowed"));
            }
            let Some(payload) = input.get(at + 9..at + 9 + len) else { break Ok(()) };
            if let Err(e) = self.frame(kind, flags, stream, payload, out, events) {
                break Err(e);
            }
            at += 9 + len;
        };
        input.drain(..at);
        result
    }

    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
        out: &mut Vec<u8>,
        events: &mut Vec<Event>,
    ) -> Result<(), Failure> {
        if self.block_for.is_some() && kind != frame::CONTINUATION {
            return Err(Failure::Protocol("a header block cut by another frame"));
        }
        match kind {
            frame::DATA => {
                if stream == 0 {
                    return Err(Failure::Protocol("DATA on stream 0"));
                }
                // Flow control counts the whole payload, padding included.
                self.unacknowledged += payload.len() as u32;
                if self.unacknowledged >= WINDOW / 2 {
                    put_window_update(out, self.unacknowledged);
                    self.unacknowledged = 0;
                }
                let data = unpad(flags, payload)?;
                if let Some(s) = self.streams.get_mut(&stream) {
                    if s.body.len() + data.len() > super::tls::MAX_MESSAGE {
                        s.too_long = true;
                    } else {
                        s.body.extend_from_slice(data);
                    }
                }
                if flags & flag::END_STREAM != 0 {
                    self.finish(stream, events);
                }
            }
            frame::HEADERS => {
                if stream == 0 {
                    return Err(Failure::Protocol("HEADERS on stream 0"));
                }
                let mut fragment = unpad(flags, payload)?;
                if flags & flag::PRIORITY != 0 {
                    fragment = fragment.get(5..).ok_or(Failure::Protocol("a short HEADERS frame"))?;
                }
                self.block.clear();
                self.block.extend_from_slice(fragment);
                self.block_for = Some((stream, flags & flag::END_STREAM != 0));
                if flags & flag::END_HEADERS != 0 {
                    self.headers(events)?;
                }
            }
            frame::CONTINUATION => {
                if self.block_for.map(|(s, _)| s) != Some(stream) {
                    return Err(Failure::Protocol("a CONTINUATION out of place"));
                }
                if self.block.len() + payload.len() > MAX_BLOCK {
                    return Err(Failure::Protocol("a header block too large"));
                }
                self.block.extend_from_slice(payload);
                if flags & flag::END_HEADERS != 0 {
                    self.headers(events)?;
                }
            }
            frame::RST_STREAM => {
                let code = payload.try_into().map(u32::from_be_bytes).map_err(|_| Failure::Protocol("RST_STREAM"))?;
                if self.streams.remove(&stream).is_some() {
                    events.push(if code == REFUSED_STREAM {
                        Event::Unprocessed(stream)
                    } else {
                        Event::Refused(stream, Refusal::Reset(code))
                    });
                }
            }
            frame::SETTINGS => {
                if stream != 0 || payload.len() % 6 != 0 {
                    return Err(Failure::Protocol("a malformed SETTINGS frame"));
                }
                if flags & flag::ACK != 0 {
                    return Ok(());
                }
                for s in payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([s[0], s[1]]);
                    let value = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                    match id {
                        setting::HEADER_TABLE_SIZE if (value as usize) < hpack::TABLE_SIZE => {
                            self.table_update = Some(value as usize);
                        }
                        setting::MAX_CONCURRENT_STREAMS => self.max_streams = (value as usize).min(MAX_STREAMS),
                        setting::INITIAL_WINDOW_SIZE if value > LAST_STREAM => {
                            return Err(Failure::Protocol("a window larger than allowed"));
                        }
                        _ => {}
                    }
                }
                put_frame_header(out, 0, frame::SETTINGS, flag::ACK, 0);
            }
            frame::PUSH_PROMISE => return Err(Failure::Protocol("a push, which our SETTINGS refused")),
            frame::PING => {
                if payload.len() != 8 || stream != 0 {
                    return Err(Failure::Protocol("a malformed PING"));
                }
                if flags & flag::ACK == 0 {
                    put_frame_header(out, 8, frame::PING, flag::ACK, 0);
                    out.extend_from_slice(payload);
                }
            }
            frame::GOAWAY => {
                let last = payload
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & LAST_STREAM)
                    .ok_or(Failure::Protocol("a short GOAWAY"))?;
                self.draining = true;
                // Streams above `last` were never processed: they can go again elsewhere.
                let unprocessed: Vec<u32> = self.streams.keys().copied().filter(|&s| s > last).collect();
                for s in unprocessed {
                    self.streams.remove(&s);
                    events.push(Event::Unprocessed(s));
                }
            }
            // PRIORITY, WINDOW_UPDATE (we send no DATA), and types we do not know.
            _ => {}
        }
        Ok(())
    }

    /// A whole header block arrived: decode it (always: the HPACK table
    /// must follow the server's) and give it to its stream.
    fn headers(&mut self, events: &mut Vec<Event>) -> Result<(), Failure> {
        let Some((stream, end)) = self.block_for.take() else { return Ok(()) };
        let (mut status, mut dns_message) = (None, false);
        self.decoder
            .decode(&self.block, |name, value| match name {
                b":status" => status = std::str::from_utf8(value).ok().and_then(|v| v.parse::<u16>().ok()),
                b"content-type" => dns_message = https::is_dns_message(value),
                _ => {}
            })
            .map_err(|_| Failure::Protocol("a header block HPACK cannot decode"))?;
        if let Some(s) = self.streams.get_mut(&stream)
            && s.status == 0
        {
            match status {
                // Informational: the final answer follows.
                Some(100..=199) if !end => {}
                Some(code) => (s.status, s.dns_message) = (code, dns_message),
                None => return Err(Failure::Protocol("a reply without a status")),
            }
        }
        if end {
            self.finish(stream, events);
        }
        Ok(())
    }

    /// The server ended `stream`: its reply, or why there is none.
    fn finish(&mut self, stream: u32, events: &mut Vec<Event>) {
        let Some(s) = self.streams.remove(&stream) else { return };
        events.push(match https::judge(s.status, s.dns_message, s.too_long, s.body.len()) {
            Ok(()) => Event::Reply(stream, s.body),
            Err(why) => Event::Refused(stream, why),
        });
    }

    /// Queues a polite end of the connection (before the TLS close).
    pub fn goodbye(&self, out: &mut Vec<u8>) {
        put_frame_header(out, 8, frame::GOAWAY, 0, 0);
        out.extend_from_slice(&[0; 8]);
    }
}

/// Strips a frame's padding (RFC 9113 §6.1).
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], Failure> {
    if flags & flag::PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or(Failure::Protocol("a short padded frame"))?;
    rest.get(..rest.len().wrapping_sub(pad as usize))
        .filter(|_| pad as usize <= rest.len())
        .ok_or(Failure::Protocol("padding longer than its frame"))
}

fn put_frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

fn put_window_update(out: &mut Vec<u8>, increment: u32) {
    put_frame_header(out, 4, frame::WINDOW_UPDATE, 0, 0);
    out.extend_from_slice(&increment.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> https::Target {
        https::Target { authority: "dns.example".into(), path: "/dns-query".into() }
    }

    fn frame_bytes(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        put_frame_header(&mut f, payload.len(), kind, flags, stream);
        f.extend_from_slice(payload);
        f
    }

    /// A header block: `:status` and a content type, as literals.
    fn block(status: &str, content_type: &str) -> Vec<u8> {
        let mut b = Vec::new();
        hpack::put_literal(&mut b, 8, &[status.as_bytes()]);
        hpack::put_literal(&mut b, 31, &[content_type.as_bytes()]);
        b
    }

    fn feed(s: &mut Session, bytes: &[u8]) -> (Vec<Event>, Vec<u8>, Result<(), Failure>) {
        let (mut input, mut out, mut events) = (bytes.to_vec(), Vec::new(), Vec::new());
        let r = s.read(&mut input, &mut out, &mut events);
        (events, out, r)
    }

    fn session() -> Session {
        let mut out = Vec::new();
        let s = Session::start(&mut out);
        assert!(out.starts_with(PREFACE));
        s
    }

    #[test]
    fn a_request_and_its_reply_in_pieces() {
        let mut s = session();
        let mut out = Vec::new();
        let id = s.request(&target(), &[0; 12], &mut out);
        assert_eq!((id, out[3], out[4]), (1, frame::HEADERS, flag::END_HEADERS | flag::END_STREAM));
        assert_eq!(s.request(&target(), &[0; 12], &mut Vec::new()), 3);
        // HEADERS split over a CONTINUATION, DATA padded, in two reads.
        let b = block("200", "application/dns-message");
        let mut bytes = frame_bytes(frame::HEADERS, 0, 1, &b[..3]);
        bytes.extend(frame_bytes(frame::CONTINUATION, flag::END_HEADERS, 1, &b[3..]));
        let mut data = vec![4u8];
        data.extend_from_slice(&[9; 12]);
        data.extend_from_slice(&[0; 4]);
        bytes.extend(frame_bytes(frame::DATA, flag::PADDED | flag::END_STREAM, 1, &data));
        let (events, _, r) = feed(&mut s, &bytes[..7]);
        assert!(r.is_ok() && events.is_empty());
        let mut input = bytes.clone();
        let (mut out, mut events) = (Vec::new(), Vec::new());
        s.read(&mut input, &mut out, &mut events).unwrap();
        assert!(input.is_empty());
        match events.as_slice() {
            [Event::Reply(1, body)] => assert_eq!(body, &[9; 12]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn settings_ping_and_the_window() {
        let mut s = session();
        let mut settings = Vec::new();
        for (id, v) in [(setting::MAX_CONCURRENT_STREAMS, 2u32), (setting::HEADER_TABLE_SIZE, 0)] {
            settings.extend_from_slice(&id.to_be_bytes());
            settings.extend_from_slice(&v.to_be_bytes());
        }
        let mut bytes = frame_bytes(frame::SETTINGS, 0, 0, &settings);
        bytes.extend(frame_bytes(frame::PING, 0, 0, b"12345678"));
        let (_, out, r) = feed(&mut s, &bytes);
        r.unwrap();
        assert_eq!(
            out,
            [frame_bytes(frame::SETTINGS, flag::ACK, 0, &[]), frame_bytes(frame::PING, flag::ACK, 0, b"12345678")]
                .concat()
        );
        // Two streams at most; the next block starts with the table size update.
        let mut req = Vec::new();
        s.request(&target(), &[0; 12], &mut req);
        assert_eq!(req[9], 0x20, "table size 0 announced");
        s.request(&target(), &[0; 12], &mut Vec::new());
        assert!(!s.room() && !s.refusing());
        // Half the connection window consumed: a WINDOW_UPDATE for it.
        let chunk = frame_bytes(frame::DATA, 0, 1, &[0; MAX_FRAME]);
        let mut out = Vec::new();
        for _ in 0..(WINDOW as usize / 2 / MAX_FRAME) {
            let (_, o, r) = feed(&mut s, &chunk);
            r.unwrap();
            out.extend(o);
        }
        assert_eq!(out, frame_bytes(frame::WINDOW_UPDATE, 0, 0, &(WINDOW / 2).to_be_bytes()));
        // The body grew past a DNS message's size: refused, not kept.
        let (events, _, _) = feed(
            &mut s,
            &[
                frame_bytes(frame::HEADERS, flag::END_HEADERS, 1, &block("200", DNS_TYPE)),
                frame_bytes(frame::DATA, flag::END_STREAM, 1, &[]),
            ]
            .concat(),
        );
        assert!(matches!(events[..], [Event::Refused(1, Refusal::Length)]), "{events:?}");
    }

    const DNS_TYPE: &str = "application/dns-message";

    /// A server that allows no streams refuses us, where one that allows
    /// some only makes us wait.
    #[test]
    fn no_streams_allowed_is_a_refusal() {
        let mut s = session();
        let zero = [&setting::MAX_CONCURRENT_STREAMS.to_be_bytes()[..], &0u32.to_be_bytes()].concat();
        feed(&mut s, &frame_bytes(frame::SETTINGS, 0, 0, &zero)).2.unwrap();
        assert!(!s.room() && s.refusing());
        let one = [&setting::MAX_CONCURRENT_STREAMS.to_be_bytes()[..], &1u32.to_be_bytes()].concat();
        feed(&mut s, &frame_bytes(frame::SETTINGS, 0, 0, &one)).2.unwrap();
        assert!(s.room() && !s.refusing());
    }

    #[test]
    fn resets_goaway_and_refusals() {
        let mut s = session();
        for _ in 0..4 {
            s.request(&target(), &[0; 12], &mut Vec::new());
        }
        // 1: reset, refused (may go again); 3: reset with another code.
        let mut bytes = frame_bytes(frame::RST_STREAM, 0, 1, &REFUSED_STREAM.to_be_bytes());
        bytes.extend(frame_bytes(frame::RST_STREAM, 0, 3, &2u32.to_be_bytes()));
        // GOAWAY: streams after 5 were not processed.
        bytes.extend(frame_bytes(frame::GOAWAY, 0, 0, &[0, 0, 0, 5, 0, 0, 0, 0]));
        let (events, _, r) = feed(&mut s, &bytes);
        r.unwrap();
        assert!(
            matches!(events[..], [Event::Unprocessed(1), Event::Refused(3, Refusal::Reset(2)), Event::Unprocessed(7)]),
            "{events:?}"
        );
        assert!(!s.room() && !s.finished(), "stream 5 still open");
        // 5 answers with an informational status first, then a 503.
        let mut bytes = frame_bytes(frame::HEADERS, flag::END_HEADERS, 5, &block("103", ""));
        bytes.extend(frame_bytes(frame::HEADERS, flag::END_HEADERS | flag::END_STREAM, 5, &block("503", "text/plain")));
        let (events, _, r) = feed(&mut s, &bytes);
        r.unwrap();
        assert!(matches!(events[..], [Event::Refused(5, Refusal::Status(503))]), "{events:?}");
        assert!(s.finished());
    }

    #[test]
    fn protocol_errors_end_the_connection() {
        let cases: [&[u8]; 5] = [
            &frame_bytes(frame::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
            &[frame_bytes(frame::HEADERS, 0, 1, &[0x88]), frame_bytes(frame::PING, 0, 0, &[0; 8])].concat(),
            &frame_bytes(frame::DATA, 0, 0, &[]),
            &frame_bytes(frame::SETTINGS, 0, 0, &[0; 5]),
            &frame_bytes(frame::HEADERS, flag::END_HEADERS, 1, &[0x80]),
        ];
        for (i, bytes) in cases.iter().enumerate() {
            let mut s = session();
            s.request(&target(), &[0; 12], &mut Vec::new());
            assert!(feed(&mut s, bytes).2.is_err(), "case {i}");
        }
        let mut too_big = Vec::new();
        put_frame_header(&mut too_big, MAX_FRAME + 1, frame::DATA, 0, 1);
        assert!(feed(&mut session(), &too_big).2.is_err());
    }
}
