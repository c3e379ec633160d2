//! Config errors, the CLI contract, reloads and stopping, against the real binary.
#![allow(clippy::unwrap_used)]

mod common;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use common::*;
use simple_dns::RCODE;

#[test]
fn check_config_reports_file_and_line() {
    let dir = TempDir::new();
    let good =
        dir.file("good.conf", "config hydradns 'main'\n\tlist listen '127.0.0.1:5353'\n\toption frobnicate 'x'\n");
    let (code, out, err) = cli(&["check-config", "-c", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": ok ("), "{out}");
    assert!(err.contains(&format!("{}:3: unknown option 'frobnicate'", good.display())), "{err}");
    for (text, line) in [
        ("config hydradns\n\toption cache_size 'many'\n", 2),
        ("config hydradns\n\n\n\toption block_mode 'sometimes'\n", 4),
        ("config hydradns\n\toption upstream_timeout '1 fortnight'\n", 2),
        ("config hydradns\n\tlist upstream 'dns.example'\n", 2),
        ("option cache_size '1'\n", 1),
        ("config hydradns\n\toption cache_size 'unterminated\n", 2),
    ] {
        let bad = dir.file("bad.conf", text);
        let (code, _, err) = cli(&["check-config", "-c", bad.to_str().unwrap()]);
        assert_eq!(code, 2, "{text}");
        assert!(err.starts_with(&format!("{}:{line}: ", bad.display())), "{text} -> {err}");
    }
    let (code, _, err) = cli(&["check-config", "-c", "/nonexistent/hydradns.conf"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/hydradns.conf: cannot read"), "{err}");
}

/// The init script evals this: it must stay plain `name=value` lines.
#[test]
fn check_config_shell_output_for_the_init_script() {
    let dir = TempDir::new();
    let conf = dir.file(
        "hydradns",
        "config hydradns 'main'\n\toption enabled '0'\n\toption dnsmasq_mode 'upstream'\n\tlist listen '127.0.0.1:5300'\n",
    );
    let (code, out, err) = cli(&["check-config", "--shell", "-c", conf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "hydradns_enabled=0",
            "hydradns_dnsmasq_mode=upstream",
            "hydradns_dnsmasq_server=127.0.0.1#5300",
            "hydradns_dnsmasq_port=5354"
        ]
    );
    assert!(lines[4].starts_with("hydradns_restart_key=") && lines[4].len() == "hydradns_restart_key=".len() + 16);
}

#[test]
fn run_refuses_a_broken_config() {
    let dir = TempDir::new();
    let bad = dir.file("bad.conf", "config hydradns\n\toption max_ttl '-1'\n");
    let (code, _, err) = cli(&["run", "--allow-root", "--log", "stderr", "-c", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{}:2: option 'max_ttl'", bad.display())), "{err}");
}

#[test]
fn run_refuses_root_unless_allowed() {
    let dir = TempDir::new();
    let conf = dir.file("ok.conf", "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n");
    let root = is_root();
    let bin = hydradns();
    // Root here (as in CI), or root of a user namespace of our own.
    let mut cmd = std::process::Command::new(if root { bin.get_program() } else { "unshare".as_ref() });
    if !root {
        cmd.arg("-r").arg(bin.get_program());
    }
    cmd.args(bin.get_args()).args(["run", "--log", "stderr", "-c"]).arg(&conf);
    let mut child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("it kept running as root");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("refusing to run as root") && err.contains("--allow-root"), "{err}");
}

#[test]
fn version_and_usage() {
    let (code, out, _) = cli(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("hydradns {}", env!("CARGO_PKG_VERSION")));
    let (code, _, err) = cli(&["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("usage:"));
    let (code, _, _) = cli(&["check"]);
    assert_eq!(code, 2);
}

/// A client querying without pause while the lists are reloaded twice: every
/// query is answered, and the new lists take effect.
#[test]
fn sighup_swaps_lists_without_dropping_queries() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let list = dir.file("list.txt", "old.example\n");
    let base = config(&[&up], &format!("config blocklist\n\toption path '{}'\n", list.display()));
    let gw = Gateway::start(&base);
    assert_eq!(udp(gw.addr, "old.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(udp(gw.addr, "new.example", A).ips(), ["192.0.2.1"]);

    let stop = Arc::new(AtomicBool::new(false));
    let (answered, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let addr = gw.addr;
    let client = {
        let (stop, answered, failed) = (stop.clone(), answered.clone(), failed.clone());
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(20);
            let mut i = 0u32;
            while !stop.load(SeqCst) && Instant::now() < end {
                let name = format!("q{}.new.example", i % 50);
                let q = build_query(i as u16, &name, A, None);
                match udp_raw(addr, &q, Duration::from_secs(2)).map(Reply::parse) {
                    Some(r) if r.rcode == RCODE::NoError => answered.fetch_add(1, SeqCst),
                    _ => failed.fetch_add(1, SeqCst),
                };
                i += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&list, "new.example\n").unwrap();
    gw.reload(&base);
    assert_eq!(udp(gw.addr, "sub.new.example", A).ips(), ["0.0.0.0"], "new list in effect");
    assert_eq!(udp(gw.addr, "new.example", A).ips(), ["0.0.0.0"], "cached before the reload, blocked after it");
    assert_eq!(udp(gw.addr, "old.example", A).ips(), ["192.0.2.1"], "old list gone");
    // Reload with a bigger real list while the client keeps going.
    let big = format!(
        "config blocklist\n\toption path '{}'\nconfig blocklist\n\toption path '{}'\n",
        list.display(),
        shared("blocklists/hagezi-2026-08-15/domains__light.txt").display()
    );
    gw.reload(&config(&[&up], &big));
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, SeqCst);
    client.join().unwrap();
    assert_eq!(failed.load(SeqCst), 0, "no query failed across reloads");
    assert!(answered.load(SeqCst) > 50, "the client kept querying ({})", answered.load(SeqCst));
    assert_eq!(udp(gw.addr, "000free.us", A).ips(), ["0.0.0.0"]);
}

#[test]
fn broken_config_on_reload_keeps_the_running_one() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "config blocklist\n\tlist domain 'blocked.example'\n"));
    std::fs::write(&gw.config, "config hydradns\n\toption cache_size 'lots'\n").unwrap();
    gw.signal("HUP");
    let needle = format!("{}:2: option 'cache_size'", gw.config.display());
    assert!(gw.wait_log(&needle, Duration::from_secs(5)), "{}", gw.log());
    assert!(gw.log().contains("reload failed, still running the previous config"));
    assert_eq!(udp(gw.addr, "blocked.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(udp(gw.addr, "other.example", A).ips(), ["192.0.2.1"]);
}

#[test]
fn sigterm_stops_cleanly_with_final_stats() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    udp(gw.addr, "a.example", A);
    let log = gw.log.clone();
    let status = gw.stop();
    assert!(status.success(), "{status:?}");
    let log = log.lock().unwrap();
    assert!(log.contains("stopping"));
    assert!(log.contains("udp_queries=1 "), "{log}");
}

#[test]
fn unreadable_list_is_logged_and_the_rest_loads() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "config blocklist\n\toption name 'gone'\n\toption path '/nonexistent/list.txt'\n\tlist domain 'still.example'\n",
    ));
    assert!(gw.log().contains("/nonexistent/list.txt: No such file"), "{}", gw.log());
    assert_eq!(udp(gw.addr, "still.example", A).ips(), ["0.0.0.0"]);
}
