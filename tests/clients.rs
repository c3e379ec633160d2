//! Who is asking, through the real binary: the real dnsmasq in front naming
//! each client (`add-subnet=32,128`, `add-mac`), forged options from a
//! source that is not trusted, and the access list and rate limit keyed on
//! the client a trusted forwarder names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// dnsmasq in front of `upstream`, as OpenWrt runs it with HydraDNS behind
/// it (`dnsmasq_mode upstream`) and the client options on.
struct Dnsmasq {
    child: Child,
    addr: SocketAddr,
}

impl Dnsmasq {
    fn start(upstream: SocketAddr) -> Dnsmasq {
        let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("dnsmasq")
            .args(["-k", "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--bind-interfaces"])
            .args(["--listen-address=127.0.0.1", "--user=root", "--pid-file=", "--cache-size=0"])
            .args(["--add-subnet=32,128", "--add-mac", "--log-facility=-"])
            .arg(format!("--port={port}"))
            .arg(format!("--server={}#{}", upstream.ip(), upstream.port()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq (Debian's dnsmasq-base; scripts/test.sh installs it)");
        let d = Dnsmasq { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
        let probe = build_query(1, "ready.clients.example", A, None);
        wait_for("dnsmasq to answer", Duration::from_secs(10), || {
            udp_raw(d.addr, &probe, Duration::from_millis(200)).is_some()
        });
        d
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One A query for `name` from `source` (an address of 127/8) to `server`.
fn ask_from(source: &str, server: SocketAddr, name: &str) -> Reply {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.send_to(&build_query(7, name, A, None), server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).unwrap_or_else(|e| panic!("no answer for {name} from {source}: {e}"));
    Reply::parse(buf[..n].to_vec())
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
    wait_for("the log", Duration::from_secs(10), || log_rows(&gw, &[]).len() >= 3);
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
    let r = Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(5)).unwrap());
    assert_eq!(r.ips(), ["192.0.2.2"]);
    let text = query_with_options(12, "text.clients.example", &[(65073, b"02:00:5E:10:00:01")]);
    udp_raw(gw.addr, &text, Duration::from_secs(5)).unwrap();
    wait_for("the log", Duration::from_secs(10), || log_rows(&gw, &[]).len() >= 2);
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
    udp_raw(gw.addr, &q, Duration::from_secs(5)).unwrap();
    wait_for("the log", Duration::from_secs(10), || !log_rows(&gw, &[]).is_empty());
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
        Reply::parse(udp_raw(gw.addr, &q, Duration::from_secs(5)).unwrap()).rcode
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
        udp_raw(gw.addr, &query_with_options(id, name, options), Duration::from_secs(5)).unwrap();
    };
    ask(21, "homework.clients.example", &[(8, &ECS_192_168_1_77)]);
    ask(22, "video.clients.example", &[(8, &[0, 1, 32, 0, 192, 168, 1, 90]), (65001, &[2, 0, 0x5e, 0x10, 0, 9])]);
    ask(23, "unnamed.clients.example", &[(8, &[0, 1, 32, 0, 192, 168, 1, 78])]);
    wait_for("the log", Duration::from_secs(10), || log_rows(&gw, &[]).len() >= 3);
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
