//! An upstream answer prepared for replay: checked once when it arrives,
//! with its OPT removed and every TTL located and clamped, so that the
//! cache, the misses' waiters and serve-stale each write a client's copy
//! with no parse: ID, question case, flags and counted-down TTLs patched.

use crate::wire::{self, HEADER_LEN, Query, flags, header, rcode, rtype};

/// Answers larger than this are passed on but not cached: it bounds the
/// cache's memory at capacity × 4 KiB.
pub const MAX_ENTRY_BYTES: usize = 4096;
/// Cap on negative-answer lifetime (RFC 2308 §5 suggests one to three hours).
pub const MAX_NEGATIVE_TTL: u32 = 3600;
/// Most bytes of an upstream's Extended DNS Errors kept with an answer
/// (RFC 8914 options, EXTRA-TEXT included); later ones are dropped.
pub const MAX_EDE_BYTES: usize = 256;
/// EDNS option code of an Extended DNS Error (RFC 8914).
pub const EDE_OPTION: u16 = 15;

/// An upstream answer prepared for replay: OPT removed, TTLs located and clamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The answer without OPT; ID and question case get patched per client.
    msg: Box<[u8]>,
    /// Offset and clamped original value of every TTL in `msg`.
    ttls: Box<[(u16, u32)]>,
    /// The upstream's Extended DNS Errors, whole options, passed on to
    /// clients that use EDNS (the rest of its OPT speaks for its transport).
    ede: Box<[u8]>,
    /// How long the whole answer may be cached; `None` when it must not be.
    pub cache_ttl: Option<u32>,
    /// A validating set's verdict, kept with the answer in the cache so a
    /// hit is counted and logged with it as the miss was.
    pub dnssec: Option<Dnssec>,
}

impl Stored {
    /// Prepares a validated upstream answer. `None` if its records cannot be
    /// walked (it is then not usable at all).
    pub fn from_response(resp: &[u8], min_ttl: u32, max_ttl: u32) -> Option<Stored> {
        let [qd, an, ns, ar] = header::counts(resp);
        if qd != 1 || resp.len() > u16::MAX as usize {
            return None;
        }
        let mut pos = wire::skip_name(resp, HEADER_LEN)? + 4;
        let mut ttls = Vec::with_capacity((an + ns + ar) as usize);
        let mut negative_ttl: Option<u32> = None;
        let mut cut: Option<(usize, u16)> = None;
        let mut ede = Vec::new();
        let additional_start_idx = an as usize + ns as usize;
        let mut additional_pos = pos;
        for i in 0..(an as usize + ns as usize + ar as usize) {
            if i == additional_start_idx {
                additional_pos = pos;
            }
            let rr = wire::read_rr(resp, pos)?;
            if rr.rtype == rtype::OPT {
                // RFC 6891 §6.1.1: an OPT belongs in the additional section
                // only. One in the answer or authority section is a malformed
                // reply, and cutting it would take one from an ARCOUNT of 0.
                if i < additional_start_idx {
                    return None;
                }
                ede = extended_errors(resp, rr.rdata_pos, rr.end);
                // Drop the OPT: it speaks for the upstream's transport, not the
                // client's. Cut just it when last, else the whole additional section.
                cut = Some(if rr.end == resp.len() && i + 1 == an as usize + ns as usize + ar as usize {
                    (pos, ar - 1)
                } else {
                    (additional_pos, 0)
                });
                break;
            }
            let ttl = rr.ttl(resp);
            if rr.rtype == rtype::SOA && i >= an as usize && i < additional_start_idx {
                // RFC 2308 §5: the negative TTL is min(SOA TTL, SOA MINIMUM).
                let minimum = wire::u32_at(resp, rr.end - 4)?;
                negative_ttl = Some(negative_ttl.map_or(ttl.min(minimum), |n| n.min(ttl).min(minimum)));
            }
            ttls.push((rr.ttl_pos as u16, ttl.clamp(min_ttl, max_ttl)));
            pos = rr.end;
        }
        let mut msg = resp.to_vec();
        if let Some((at, new_ar)) = cut {
            msg.truncate(at);
            ttls.retain(|&(p, _)| (p as usize) < at);
            header::set_counts(&mut msg, [qd, an, ns, new_ar]);
        }
        let rc = header::rcode(resp);
        let f = header::flags(resp);
        let negative = rc == rcode::NXDOMAIN || (rc == rcode::NOERROR && an == 0);
        let cache_ttl = if f & flags::TC != 0 || msg.len() > MAX_ENTRY_BYTES {
            None
        } else if negative {
            negative_ttl.map(|n| n.clamp(min_ttl, max_ttl.min(MAX_NEGATIVE_TTL)))
        } else if rc == rcode::NOERROR {
            ttls.iter().map(|&(_, t)| t).min()
        } else {
            // SERVFAIL, REFUSED and the rest are passed on, never cached.
            None
        };
        if let (true, Some(neg)) = (negative, cache_ttl) {
            // The SOA TTL tells clients how long to cache the denial.
            for t in &mut ttls {
                t.1 = t.1.min(neg);
            }
        }
        Some(Stored {
            msg: msg.into_boxed_slice(),
            ttls: ttls.into_boxed_slice(),
            ede: ede.into_boxed_slice(),
            cache_ttl: cache_ttl.filter(|&t| t > 0),
            dnssec: None,
        })
    }

    /// The stored answer (OPT removed, ID and TTLs as first stored).
    pub fn bytes(&self) -> &[u8] {
        &self.msg
    }

    /// Offset and clamped original value of every TTL in [`Stored::bytes`].
    pub fn ttls(&self) -> &[(u16, u32)] {
        &self.ttls
    }

    /// The upstream's Extended DNS Errors, whole options.
    pub fn ede(&self) -> &[u8] {
        &self.ede
    }

    /// Response code of the stored answer.
    pub fn rcode(&self) -> u8 {
        header::rcode(&self.msg)
    }

    /// Writes this answer for client query `q`, `elapsed` seconds after it
    /// was stored. The UDP size limit is the caller's to enforce.
    pub fn write_answer(&self, q: &Query, elapsed: u32, out: &mut Vec<u8>) {
        replay(&self.msg, self.ttls.iter().copied(), &self.ede, q, elapsed, out);
    }
}

/// The Extended DNS Error options among the EDNS options at `start..end`
/// of `msg`, whole, up to [`MAX_EDE_BYTES`].
fn extended_errors(msg: &[u8], start: usize, end: usize) -> Vec<u8> {
    let mut ede = Vec::new();
    let mut p = start;
    while let (Some(code), Some(len)) = (wire::u16_at(msg, p), wire::u16_at(msg, p + 2)) {
        let next = p + 4 + len as usize;
        if next > end {
            break;
        }
        if code == EDE_OPTION && ede.len() + next - p <= MAX_EDE_BYTES {
            ede.extend_from_slice(&msg[p..next]);
        }
        p = next;
    }
    ede
}

/// Writes stored answer `msg` for client query `q`, `elapsed` seconds after
/// it was stored, counting down the TTLs at `ttls` (offset, stored value),
/// with the upstream's Extended DNS Errors `ede` in our OPT.
///
/// Flags: ours (QR, RA), the client's RD and CD, the upstream's opcode and
/// rcode. Not AA: a forwarder is not the authority, even for the upstream's
/// own zones (Unbound never sets it; dnsmasq clears it on hits).
#[inline]
pub fn replay(
    msg: &[u8],
    ttls: impl Iterator<Item = (u16, u32)>,
    ede: &[u8],
    q: &Query,
    elapsed: u32,
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(msg);
    header::set_id(out, q.id);
    // Same key means same name up to case: echo the client's spelling (0x20-safe).
    if let Some(name) = out.get_mut(HEADER_LEN..HEADER_LEN + q.qname.len()) {
        name.copy_from_slice(q.qname);
    }
    let upstream = header::flags(out);
    let mut f = (upstream & (flags::OPCODE_MASK | flags::RCODE_MASK))
        | flags::QR
        | flags::RA
        | (q.flags & (flags::RD | flags::CD));
    // RFC 6840 §5.8: AD only for clients that asked for DNSSEC information.
    if q.flags & flags::AD != 0 || q.edns.is_some_and(|e| e.dnssec_ok) {
        f |= upstream & flags::AD;
    }
    header::set_flags(out, f);
    for (pos, ttl) in ttls {
        wire::put_u32(out, pos as usize, ttl.saturating_sub(elapsed));
    }
    let [_, an, ns, ar] = header::counts(out);
    wire::build::finish_with(out, q.edns, [an, ns, ar], false, ede);
}

/// A validating set's verdict on an answer (`option dnssec`), as the
/// query log's `dnssec` column says it: here, beside the answer it
/// describes, because the in-flight table hands it to waiting clients and
/// the log records it. One byte, so a log entry still queues without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dnssec {
    /// Validated from a trust anchor.
    Secure,
    /// Provably unsigned (or signed only with what is not supported).
    Insecure,
    /// Failed validation: answered SERVFAIL.
    Bogus,
    /// The chain could not be fetched, or a work limit was hit: SERVFAIL.
    Indeterminate,
}

impl Dnssec {
    /// The column's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Dnssec::Secure => "secure",
            Dnssec::Insecure => "insecure",
            Dnssec::Bogus => "bogus",
            Dnssec::Indeterminate => "indeterminate",
        }
    }
}
