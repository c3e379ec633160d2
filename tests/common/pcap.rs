//! Just enough of libpcap's file format to pull DNS payloads out of the real
//! captures in tests/data/pcaps: Ethernet (with 802.1Q), raw IP and Linux
//! SLL2 links; IPv4 and IPv6; UDP and TCP.
#![allow(dead_code, unreachable_pub)]

/// One transport payload from a capture.
#[derive(Debug, Clone)]
pub struct Segment {
    pub tcp: bool,
    pub src_port: u16,
    pub dst_port: u16,
    /// TCP sequence number (0 for UDP).
    pub seq: u32,
    pub payload: Vec<u8>,
}

fn u16be(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

/// Every UDP and TCP payload in the file, in capture order.
pub fn segments(path: &std::path::Path) -> Vec<Segment> {
    let d = std::fs::read(path).unwrap();
    let le = match &d[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        m => panic!("{}: not a pcap file ({m:?})", path.display()),
    };
    let u32at = |i: usize| {
        let b = [d[i], d[i + 1], d[i + 2], d[i + 3]];
        if le { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) }
    };
    let link = u32at(20);
    let mut out = Vec::new();
    let mut pos = 24;
    while pos + 16 <= d.len() {
        let caplen = u32at(pos + 8) as usize;
        let start = pos + 16;
        pos = start + caplen;
        let Some(frame) = d.get(start..start + caplen) else { break };
        let ip = match link {
            1 => {
                let mut off = 12;
                let mut ethertype = u16be(frame, off);
                while ethertype == Some(0x8100) {
                    off += 4;
                    ethertype = u16be(frame, off);
                }
                frame.get(off + 2..)
            }
            101 => Some(frame),
            276 => frame.get(20..),
            other => panic!("link type {other} not supported"),
        };
        if let Some(seg) = ip.and_then(parse_ip) {
            out.push(seg);
        }
    }
    out
}

fn parse_ip(ip: &[u8]) -> Option<Segment> {
    let (proto, l4) = match ip.first()? >> 4 {
        4 => {
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = (u16be(ip, 2)? as usize).min(ip.len());
            (*ip.get(9)?, ip.get(ihl..total)?)
        }
        6 => {
            let plen = u16be(ip, 4)? as usize;
            (*ip.get(6)?, ip.get(40..(40 + plen).min(ip.len()))?)
        }
        _ => return None,
    };
    match proto {
        17 => {
            let len = (u16be(l4, 4)? as usize).min(l4.len());
            Some(Segment {
                tcp: false,
                src_port: u16be(l4, 0)?,
                dst_port: u16be(l4, 2)?,
                seq: 0,
                payload: l4.get(8..len)?.to_vec(),
            })
        }
        6 => {
            let off = (*l4.get(12)? >> 4) as usize * 4;
            Some(Segment {
                tcp: true,
                src_port: u16be(l4, 0)?,
                dst_port: u16be(l4, 2)?,
                seq: u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]),
                payload: l4.get(off..)?.to_vec(),
            })
        }
        _ => None,
    }
}
