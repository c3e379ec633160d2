//! Groups of devices through the real binary: each client gets the union
//! of its groups' lists (and no other group's verdict, from the cache or a
//! CNAME), `config client` precedence, a group's own block answer, overnight
//! schedules in a fixed time zone (DST included) with the clock hook, the
//! unsynced clock, per-group pause, `check --client`, per-group stats and
//! the log naming devices by their `config client`.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use common::*;
use simple_dns::RCODE;

/// Queries from these loopback addresses play the devices.
const KID: &str = "127.0.0.2";
const PARENT: &str = "127.0.0.3";
const GUEST: &str = "127.0.0.5";
const NOBODY: &str = "127.0.0.9";

/// One A query for `name` from `source`, with EDNS `options` if any.
fn ask(source: &str, server: SocketAddr, name: &str, options: &[(u16, &[u8])]) -> Reply {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let q = if options.is_empty() { build_query(9, name, A, None) } else { query_with_options(9, name, options) };
    s.send_to(&q, server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).unwrap_or_else(|e| panic!("no answer for {name} from {source}: {e}"));
    Reply::parse(buf[..n].to_vec())
}

fn a(source: &str, gw: &Gateway, name: &str) -> Reply {
    ask(source, gw.addr, name, &[])
}

/// Blocked with the global `null` answer.
fn is_null(r: &Reply) -> bool {
    r.ips() == ["0.0.0.0"]
}

const LISTS: &str = "
config client
\toption name 'kids-tablet'
\tlist match '127.0.0.2'
\tlist group 'kids'
\tlist group 'default'
config client
\toption name 'guest-net'
\tlist match '127.0.0.4/30'
\tlist group 'guests'
config client
\toption name 'no-group'
\tlist match '127.0.0.9'
config group 'kids'
\toption block_mode 'nxdomain'
config blocklist
\toption name 'ads'
\tlist domain 'ads.example'
config blocklist
\toption name 'social'
\tlist domain 'social.example'
\tlist domain 'cname-target.example'
\tlist group 'kids'
config blocklist
\toption name 'guest-only'
\tlist domain 'streaming.example'
\tlist group 'guests'
config allowlist
\toption name 'homework'
\tlist domain 'school.social.example'
\tlist group 'kids'
";

fn gateway(up: &Upstream, extra: &str) -> Gateway {
    Gateway::start(&config(&[up], &format!("{LISTS}{extra}{}", log_section("\toption batch_interval '50ms'\n"))))
}

#[test]
fn each_client_gets_its_groups_lists_and_no_other_groups_verdict() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up, "");
    // The parent (no config client: default) asks first; its answer is cached.
    assert_eq!(a(PARENT, &gw, "social.example").ips(), ["192.0.2.1"]);
    // The kid is in kids and default: social blocked with the group's NXDOMAIN, ads with null.
    let r = a(KID, &gw, "social.example");
    assert_eq!((r.rcode, r.answers.len()), (RCODE::NameError, 0), "kids' block_mode nxdomain: {r:?}");
    assert!(is_null(&a(KID, &gw, "ads.example")));
    assert!(is_null(&a(PARENT, &gw, "ads.example")));
    // And the parent again: the cached answer, not the kid's verdict.
    assert_eq!(a(PARENT, &gw, "social.example").ips(), ["192.0.2.1"]);
    assert_eq!(up.seen("social.example"), 1, "one upstream query, answered from the cache after");
    // The other way round: blocked for the kid first, then the parent forwards.
    assert_eq!(a(KID, &gw, "m.social.example").rcode, RCODE::NameError);
    assert_eq!(a(PARENT, &gw, "m.social.example").ips(), ["192.0.2.1"]);
    assert_eq!(
        a(KID, &gw, "m.social.example").rcode,
        RCODE::NameError,
        "cached for the parent, still blocked for the kid"
    );
    // The kids' allowlist beats their blocklist; it is theirs only.
    assert_eq!(a(KID, &gw, "school.social.example").ips(), ["192.0.2.1"]);
    // A guest (the /30): only guest-only, not default's ads.
    assert!(is_null(&a(GUEST, &gw, "streaming.example")));
    assert_eq!(a(GUEST, &gw, "ads.example").ips(), ["192.0.2.1"]);
    assert_eq!(a(PARENT, &gw, "streaming.example").ips(), ["192.0.2.1"]);
    assert_eq!(a(KID, &gw, "streaming.example").ips(), ["192.0.2.1"]);
    // A client rule listing no group: the group default, as a list without groups.
    assert!(is_null(&a(NOBODY, &gw, "ads.example")));
    assert_eq!(a(NOBODY, &gw, "m.social.example").ips(), ["192.0.2.1"]);
    // CNAME cloaking follows the client's groups too, from one cached answer.
    assert_eq!(a(PARENT, &gw, "cloaked.shop.example").answers.len(), 2);
    assert_eq!(a(KID, &gw, "cloaked.shop.example").rcode, RCODE::NameError, "its CNAME target is on the kids' list");
    assert_eq!(a(PARENT, &gw, "cloaked.shop.example").answers.len(), 2);
    assert_eq!(up.seen("cloaked.shop.example"), 1);
    // Per-group counters.
    let groups = gw.report().groups;
    let blocked: Vec<_> = groups.iter().map(|g| (g.name.as_str(), g.blocked)).collect();
    assert_eq!(blocked, [("default", 3), ("kids", 4), ("guests", 1)], "{groups:?}");
    let (_, text, _) = cli(&["stats", "-c", cfg_path(&gw)]);
    assert!(text.contains("group        kids: 4 blocked"), "{text}");
    // The log names the list per client.
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &["--domain", "social.example"]).len() >= 3);
    let rows = log_rows(&gw, &["--client", KID, "--domain", "social.example"]);
    let blocked = rows.iter().filter(|r| r.name != "school.social.example");
    assert!(blocked.clone().count() == 3, "{rows:?}");
    assert!(blocked.into_iter().all(|r| r.outcome == "blocked" && r.list.as_deref() == Some("social")), "{rows:?}");
    // Named by its config client, and found by that name.
    assert!(rows.iter().all(|r| r.client_name.as_deref() == Some("kids-tablet")), "{rows:?}");
    assert_eq!(log_rows(&gw, &["--client", "kids-tablet", "--domain", "social.example"]).len(), rows.len());
}

#[test]
fn the_mac_a_forwarder_names_beats_the_address_and_a_lease_hostname_matches() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let leases = dir.file("dhcp.leases", "0 02:00:5e:10:00:07 127.0.0.10 Tablet-Anna *\n");
    let gw = gateway(
        &up,
        &format!(
            "config client\n\toption name 'by-mac'\n\tlist match '02:00:5e:10:00:01'\n\tlist group 'guests'\n\
             config client\n\toption name 'tablets'\n\tlist match 'tablet-*'\n\tlist group 'kids'\n\
             config hydradns 'more'\n\toption leases_file '{}'\n\tlist trusted_proxy '127.0.0.1'\n",
            leases.display()
        ),
    );
    // From the kid's own address, but dnsmasq (trusted: loopback) says which MAC asked.
    let mac: &[u8] = &[0x02, 0x00, 0x5e, 0x10, 0x00, 0x01];
    let r = ask("127.0.0.1", gw.addr, "streaming.example", &[(8, &[0, 1, 32, 0, 127, 0, 0, 2]), (65001, mac)]);
    assert!(is_null(&r), "the MAC's rule (guests): {r:?}");
    let r = ask("127.0.0.1", gw.addr, "social.example", &[(8, &[0, 1, 32, 0, 127, 0, 0, 2]), (65001, mac)]);
    assert_eq!(r.ips(), ["192.0.2.1"], "not the address's rule (kids)");
    // The same options from a source not trusted are ignored: the kid's address decides.
    let r = ask(KID, gw.addr, "social.example", &[(65001, mac)]);
    assert_eq!(r.rcode, RCODE::NameError, "{r:?}");
    // The leases name 127.0.0.10 (outside the guests' /30) 'Tablet-Anna': matched by the glob, any case.
    assert_eq!(a("127.0.0.10", &gw, "social.example").rcode, RCODE::NameError);
    assert_eq!(a("127.0.0.10", &gw, "ads.example").ips(), ["192.0.2.1"], "tablets are in kids only");
    let (code, out, err) = cli(&["check", "-c", cfg_path(&gw), "--client", "tablet-anna", "social.example"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("config client 'tablets'") && out.contains("groups: kids"), "{out}");
    assert!(out.contains("blocked by list 'social' of group 'kids'"), "{out}");
}

/// A reload that brings the first rule matching on hostnames starts the
/// look at the leases (an idle gateway had no timer for it): a device that
/// gets its lease afterwards is matched within a few looks.
#[test]
fn a_reload_that_adds_a_hostname_rule_follows_leases_from_then_on() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let leases = dir.file("dhcp.leases", "0 02:00:5e:10:00:07 127.0.0.10 Tablet-Anna *\n");
    let gw = gateway(&up, &format!("config hydradns 'more'\n\toption leases_file '{}'\n", leases.display()));
    assert_eq!(a("127.0.0.10", &gw, "a.social.example").ips(), ["192.0.2.1"], "no rule names it yet");
    let text = std::fs::read_to_string(&gw.config).unwrap();
    gw.reload(&format!("{text}config client\n\toption name 'tablets'\n\tlist match 'tablet-*'\n\tlist group 'kids'\n"));
    assert_eq!(a("127.0.0.10", &gw, "b.social.example").rcode, RCODE::NameError, "the reload read the leases");
    std::fs::write(
        &leases,
        "0 02:00:5e:10:00:07 127.0.0.10 Tablet-Anna *\n0 02:00:5e:10:00:08 127.0.0.11 tablet-ben *\n",
    )
    .unwrap();
    let mut n = 0;
    wait_for("the new lease to be matched", Duration::from_secs(30), || {
        n += 1;
        a("127.0.0.11", &gw, &format!("n{n}.social.example")).rcode == RCODE::NameError
    });
}

#[test]
fn check_explains_the_verdict_for_a_client() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up, "");
    let check = |args: &[&str]| {
        let mut all = vec!["check", "-c", cfg_path(&gw)];
        all.extend_from_slice(args);
        let (code, out, err) = cli(&all);
        assert_eq!(code, 0, "{err}");
        out
    };
    let out = check(&["--client", KID, "x.social.example"]);
    assert!(out.contains("config client 'kids-tablet'") && out.contains("groups: default,kids"), "{out}");
    assert!(out.contains("blocked by list 'social' of group 'kids' (entry social.example)"), "{out}");
    assert!(check(&["--client", PARENT, "x.social.example"]).contains("not blocked"));
    assert!(check(&["x.social.example"]).contains("not blocked"), "without --client: the default group");
    let out = check(&["--client", "kids-tablet", "school.social.example"]);
    assert!(out.contains("allowed by list 'homework'"), "{out}");
    let (code, _, err) = cli(&["check", "-c", cfg_path(&gw), "--client", "no-such-device", "a.example"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn a_group_pause_lets_only_that_groups_lists_through() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up, "");
    // A minute: what is checked during the pause (a reload among it) takes
    // a fraction of that, a busy machine's few seconds included. A short
    // pause replaces it below to see one end on its own.
    let (code, out, err) = cli(&["pause", "-c", cfg_path(&gw), "--group", "kids", "60s"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("group 'kids' paused until"), "{out}");
    assert_eq!(a(KID, &gw, "p.social.example").ips(), ["192.0.2.1"], "kids' list paused");
    assert!(is_null(&a(KID, &gw, "p.ads.example")), "default's list still blocks for the kid");
    let kids = gw.report().groups.into_iter().find(|g| g.name == "kids").unwrap();
    assert!(kids.paused_until > 0 && gw.report().paused_until == 0);
    let (code, _, err) = cli(&["pause", "-c", cfg_path(&gw), "--group", "nope", "2s"]);
    assert_eq!(code, 1, "an unknown group: {err}");
    assert!(err.contains("no group 'nope'"), "{err}");
    // Kept across a reload that renumbers the groups.
    let text = std::fs::read_to_string(&gw.config).unwrap();
    gw.reload(&text.replacen("config group 'kids'", "config group 'early'\nconfig group 'kids'", 1));
    assert_eq!(a(KID, &gw, "q.social.example").ips(), ["192.0.2.1"]);
    let (code, _, err) = cli(&["pause", "-c", cfg_path(&gw), "--group", "kids", "1s"]);
    assert_eq!(code, 0, "{err}");
    wait_for("the group pause to end", Duration::from_secs(30), || {
        a(KID, &gw, "p.social.example").rcode == RCODE::NameError
    });
    assert!(gw.report().counters.paused >= 2);
    wait_for("the log", Duration::from_secs(60), || !log_rows(&gw, &["--domain", "p.social.example"]).is_empty());
    let rows = log_rows(&gw, &["--domain", "p.social.example"]);
    assert!(rows.iter().any(|r| r.outcome == "paused" && r.list.as_deref() == Some("social")), "{rows:?}");
}

/// A gateway whose clock reads `now` (Unix seconds) at start, in Berlin's
/// zone; `synced`: whether the clock marker it is given exists (`None`: no
/// `time_synced_file` option, so the test clock counts as synced).
fn scheduled(up: &Upstream, now: i64, synced: Option<bool>) -> Gateway {
    let dir = TempDir::new();
    let marker = dir.0.join("ntpd-synced");
    if synced == Some(true) {
        std::fs::write(&marker, "").unwrap();
    }
    let option = match synced {
        Some(_) => format!("\toption time_synced_file '{}'\n", marker.display()),
        None => String::new(),
    };
    let text = config(
        &[up],
        &format!(
            "{option}\
             config client\n\tlist match '127.0.0.2'\n\tlist group 'kids'\n\
             config group 'kids'\n\toption schedule 'school-nights'\n\
             config schedule 'school-nights'\n\tlist day 'sun'\n\tlist day 'mon'\n\tlist day 'tue'\n\
             \tlist day 'wed'\n\tlist day 'thu'\n\toption start '21:00'\n\toption end '07:00'\n\
             config blocklist\n\toption name 'social'\n\tlist domain 'social.example'\n\tlist group 'kids'\n",
        ),
    );
    let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let mut cmd: Command = hydradns();
    cmd.env("TZ", "CET-1CEST,M3.5.0,M10.5.0/3").env("HYDRADNS_TEST_NOW", now.to_string());
    Gateway::start_command(dir, config, cmd)
}

/// Unix seconds of a UTC date and time.
fn utc(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
    // Days from civil (H. Hinnant), for the test's own arithmetic.
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + h * 3600 + mi * 60 + s
}

#[test]
fn overnight_schedules_in_local_time_with_daylight_saving() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let blocked = |now: i64, synced: Option<bool>| {
        let gw = scheduled(&up, now, synced);
        a(KID, &gw, "social.example").rcode == RCODE::NoError && a(KID, &gw, "social.example").ips() == ["0.0.0.0"]
    };
    // Thursday 3 December 2026, 21:30 in Berlin (20:30 UTC): a school night.
    assert!(blocked(utc(2026, 12, 3, 20, 30, 0), Some(true)));
    // Friday 06:59 (05:59 UTC): still Thursday's night.
    assert!(blocked(utc(2026, 12, 4, 5, 59, 0), Some(true)));
    // Friday 07:00 and Friday 21:30: outside.
    assert!(!blocked(utc(2026, 12, 4, 6, 0, 0), Some(true)));
    assert!(!blocked(utc(2026, 12, 4, 20, 30, 0), Some(true)));
    // Sunday 29 March 2026, the day summer time starts: 19:30 UTC is 21:30
    // CEST (inside), though it would be 20:30 in winter time (outside).
    assert!(blocked(utc(2026, 3, 29, 19, 30, 0), Some(true)));
    assert!(!blocked(utc(2026, 3, 29, 18, 30, 0), Some(true)), "20:30 CEST");
    // A clock not known good: the group stays in its blocking state.
    assert!(blocked(utc(2026, 12, 4, 20, 30, 0), Some(false)));
    // The window opens while it runs: ten seconds before 21:00 on a Sunday
    // (time for the start and the first query, on a busy machine too).
    // A clock the test hook sets is known good without a marker option.
    assert!(!blocked(utc(2026, 12, 4, 20, 30, 0), None));
    assert!(blocked(utc(2026, 12, 3, 20, 30, 0), None));
    let gw = scheduled(&up, utc(2026, 12, 6, 19, 59, 50), Some(true));
    assert_eq!(a(KID, &gw, "social.example").ips(), ["192.0.2.1"]);
    assert!(!gw.report().groups[1].active);
    wait_for("21:00", Duration::from_secs(60), || a(KID, &gw, "social.example").ips() == ["0.0.0.0"]);
    assert!(gw.report().groups[1].active);
}
