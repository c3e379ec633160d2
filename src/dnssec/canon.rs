//! The bytes an RRSIG signs (RFC 4034 §3.1.8.1): the RRSIG's RDATA up to
//! its signature with the signer's name lowercased, then each record of
//! the RRset in canonical form (§6.2) and canonical order (§6.3).

use super::name;
use super::record::{Record, Rrsig, canonical_rdata};

/// Buffers reused from one signature to the next within a validation, so
/// that checking an RRset allocates nothing once they have grown.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The signed data being built.
    data: Vec<u8>,
    /// Each record's canonical RDATA, back to back.
    rdatas: Vec<u8>,
    /// Where each record's canonical RDATA is in `rdatas`.
    spans: Vec<(u32, u32)>,
}

/// Builds the data `sig` signs over `rrset` (one owner, type and class,
/// checked by the caller) into `scratch`. The owner is written as the RRSIG
/// says it was signed: lowercase, and as `*.` + its rightmost `labels`
/// labels when the answer was expanded from a wildcard (§3.1.3). Identical
/// records count once (RFC 2181 §5; RFC 4034 §6.3). `None` if a record's
/// RDATA is malformed for its type.
pub(crate) fn signed_data<'s>(scratch: &'s mut Scratch, sig: &Rrsig<'_>, rrset: &[Record<'_>]) -> Option<&'s [u8]> {
    let Scratch { data, rdatas, spans } = scratch;
    data.clear();
    rdatas.clear();
    spans.clear();
    let head_len = sig.head.len() - sig.signer.len();
    data.extend_from_slice(&sig.head[..head_len]);
    name::push_lower(data, sig.signer);

    for r in rrset {
        let start = rdatas.len();
        canonical_rdata(r.rtype, r.rdata, rdatas)?;
        if rdatas.len() - start > u16::MAX as usize {
            return None;
        }
        spans.push((start as u32, rdatas.len() as u32));
    }
    let rdatas: &[u8] = rdatas;
    let bytes = |&(s, e): &(u32, u32)| &rdatas[s as usize..e as usize];
    spans.sort_unstable_by(|a, b| bytes(a).cmp(bytes(b)));
    spans.dedup_by(|a, b| bytes(a) == bytes(b));

    let first = rrset.first()?;
    let owner_at = data.len();
    let labels = sig.labels as usize;
    if labels < name::rrsig_label_count(first.owner) {
        data.extend_from_slice(b"\x01*");
        name::push_lower(data, name::suffix(first.owner, labels));
    } else {
        name::push_lower(data, first.owner);
    }
    let owner_end = data.len();
    let mut fixed = [0u8; 10];
    fixed[0..2].copy_from_slice(&first.rtype.to_be_bytes());
    fixed[2..4].copy_from_slice(&first.class.to_be_bytes());
    fixed[4..8].copy_from_slice(&sig.original_ttl.to_be_bytes());
    for (i, span) in spans.iter().enumerate() {
        if i > 0 {
            data.extend_from_within(owner_at..owner_end);
        }
        let rdata = bytes(span);
        fixed[8..10].copy_from_slice(&(rdata.len() as u16).to_be_bytes());
        data.extend_from_slice(&fixed);
        data.extend_from_slice(rdata);
    }
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::name::from_text as n;
    use crate::dnssec::record::rtype;

    fn rrsig(labels: u8) -> Vec<u8> {
        let mut r = vec![0, 15, 8, labels, 0, 0, 14, 16, 0x78, 0, 0, 0, 0x60, 0, 0, 0, 0x12, 0x34];
        r.extend_from_slice(&n("Example.COM."));
        r.extend_from_slice(&[9, 9, 9]);
        r
    }

    #[test]
    fn order_case_and_duplicates() {
        let owner = n("WWW.example.com.");
        let mx_b = [&[0u8, 20][..], &n("B.example.com.")].concat();
        let mx_a = [&[0u8, 20][..], &n("a.example.com.")].concat();
        let rec = |rdata: &'static [u8]| Record { owner: &[], rtype: rtype::MX, class: 1, ttl: 7, rdata };
        let (mx_b, mx_a): (&'static [u8], &'static [u8]) = (mx_b.leak(), mx_a.leak());
        let owner: &'static [u8] = owner.leak();
        let set = [Record { owner, ..rec(mx_b) }, Record { owner, ..rec(mx_a) }, Record { owner, ..rec(mx_b) }];
        let sig_rdata = rrsig(3);
        let sig = Rrsig::parse(&sig_rdata).unwrap();
        let mut scratch = Scratch::default();
        let data = signed_data(&mut scratch, &sig, &set).unwrap().to_vec();
        let mut want = sig_rdata[..18].to_vec();
        want.extend_from_slice(&n("example.com."));
        for target in ["a.example.com.", "b.example.com."] {
            want.extend_from_slice(&n("www.example.com."));
            want.extend_from_slice(&[0, 15, 0, 1, 0, 0, 14, 16, 0, 2 + n(target).len() as u8, 0, 20]);
            want.extend_from_slice(&n(target));
        }
        assert_eq!(data, want);

        // Signed from a wildcard: the owner becomes *.example.com.
        let sig_rdata = rrsig(2);
        let sig = Rrsig::parse(&sig_rdata).unwrap();
        let data = signed_data(&mut scratch, &sig, &set[..1]).unwrap();
        let owner_at = 18 + n("example.com.").len();
        assert!(data[owner_at..].starts_with(&n("*.example.com.")));
    }
}
