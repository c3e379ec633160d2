//! An upstream's reply as the validator reads it: `dnssec::Records::from_message`
//! expands every compressed name into one buffer, and the validator then
//! slices that buffer by offsets, so a wrong offset or an expansion that
//! runs away is a crash or a wrong record. Every owner read is one whole
//! name, the views of RRSIG, DNSKEY and DS RDATA and the canonical order
//! take whatever comes, and the records written out again without
//! compression read back exactly the same.
#![no_main]

use hydradns::dnssec::{self, Dnskey, Ds, Record, Records, Rrsig, Section, name, rtype};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|msg: &[u8]| {
    let Some(records) = Records::from_message(msg) else { return };
    let all: Vec<(Section, Record<'_>)> = records.iter().collect();
    assert_eq!(all.len(), records.len());
    for (_, r) in &all {
        assert!(name::is_name(r.owner), "an owner that is not one whole name: {:?}", r.owner);
        assert_ne!(r.rtype, rtype::OPT, "OPT is not data");
        match r.rtype {
            rtype::RRSIG => {
                if let Some(sig) = Rrsig::parse(r.rdata) {
                    assert!(name::is_name(sig.signer), "a signer that is not one whole name");
                }
            }
            rtype::DNSKEY => {
                if let Some(key) = Dnskey::parse(r.rdata) {
                    let _ = (key.signs_zone(), dnssec::key_tag(r.rdata));
                }
            }
            rtype::DS => {
                let _ = Ds::parse(r.rdata);
            }
            _ => {}
        }
    }
    let flat: Vec<Record<'_>> = all.iter().map(|(_, r)| *r).collect();
    for pair in flat.windows(2) {
        let (a, b) = (pair[0].owner, pair[1].owner);
        assert_eq!(name::canonical_cmp(a, b), name::canonical_cmp(b, a).reverse(), "an order that is not one");
    }
    // Bounded: each lookup walks every record.
    for r in flat.iter().take(8) {
        let set = dnssec::rrset(&flat, r.owner, r.rtype);
        assert!(set.iter().all(|x| x.rtype == r.rtype && name::eq(x.owner, r.owner)));
        let _ = (dnssec::rrsigs_for(&flat, r.owner, r.rtype), dnssec::signer_of(&flat, r.owner, r.rtype));
    }

    // Written out uncompressed (no question, no OPT), the records read back
    // the same: an expansion that shifted a byte would not.
    let mut out = vec![0u8; 12];
    let mut counts = [0u16; 4];
    for (section, r) in &all {
        let Ok(rdlen) = u16::try_from(r.rdata.len()) else { return };
        out.extend_from_slice(r.owner);
        out.extend_from_slice(&r.rtype.to_be_bytes());
        out.extend_from_slice(&r.class.to_be_bytes());
        out.extend_from_slice(&r.ttl.to_be_bytes());
        out.extend_from_slice(&rdlen.to_be_bytes());
        out.extend_from_slice(r.rdata);
        counts[1 + *section as usize] += 1;
    }
    if out.len() > usize::from(u16::MAX) {
        return;
    }
    for (i, c) in counts.iter().enumerate() {
        out[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
    }
    let again = Records::from_message(&out).expect("records written out uncompressed read back");
    assert_eq!(again.iter().collect::<Vec<_>>(), all, "records changed on the way back");
});
