//! Who is asking, through the real binary: the real dnsmasq in front naming
//! each client (`add-subnet=32,128`, `add-mac`), as OpenWrt runs it
//! (`strip-subnet`, `strip-mac`: a client that forges its name is still
//! logged, grouped and rate-limited as itself) and without the stripping (a
//! forged second option turns the query away), forged options from a source
//! that is not trusted, two Client Subnet or MAC options from the trusted
//! one, and the access list and rate limit keyed on the client a trusted
//! forwarder names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use simple_dns::RCODE;

/// dnsmasq in front of `upstream` with the client options on
/// (`dnsmasq_mode upstream`).
struct Dnsmasq {
    _child: KillOnDrop,
    addr: SocketAddr,
}

impl Dnsmasq {
    /// Without `strip-subnet`/`strip-mac`: a client's own options pass
    /// through (what dnsmasq does unless told otherwise).
    fn start(upstream: SocketAddr) -> Dnsmasq {
        Dnsmasq::with(upstream, &[])
    }

    /// As OpenWrt runs it with HydraDNS behind it (`stripsubnet`,
    /// `stripmac`): a client's own options are dropped, dnsmasq's added.
    fn stripping(upstream: SocketAddr) -> Dnsmasq {
        Dnsmasq::with(upstream, &["--strip-subnet", "--strip-mac"])
    }

    fn with(upstream: SocketAddr, extra: &[&str]) -> Dnsmasq {
        // On a port free when picked; started again elsewhere if another
        // test took it first (dnsmasq then exits).
        let (child, port) = spawn_on_free_port(
            "dnsmasq",
            |p| vec![("udp", p), ("tcp", p)],
            |port| {
                Command::new("dnsmasq")
                    .args(["-k", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces"])
                    .args(["--listen-address=127.0.0.1", "--user=root", "--pid-file=", "--cache-size=0"])
                    .args(extra)
                    .args(["--add-subnet=32,128", "--add-mac", "--log-facility=-"])
                    .arg(format!("--port={port}"))
                    .arg(format!("--server={}#{}", upstream.ip(), upstream.port()))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("dnsmasq (Debian's dnsmasq-base; scripts/test.sh installs it)")
            },
        );
        let d = Dnsmasq { _child: child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
        let probe = build_query(1, "ready.clients.example", A, None);
        wait_for("dnsmasq to answer", Duration::from_secs(30), || {
            udp_raw(d.addr, &probe, Duration::from_secs(1)).is_some()
        });
        d
    }
}

/// EDNS options as (code, data), in the order they are sent.
type Options<'a> = &'a [(u16, &'a [u8])];

/// One A query for `name` from `source` (an address of 127/8) to `server`,
/// with EDNS `options` if any; `None` when nothing comes back in `wait`.
fn ask_with(source: &str, server: SocketAddr, name: &str, options: &[(u16, &[u8])], wait: Duration) -> Option<Reply> {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(wait)).unwrap();
    let q = if options.is_empty() { build_query(7, name, A, None) } else { query_with_options(7, name, options) };
    s.send_to(&q, server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).ok()?;
    Some(Reply::parse(buf[..n].to_vec()))
}

/// One A query for `name` from `source` (an address of 127/8) to `server`.
fn ask_from(source: &str, server: SocketAddr, name: &str) -> Reply {
    ask_with(source, server, name, &[], Duration::from_secs(10))
        .unwrap_or_else(|| panic!("no answer for {name} from {source}"))
}

const ECS_192_168_1_77: [u8; 8] = [0, 1, 32, 0, 192, 168, 1, 77];
const MAC: [u8; 6] = [0x02, 0x00, 0x5e, 0x10, 0x00, 0x01];

#[test]
fn behind_dnsmasq_each_client_is_logged_as_itself() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &log_section("\toption batch_interval '50ms'\n")));
    let dnsmasq = Dnsmasq::start(gw.addr);
    assert_eq!(ask_from("127.0.0.2", dnsmasq.addr, "two.clients.example").ips(), ["192.0.2.1"]);
    assert_eq!(ask_from("127.0.0.3", dnsmasq.addr, "three.clients.example").ips(), ["192.0.2.1"]);
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &[]).len() >= 3);
    let client_of = |name: &str| {
        let rows = log_rows(&gw, &["--domain", name]);
        assert_eq!(rows.len(), 1, "{rows:?}");
        rows[0].client.clone()
    };
    assert_eq!(client_of("two.clients.example"), "127.0.0.2");
    assert_eq!(client_of("three.clients.example"), "127.0.0.3");
    let theirs = log_rows(&gw, &["--client", "127.0.0.3"]);
    assert_eq!(theirs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["three.clients.example"]);
    // What dnsmasq added stayed here: the upstream saw queries, none with a client option.
    assert!(up.seen("two.clients.example") == 1 && up.seen("three.clients.example") == 1);
    assert_eq!(up.client_options_seen(), 0);
}

#[test]
fn a_trusted_forwarder_names_the_client_and_its_mac() {
    let up = Upstream::start("192.0.2.2".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &log_section("\toption batch_interval '50ms'\n")));
    let q = query_with_options(11, "named.clients.example", &[(8, &ECS_192_168_1_77), (65001, &MAC)]);
    let r = Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap());
    assert_eq!(r.ips(), ["192.0.2.2"]);
    let text = query_with_options(12, "text.clients.example", &[(65073, b"02:00:5E:10:00:01")]);
    udp_raw(gw.addr, &text, Duration::from_secs(10)).unwrap();
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &[]).len() >= 2);
    let by_mac = log_rows(&gw, &["--client", "02:00:5E:10:00:01"]);
    let rows: Vec<_> = by_mac.iter().map(|r| (r.name.as_str(), r.client.as_str(), r.mac.as_deref())).collect();
    assert_eq!(
        rows,
        [
            ("text.clients.example", "127.0.0.1", Some("02:00:5e:10:00:01")),
            ("named.clients.example", "192.168.1.77", Some("02:00:5e:10:00:01")),
        ]
    );
    assert_eq!(up.client_options_seen(), 0, "no client option leaves");
}

#[test]
fn options_from_a_source_that_is_not_trusted_are_ignored() {
    let up = Upstream::start("192.0.2.3".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!("\tlist trusted_proxy '127.0.0.9'\n{}", log_section("\toption batch_interval '50ms'\n")),
    ));
    let q = query_with_options(13, "forged.clients.example", &[(8, &ECS_192_168_1_77), (65001, &MAC)]);
    udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap();
    wait_for("the log", Duration::from_secs(60), || !log_rows(&gw, &[]).is_empty());
    let rows = log_rows(&gw, &[]);
    assert_eq!((rows[0].client.as_str(), rows[0].mac.as_deref()), ("127.0.0.1", None));
    assert_eq!(up.client_options_seen(), 0);
}

#[test]
fn the_rate_limit_and_the_access_list_apply_to_the_named_client() {
    let up = Upstream::start("192.0.2.4".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption ratelimit '1'\n\toption ratelimit_burst '3'\n\toption ratelimit_action 'refuse'\n\toption deny_action 'refuse'\n\tlist allow_client '127.0.0.0/8'\n\
         \tlist allow_client '192.168.1.0/24'\n",
    ));
    let ask = |id: u16, ecs: &[u8]| {
        let q = query_with_options(id, "limited.clients.example", &[(8, ecs)]);
        Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap()).rcode
    };
    // One client over its burst is refused; another behind the same forwarder is not.
    let first: Vec<_> = (0..6).map(|i| ask(100 + i, &ECS_192_168_1_77)).collect();
    assert_eq!(first.iter().filter(|r| **r == simple_dns::RCODE::Refused).count(), 3, "{first:?}");
    assert_eq!(ask(200, &[0, 1, 32, 0, 192, 168, 1, 78]), simple_dns::RCODE::NoError);
    // A named client outside allow_client is turned away though the forwarder is allowed.
    assert_eq!(ask(300, &[0, 1, 32, 0, 10, 9, 9, 9]), simple_dns::RCODE::Refused);
    let c = gw.report().counters;
    assert_eq!((c.ratelimited, c.denied), (3, 1));
}

#[test]
fn the_default_access_list_leaves_the_lan_behind_the_forwarder_to_it() {
    // A LAN on public IPv6 (an ISP's prefix) or on other addresses outside
    // the private ranges: dnsmasq admitted them (localservice) and names them.
    let up = Upstream::start("192.0.2.6".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let ask = |id: u16, ecs: &[u8]| {
        let q = query_with_options(id, "lan.clients.example", &[(8, ecs)]);
        Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap()).rcode
    };
    let mut v6 = vec![0, 2, 128, 0];
    v6.extend_from_slice(&"2a02:db8:1::77".parse::<std::net::Ipv6Addr>().unwrap().octets());
    assert_eq!(ask(1, &v6), simple_dns::RCODE::NoError);
    assert_eq!(ask(2, &[0, 1, 32, 0, 192, 0, 2, 77]), simple_dns::RCODE::NoError);
    assert_eq!(gw.report().counters.denied, 0);
}

#[test]
fn the_log_names_devices_from_the_dhcp_leases_and_ethers() {
    let up = Upstream::start("192.0.2.5".parse().unwrap());
    let files = TempDir::new();
    let leases = files.file(
        "dhcp.leases",
        "1764720000 02:00:5e:10:00:01 192.168.1.77 kids-tablet *\n\
         1764720000 02:00:5e:10:00:02 192.168.1.78 * *\n",
    );
    let ethers = files.file("ethers", "02:00:5e:10:00:09 media-box\n");
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "\toption leases_file '{}'\n\toption ethers_file '{}'\n{}",
            leases.display(),
            ethers.display(),
            log_section("\toption batch_interval '50ms'\n")
        ),
    ));
    let ask = |id: u16, name: &str, options: &[(u16, &[u8])]| {
        udp_raw(gw.addr, &query_with_options(id, name, options), Duration::from_secs(10)).unwrap();
    };
    ask(21, "homework.clients.example", &[(8, &ECS_192_168_1_77)]);
    ask(22, "video.clients.example", &[(8, &[0, 1, 32, 0, 192, 168, 1, 90]), (65001, &[2, 0, 0x5e, 0x10, 0, 9])]);
    ask(23, "unnamed.clients.example", &[(8, &[0, 1, 32, 0, 192, 168, 1, 78])]);
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &[]).len() >= 3);
    let named = |name: &str| log_rows(&gw, &["--domain", name])[0].client_name.clone();
    assert_eq!(named("homework.clients.example").as_deref(), Some("kids-tablet"), "by address, from the leases");
    assert_eq!(named("video.clients.example").as_deref(), Some("media-box"), "by MAC, from /etc/ethers");
    assert_eq!(named("unnamed.clients.example"), None, "a * hostname names no one");
    let theirs = log_rows(&gw, &["--client", "kids-tablet"]);
    assert_eq!(theirs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["homework.clients.example"]);
    let (code, out, err) = cli(&["top", "-c", cfg_path(&gw), "--clients"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("kids-tablet (192.168.1.77)") && out.contains("192.168.1.78"), "{out}");
}

/// `hydradns devices`: the leases' devices and the log's clients, one row
/// per device with its groups and its queries since local midnight.
#[test]
fn devices_merges_the_leases_the_config_and_the_log_since_midnight() {
    use nanoserde::DeJson;
    let up = Upstream::start("192.0.2.5".parse().unwrap());
    let files = TempDir::new();
    let leases = files.file(
        "dhcp.leases",
        "1764720000 02:00:5e:10:00:01 192.168.1.77 android-5 *\n\
         1764720000 02:00:5e:10:00:03 192.168.1.79 nas *\n",
    );
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "\toption leases_file '{}'\n\toption ethers_file '{}'\n{}\
             config group 'kids'\n\
             config client\n\toption name 'kids-tablet'\n\tlist match '02:00:5e:10:00:01'\n\tlist group 'kids'\n\
             config blocklist\n\toption name 'ads'\n\tlist domain 'ads.example'\n\tlist group 'kids'\n",
            leases.display(),
            files.0.join("none").display(),
            log_section("\toption batch_interval '50ms'\n")
        ),
    ));
    let ask = |id: u16, name: &str| {
        udp_raw(
            gw.addr,
            &query_with_options(id, name, &[(8, &ECS_192_168_1_77), (65001, &MAC)]),
            Duration::from_secs(10),
        )
        .unwrap();
    };
    ask(31, "homework.clients.example");
    ask(32, "ads.example");
    ask(33, "x.ads.example");
    udp(gw.addr, "router.clients.example", A);
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &[]).len() >= 4);
    // A zone in which it is about noon now: midnight is hours away, before and after.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let offset = 12 - now % 86_400 / 3600;
    let out = hydradns()
        .args(["devices", "-c", cfg_path(&gw), "--json"])
        .env("TZ", format!("<ZZZ>{}", -offset))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = hydradns::cli::devices::Devices::deserialize_json(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let local = now + offset * 3600;
    assert_eq!(d.since as i64, now - local.rem_euclid(86_400), "local midnight: {text}");
    let by =
        |ip: &str| d.devices.iter().find(|x| x.ip.as_deref() == Some(ip)).unwrap_or_else(|| panic!("{ip}: {text}"));
    let tablet = by("192.168.1.77");
    assert_eq!(tablet.name.as_deref(), Some("kids-tablet"), "the config's name before the lease's");
    assert_eq!((tablet.mac.as_deref(), tablet.rule.as_deref()), (Some("02:00:5e:10:00:01"), Some("kids-tablet")));
    assert_eq!((&tablet.groups[..], tablet.queries, tablet.blocked), (&["kids".to_string()][..], 3, 2), "{text}");
    assert!(tablet.last_seen as i64 >= now - 60 && tablet.last_seen as i64 <= now + 1, "{text}");
    let nas = by("192.168.1.79");
    assert_eq!((nas.name.as_deref(), &nas.groups[..], nas.queries), (Some("nas"), &["default".to_string()][..], 0));
    assert_eq!((by("127.0.0.1").queries, by("127.0.0.1").blocked), (1, 0));
    assert_eq!(d.devices[0].ip.as_deref(), Some("192.168.1.77"), "the config's first: {text}");
    let (code, out, err) = cli(&["devices", "-c", cfg_path(&gw)]);
    assert_eq!(code, 0, "{err}");
    let line = "kids-tablet (192.168.1.77 02:00:5e:10:00:01): kids; 3 queries, 2 blocked, last ";
    assert!(out.lines().any(|l| l.starts_with(line)), "{out}");
    assert_eq!(cli(&["devices", "-c", cfg_path(&gw), "--blocked"]).0, 2);
    // The log by group: each client put in its groups by today's rules.
    let clients = |group: &str| {
        let rows = log_rows(&gw, &["--group", group]);
        let mut c: Vec<String> = rows.iter().map(|r| r.client.clone()).collect();
        c.dedup();
        (rows.len(), c)
    };
    assert_eq!(clients("kids"), (3, vec!["192.168.1.77".to_string()]), "the tablet's rows, by its MAC's rule");
    assert_eq!(clients("default"), (1, vec!["127.0.0.1".to_string()]), "the router's, which no rule names");
    let blocked = log_rows(&gw, &["--group", "kids", "--blocked"]);
    assert_eq!(blocked.len(), 2, "with the other filters: {blocked:?}");
    let (code, _, err) = cli(&["log", "-c", cfg_path(&gw), "--group", "nope"]);
    assert_eq!(code, 2, "an unknown group is a usage error: {err}");
    assert!(err.contains("no group 'nope'"), "{err}");
}

/// What a device at 127.0.0.2 sends to pass for another: the address of
/// the parent's laptop (127.0.0.3) or of the router (127.0.0.1), a MAC.
const ECS_127_0_0_3: [u8; 8] = [0, 1, 32, 0, 127, 0, 0, 3];
const ECS_127_0_0_1: [u8; 8] = [0, 1, 32, 0, 127, 0, 0, 1];
const FORGED_MAC: [u8; 6] = [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee];

/// The kid's tablet (127.0.0.2) is in a group whose list blocks
/// `social.example`; the parent's laptop (127.0.0.3, or the forged MAC)
/// and the router are not.
const KIDS: &str = "config client\n\toption name 'kid'\n\tlist match '127.0.0.2'\n\tlist group 'kids'\n\
                    config client\n\toption name 'parent'\n\tlist match '127.0.0.3'\n\tlist match '02:aa:bb:cc:dd:ee'\n\
                    config blocklist\n\toption name 'social'\n\tlist domain 'social.example'\n\tlist group 'kids'\n";

#[test]
fn a_client_forging_its_name_through_openwrts_dnsmasq_is_logged_and_grouped_as_itself() {
    let up = Upstream::start("192.0.2.6".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &format!("{KIDS}{}", log_section("\toption batch_interval '50ms'\n"))));
    let dnsmasq = Dnsmasq::stripping(gw.addr);
    let text_mac: &[u8] = b"02:aa:bb:cc:dd:ee";
    let forgeries: [(&str, Options); 5] = [
        ("parent", &[(8, &ECS_127_0_0_3), (65001, &FORGED_MAC)]),
        ("router", &[(8, &ECS_127_0_0_1), (65073, text_mac)]),
        ("parent-mac", &[(65001, &FORGED_MAC)]),
        ("twice", &[(8, &ECS_127_0_0_3), (8, &ECS_127_0_0_1), (65001, &FORGED_MAC), (65073, text_mac)]),
        ("none", &[]),
    ];
    for (who, options) in forgeries {
        let ask = |name: &str| {
            ask_with("127.0.0.2", dnsmasq.addr, name, options, Duration::from_secs(10))
                .unwrap_or_else(|| panic!("no answer for {name}"))
        };
        assert_eq!(ask(&format!("{who}.social.example")).ips(), ["0.0.0.0"], "{who}: the kids' list still applies");
        assert_eq!(ask(&format!("{who}.clients.example")).ips(), ["192.0.2.6"], "{who}");
    }
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &["--client", "127.0.0.2"]).len() >= 10);
    let rows = log_rows(&gw, &["--client", "127.0.0.2"]);
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert!(rows.iter().all(|r| r.client == "127.0.0.2" && r.mac.is_none()), "{rows:?}");
    assert!(rows.iter().all(|r| r.client_name.as_deref() == Some("kid")), "{rows:?}");
    assert!(log_rows(&gw, &["--client", "127.0.0.3"]).is_empty());
    assert!(log_rows(&gw, &["--client", "02:aa:bb:cc:dd:ee"]).is_empty());
    assert_eq!(up.seen("parent.social.example"), 0);
}

/// Sends `n` A queries from `source` to `server` (the gateway `gw`, or
/// dnsmasq in front of it) back to back, with EDNS `options` if any: the
/// answers' rcodes, and the whole seconds the burst took by the test's
/// clock (each lets a bucket at `ratelimit '1'` take one more). Through
/// dnsmasq a refused query gets no answer (it passes no REFUSED from its
/// only server on): the burst is over when the answers and the gateway's
/// count of refusals make `n`, then a moment more shows no other comes.
fn burst(
    gw: &Gateway,
    source: &str,
    server: SocketAddr,
    n: usize,
    options: &[(u16, &[u8])],
    tag: &str,
) -> (Vec<RCODE>, usize) {
    let limited = || gw.report().counters.ratelimited;
    let before = limited();
    let started = std::time::Instant::now();
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    for i in 0..n {
        let name = format!("{tag}{i}.limited.clients.example");
        let q = if options.is_empty() { build_query(7, &name, A, None) } else { query_with_options(7, &name, options) };
        s.send_to(&q, server).unwrap();
    }
    s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut buf = [0u8; 1500];
    let mut got = Vec::new();
    let mut take = |got: &mut Vec<RCODE>| {
        while let Ok(len) = s.recv(&mut buf) {
            got.push(Reply::parse(buf[..len].to_vec()).rcode);
        }
    };
    // Refusals through dnsmasq are silent: the gateway's count stands in for them.
    let refused_unheard = || if server == gw.addr { 0 } else { limited() - before };
    wait_for("the burst's answers", Duration::from_secs(30), || {
        take(&mut got);
        got.len() as u64 + refused_unheard() >= n as u64
    });
    let took = started.elapsed().as_secs() as usize;
    take(&mut got);
    (got, took)
}

#[test]
fn a_client_forging_its_name_through_openwrts_dnsmasq_is_rate_limited_as_itself() {
    let up = Upstream::start("192.0.2.7".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption ratelimit '1'\n\toption ratelimit_burst '3'\n\toption ratelimit_action 'refuse'\n",
    ));
    let dnsmasq = Dnsmasq::stripping(gw.addr);
    let limited = || gw.report().counters.ratelimited;
    let served = |answers: &[RCODE]| answers.iter().filter(|r| **r == RCODE::NoError).count();
    // The parent's laptop spends its bucket; the kid's tablet, claiming to be
    // it, still has its own: all three answered.
    // (A burst that took whole seconds by the test's clock may have one
    // more answered for each: `took`; none on an idle machine.)
    let (parent, took) = burst(&gw, "127.0.0.3", dnsmasq.addr, 6, &[], "a");
    assert!(served(&parent) <= 4 + took && limited() >= 2u64.saturating_sub(took as u64), "{parent:?}");
    let (kid, _) = burst(&gw, "127.0.0.2", dnsmasq.addr, 3, &[(8, &ECS_127_0_0_3), (65001, &FORGED_MAC)], "b");
    assert_eq!(kid, [RCODE::NoError; 3]);
    // Claiming to be the router does not escape the limit: it is the kid's
    // bucket, already spent, and nothing of this one gets through.
    let before = limited();
    let (kid, took) = burst(&gw, "127.0.0.2", dnsmasq.addr, 3, &[(8, &ECS_127_0_0_1)], "c");
    assert!(served(&kid) <= 1 + took && limited() + took as u64 >= before + 2, "{kid:?}");
    // The router's own queries through dnsmasq are named 127.0.0.1: limited too.
    let before = limited();
    let (router, took) = burst(&gw, "127.0.0.1", dnsmasq.addr, 6, &[], "d");
    assert!(served(&router) <= 4 + took && limited() + took as u64 >= before + 2, "{router:?}");
    // Straight from loopback: a forwarder naming ::1 is limited, its own
    // query naming no address (no options, or a MAC alone) is not.
    let ecs_v6_loopback: &[u8] = &[0, 2, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let (named, took) = burst(&gw, "127.0.0.1", gw.addr, 6, &[(8, ecs_v6_loopback)], "e");
    assert!((3..=3 + took).contains(&served(&named)) && named.len() == 6, "{named:?}");
    let before = limited();
    assert_eq!(burst(&gw, "127.0.0.1", gw.addr, 10, &[], "f").0, [RCODE::NoError; 10]);
    assert_eq!(burst(&gw, "127.0.0.1", gw.addr, 10, &[(65001, &FORGED_MAC)], "g").0, [RCODE::NoError; 10]);
    assert_eq!(limited(), before);
}

#[test]
fn two_subnet_or_two_mac_options_from_the_trusted_forwarder_are_refused() {
    let up = Upstream::start("192.0.2.8".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &log_section("\toption batch_interval '50ms'\n")));
    let text_mac: &[u8] = b"02:00:5e:10:00:01";
    let b64_mac: &[u8] = b"AgBeEAAB";
    let other = [0, 1, 32, 0, 192, 168, 1, 78];
    let twice: [(&str, Options); 6] = [
        ("two-subnets", &[(8, &ECS_192_168_1_77), (8, &other)]),
        ("two-subnets-after-a-mac", &[(65001, &MAC), (8, &other), (8, &ECS_192_168_1_77)]),
        ("raw-and-text", &[(65001, &FORGED_MAC), (65073, text_mac), (8, &ECS_192_168_1_77)]),
        ("text-and-raw", &[(65073, text_mac), (65001, &MAC), (8, &ECS_192_168_1_77)]),
        ("raw-and-base64", &[(65001, &FORGED_MAC), (65073, b64_mac)]),
        ("raw-twice", &[(8, &ECS_192_168_1_77), (65001, &FORGED_MAC), (65001, &MAC)]),
    ];
    for (i, (name, options)) in twice.iter().enumerate() {
        let q = query_with_options(40 + i as u16, &format!("{name}.clients.example"), options);
        let r = Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap());
        assert_eq!(r.rcode, RCODE::Refused, "{name}");
    }
    // One of each, either order, is answered.
    for (i, options) in
        [[(8, &ECS_192_168_1_77[..]), (65001, &MAC[..])], [(65073, text_mac), (8, &other[..])]].iter().enumerate()
    {
        let q = query_with_options(50 + i as u16, &format!("once{i}.clients.example"), options);
        assert_eq!(Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(10)).unwrap()).ips(), ["192.0.2.8"]);
    }
    assert_eq!(gw.report().counters.denied, 6);
    assert!(twice.iter().all(|(name, _)| up.seen(&format!("{name}.clients.example")) == 0));
    // Logged as the forwarder that sent them, naming no one.
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &[]).len() >= 8);
    let rows = log_rows(&gw, &["--client", "127.0.0.1"]);
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(rows.iter().all(|r| r.mac.is_none()), "{rows:?}");
}

#[test]
fn without_stripping_a_second_forged_subnet_through_dnsmasq_is_refused() {
    // dnsmasq adds its own Client Subnet only when the query has none, so a
    // client sending two passes both on and neither is dnsmasq's: taking
    // either would let the kid's tablet out of its group.
    let up = Upstream::start("192.0.2.9".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &format!("{KIDS}{}", log_section("\toption batch_interval '50ms'\n"))));
    let dnsmasq = Dnsmasq::start(gw.addr);
    let orders: [[(u16, &[u8]); 2]; 2] =
        [[(8, &ECS_127_0_0_3), (8, &ECS_127_0_0_1)], [(8, &ECS_127_0_0_1), (8, &ECS_127_0_0_3)]];
    for (i, options) in orders.iter().enumerate() {
        // dnsmasq passes no REFUSED from its only server on: the client hears nothing.
        let name = format!("twice{i}.social.example");
        let r = ask_with("127.0.0.2", dnsmasq.addr, &name, &options[..], Duration::from_secs(1));
        assert!(r.as_ref().is_none_or(|r| r.ips().is_empty()), "{:?}", r.map(|r| r.ips()));
        assert_eq!(up.seen(&name), 0);
    }
    assert_eq!(gw.report().counters.denied, 2);
    assert_eq!(ask_from("127.0.0.2", dnsmasq.addr, "once.social.example").ips(), ["0.0.0.0"]);
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &["--client", "127.0.0.2"]).len() == 1);
    assert!(log_rows(&gw, &["--client", "127.0.0.3"]).is_empty());
}
