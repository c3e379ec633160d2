//! Parental controls through the real binary against the scripted
//! upstream: blocked services per group (inside the group's schedule, its
//! block mode, allow entries winning, the log's `service:ID`), safe search
//! (CNAME plus the safe host's addresses, NODATA for HTTPS, moderate and
//! strict YouTube, SERVFAIL when the safe host does not resolve, a blocked
//! service first), per-group logging, and `services_url`.

#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/http.rs"]
mod http;

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use common::*;
use simple_dns::{Packet, RCODE, rdata::RData};

/// Queries from these loopback addresses play the devices.
const KID: &str = "127.0.0.2";
const TEEN: &str = "127.0.0.3";
const PARENT: &str = "127.0.0.4";
const GUEST: &str = "127.0.0.5";

const HTTPS: u16 = 65;

fn ask(source: &str, server: SocketAddr, name: &str, qtype: u16) -> Reply {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.send_to(&build_query(9, name, qtype, Some(1232)), server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).unwrap_or_else(|e| panic!("no answer for {name} from {source}: {e}"));
    Reply::parse(buf[..n].to_vec())
}

/// The CNAME targets and addresses of an answer, in order.
fn records(r: &Reply) -> Vec<String> {
    let p = Packet::parse(&r.raw).unwrap();
    p.answers
        .iter()
        .map(|rr| match &rr.rdata {
            RData::CNAME(c) => format!("CNAME {}", c.0),
            RData::A(a) => format!("A {}", std::net::Ipv4Addr::from(a.address)),
            RData::AAAA(a) => format!("AAAA {}", std::net::Ipv6Addr::from(a.address)),
            other => format!("{other:?}"),
        })
        .collect()
}

/// A gateway whose clock reads `now` (Unix seconds, UTC zone) at start.
fn gateway_at(up: &Upstream, extra: &str, now: Option<i64>) -> Gateway {
    let dir = TempDir::new();
    let text = config(&[up], &format!("{extra}{}", log_section("\toption batch_interval '50ms'\n")));
    let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let mut cmd: Command = hydradns();
    cmd.env("TZ", "UTC0");
    if let Some(now) = now {
        cmd.env("HYDRADNS_TEST_NOW", now.to_string());
    }
    Gateway::start_command(dir, config, cmd)
}

const CLIENTS: &str = "
config client
\toption name 'kids-tablet'
\tlist match '127.0.0.2'
\tlist group 'kids'
config client
\toption name 'teen-phone'
\tlist match '127.0.0.3'
\tlist group 'teens'
config client
\toption name 'parent-laptop'
\tlist match '127.0.0.4'
\tlist group 'default'
config client
\toption name 'guest'
\tlist match '127.0.0.5'
\tlist group 'guests'
";

/// Thursday 3 December 2026 in UTC, at `h:m`.
fn thursday(h: i64, m: i64) -> i64 {
    1_796_256_000 + h * 3600 + m * 60
}

#[test]
fn a_service_blocks_for_its_group_inside_the_schedule_only() {
    assert_eq!(thursday(0, 0) % 86_400, 0);
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let groups = "
config group 'kids'
\toption schedule 'school-nights'
\toption block_mode 'nxdomain'
\tlist service 'tiktok'
\tlist service 'not-a-service'
config group 'teens'
\tlist service 'tiktok'
config group 'guests'
config schedule 'school-nights'
\toption start '19:00'
\toption end '07:00'
config allowlist
\toption name 'homework'
\tlist domain 'school.tiktok.com'
\tlist group 'kids'
";
    let extra = format!("{CLIENTS}{groups}");
    // Inside the kids' window (20:00), then outside it (12:00).
    let gw = gateway_at(&up, &extra, Some(thursday(20, 0)));
    assert_eq!(ask(KID, gw.addr, "www.tiktok.com", A).rcode, RCODE::NameError, "the group's block mode");
    assert_eq!(ask(KID, gw.addr, "v16.tiktokcdn.com", A).rcode, RCODE::NameError, "under a catalogue domain");
    assert_eq!(ask(KID, gw.addr, "school.tiktok.com", A).ips(), ["192.0.2.1"], "an allow entry wins");
    assert_eq!(ask(TEEN, gw.addr, "www.tiktok.com", A).ips(), ["0.0.0.0"], "unscheduled group, global mode");
    assert_eq!(ask(PARENT, gw.addr, "www.tiktok.com", A).ips(), ["192.0.2.1"]);
    assert_eq!(ask(GUEST, gw.addr, "www.tiktok.com", A).ips(), ["192.0.2.1"]);
    assert_eq!(ask(KID, gw.addr, "example.org", A).ips(), ["192.0.2.1"]);
    assert!(gw.log().contains("unknown service 'not-a-service'"), "{}", gw.log());
    wait_for("the log", Duration::from_secs(60), || !log_rows(&gw, &["--domain", "www.tiktok.com"]).is_empty());
    let rows = log_rows(&gw, &["--domain", "www.tiktok.com", "--blocked"]);
    assert!(rows.iter().all(|r| r.list.as_deref() == Some("service:tiktok")), "{rows:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (code, out, err) = cli(&["check", "-c", cfg_path(&gw), "--client", "kids-tablet", "m.tiktok.com"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("blocked by service 'tiktok' of group 'kids'"), "{out}");
    let (_, _, err) = cli(&["check-config", "-c", cfg_path(&gw)]);
    assert!(err.contains("unknown service 'not-a-service'") && err.contains("(warning)"), "{err}");
    drop(gw);
    let gw = gateway_at(&up, &extra, Some(thursday(12, 0)));
    assert_eq!(ask(KID, gw.addr, "www.tiktok.com", A).ips(), ["192.0.2.1"], "outside the schedule");
    assert_eq!(ask(TEEN, gw.addr, "www.tiktok.com", A).ips(), ["0.0.0.0"]);
}

#[test]
fn safe_search_answers_the_safe_host_with_its_addresses() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let groups = "
config group 'kids'
\toption safe_search '1'
\tlist service 'youtube'
config group 'teens'
\toption safe_search '1'
\toption youtube_restrict 'strict'
config group 'guests'
\toption safe_search '1'
";
    let gw = gateway_at(&up, &format!("{CLIENTS}{groups}"), None);
    let kid = ask(KID, gw.addr, "www.google.com", A);
    assert_eq!(kid.rcode, RCODE::NoError);
    assert_eq!(records(&kid), ["CNAME forcesafesearch.google.com", "A 192.0.2.1"]);
    assert_eq!(up.seen("forcesafesearch.google.com"), 1, "resolved upstream");
    let kid6 = ask(KID, gw.addr, "www.google.com", AAAA);
    assert_eq!(records(&kid6), ["CNAME forcesafesearch.google.com", "AAAA 2001:db8::1"]);
    let https = ask(KID, gw.addr, "www.google.com", HTTPS);
    assert_eq!((https.rcode, https.answers.len(), https.authority.len()), (RCODE::NoError, 0, 1), "NODATA");
    // A parent gets the upstream's own answer, before and after the kid's.
    let parent = ask(PARENT, gw.addr, "www.google.com", A);
    assert_eq!(records(&parent), ["A 192.0.2.1"]);
    assert_eq!(
        records(&ask(KID, gw.addr, "www.google.com", A))[0],
        "CNAME forcesafesearch.google.com",
        "not the cached answer"
    );
    assert_eq!(records(&ask(KID, gw.addr, "google.de", A))[0], "CNAME forcesafesearch.google.com");
    assert_eq!(records(&ask(KID, gw.addr, "duckduckgo.com", A))[0], "CNAME safe.duckduckgo.com");
    assert_eq!(records(&ask(KID, gw.addr, "www.bing.com", A))[0], "CNAME strict.bing.com");
    // YouTube: blocked for the kids (the service wins), strict for teens, moderate for guests.
    assert_eq!(ask(KID, gw.addr, "www.youtube.com", A).ips(), ["0.0.0.0"]);
    assert_eq!(records(&ask(TEEN, gw.addr, "www.youtube.com", A)), ["CNAME restrict.youtube.com", "A 192.0.2.1"]);
    assert_eq!(records(&ask(GUEST, gw.addr, "m.youtube.com", A))[0], "CNAME restrictmoderate.youtube.com");
    assert_eq!(records(&ask(PARENT, gw.addr, "www.youtube.com", A)), ["A 192.0.2.1"]);
    // Counted and logged as safe search, under the name asked.
    assert!(gw.report().counters.safe_search >= 8, "{:?}", gw.report().counters);
    wait_for("the log", Duration::from_secs(60), || !log_rows(&gw, &["--domain", "google.de"]).is_empty());
    let rows = log_rows(&gw, &["--domain", "www.google.com"]);
    assert_eq!(rows.iter().filter(|r| r.outcome == "safe_search").count(), 4, "{rows:?}");
    assert!(rows.iter().any(|r| r.outcome == "forwarded" && r.client == PARENT), "{rows:?}");
    let (_, out, _) = cli(&["check", "-c", cfg_path(&gw), "--client", "teen-phone", "www.youtube.com"]);
    assert!(out.contains("safe search") && out.contains("restrict.youtube.com"), "{out}");
    // A safe host that does not resolve: SERVFAIL, never the unrestricted answer.
    up.behaviour.rcode.store(3, std::sync::atomic::Ordering::SeqCst);
    let r = ask(KID, gw.addr, "www.ecosia.org", A);
    assert_eq!((r.rcode, r.answers.len()), (RCODE::ServerFailure, 0), "{r:?}");
    up.behaviour.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = ask(KID, gw.addr, "search.brave.com", AAAA);
    assert_eq!((r.rcode, r.answers.len()), (RCODE::ServerFailure, 0), "{r:?}");
}

#[test]
fn each_group_chooses_what_the_log_keeps() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let groups = "
config client
\toption name 'shared-console'
\tlist match '127.0.0.6'
\tlist group 'guests'
\tlist group 'teens'
config group 'kids'
\toption querylog 'none'
config group 'teens'
\toption querylog 'anonymous'
config group 'guests'
\toption querylog 'full'
";
    let gw = gateway_at(&up, &format!("{CLIENTS}{groups}"), None);
    for _ in 0..3 {
        assert_eq!(ask(KID, gw.addr, "kid.example", A).ips(), ["192.0.2.1"]);
    }
    ask(TEEN, gw.addr, "teen.example", A);
    ask("127.0.0.6", gw.addr, "console.example", A);
    ask(GUEST, gw.addr, "guest.example", A);
    ask(PARENT, gw.addr, "parent.example", A);
    wait_for("the log", Duration::from_secs(60), || !log_rows(&gw, &["--domain", "parent.example"]).is_empty());
    assert!(log_rows(&gw, &["--domain", "kid.example"]).is_empty(), "querylog none: no row");
    assert_eq!(gw.report().queries, 7, "but counted");
    for name in ["teen.example", "console.example"] {
        let rows = log_rows(&gw, &["--domain", name]);
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!((r.client.as_str(), &r.mac, &r.client_name), ("0.0.0.0", &None, &None), "{name}: {r:?}");
    }
    let guest = &log_rows(&gw, &["--domain", "guest.example"])[0];
    assert_eq!((guest.client.as_str(), guest.client_name.as_deref()), (GUEST, Some("guest")));
    let parent = &log_rows(&gw, &["--domain", "parent.example"])[0];
    assert_eq!(parent.client, PARENT);
}

#[test]
fn services_url_loads_a_hostlistsregistry_file_and_keeps_it_through_a_failed_refresh() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = http::HttpServer::start();
    let body = r#"{"blocked_services":[
        {"id":"exampletube","name":"ExampleTube","rules":["||tube.example^","||tubecdn.example^"],
         "icon_svg":"<svg></svg>","group":"video"}],
        "groups":[{"id":"video","name":"Video"}]}"#;
    web.set("/services.json", http::Route::List { body: body.into(), etag: "\"s1\"".into() });
    let extra = format!(
        "\toption list_dir '@DIR@/lists'\n\toption download_timeout '30s'\n\toption services_url '{}'\n{CLIENTS}\
         config group 'kids'\n\tlist service 'exampletube'\nconfig group 'teens'\nconfig group 'guests'\n",
        web.url("/services.json")
    );
    let gw = gateway_at(&up, &extra, None);
    wait_for("the services download", Duration::from_secs(120), || {
        ask(KID, gw.addr, "www.tube.example", A).ips() == ["0.0.0.0"]
    });
    assert!(gw.log().contains("unknown service 'exampletube'"), "before the first download: {}", gw.log());
    assert_eq!(ask(KID, gw.addr, "img.tubecdn.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(ask(PARENT, gw.addr, "www.tube.example", A).ips(), ["192.0.2.1"]);
    let (code, out, err) = cli(&["services", "-c", cfg_path(&gw), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(r#""id":"exampletube""#) && out.contains(r#""category":"video""#), "{out}");
    assert!(!out.contains("tiktok"), "the downloaded catalogue replaces the built-in one: {out}");
    // Refreshes that fail (an HTTP error, then a page that is no services.json) keep the copy.
    for route in
        [http::Route::Status(500), http::Route::List { body: b"<html>nope</html>".to_vec(), etag: "\"x\"".into() }]
    {
        web.set("/services.json", route);
        let (_, out, err) = cli(&["update", "-c", cfg_path(&gw), "--json"]);
        assert!(out.contains(r#""name":"services","status":"failed""#), "{out} {err}");
        assert_eq!(ask(KID, gw.addr, "www.tube.example", A).ips(), ["0.0.0.0"]);
    }
    // `lists` and `status` show the download beside the lists, with its last error.
    let (code, out, err) = cli(&["lists", "-c", cfg_path(&gw)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("services (services): 2 entries"), "{out}");
    assert!(out.contains("last success") && out.contains("last error"), "{out}");
    let (_, out, _) = cli(&["status", "-c", cfg_path(&gw)]);
    assert!(out.contains("list         services (services): 2 entries, updated "), "{out}");
    // A reload reads the saved copy again, with the server still failing.
    gw.reload(&std::fs::read_to_string(&gw.config).unwrap());
    assert_eq!(ask(KID, gw.addr, "new.tube.example", A).ips(), ["0.0.0.0"]);
    assert!(web.conditional_hits("/services.json") >= 1, "ETag sent");
}
