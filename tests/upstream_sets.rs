//! Upstreams per group through the real binary (issue 60): each client gets
//! the answer of its group's set, from the upstream, the cache, serve-stale,
//! a prefetch and a miss another set has in flight; groups with the same
//! list share entries; a schedule moves a client between sets at once; a set
//! whose upstreams are down answers SERVFAIL (or its own stale answer),
//! never the main set's, unless `fallback_main`; `check --client` names the
//! set; `stats` and the log say which set answered.
//!
//! Two scripted upstreams answer every name with their own address: main
//! 192.0.2.1, the kids' 192.0.2.7, so an answer shows which set it came from.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use common::*;
use simple_dns::RCODE;

/// In `kids` (its own upstreams).
const KID: &str = "127.0.0.2";
/// In no `config client`: the main upstreams.
const PARENT: &str = "127.0.0.3";
/// In `teens`, whose list is the kids' list: the same set.
const TEEN: &str = "127.0.0.4";

const MAIN_IP: &str = "192.0.2.1";
const KIDS_IP: &str = "192.0.2.7";

fn ask(source: &str, server: SocketAddr, name: &str) -> Reply {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.send_to(&build_query(7, name, A, None), server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).unwrap_or_else(|e| panic!("no answer for {name} from {source}: {e}"));
    Reply::parse(buf[..n].to_vec())
}

fn ips(source: &str, gw: &Gateway, name: &str) -> Vec<String> {
    ask(source, gw.addr, name).ips()
}

/// The clients and groups; `kids_extra` goes into the kids' group section.
fn sections(kids: &Upstream, kids_extra: &str) -> String {
    format!(
        "config client\n\toption name 'kid'\n\tlist match '{KID}'\n\tlist group 'kids'\n\
         config client\n\toption name 'teen'\n\tlist match '{TEEN}'\n\tlist group 'teens'\n\
         config group 'kids'\n\tlist upstream '{k}'\n{kids_extra}\
         config group 'teens'\n\tlist upstream '{k}'\n{kids_extra}",
        k = kids.addr
    )
}

fn gateway(main: &Upstream, kids: &Upstream, extra: &str) -> Gateway {
    let log = log_section("\toption batch_interval '50ms'\n");
    Gateway::start(&config(&[main], &format!("{}{extra}{log}", sections(kids, ""))))
}

fn set_named<'a>(r: &'a hydradns::stats::Report, name: &str) -> &'a hydradns::stats::SetReport {
    r.upstream_sets.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no set {name}: {:?}", r.upstream_sets))
}

#[test]
fn each_client_gets_its_sets_answer_from_upstream_and_cache_and_shares_it_only_within_the_set() {
    let main = Upstream::start(MAIN_IP.parse().unwrap());
    let kids = Upstream::start(KIDS_IP.parse().unwrap());
    let gw = gateway(&main, &kids, "");
    assert_eq!(ips(KID, &gw, "video.example"), [KIDS_IP]);
    assert_eq!(ips(PARENT, &gw, "video.example"), [MAIN_IP]);
    // From the cache now: each set's own entry.
    assert_eq!(ips(KID, &gw, "video.example"), [KIDS_IP]);
    assert_eq!(ips(PARENT, &gw, "video.example"), [MAIN_IP]);
    // The teens' list is the kids': one set, one entry.
    assert_eq!(ips(TEEN, &gw, "video.example"), [KIDS_IP]);
    assert_eq!((kids.asked("video.example"), main.asked("video.example")), (1, 1));

    let r = gw.report();
    assert_eq!(r.upstream_sets.len(), 2, "{:?}", r.upstream_sets);
    let (m, k) = (set_named(&r, "main"), set_named(&r, "kids,teens"));
    assert_eq!((m.queries, m.failed, k.queries, k.failed), (1, 0, 1, 0));
    assert_eq!(k.upstreams, [kids.addr.to_string()]);

    // The log says which set answered a forwarded query.
    wait_for("the log rows", Duration::from_secs(30), || log_rows(&gw, &["--domain", "video.example"]).len() == 5);
    let rows = log_rows(&gw, &["--domain", "video.example", "--outcome", "forwarded"]);
    let mut sets: Vec<(String, Option<String>)> = rows.into_iter().map(|r| (r.client, r.upstream_set)).collect();
    sets.sort();
    assert_eq!(sets, [(KID.to_string(), Some("kids,teens".to_string())), (PARENT.to_string(), None)]);

    // `check --client` names the set.
    let (code, out, err) = cli(&["check", "-c", cfg_path(&gw), "--client", KID, "video.example"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("upstreams: set 'kids,teens': {}", kids.addr)), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg_path(&gw), "--client", PARENT, "video.example"]);
    assert!(out.contains("upstreams: main"), "{out}");
    let (_, out, _) = cli(&["stats", "-c", cfg_path(&gw)]);
    assert!(out.contains("upstream set kids,teens: "), "{out}");
}

#[test]
fn a_miss_in_flight_for_one_set_is_not_shared_with_another() {
    let main = Upstream::start(MAIN_IP.parse().unwrap());
    let kids = Upstream::start(KIDS_IP.parse().unwrap());
    let gw = gateway(&main, &kids, "");
    main.behaviour.hold.store(true, SeqCst);
    kids.behaviour.hold.store(true, SeqCst);
    let addr = gw.addr;
    let kid = std::thread::spawn(move || ask(KID, addr, "held.example").ips());
    let parent = std::thread::spawn(move || ask(PARENT, addr, "held.example").ips());
    wait_for("both upstreams asked", Duration::from_secs(30), || {
        main.asked("held.example") == 1 && kids.asked("held.example") == 1
    });
    main.behaviour.hold.store(false, SeqCst);
    kids.behaviour.hold.store(false, SeqCst);
    assert_eq!(kid.join().unwrap(), [KIDS_IP]);
    assert_eq!(parent.join().unwrap(), [MAIN_IP]);
}

#[test]
fn stale_answers_and_prefetches_stay_in_their_set() {
    let main = Upstream::start(MAIN_IP.parse().unwrap());
    let kids = Upstream::start(KIDS_IP.parse().unwrap());
    let gw = gateway(&main, &kids, "\toption serve_stale '1'\n\toption prefetch '1'\n");

    // Prefetch: a name hit twice in the last second of its 2 s TTL is
    // refreshed, by the set that asked.
    assert_eq!(ips(KID, &gw, "ttl2.pre.example"), [KIDS_IP]);
    wait_for("a prefetch through the kids' set", Duration::from_secs(30), || {
        assert_eq!(ips(KID, &gw, "ttl2.pre.example"), [KIDS_IP]);
        kids.asked("ttl2.pre.example") >= 2
    });
    assert_eq!(main.asked("ttl2.pre.example"), 0);

    // Serve-stale: both upstreams gone silent, each client gets its own
    // set's expired answer.
    assert_eq!(ips(KID, &gw, "ttl1.stale.example"), [KIDS_IP]);
    assert_eq!(ips(PARENT, &gw, "ttl1.stale.example"), [MAIN_IP]);
    main.behaviour.silent.store(true, SeqCst);
    kids.behaviour.silent.store(true, SeqCst);
    // Past the 1 s TTL (the cache counts whole seconds).
    std::thread::sleep(Duration::from_millis(2100));
    let kid = ask(KID, gw.addr, "ttl1.stale.example");
    let parent = ask(PARENT, gw.addr, "ttl1.stale.example");
    assert_eq!((kid.rcode, kid.ips()), (RCODE::NoError, vec![KIDS_IP.to_string()]));
    assert_eq!((parent.rcode, parent.ips()), (RCODE::NoError, vec![MAIN_IP.to_string()]));
}

#[test]
fn a_set_whose_upstreams_fail_answers_servfail_not_the_main_sets_answer_unless_told() {
    let main = Upstream::start(MAIN_IP.parse().unwrap());
    let kids = Upstream::start(KIDS_IP.parse().unwrap());
    kids.behaviour.silent.store(true, SeqCst);
    let gw = gateway(&main, &kids, "");
    let r = ask(KID, gw.addr, "down.example");
    assert_eq!((r.rcode, r.ips()), (RCODE::ServerFailure, Vec::<String>::new()));
    assert_eq!(main.asked("down.example"), 0, "the main upstreams were not asked for the kids");
    assert!(kids.asked("down.example") >= 1);
    assert_eq!(ips(PARENT, &gw, "down.example"), [MAIN_IP]);
    assert_eq!(set_named(&gw.report(), "kids,teens").failed, 1);
    drop(gw);

    // `fallback_main '1'`: the main upstreams after the kids' own.
    let log = log_section("");
    let gw = Gateway::start(&config(&[&main], &format!("{}{log}", sections(&kids, "\toption fallback_main '1'\n"))));
    assert_eq!(ips(KID, &gw, "down2.example"), [MAIN_IP]);
    assert!(kids.asked("down2.example") >= 1, "its own upstreams first");
}

/// A gateway whose clock reads `now` (Unix seconds, UTC) at start, the kids'
/// group inside a 21:00–07:00 window every day.
fn scheduled(main: &Upstream, kids: &Upstream, now: i64) -> Gateway {
    let dir = TempDir::new();
    let text = config(
        &[main],
        &format!(
            "config client\n\tlist match '{KID}'\n\tlist group 'kids'\n\
             config group 'kids'\n\tlist upstream '{}'\n\toption schedule 'nights'\n\
             config schedule 'nights'\n\toption start '21:00'\n\toption end '07:00'\n{}",
            kids.addr,
            log_section("")
        ),
    );
    let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let mut cmd: Command = hydradns();
    cmd.env("TZ", "UTC0").env("HYDRADNS_TEST_NOW", now.to_string());
    Gateway::start_command(dir, config, cmd)
}

#[test]
fn a_schedule_moves_its_clients_between_sets_at_once_without_the_other_sets_cache() {
    let main = Upstream::start(MAIN_IP.parse().unwrap());
    let kids = Upstream::start(KIDS_IP.parse().unwrap());
    // 6 December 2026, 20:59:52 UTC: eight seconds before the window opens.
    let start = 1_796_590_792;
    let gw = scheduled(&main, &kids, start);
    assert_eq!(ips(KID, &gw, "sched.example"), [MAIN_IP], "outside its window: the main upstreams");
    wait_for("21:00", Duration::from_secs(60), || ips(KID, &gw, "sched.example") == [KIDS_IP]);
    drop(gw);
    // 7 December, 06:59:52: the window closes; the kids' answer cached
    // under their set is not the main set's.
    let gw = scheduled(&main, &kids, start + 10 * 3600);
    assert_eq!(ips(KID, &gw, "sched2.example"), [KIDS_IP]);
    wait_for("07:00", Duration::from_secs(60), || ips(KID, &gw, "sched2.example") == [MAIN_IP]);
}

#[test]
fn a_reload_that_renumbers_the_sets_never_serves_one_sets_cached_answer_to_another() {
    let main = Upstream::start(MAIN_IP.parse().unwrap());
    let kids = Upstream::start(KIDS_IP.parse().unwrap());
    let family = Upstream::start("192.0.2.9".parse().unwrap());
    let log = log_section("\toption batch_interval '50ms'\n");
    let gw = Gateway::start(&config(&[&main], &format!("{}{log}", sections(&kids, ""))));
    // Cached as set 1's answer: the kids' set.
    assert_eq!(ips(KID, &gw, "video.example"), [KIDS_IP]);
    // A group with other upstreams, put first, takes number 1; the kids'
    // set is number 2 now.
    let guests = format!(
        "config group 'guests'\n\tlist upstream '{}'\n\
         config client\n\toption name 'guest'\n\tlist match '{PARENT}'\n\tlist group 'guests'\n",
        family.addr
    );
    let renumbered = format!("{guests}{}{log}", sections(&kids, ""));
    gw.reload(&config(&[&main], &renumbered));
    assert_eq!(ips(PARENT, &gw, "video.example"), ["192.0.2.9"], "the kids' cached answer, given to a guest");
    assert_eq!(ips(KID, &gw, "video.example"), [KIDS_IP]);
    assert_eq!(kids.asked("video.example"), 2);
    // A reload that leaves the sets alone keeps their entries.
    gw.reload(&config(&[&main], &format!("{renumbered}config blocklist\n\tlist domain 'ads.example'\n")));
    assert_eq!(ips(KID, &gw, "video.example"), [KIDS_IP]);
    assert_eq!(ips(PARENT, &gw, "video.example"), ["192.0.2.9"]);
    assert_eq!((kids.asked("video.example"), family.asked("video.example")), (2, 1));
}
