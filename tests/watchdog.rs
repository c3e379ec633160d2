//! The watchdog (`hydradns watchdog`) against the real daemon: it leaves an
//! idle daemon asleep, fails DNS open (runs the init script's `unfiltered`)
//! when the daemon is hung under traffic or gone, and back (`filtered`)
//! when it answers again. The hook here is a script that writes down what
//! it was asked; on OpenWrt it is the init script (tests/openwrt/rig/net.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::Duration;

use common::*;

/// A watchdog watching `gw` every 200 ms, its hook writing to `hook.log`.
struct Watchdog {
    _child: KillOnDrop,
    calls: PathBuf,
    state: PathBuf,
    log: PathBuf,
}

impl Watchdog {
    fn start(gw: &Gateway, extra: &str) -> Watchdog {
        let dir = &gw.dir;
        let calls = dir.0.join("hook.log");
        let hook = dir.file("hook.sh", &format!("#!/bin/sh\necho \"$@\" >> '{}'\n", calls.display()));
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // The daemon's config names port 0; the watchdog's names the port it got.
        let conf = dir.file(
            "watchdog.conf",
            &format!(
                "config hydradns 'main'\n\tlist listen '{}'\n\toption control_socket '{}'\n{extra}",
                gw.addr,
                gw.control_socket().display()
            ),
        );
        let state = dir.0.join("unfiltered");
        let log = dir.0.join("watchdog.log");
        let child = hydradns()
            .args(["watchdog", "-c", conf.to_str().unwrap(), "--interval", "200ms", "--log", "stderr"])
            .args(["--hook", hook.to_str().unwrap(), "--state", state.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let dog = Watchdog { _child: KillOnDrop(child), calls, state, log };
        // Running (its first line), not merely started.
        wait_for("the watchdog", Duration::from_secs(30), || dog.log().contains("watchdog: watching"));
        dog
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn calls(&self) -> String {
        std::fs::read_to_string(&self.calls).unwrap_or_default()
    }
}

/// Queries that wait in the daemon's socket: what a client does while no
/// answer comes.
fn knock(gw: &Gateway, n: u16) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..n {
        s.send_to(&build_query(i, "knock.example", A, None), gw.addr).unwrap();
    }
}

#[test]
fn the_watchdog_does_not_wake_an_idle_daemon() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption stats_interval '0'\nconfig querylog 'querylog'\n\toption enabled '0'\n",
    ));
    let dog = Watchdog::start(&gw, "");
    // Settled: a whole second without a wake-up (bounded; the 5 s below
    // are what is judged).
    wait_for("a quiet second", Duration::from_secs(60), || {
        let before = wake_ups(gw.pid());
        std::thread::sleep(Duration::from_secs(1));
        wake_ups(gw.pid()) == before
    });
    let before = wake_ups(gw.pid());
    // 25 of the watchdog's ticks.
    std::thread::sleep(Duration::from_secs(5));
    let woken = wake_ups(gw.pid()) - before;
    assert!(woken <= 2, "{woken} context switches of the daemon in 5 idle seconds with the watchdog on");
    assert_eq!(dog.calls(), "", "nothing to do");
}

#[test]
fn a_hung_daemon_fails_dns_open_and_back() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let dog = Watchdog::start(&gw, "");
    gw.signal("STOP");
    // Idle and hung: nobody asks, nothing to do yet (five of its ticks, or
    // fewer on a busy machine: what this shows then is less, never wrong).
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(dog.calls(), "");
    knock(&gw, 3);
    wait_for("unfiltered", Duration::from_secs(20), || dog.calls() == "unfiltered\n");
    let state = std::fs::read_to_string(&dog.state).unwrap();
    assert!(state.contains("does not answer on 127.0.0.1:"), "{state}");
    gw.signal("CONT");
    wait_for("filtered", Duration::from_secs(20), || dog.calls() == "unfiltered\nfiltered\n");
    assert!(!dog.state.exists(), "the state file goes when DNS is filtered again");
    assert_eq!(udp(gw.addr, "after.example", A).ips(), ["192.0.2.1"]);
}

#[test]
fn a_daemon_that_is_gone_fails_dns_open_unless_told_not_to() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    let open = Watchdog::start(&gw, "");
    // A second one, with fail_open 0.
    let other = Gateway::start(&config(&[&up], ""));
    let closed = Watchdog::start(&other, "\toption fail_open '0'\n");
    let addr = gw.addr;
    let (status, _dir) = gw.stop_keeping_dir();
    assert!(status.success());
    let _other_dir = other.kill_keeping_dir();
    // Another program takes the port (and never answers): not the daemon.
    let _squatter = UdpSocket::bind(addr).unwrap();
    wait_for("unfiltered", Duration::from_secs(20), || open.calls() == "unfiltered\n");
    let state = std::fs::read_to_string(&open.state).unwrap();
    assert!(state.contains(&format!("it does not listen on {addr}")), "{state}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(closed.calls(), "", "fail_open 0 switches nothing");
    assert!(!closed.state.exists());
}

/// Issue 58: a LAN device flooding the port fills the daemon's receive
/// queue, and the watchdog's probe is lost in it as in a hung daemon's.
/// A daemon that keeps reading is overloaded, not hung: failing DNS open
/// would take the filter away from the whole network for one device's
/// flood. Four senders of names never asked before, for 8 s (bounded in
/// time); the daemon, a debug build, cannot keep up with them.
#[test]
fn a_flood_the_daemon_cannot_keep_up_with_does_not_fail_dns_open() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption stats_interval '0'\nconfig querylog 'querylog'\n\toption enabled '0'\n",
    ));
    let dog = Watchdog::start(&gw, "");
    let end = std::time::Instant::now() + Duration::from_secs(8);
    let floods: Vec<_> = (0..4u16)
        .map(|t| {
            let addr = gw.addr;
            std::thread::spawn(move || {
                let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                let mut i: u32 = 0;
                while std::time::Instant::now() < end {
                    let q = build_query(i as u16, &format!("n{i}.f{t}.flood.example"), A, None);
                    // A full queue on either side is the point: ignore it.
                    let _ = s.send_to(&q, addr);
                    i = i.wrapping_add(1);
                }
                i
            })
        })
        .collect();
    let sent: u32 = floods.into_iter().map(|f| f.join().unwrap()).sum();
    let log = dog.log();
    assert_eq!(dog.calls(), "", "failed open under a flood of {sent} queries:\n{log}");
    // Without a lost probe the test would prove nothing.
    assert!(
        log.contains("overloaded, not hung"),
        "the flood ({sent} queries) never hid the probe; the watchdog said:\n{log}"
    );
    assert!(!dog.state.exists());
    // The flood's backlog drains in a moment.
    wait_for("an answer after the flood", Duration::from_secs(10), || {
        udp_raw(gw.addr, &build_query(7, "after.example", A, None), Duration::from_secs(1))
            .is_some_and(|raw| Reply::parse(raw).ips() == ["192.0.2.1"])
    });
    assert_eq!(dog.calls(), "");
}
