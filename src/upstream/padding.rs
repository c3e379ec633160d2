//! EDNS(0) padding (RFC 7830) of queries on encrypted transports to a
//! multiple of [`BLOCK`] bytes, the query policy RFC 8467 recommends (and
//! Unbound uses): the length of a query then says little about the name.

use crate::wire::rtype;

/// Queries are padded to a multiple of this.
pub const BLOCK: usize = 128;
/// The Padding option's code.
const OPTION_PADDING: u16 = 12;
/// An OPT record without options: root name, type, class, TTL, RDLENGTH 0.
const BARE_OPT_LEN: usize = 11;

/// Pads `query`, whose last record is our OPT without options (as
/// `build_query` makes it); any other message is left as it is.
pub fn pad(query: &mut Vec<u8>) {
    let len = query.len();
    let Some(opt) = len.checked_sub(BARE_OPT_LEN).map(|at| &query[at..]) else { return };
    if opt[0] != 0 || opt[1..3] != rtype::OPT.to_be_bytes() || opt[9..11] != [0, 0] {
        return;
    }
    let padded = (len + 4).div_ceil(BLOCK) * BLOCK;
    let fill = padded - len - 4;
    query[len - 2..].copy_from_slice(&((4 + fill) as u16).to_be_bytes());
    query.extend_from_slice(&OPTION_PADDING.to_be_bytes());
    query.extend_from_slice(&(fill as u16).to_be_bytes());
    query.resize(padded, 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::build_query;
    use crate::wire::{parse_query, tests::query};

    #[test]
    fn pads_to_the_block_and_stays_a_valid_query() {
        for name in ["a.example", "www.example.com", &format!("{}.example", "x".repeat(63)), &"ab.".repeat(60)] {
            let m = query(7, name, rtype::A, None);
            let q = parse_query(&m).unwrap();
            let mut ours = build_query(&q, 9);
            pad(&mut ours);
            assert_eq!(ours.len() % BLOCK, 0, "{name}: {}", ours.len());
            let p = simple_dns::Packet::parse(&ours).unwrap();
            let opt = p.opt().unwrap();
            assert_eq!(opt.opt_codes.len(), 1);
            assert_eq!(opt.opt_codes[0].code, OPTION_PADDING);
            assert!(parse_query(&ours).is_ok());
        }
        let mut not_ours = b"\x00\x01 nothing like a query".to_vec();
        let before = not_ours.clone();
        pad(&mut not_ours);
        assert_eq!(not_ours, before);
    }
}
