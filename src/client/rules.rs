//! Which `config client` a query's client is, and so its groups.
//!
//! Asked only when the lists have to be looked at for a client (a miss, a
//! blocked name, a cache hit no list decision covers for everyone), never
//! for a plain cache hit. A config without `config client` sections puts
//! everyone in `default` without looking at anything.
//!
//! Precedence, as the users expect from Pi-hole and AdGuard Home:
//! a MAC rule, then an exact address, then the longest network, then a
//! hostname glob; among equals, the first in the file. The MAC is the one a
//! trusted forwarder put in the query (dnsmasq's `add-mac`), else the
//! kernel's ARP table's; the hostname comes from the leases and ethers.
//! Both come from a [`Learned`] table a background job rebuilds when those
//! files change, so no query reads a file.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::config::groups::{ClientMatch, ClientRule};
use crate::config::groups::{DEFAULT, GroupTable};

use super::names::NameBook;

/// Source of [`ClientRules::id`].
static IDS: AtomicU64 = AtomicU64::new(1);

/// One `config client`, compiled.
#[derive(Debug)]
struct Rule {
    name: Arc<str>,
    groups: u64,
}

/// The `config client` sections as lookups.
#[derive(Debug)]
pub struct ClientRules {
    /// Tells a [`Learned`] table made for these rules from one made for others.
    id: u64,
    rules: Vec<Rule>,
    /// (MAC, rule), sorted. Sorted vectors rather than hash maps: a few
    /// dozen entries, and each map type cost 1.5 KB of code (aarch64).
    macs: Vec<([u8; 6], u16)>,
    /// (address as [`bits`], rule), sorted.
    ips: Vec<(u128, u16)>,
    /// (prefix length, network, mask, rule) as 128-bit numbers (IPv4 as
    /// mapped), longest prefix first, file order among equals.
    nets: Vec<(u32, u128, u128, u16)>,
    /// (glob, rule) in file order.
    globs: Vec<(Box<str>, u16)>,
}

impl Default for ClientRules {
    fn default() -> ClientRules {
        ClientRules::new(&[], &GroupTable::default())
    }
}

/// The address as a 128-bit number, IPv4 as IPv4-mapped IPv6.
fn bits(ip: IpAddr) -> u128 {
    match ip.to_canonical() {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl ClientRules {
    /// Compiles `clients`, their group names looked up in `groups`.
    pub fn new(clients: &[ClientRule], groups: &GroupTable) -> ClientRules {
        let mut r = ClientRules {
            id: IDS.fetch_add(1, Relaxed),
            rules: Vec::new(),
            macs: Vec::new(),
            ips: Vec::new(),
            nets: Vec::new(),
            globs: Vec::new(),
        };
        for (i, c) in clients.iter().enumerate() {
            let i = i as u16;
            let mask = if c.groups.is_empty() { 0 } else { groups.mask_of(&c.groups) };
            r.rules.push(Rule { name: Arc::from(c.name.as_str()), groups: mask });
            for m in &c.matches {
                match m {
                    ClientMatch::Mac(mac) => insert_first(&mut r.macs, *mac, i),
                    ClientMatch::Ip(ip) => insert_first(&mut r.ips, bits(*ip), i),
                    ClientMatch::Cidr(ip, len) => {
                        let len = u32::from(*len) + if ip.to_canonical().is_ipv4() { 96 } else { 0 };
                        let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                        let at = r.nets.partition_point(|n| n.0 >= len);
                        r.nets.insert(at, (len, bits(*ip) & mask, mask, i));
                    }
                    ClientMatch::Host(g) => r.globs.push((g.as_str().into(), i)),
                }
            }
        }
        r
    }

    /// No `config client`: everyone is in `default`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule needs MACs or hostnames from the router's files.
    pub fn needs_learning(&self) -> bool {
        !self.macs.is_empty() || !self.globs.is_empty()
    }

    /// The rule for the client at `ip` (with `mac`, if a forwarder named
    /// it), by the precedence above; `learned` is ignored unless it was made
    /// for these rules.
    pub fn find(&self, ip: IpAddr, mac: Option<[u8; 6]>, learned: &Learned) -> Option<usize> {
        if self.rules.is_empty() {
            return None;
        }
        let b = bits(ip);
        let mine = learned.rules == self.id;
        let seen = if mine { lookup(&learned.by_ip, &b) } else { None };
        let mac = mac.or_else(|| seen.and_then(|s| s.mac));
        let found = mac
            .and_then(|m| lookup(&self.macs, &m))
            .or_else(|| lookup(&self.ips, &b))
            .or_else(|| self.nets.iter().find(|n| b & n.2 == n.1).map(|n| n.3))
            .or_else(|| {
                let by_mac = mac.filter(|_| mine).and_then(|m| lookup(&learned.by_mac, &m));
                by_mac.flatten().or_else(|| seen.and_then(|s| s.glob))
            });
        found.map(usize::from)
    }

    /// The groups of rule `rule`; `None` (no rule matched) is `default`.
    #[inline]
    pub fn groups(&self, rule: Option<usize>) -> u64 {
        rule.and_then(|r| self.rules.get(r)).map_or(DEFAULT, |r| r.groups)
    }

    /// The name of rule `rule`.
    pub fn name(&self, rule: usize) -> Option<&Arc<str>> {
        self.rules.get(rule).map(|r| &r.name)
    }

    /// The first glob rule matching `host`.
    fn glob_rule(&self, host: &str) -> Option<u16> {
        let host = host.to_ascii_lowercase();
        self.globs.iter().find(|(g, _)| glob_match(g.as_bytes(), host.as_bytes())).map(|&(_, i)| i)
    }
}

/// What the router's files say about the devices, for one set of rules:
/// each known address's MAC and the glob rule its hostname matches, and
/// the glob rule of each known MAC's hostname.
#[derive(Debug, Default)]
pub struct Learned {
    /// The [`ClientRules::id`] this was made for; 0 for none.
    rules: u64,
    /// (address as [`bits`], what is known), sorted.
    by_ip: Vec<(u128, Seen)>,
    /// (MAC, glob rule of its hostname), sorted.
    by_mac: Vec<([u8; 6], Option<u16>)>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    mac: Option<[u8; 6]>,
    glob: Option<u16>,
}

impl Learned {
    /// The table for `rules` from what `book` knows now.
    pub fn new(rules: &ClientRules, book: &NameBook) -> Learned {
        let mut l = Learned { rules: rules.id, ..Learned::default() };
        for (ip, mac, name) in book.devices() {
            let glob = name.and_then(|n| rules.glob_rule(n));
            if let Some(m) = mac {
                match l.by_mac.binary_search_by_key(&m, |e| e.0) {
                    Ok(i) => l.by_mac[i].1 = l.by_mac[i].1.or(glob),
                    Err(i) => l.by_mac.insert(i, (m, glob)),
                }
            }
            if let Some(ip) = ip {
                let b = bits(ip);
                match l.by_ip.binary_search_by_key(&b, |e| e.0) {
                    Ok(i) => {
                        let e = &mut l.by_ip[i].1;
                        e.mac = e.mac.or(mac);
                        e.glob = e.glob.or(glob);
                    }
                    Err(i) => l.by_ip.insert(i, (b, Seen { mac, glob })),
                }
            }
        }
        l
    }

    /// Made for `rules`?
    pub fn is_for(&self, rules: &ClientRules) -> bool {
        self.rules == rules.id
    }
}

/// Adds (`k`, `v`) to the sorted `list` unless `k` is in it: the first in file order stays.
fn insert_first<K: Ord + Copy, V>(list: &mut Vec<(K, V)>, k: K, v: V) {
    if let Err(at) = list.binary_search_by_key(&k, |e| e.0) {
        list.insert(at, (k, v));
    }
}

/// The value for `k` in sorted `list`.
#[inline]
fn lookup<K: Ord + Copy, V: Copy>(list: &[(K, V)], k: &K) -> Option<V> {
    list.binary_search_by_key(k, |e| e.0).ok().map(|i| list[i].1)
}

/// `*` any run of bytes, `?` any one byte; the rest as is.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was and the text position it now stands for.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::Config;

    const CONFIG: &str = "
config client
\toption name 'by-glob'
\tlist match 'tablet-*'
\tlist group 'kids'
config client
\toption name 'lan'
\tlist match '192.168.1.0/24'
\tlist group 'default'
config client
\toption name 'room'
\tlist match '192.168.1.0/28'
\tlist group 'kids'
\tlist group 'default'
config client
\toption name 'exact'
\tlist match '192.168.1.5'
\tlist group 'guests'
config client
\toption name 'by-mac'
\tlist match '02:00:5e:10:00:01'
\tlist group 'guests'
config client
\toption name 'v6'
\tlist match 'fd00::/64'
\tlist group 'kids'
config group 'kids'
config group 'guests'
";

    fn rules() -> (ClientRules, GroupTable) {
        let cfg = Config::parse("t", CONFIG).unwrap();
        let t = GroupTable::new(&cfg);
        (ClientRules::new(&cfg.clients, &t), t)
    }

    fn who(r: &ClientRules, l: &Learned, ip: &str, mac: Option<[u8; 6]>) -> Option<String> {
        r.find(ip.parse().unwrap(), mac, l).map(|i| r.name(i).unwrap().to_string())
    }

    #[test]
    fn precedence_mac_ip_longest_network_glob() {
        let (r, t) = rules();
        let none = Learned::default();
        let mac = Some([2, 0, 0x5e, 0x10, 0, 1]);
        assert_eq!(who(&r, &none, "192.168.1.5", mac).as_deref(), Some("by-mac"), "MAC beats the address");
        assert_eq!(who(&r, &none, "192.168.1.5", None).as_deref(), Some("exact"));
        assert_eq!(who(&r, &none, "192.168.1.6", None).as_deref(), Some("room"), "longest network");
        assert_eq!(who(&r, &none, "192.168.1.100", None).as_deref(), Some("lan"));
        assert_eq!(who(&r, &none, "::ffff:192.168.1.100", None).as_deref(), Some("lan"), "v4-mapped");
        assert_eq!(who(&r, &none, "fd00::9", None).as_deref(), Some("v6"));
        assert_eq!(who(&r, &none, "10.0.0.1", None), None);
        assert_eq!(r.groups(None), DEFAULT);
        assert_eq!(
            r.groups(r.find("192.168.1.6".parse().unwrap(), None, &none)),
            t.mask_of(&["kids".into(), "default".into()])
        );
    }

    #[test]
    fn learned_macs_and_hostnames() {
        let (r, _) = rules();
        let dir = std::env::temp_dir().join(format!("hydradns-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let leases = dir.join("leases");
        std::fs::write(
            &leases,
            "0 02:00:5e:10:00:07 10.0.0.7 Tablet-Anna *\n0 02:00:5e:10:00:01 10.0.0.8 tablet-bob *\n",
        )
        .unwrap();
        let arp = dir.join("arp");
        std::fs::write(
            &arp,
            "IP address HW type Flags HW address Mask Device\n10.0.0.9 0x1 0x2 02:00:5e:10:00:01 * br-lan\n",
        )
        .unwrap();
        let mut book = NameBook::new(&leases, &dir.join("none"), &arp);
        book.refresh(std::time::Instant::now());
        let l = Learned::new(&r, &book);
        assert_eq!(who(&r, &l, "10.0.0.7", None).as_deref(), Some("by-glob"), "hostname from the leases, any case");
        assert_eq!(who(&r, &l, "10.0.0.8", None).as_deref(), Some("by-mac"), "the lease's MAC beats its hostname");
        assert_eq!(who(&r, &l, "10.0.0.9", None).as_deref(), Some("by-mac"), "MAC from the ARP table");
        assert_eq!(
            who(&r, &l, "10.9.9.9", Some([2, 0, 0x5e, 0x10, 0, 7])).as_deref(),
            Some("by-glob"),
            "by the MAC's lease"
        );
        // Made for other rules: not used.
        let (other, _) = rules();
        assert_eq!(who(&other, &l, "10.0.0.7", None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn globs() {
        assert!(glob_match(b"tablet-*", b"tablet-anna"));
        assert!(glob_match(b"*-tv", b"living-room-tv"));
        assert!(glob_match(b"p?one*", b"phone12"));
        assert!(!glob_match(b"tablet-*", b"tablet"));
        assert!(glob_match(b"*", b""));
        assert!(!glob_match(b"a*b", b"acbc"));
        assert!(glob_match(b"a*b*c", b"aXbYbZc"));
    }
}
