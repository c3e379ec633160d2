//! `hydradns pause` and `resume` through the real binary: blocked names
//! answered as unlisted and logged `paused` while it lasts, blocked again
//! the moment it ends (their answers cached meanwhile notwithstanding), kept
//! across a reload, local names untouched.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;

fn gateway(up: &Upstream) -> Gateway {
    Gateway::start(&config(
        &[up],
        &format!(
            "config blocklist\n\toption name 'ads'\n\tlist domain 'ads.example'\n\
             config record\n\toption name 'nas.ads.example'\n\tlist ip '192.168.1.10'\n{}",
            log_section("\toption batch_interval '50ms'\n")
        ),
    ))
}

fn pause(gw: &Gateway, args: &[&str]) -> String {
    let mut all = vec![args[0], "-c", cfg_path(gw)];
    all.extend_from_slice(&args[1..]);
    let (code, out, err) = cli(&all);
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn a_pause_lets_blocked_names_through_until_it_ends() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up);
    assert_eq!(udp(gw.addr, "t.ads.example", A).ips(), ["0.0.0.0"]);
    // A minute: what is checked during the pause takes a fraction of that,
    // a busy machine's few seconds included. A short pause replaces it
    // below to see one end on its own.
    let out = pause(&gw, &["pause", "60s"]);
    assert!(out.starts_with("blocking paused until "), "{out}");
    assert!(gw.report().paused_until > 0);
    // Answered as unlisted: upstream, then from the cache.
    assert_eq!(udp(gw.addr, "t.ads.example", A).ips(), ["192.0.2.1"]);
    assert_eq!(udp(gw.addr, "t.ads.example", A).ips(), ["192.0.2.1"]);
    assert_eq!(up.seen("t.ads.example"), 1);
    // Local names are not blocking: they stay.
    assert_eq!(udp(gw.addr, "nas.ads.example", A).ips(), ["192.168.1.10"]);
    wait_for("the log", Duration::from_secs(60), || log_rows(&gw, &["--domain", "t.ads.example"]).len() >= 3);
    let rows = log_rows(&gw, &["--domain", "t.ads.example"]);
    let outcomes: Vec<_> = rows.iter().map(|r| (r.outcome.as_str(), r.list.as_deref())).collect();
    assert_eq!(outcomes, [("paused", Some("ads")), ("paused", Some("ads")), ("blocked", Some("ads"))]);
    assert_eq!(gw.report().counters.paused, 2);
    // Over on its own: blocked again at once, the cached answer notwithstanding.
    pause(&gw, &["pause", "1s"]);
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(1100).saturating_sub(started.elapsed()));
    assert_eq!(udp(gw.addr, "t.ads.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(gw.report().paused_until, 0);
}

#[test]
fn resume_ends_a_pause_and_a_reload_keeps_one() {
    let up = Upstream::start("192.0.2.2".parse().unwrap());
    let gw = gateway(&up);
    let unix = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let before = unix();
    pause(&gw, &["pause"]);
    let until = gw.report().paused_until;
    let after = unix();
    // Set between `before` and `after` (whole seconds either side).
    assert!((before + 299..=after + 301).contains(&until), "the default is 5 minutes: {until} at {before}..{after}");
    gw.reload(&std::fs::read_to_string(&gw.config).unwrap());
    assert_eq!(gw.report().paused_until, until, "kept across SIGHUP");
    assert_eq!(udp(gw.addr, "r.ads.example", A).ips(), ["192.0.2.2"]);
    assert!(pause(&gw, &["resume"]).starts_with("blocking on"));
    assert_eq!(udp(gw.addr, "r.ads.example", A).ips(), ["0.0.0.0"]);
    assert!(gw.log().contains("blocking paused for 300 s") && gw.log().contains("blocking resumed"), "{}", gw.log());
    let (code, _, err) = cli(&["pause", "-c", cfg_path(&gw), "soon"]);
    assert_eq!(code, 2, "{err}");
}
