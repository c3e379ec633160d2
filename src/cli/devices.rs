//! `hydradns devices`, for LuCI's Devices page too: what the router's files
//! know (DHCP leases, /etc/ethers, the ARP and IPv6 neighbour tables), the
//! names `config client` sections give, and what the query log saw since
//! local midnight, merged into one row per device with its groups. A device
//! is one MAC, else one address: a lease and the log's rows of the same MAC
//! (or, without one, the same address) are one row.
// nanoserde's DeJson derive expands to code clippy would write with `?`.
#![allow(clippy::question_mark)]

use nanoserde::{DeJson, SerJson};
use rusqlite::Connection;

use super::*;
use crate::client::names::{NameBook, configured_names};
use crate::client::rules::{ClientRules, Learned};
use crate::config::groups::GroupTable;
use crate::mac::mac_text;
use crate::querylog::devices::{Merged, seen};

/// One device of `hydradns devices --json`.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct Device {
    /// The config's name for it, else the leases' or /etc/ethers'.
    pub name: Option<String>,
    /// Its address (the first known).
    pub ip: Option<String>,
    /// Its hardware address, lowercase with colons.
    pub mac: Option<String>,
    /// The `config client` section it is, if any.
    pub rule: Option<String>,
    /// Its groups (`default` when no rule matches).
    pub groups: Vec<String>,
    /// Unix seconds of its last query since midnight; 0: none.
    pub last_seen: u64,
    /// Its queries since midnight.
    pub queries: u64,
    /// Of those, blocked.
    pub blocked: u64,
}

/// `hydradns devices --json`.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct Devices {
    pub schema: u64,
    /// Local midnight, Unix seconds: where the counts start.
    pub since: u64,
    /// The config's first, then the files', then the log's other clients.
    pub devices: Vec<Device>,
    /// Devices past the first [`MAX_DEVICES`], not listed.
    pub dropped: u64,
}

/// Unix seconds of the local midnight before `now` (the zone is the
/// schedules': `TZ`, else /etc/TZ).
fn midnight(now: u64) -> u64 {
    let t = now as i64;
    let local = t + crate::policy::schedule::local_zone().offset_at(t);
    (t - local.rem_euclid(86_400)).max(0) as u64
}

/// Most devices listed: a home network has dozens; a leases file may name
/// tens of thousands, and the merge compares each with those kept.
const MAX_DEVICES: usize = 2000;

/// Adds `m` to `rows`: into the row of the same MAC, else of the same
/// address (neither having another MAC), else as a new row; `false` when
/// it is new and `rows` holds [`MAX_DEVICES`] already. Plain scans rather
/// than an index: 4 KB less code on aarch64, and a page's worth of rows.
fn merge(rows: &mut Vec<Merged>, m: Merged) -> bool {
    let by_mac = rows.iter().position(|r| m.mac.is_some() && r.mac == m.mac);
    let same_ip = |r: &Merged| m.ip.is_some() && r.ip == m.ip && (m.mac.is_none() || r.mac.is_none());
    let Some(r) = by_mac.or_else(|| rows.iter().position(same_ip)).map(|i| &mut rows[i]) else {
        if rows.len() >= MAX_DEVICES {
            return false;
        }
        rows.push(m);
        return true;
    };
    r.ip = r.ip.or(m.ip);
    r.mac = r.mac.or(m.mac);
    r.name = r.name.take().or(m.name);
    r.last_ms = r.last_ms.max(m.last_ms);
    r.queries += m.queries;
    r.blocked += m.blocked;
    true
}

/// `hydradns devices`. Without a query log the devices are still listed,
/// with no counts.
pub(super) fn devices_cmd(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "devices", &["-c", "--json"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let logged = cfg.querylog.enabled && cfg.querylog.path.exists();
    let conn = if logged { open_log(&cfg).ok() } else { None };
    let book = router_book(&cfg);
    let not_devices = crate::client::neighbours::not_devices();
    match devices(&cfg, &book, &not_devices, conn.as_ref(), midnight(crate::sys::unix_now())) {
        Ok(d) if args.json => println!("{}", d.serialize_json()),
        Ok(d) => print!("{}", text(&d)),
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// The devices `cfg` and `book` know and `conn`'s log saw since `since`
/// (Unix seconds), each with its `config client` and groups: those the
/// config names first, then the leases', /etc/ethers', the neighbours',
/// then the log's other clients (unsorted: a sort of these rows cost 10 KB
/// of code; LuCI sorts them). A neighbour at a `not_devices` address (the
/// WAN's side, the router itself) is left out unless something names it or
/// it asked.
fn devices(
    cfg: &Config,
    book: &NameBook,
    not_devices: &[IpAddr],
    conn: Option<&Connection>,
    since: u64,
) -> Result<Devices, String> {
    let seen = match conn {
        Some(c) => seen(c, since * 1000)?,
        None => Vec::new(),
    };
    let named = configured_names(&cfg.clients);
    let named = named.iter().map(|k| (k.ip, k.mac, Some(k.name.as_str())));
    let mut rows = Vec::new();
    let mut dropped = 0;
    // A table entry without a name (the ARP table's) names no one.
    for (ip, mac, name) in named.chain(book.devices()) {
        let name = name.filter(|n| !n.is_empty()).map(str::to_string);
        if name.is_none() && ip.is_some_and(|ip| not_devices.contains(&ip)) {
            continue;
        }
        dropped += u64::from(!merge(&mut rows, Merged { ip, mac, name, last_ms: 0, queries: 0, blocked: 0 }));
    }
    for m in seen {
        dropped += u64::from(!merge(&mut rows, m));
    }
    let table = GroupTable::new(cfg);
    let rules = ClientRules::new(&cfg.clients, &table);
    let learned = Learned::new(&rules, book);
    let devices: Vec<Device> = rows
        .into_iter()
        .map(|Merged { ip, mac, name, last_ms, queries, blocked }| {
            let rule = rules.find(ip.unwrap_or(IpAddr::from([0u8; 4])), mac, &learned);
            let groups = table.names_of(rules.groups(rule));
            Device {
                name,
                ip: ip.map(|a| a.to_string()),
                mac: mac.as_ref().map(mac_text),
                rule: rule.and_then(|r| cfg.clients.get(r)).map(|c| c.name.clone()),
                groups: groups.split(',').filter(|g| !g.is_empty()).map(str::to_string).collect(),
                last_seen: last_ms / 1000,
                queries,
                blocked,
            }
        })
        .collect();
    Ok(Devices { schema: crate::stats::SCHEMA, since, devices, dropped })
}

/// `hydradns devices` as text, a device a line.
fn text(d: &Devices) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    for x in &d.devices {
        let last = match x.last_seen {
            0 => "none today".to_string(),
            t => format!("last {} UTC", &crate::timetext::iso8601(t * 1000)[11..16]),
        };
        let _ = writeln!(
            o,
            "{} ({} {}): {}; {} queries, {} blocked, {last}",
            x.name.as_deref().unwrap_or("-"),
            x.ip.as_deref().unwrap_or("-"),
            x.mac.as_deref().unwrap_or("-"),
            x.groups.join(","),
            x.queries,
            x.blocked
        );
    }
    o
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::querylog::devices::tests::{MIDNIGHT, add};
    use crate::querylog::history::tests::log;

    #[test]
    fn one_row_per_mac_else_per_address_and_at_most_max_devices() {
        let tablet = Some([2, 0, 0x5e, 0x10, 0, 1]);
        let row = |ip: &str, mac: Option<[u8; 6]>, name: Option<&str>, last_ms, queries, blocked| Merged {
            ip: ip.parse().ok(),
            mac,
            name: name.map(str::to_string),
            last_ms,
            queries,
            blocked,
        };
        let mut rows = Vec::new();
        for m in [
            // The config's name by address, then the lease with its MAC.
            row("192.168.1.50", None, Some("kids-tablet"), 0, 0, 0),
            row("192.168.1.50", tablet, Some("android-1"), 0, 0, 0),
            row("-", Some([2, 0, 0x5e, 0x10, 0, 9]), Some("media-box"), 0, 0, 0),
            // The tablet over IPv6: the same MAC; then by its address.
            row("fd00::50", tablet, None, 7, 3, 1),
            row("192.168.1.50", None, None, 9, 2, 0),
            // Another MAC at the tablet's address (a lease handed on): another device.
            row("192.168.1.50", Some([2, 0, 0x5e, 0x10, 0, 2]), Some("phone"), 4, 1, 1),
        ] {
            assert!(merge(&mut rows, m));
        }
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[0], row("192.168.1.50", tablet, Some("kids-tablet"), 9, 5, 1));
        assert_eq!(rows[1].name.as_deref(), Some("media-box"));
        assert_eq!(
            (rows[2].mac, rows[2].name.as_deref(), rows[2].queries),
            (Some([2, 0, 0x5e, 0x10, 0, 2]), Some("phone"), 1)
        );
        // Full: a new device is dropped (and said so), a known one still counts.
        while rows.len() < MAX_DEVICES {
            let n = rows.len() as u32;
            assert!(merge(&mut rows, row(&std::net::Ipv4Addr::from(0x0a00_0000 + n).to_string(), None, None, 0, 1, 0)));
        }
        assert!(!merge(&mut rows, row("192.168.9.9", None, None, 1, 1, 0)));
        assert!(merge(&mut rows, row("192.168.1.50", None, None, 10, 1, 0)));
        assert_eq!((rows.len(), rows[0].queries), (MAX_DEVICES, 6));
    }

    #[test]
    fn each_device_with_its_rule_and_groups() {
        let cfg = Config::parse(
            "t",
            "config group 'kids'\nconfig client\n\toption name 'tablet'\n\tlist match '02:00:5e:10:00:01'\n\tlist group 'kids'\n",
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("hydradns-devices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let leases = dir.join("leases");
        std::fs::write(
            &leases,
            "0 02:00:5e:10:00:01 192.168.1.50 android-1 *\n0 02:00:5e:10:00:03 192.168.1.51 nas *\n",
        )
        .unwrap();
        // The ARP table: a LAN device without a lease, the ISP's gateway,
        // and a host on the WAN's side that asked.
        let arp = dir.join("arp");
        std::fs::write(
            &arp,
            "IP address       HW type     Flags       HW address            Mask     Device\n\
             192.168.1.60     0x1         0x2         02:00:5e:10:00:04     *        br-lan\n\
             198.51.100.1     0x1         0x2         02:00:5e:10:00:05     *        eth1\n\
             198.51.100.7     0x1         0x2         02:00:5e:10:00:06     *        eth1\n",
        )
        .unwrap();
        let mut book = NameBook::new(&leases, &dir.join("none"), &arp);
        book.refresh(std::time::Instant::now());
        let conn = log();
        add(&conn, MIDNIGHT * 1000 + 1000, 0, "192.168.1.50", None, "blocked");
        add(&conn, MIDNIGHT * 1000 + 2000, 0, "198.51.100.7", None, "allowed");
        let not_devices: Vec<IpAddr> = ["198.51.100.1", "198.51.100.7"].map(|a| a.parse().unwrap()).to_vec();
        let d = devices(&cfg, &book, &not_devices, Some(&conn), MIDNIGHT).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let by = |n: &str| d.devices.iter().find(|x| x.name.as_deref() == Some(n)).unwrap().clone();
        let tablet = by("tablet");
        assert_eq!((tablet.ip.as_deref(), tablet.rule.as_deref()), (Some("192.168.1.50"), Some("tablet")));
        assert_eq!(
            (tablet.groups, tablet.last_seen, tablet.queries, tablet.blocked),
            (vec!["kids".to_string()], MIDNIGHT + 1, 1, 1)
        );
        assert_eq!(d.devices[0].name.as_deref(), Some("tablet"), "the config's first");
        let ips: Vec<&str> = d.devices.iter().filter_map(|x| x.ip.as_deref()).collect();
        assert!(ips.contains(&"192.168.1.60"), "a LAN neighbour without a name: {ips:?}");
        assert!(!ips.contains(&"198.51.100.1"), "the WAN's gateway never asked: {ips:?}");
        assert!(ips.contains(&"198.51.100.7"), "a host on the WAN's side that asked: {ips:?}");
        let nas = by("nas");
        assert_eq!((nas.rule, nas.groups, nas.queries), (None, vec!["default".to_string()], 0));
        let json = d.serialize_json();
        assert!(
            json.starts_with(&format!("{{\"schema\":1,\"since\":{MIDNIGHT},\"devices\":[{{\"name\":\"tablet\"")),
            "{json}"
        );
        assert!(json.ends_with("],\"dropped\":0}"), "{json}");
        let t = text(&d);
        assert!(
            t.starts_with("tablet (192.168.1.50 02:00:5e:10:00:01): kids; 1 queries, 1 blocked, last 00:00 UTC\n"),
            "{t}"
        );
        assert!(
            t.contains("\nnas (192.168.1.51 02:00:5e:10:00:03): default; 0 queries, 0 blocked, none today\n"),
            "{t}"
        );
    }
}
