//! The services catalogue (`option services_url`) against hostile
//! downloads, through the real binary (issue 58, item 3): a catalogue over
//! a cap (80,000 rules in one service, 64 MiB, 1,001 services) is refused
//! with an error, quickly, while the gateway answers throughout; the last
//! good catalogue stays in force, through a restart too; and a saved copy
//! over a cap (planted, or kept from a version without the caps) gives way
//! to the built-in catalogue without holding up the start.
//!
//! Bounds marked "issue 58" are the issue's requirements (`update` within
//! 5 s, `status --json` within 2 s, a restart answering within 5 s): each
//! is a wait that fails past it, not a measure of speed. The quadratic
//! parser took 5.6 s for the first catalogue in release builds (minutes in
//! this debug build) and hours for the second.
//!
//! An `update` is the lists thread's work, and that thread runs at nice
//! 15: on a machine whose cores are busy with other work it gets a few per
//! cent of one, and the same update takes many times longer by the clock.
//! So `update`'s 5 s is held against the CPU time the gateway spent on it
//! (measured here at 0.7 s at most, on the debug build), which no neighbour
//! changes, with a minute's wait by the clock for an update that hangs.
//! `status` and the restart are served at normal priority: their bounds
//! are by the clock (measured: 20 ms and well under a second).

#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/http.rs"]
mod http;

use std::io::Read;
use std::net::{SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use common::*;

/// Queries from this loopback address play the child's device; others are the parents'.
const KID: &str = "127.0.0.2";
const PARENT: &str = "127.0.0.4";

/// `update` answers within this (issue 58).
const UPDATE_BOUND: Duration = Duration::from_secs(5);
/// `status --json` answers within this (issue 58).
const STATUS_BOUND: Duration = Duration::from_secs(2);
/// A restarted gateway answers DNS within this of being started (issue 58).
const RESTART_BOUND: Duration = Duration::from_secs(5);
/// Commands the issue sets no bound for (`services`, `check-config`, which
/// parse the catalogue): they finish, that is all. Also how long an
/// `update` may take by the clock (see the module notes).
const LOOSE_BOUND: Duration = Duration::from_secs(120);

/// The A records of `name` asked from `source`; `None` without an answer in 2 s.
fn ask(source: &str, server: SocketAddr, name: &str) -> Option<Vec<String>> {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.send_to(&build_query(7, name, A, Some(1232)), server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).ok()?;
    Some(Reply::parse(buf[..n].to_vec()).ips())
}

fn blocked(source: &str, server: SocketAddr, name: &str) -> bool {
    ask(source, server, name).unwrap_or_else(|| panic!("no answer for {name}")) == ["0.0.0.0"]
}

/// Runs the binary with `args`; fails the test if it has not finished within `bound`.
fn cli_within(args: &[&str], bound: Duration) -> (i32, String, String) {
    let started = Instant::now();
    let mut child = hydradns().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Read as it comes: a full pipe would stall the child and look like slowness.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hydradns {args:?} did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status.code().unwrap_or(-1), out.join().unwrap(), err.join().unwrap())
}

/// `update` as [`cli_within`] with the loose bound by the clock, and
/// fails if the gateway `gw` spent more than [`UPDATE_BOUND`] of CPU time
/// on it (issue 58; see the module notes).
fn update_within_bound(gw: &Gateway, args: &[&str]) -> (i32, String, String) {
    let before = gw.cpu_seconds();
    let done = cli_within(args, LOOSE_BOUND);
    let spent = gw.cpu_seconds() - before;
    assert!(
        spent < UPDATE_BOUND.as_secs_f64(),
        "hydradns {args:?} cost the gateway {spent:.2} s of CPU (issue 58's bound)"
    );
    done
}

/// The `services` row of `status --json`, as text.
fn services_row(status_json: &str) -> &str {
    let start = status_json.find(r#""name":"services","kind":"services""#).unwrap_or_else(|| panic!("{status_json}"));
    let row = &status_json[start..];
    &row[..row[1..].find(r#"{"name":"#).map_or(row.len(), |e| e + 1)]
}

/// A catalogue of `services` services of `rules` rules each, ids `{prefix}{i}`.
fn catalogue(prefix: &str, services: usize, rules: usize) -> Vec<u8> {
    let mut s = String::from(r#"{"blocked_services":["#);
    for i in 0..services {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(r#"{{"id":"{prefix}{i}","name":"Hostile {i}","group":"video","rules":["#));
        for r in 0..rules {
            if r > 0 {
                s.push(',');
            }
            s.push_str(&format!(r#""||r{r}.h{i}.example^""#));
        }
        s.push_str("]}");
    }
    s.push_str("]}");
    s.into_bytes()
}

/// The good catalogue: `exampletube` (2 domains), then as many services
/// of 5,000 short rules as fit under the 4 MiB cap, each rule a domain of
/// its own. A parser quadratic in a service's rules takes long enough on it
/// to miss the restart bound, caps or not. Its bytes and domains.
fn good_catalogue() -> (Vec<u8>, u64) {
    let mut s = br#"{"blocked_services":[
        {"id":"exampletube","name":"ExampleTube","rules":["||tube.example^","||tubecdn.example^"],"group":"video"}"#
        .to_vec();
    let mut domains = 2;
    for i in 0.. {
        let rules: Vec<String> = (0..5000).map(|r| format!(r#""||{r}.f{i}^""#)).collect();
        let service = format!(r#",{{"id":"filler{i}","name":"Filler {i}","rules":[{}]}}"#, rules.join(","));
        if s.len() + service.len() + 2 > 4 << 20 {
            break;
        }
        s.extend_from_slice(service.as_bytes());
        domains += 5000;
    }
    s.extend_from_slice(b"]}");
    (s, domains)
}

/// One service whose rules fill just under 64 MiB (`max_list_size` as
/// shipped, which let the quadratic parser have it all).
fn catalogue_of_64_mib() -> Vec<u8> {
    let end = b"]}]}";
    let mut s = br#"{"blocked_services":[{"id":"hostile_big","name":"Big","rules":["||r0.big.example^""#.to_vec();
    let mut r = 1u64;
    while s.len() + 40 + end.len() < 64 << 20 {
        s.extend_from_slice(format!(r#","||r{r}.big.example^""#).as_bytes());
        r += 1;
    }
    s.extend_from_slice(end);
    s
}

/// Asks a name the upstream answers, every 20 ms, from another thread;
/// counts the queries that got no answer within 2 s.
struct Prober {
    stop: Arc<AtomicBool>,
    asked: Arc<AtomicU64>,
    missed: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Prober {
    fn start(server: SocketAddr) -> Prober {
        let (stop, asked, missed) = (Arc::new(AtomicBool::new(false)), Arc::default(), Arc::default());
        let (s, a, m): (Arc<AtomicBool>, Arc<AtomicU64>, Arc<AtomicU64>) =
            (stop.clone(), Arc::clone(&asked), Arc::clone(&missed));
        let thread = std::thread::spawn(move || {
            let mut i = 0u64;
            while !s.load(SeqCst) {
                i += 1;
                if ask(PARENT, server, &format!("probe{i}.example")) != Some(vec!["192.0.2.1".to_string()]) {
                    m.fetch_add(1, SeqCst);
                }
                a.fetch_add(1, SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Prober { stop, asked, missed, thread: Some(thread) }
    }

    /// Stops; (asked, missed).
    fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, SeqCst);
        self.thread.take().unwrap().join().unwrap();
        (self.asked.load(SeqCst), self.missed.load(SeqCst))
    }
}

/// Peak resident memory of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Starts the gateway on `dir`'s config; fails past the restart bound (issue 58).
fn start_within_bound(dir: TempDir, config: std::path::PathBuf) -> Gateway {
    let started = Instant::now();
    let gw = Gateway::start_with(dir, config);
    while ask(PARENT, gw.addr, "after-restart.example").is_none() {
        assert!(started.elapsed() < RESTART_BOUND, "no answer within {RESTART_BOUND:?} of the start:\n{}", gw.log());
    }
    assert!(started.elapsed() < RESTART_BOUND, "answered only after {:?}:\n{}", started.elapsed(), gw.log());
    gw
}

#[test]
fn a_catalogue_over_a_cap_is_refused_and_the_last_good_one_stays_in_force() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = http::HttpServer::start();
    let (good, good_domains) = good_catalogue();
    let in_use = format!(r#""entries":{good_domains}"#);
    web.set("/services.json", http::Route::List { body: good.clone(), etag: "\"good\"".into() });
    // max_list_size is left as shipped (64 MiB): the catalogue's own cap must cut it.
    let text = config(
        &[&up],
        &format!(
            "\toption list_dir '@DIR@/lists'\n\toption download_timeout '20s'\n\toption services_url '{}'\n\
             config client\n\toption name 'kids-tablet'\n\tlist match '{KID}'\n\tlist group 'kids'\n\
             config group 'kids'\n\tlist service 'exampletube'\n\tlist service 'tiktok'\n",
            web.url("/services.json")
        ),
    );
    let gw = Gateway::start(&text);
    let cfg = gw.config.to_str().unwrap().to_string();
    wait_for("the first download", LOOSE_BOUND, || blocked(KID, gw.addr, "www.tube.example"));
    assert!(!blocked(PARENT, gw.addr, "www.tube.example"));

    let hostile: [(&str, Vec<u8>, &str); 3] = [
        ("80,000 rules in one service", catalogue("hostile_rules", 1, 80_000), "more than 5000 rules"),
        ("64 MiB", catalogue_of_64_mib(), "larger than 4 MiB"),
        ("1,001 services", catalogue("hostile_many", 1001, 1), "more than 1000 services"),
    ];
    for (round, (what, body, needle)) in hostile.into_iter().enumerate() {
        let size = body.len();
        web.set("/services.json", http::Route::List { body, etag: format!("\"hostile{round}\"") });
        let prober = Prober::start(gw.addr);
        let (code, out, err) = update_within_bound(&gw, &["update", "-c", &cfg, "--json"]);
        assert_eq!(code, 1, "{what}: a failed download: {out} {err}");
        assert!(out.contains(r#""name":"services","status":"failed""#) && out.contains(needle), "{what}: {out} {err}");
        assert!(out.contains(&in_use), "{what}: the good copy is the one in use: {out}");

        let (_, out, err) = cli_within(&["status", "-c", &cfg, "--json"], STATUS_BOUND);
        let row = services_row(&out);
        assert!(row.contains(r#""last_error":""#) && row.contains(needle), "{what}: {row} {err}");
        assert!(row.contains(&in_use), "{what}: {row}");

        let (code, out, err) = cli_within(&["services", "-c", &cfg, "--json"], LOOSE_BOUND);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(r#""id":"exampletube""#) && !out.contains("hostile"), "{what}: {out}");
        assert!(blocked(KID, gw.addr, "img.tubecdn.example"), "{what}: the last good catalogue still blocks");
        assert!(!blocked(KID, gw.addr, "r1.h0.example") && !blocked(KID, gw.addr, "r1.big.example"), "{what}");
        let (asked, missed) = prober.finish();
        assert!(asked > 0 && missed == 0, "{what}: {missed} of {asked} queries unanswered during the refusal");
        assert!(gw.log().contains(needle), "{what}: the log says why:\n{}", gw.log());
        if what == "64 MiB" && std::env::var_os("HYDRADNS_TEST_RUNNER").is_none() {
            // Cut off at 4 MiB as it arrived: never the whole file in memory.
            let peak = peak_rss_kib(gw.pid());
            assert!(peak < size as u64 >> 10, "{what}: peak resident {peak} KiB");
        }
    }
    assert!(gw.log().contains("list 'services': download failed ("), "{}", gw.log());
    assert!(gw.log().contains(&format!("keeping the saved copy ({good_domains} entries)")), "{}", gw.log());

    // A restart reads the saved copy: still the good one, and soon answering.
    let (_, dir) = gw.stop_keeping_dir();
    let config_path = dir.0.join("hydradns.conf");
    let gw = start_within_bound(dir, config_path.clone());
    assert!(blocked(KID, gw.addr, "www.tube.example"), "after the restart:\n{}", gw.log());
    assert!(!blocked(KID, gw.addr, "tiktok.com"), "the downloaded catalogue, not the built-in one");
    let (code, out, _) = update_within_bound(&gw, &["update", "-c", &cfg, "--json"]);
    assert!(code == 1 && out.contains("more than 1000 services"), "{out}");
    assert!(blocked(KID, gw.addr, "www.tube.example"));

    // The good catalogue again: its error is cleared, nothing is rewritten.
    web.set("/services.json", http::Route::List { body: good, etag: "\"good2\"".into() });
    let (code, out, err) = update_within_bound(&gw, &["update", "-c", &cfg, "--json"]);
    assert!(code == 0 && out.contains(r#""name":"services","status":"not-modified""#), "{out} {err}");

    // A saved copy over a cap (as a version without the caps kept it, or
    // as someone put it there) is refused at the start, without delaying
    // it, for the built-in catalogue, and every view says so.
    let (_, dir) = gw.stop_keeping_dir();
    let saved = std::fs::read_dir(dir.0.join("lists"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    std::fs::write(&saved, catalogue("hostile_saved", 1, 80_000)).unwrap();
    let gw = start_within_bound(dir, config_path);
    assert!(blocked(KID, gw.addr, "tiktok.com"), "the built-in catalogue is in force:\n{}", gw.log());
    assert!(!blocked(KID, gw.addr, "www.tube.example") && !blocked(KID, gw.addr, "r1.h0.example"));
    assert!(
        gw.log().contains("more than 5000 rules, the cap for a service; using the built-in catalogue"),
        "{}",
        gw.log()
    );
    let (_, out, _) = cli_within(&["status", "-c", &cfg, "--json"], STATUS_BOUND);
    let row = services_row(&out);
    assert!(row.contains("more than 5000 rules") && row.contains("the built-in catalogue is in use"), "{row}");
    let (_, out, err) = cli_within(&["services", "-c", &cfg, "--json"], LOOSE_BOUND);
    assert!(out.contains(r#""id":"tiktok""#) && !out.contains("hostile"), "{out}");
    assert!(err.contains("more than 5000 rules"), "{err}");
    let (_, _, err) = cli_within(&["check-config", "-c", &cfg], LOOSE_BOUND);
    assert!(err.contains("more than 5000 rules") && err.contains("(warning)"), "{err}");
}
