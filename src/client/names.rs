//! Devices' names, from what the router already knows: dnsmasq's DHCP leases
//! (`/tmp/dhcp.leases`, IPv4 and DHCPv6 lines) and `/etc/ethers`; and the
//! MAC of a client that asks directly (replace mode) from the kernel's ARP
//! table (`/proc/net/arp`) and IPv6 neighbour table ([`super::neighbours`]).
//!
//! Read by the query log's writer thread, never on the query path: it looks
//! a logged client up by MAC, then by address, and re-reads a file only when
//! its modification time or size changed, checked at most every
//! [`CHECK_EVERY`] (dnsmasq rewrites the leases file in place on every lease
//! change). A file that is missing or unreadable names no one; a line that
//! does not parse is skipped.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use rustc_hash::FxHashMap;

use crate::mac::parse_mac;

/// How often the files' metadata is looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(10);

/// Largest leases or ethers file read: 4 MiB is tens of thousands of devices.
const MAX_TABLE_BYTES: u64 = 4 << 20;
/// The kernel's ARP table.
pub const ARP: &str = "/proc/net/arp";

/// One device a file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub mac: Option<[u8; 6]>,
    pub ip: Option<IpAddr>,
    pub name: String,
}

/// dnsmasq's lease file (`lease.c`, `lease_update_file`):
/// `<expiry> <mac> <ipv4> <hostname|*> <client-id|*>` per IPv4 lease, then
/// after a `duid <server-duid>` line `<expiry> <iaid> <ipv6> <hostname|*>
/// <client-duid|*>` per DHCPv6 lease. The first field is an epoch, or a
/// lease length on a router without a real-time clock; it is not used. A
/// hardware address other than Ethernet's is written `<hwtype>-<address>`
/// and names no MAC here.
pub fn parse_leases(text: &str) -> Vec<Known> {
    let mut out = Vec::new();
    let mut v6 = false;
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.first() == Some(&"duid") {
            v6 = true;
            continue;
        }
        let [_, hw, ip, name, ..] = f[..] else { continue };
        let (Ok(ip), false) = (ip.parse::<IpAddr>(), name == "*" || name.is_empty()) else { continue };
        let mac = if v6 { None } else { parse_mac(hw.as_bytes()) };
        out.push(Known { mac, ip: Some(ip), name: name.to_string() });
    }
    out
}

/// `/etc/ethers` (ethers(5)): `<mac> <hostname or address>` per line, `#`
/// comments. A line naming an address (or `*`, as a lease does) gives no name.
pub fn parse_ethers(text: &str) -> Vec<Known> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or("");
            let mut f = line.split_ascii_whitespace();
            let (mac, host) = (parse_mac(f.next()?.as_bytes())?, f.next()?);
            (host != "*" && host.parse::<IpAddr>().is_err()).then(|| Known {
                mac: Some(mac),
                ip: None,
                name: host.to_string(),
            })
        })
        .collect()
}

/// `/proc/net/arp`: `IP HWtype Flags HWaddress Mask Device` after a header
/// line; only complete entries (flag 0x2) with a real address count.
pub fn parse_arp(text: &str) -> Vec<(IpAddr, [u8; 6])> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let [ip, _, flags, hw, ..] = f[..] else { return None };
            let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
            let mac = parse_mac(hw.as_bytes()).filter(|m| *m != [0; 6])?;
            (flags & 0x2 != 0).then_some((ip.parse().ok()?, mac))
        })
        .collect()
}

/// The names `config client` sections give the devices they match by one
/// address or MAC (a network or a glob names no one device).
pub fn configured_names(clients: &[crate::config::groups::ClientRule]) -> Vec<Known> {
    use crate::config::groups::ClientMatch;
    let mut out = Vec::new();
    for c in clients {
        for m in &c.matches {
            let (mac, ip) = match m {
                ClientMatch::Mac(mac) => (Some(*mac), None),
                ClientMatch::Ip(ip) => (None, Some(*ip)),
                _ => continue,
            };
            out.push(Known { mac, ip, name: c.name.clone() });
        }
    }
    out
}

/// The names the files give, kept up to date.
#[derive(Debug)]
pub struct NameBook {
    leases: Source,
    ethers: Source,
    /// The kernel's ARP table (a /proc file has no mtime: read at every look).
    arp: PathBuf,
    mac_of: FxHashMap<IpAddr, [u8; 6]>,
    /// The ARP table as last read, to tell a change.
    arp_text: Vec<u8>,
    /// The IPv6 neighbours as last read, when this book reads them ([`NameBook::router`]).
    ipv6: Option<Vec<(IpAddr, [u8; 6])>>,
    by_mac: FxHashMap<[u8; 6], String>,
    by_ip: FxHashMap<IpAddr, String>,
    checked: Option<Instant>,
    changed: bool,
    /// Names the config gives (`config client` matching one address or
    /// MAC): the owner's words, so they come before the files'.
    configured: Vec<Known>,
    /// Where a reload leaves the next `configured` for the thread that owns the book.
    pending: Configured,
}

/// A hand-over slot for the config's names: the reload fills it, the
/// book's owner takes it at its next look. Neither is on the query path.
pub type Configured = std::sync::Arc<std::sync::Mutex<Option<Vec<Known>>>>;

#[derive(Debug)]
struct Source {
    path: PathBuf,
    seen: Option<(SystemTime, u64)>,
    parse: fn(&str) -> Vec<Known>,
    known: Vec<Known>,
}

impl Source {
    /// Re-reads the file if it changed; true if it did.
    fn refresh(&mut self) -> bool {
        let stamp = std::fs::metadata(&self.path).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
        if stamp == self.seen {
            return false;
        }
        self.seen = stamp;
        // A regular file of bounded size: the path comes from the config.
        self.known = match crate::sys::read_regular(&self.path, MAX_TABLE_BYTES) {
            Ok(bytes) => (self.parse)(&String::from_utf8_lossy(&bytes)),
            Err(_) => Vec::new(),
        };
        true
    }
}

impl NameBook {
    /// Names from `leases` and `ethers` (either may be missing or empty),
    /// MACs from the ARP table at `arp` (`/proc/net/arp`).
    pub fn new(leases: &Path, ethers: &Path, arp: &Path) -> NameBook {
        let source = |path: &Path, parse| Source { path: path.to_path_buf(), seen: None, parse, known: Vec::new() };
        NameBook {
            leases: source(leases, parse_leases),
            ethers: source(ethers, parse_ethers),
            arp: arp.to_path_buf(),
            mac_of: FxHashMap::default(),
            arp_text: Vec::new(),
            ipv6: None,
            by_mac: FxHashMap::default(),
            by_ip: FxHashMap::default(),
            checked: None,
            changed: false,
            configured: Vec::new(),
            pending: Configured::default(),
        }
    }

    /// The router's own: `leases`, `ethers`, the ARP table and the kernel's
    /// IPv6 neighbours (tests give [`NameBook::new`] made-up files instead).
    pub fn router(leases: &Path, ethers: &Path) -> NameBook {
        NameBook { ipv6: Some(Vec::new()), ..NameBook::new(leases, ethers, ARP.as_ref()) }
    }

    /// Looks at the files if [`CHECK_EVERY`] has passed since the last look,
    /// or the config's names changed.
    pub fn refresh(&mut self, now: Instant) {
        let reloaded = || self.pending.lock().is_ok_and(|p| p.is_some());
        if self.checked.is_some_and(|t| now.duration_since(t) < CHECK_EVERY) && !reloaded() {
            return;
        }
        self.look(now);
    }

    /// Looks at the files now; [`NameBook::changed`] says whether they changed.
    pub fn look(&mut self, now: Instant) {
        self.checked = Some(now);
        let arp = std::fs::read(&self.arp).unwrap_or_default();
        let mut arp_changed = arp != self.arp_text;
        let v6 = self.ipv6.as_ref().map(|_| super::neighbours::ipv6());
        if v6.is_some() && v6 != self.ipv6 {
            arp_changed = true;
            self.ipv6 = v6;
        }
        if arp_changed {
            self.mac_of = parse_arp(&String::from_utf8_lossy(&arp)).into_iter().collect();
            self.mac_of.extend(self.ipv6.iter().flatten().copied());
            self.arp_text = arp;
        }
        // Both looked at, whichever changed.
        let given = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let given = given.map(|g| self.configured = g).is_some();
        let changed = self.leases.refresh() | self.ethers.refresh() | given;
        self.changed = changed || arp_changed;
        if !changed {
            return;
        }
        self.by_mac.clear();
        self.by_ip.clear();
        // The config's names first, then the leases: a name the device asked
        // for beats a static one, and the first lease for an address or MAC
        // wins over a stale repeat.
        for k in self.configured.iter().chain(&self.leases.known).chain(&self.ethers.known) {
            if let Some(mac) = k.mac {
                self.by_mac.entry(mac).or_insert_with(|| k.name.clone());
            }
            if let Some(ip) = k.ip {
                self.by_ip.entry(ip).or_insert_with(|| k.name.clone());
            }
        }
    }

    /// The slot a reload puts the config's names in ([`configured_names`]).
    pub fn configured(&self) -> Configured {
        self.pending.clone()
    }

    /// The name of the client at `ip` with hardware address `mac`.
    pub fn name(&self, ip: IpAddr, mac: Option<[u8; 6]>) -> Option<&str> {
        mac.and_then(|m| self.by_mac.get(&m)).or_else(|| self.by_ip.get(&ip.to_canonical())).map(String::as_str)
    }

    /// Every device the files and the ARP table know: (address, MAC, name),
    /// leases first, then ethers, then the ARP table's addresses.
    pub fn devices(&self) -> impl Iterator<Item = (Option<IpAddr>, Option<[u8; 6]>, Option<&str>)> {
        let named = self.leases.known.iter().chain(&self.ethers.known).map(|k| (k.ip, k.mac, Some(k.name.as_str())));
        named.chain(self.mac_of.iter().map(|(ip, mac)| (Some(*ip), Some(*mac), None)))
    }

    /// Whether a file or the ARP table changed at the last [`NameBook::refresh`] that looked.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The hardware address of the client at `ip`: `given` (a forwarder's
    /// word), else the ARP table's.
    pub fn mac(&self, ip: IpAddr, given: Option<[u8; 6]>) -> Option<[u8; 6]> {
        given.or_else(|| self.mac_of.get(&ip.to_canonical()).copied())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// As dnsmasq writes it: IPv4 leases, a `*` hostname, a non-Ethernet
    /// hardware address, then the DUID line and DHCPv6 leases.
    const LEASES: &str = "1764720000 02:00:5e:10:00:01 192.168.1.50 kids-tablet 01:02:00:5e:10:00:01
1764720100 02:00:5e:10:00:02 192.168.1.51 * *
1764720200 06-02:00:5e:10:00:03 192.168.1.52 printer *
duid 00:01:00:01:2c:5f:aa:bb:02:00:5e:10:00:ff
1764720300 4166541 fd00::50 laptop 00:01:00:01:2c:5f:00:11:02:00:5e:10:00:04
garbage line
";

    #[test]
    fn leases_v4_v6_star_and_other_hardware() {
        let k = parse_leases(LEASES);
        let names: Vec<_> = k.iter().map(|k| (k.name.as_str(), k.mac.is_some(), k.ip.unwrap().to_string())).collect();
        assert_eq!(
            names,
            [
                ("kids-tablet", true, "192.168.1.50".to_string()),
                ("printer", false, "192.168.1.52".to_string()),
                ("laptop", false, "fd00::50".to_string()),
            ]
        );
    }

    #[test]
    fn broken_rtc_leases_read_the_same() {
        // Without a real-time clock dnsmasq writes the lease length first.
        let k = parse_leases("43200 02:00:5e:10:00:01 192.168.1.50 nas *\n");
        assert_eq!(k[0].name, "nas");
    }

    #[test]
    fn ethers_names_and_addresses() {
        let k = parse_ethers(
            "# static\n02:00:5e:10:00:09 media-box\n02:00:5e:10:00:0a 192.168.1.9\n02:00:5e:10:00:0b *\nbad\n",
        );
        assert_eq!(k, [Known { mac: Some([2, 0, 0x5e, 0x10, 0, 9]), ip: None, name: "media-box".into() }]);
    }

    #[test]
    fn the_book_follows_the_files_and_prefers_the_mac() {
        let dir = std::env::temp_dir().join(format!("hydradns-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (leases, ethers) = (dir.join("dhcp.leases"), dir.join("ethers"));
        std::fs::write(&leases, LEASES).unwrap();
        let arp = dir.join("arp");
        std::fs::write(
            &arp,
            "IP address       HW type     Flags       HW address            Mask     Device\n\
             192.168.1.60     0x1         0x2         02:00:5e:10:00:09     *        br-lan\n\
             192.168.1.61     0x1         0x0         00:00:00:00:00:00     *        br-lan\n",
        )
        .unwrap();
        let mut book = NameBook::new(&leases, &ethers, &arp);
        let t0 = Instant::now();
        book.refresh(t0);
        let tablet = Some([2, 0, 0x5e, 0x10, 0, 1]);
        assert_eq!(book.name("10.9.9.9".parse().unwrap(), tablet), Some("kids-tablet"), "by MAC first");
        assert_eq!(book.name("fd00::50".parse().unwrap(), None), Some("laptop"));
        assert_eq!(book.name("192.168.1.51".parse().unwrap(), None), None, "a * hostname names no one");
        // dnsmasq rewrites the file in place; seen at the next check, not before.
        std::fs::write(&leases, "1 02:00:5e:10:00:01 192.168.1.50 homework-tablet *\n").unwrap();
        std::fs::write(&ethers, "02:00:5e:10:00:09 media-box\n").unwrap();
        book.refresh(t0 + Duration::from_secs(1));
        assert_eq!(book.name("192.168.1.50".parse().unwrap(), None), Some("kids-tablet"));
        book.refresh(t0 + CHECK_EVERY);
        assert_eq!(book.name("192.168.1.50".parse().unwrap(), None), Some("homework-tablet"));
        assert_eq!(book.name("192.168.1.60".parse().unwrap(), Some([2, 0, 0x5e, 0x10, 0, 9])), Some("media-box"));
        // A client asking directly: its MAC from the ARP table, and through it its name.
        let direct: IpAddr = "192.168.1.60".parse().unwrap();
        let mac = book.mac(direct, None);
        assert_eq!(mac, Some([2, 0, 0x5e, 0x10, 0, 9]));
        assert_eq!(book.name(direct, mac), Some("media-box"));
        assert_eq!(book.mac("192.168.1.61".parse().unwrap(), None), None, "an incomplete entry");
        std::fs::remove_dir_all(&dir).unwrap();
        book.refresh(t0 + 2 * CHECK_EVERY);
        assert_eq!(book.name("192.168.1.50".parse().unwrap(), None), None, "gone with the file");
    }
}
