//! A DHCP lease file, an ethers file and the kernel's ARP table as dnsmasq,
//! the owner and Linux write them, or as anything else: every device read
//! has a name and an address or MAC, no ARP entry a null MAC, never a panic.
#![no_main]

use hydradns::client::names::{parse_arp, parse_ethers, parse_leases};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for k in parse_leases(&text).into_iter().chain(parse_ethers(&text)) {
        assert!(!k.name.is_empty() && k.name != "*", "{k:?}");
        assert!(k.ip.is_some() || k.mac.is_some(), "{k:?}");
    }
    for (_, mac) in parse_arp(&text) {
        assert_ne!(mac, [0; 6], "an incomplete ARP entry");
    }
});
