//! Fault injection against the real binary: upstreams that are slow, send
//! junk or flood forged replies; a query-log filesystem that is read-only,
//! then full; a kill in the middle of saving a downloaded list. Each test
//! shows DNS keeps answering and that nothing promised is lost: every query
//! is answered, every log entry is written or counted, the saved list is
//! always a whole one.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/http.rs"]
mod http;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use common::*;
use http::{HttpServer, Route, list_body};
use simple_dns::RCODE;

/// Replies from upstreams that did not match a query we sent.
fn mismatched(gw: &Gateway) -> u64 {
    gw.report().upstreams.iter().map(|u| u.mismatched).sum()
}

fn wait_for(what: impl Fn() -> bool, secs: u64) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if what() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn slow_upstream_answers_within_the_timeout_and_fails_over_beyond_it() {
    let slow = Upstream::start("192.0.2.1".parse().unwrap());
    let other = Upstream::start("192.0.2.2".parse().unwrap());
    // A 600 ms answer against a 5 s timeout: slow, with room to spare.
    slow.behaviour.delay_ms.store(600, SeqCst);
    let gw = Gateway::start(&config(
        &[&slow, &other],
        "\toption upstream_timeout '5s'\nconfig blocklist\n\tlist domain 'ads.example'\n",
    ));
    assert_eq!(udp(gw.addr, "a.example", A).ips(), ["192.0.2.1"], "slow but within the timeout");
    // While a miss waits on the slow upstream (it holds the answer until
    // told), blocked and cached names are answered: they never wait on the network.
    slow.behaviour.delay_ms.store(0, SeqCst);
    slow.behaviour.hold.store(true, SeqCst);
    let addr = gw.addr;
    let pending = std::thread::spawn(move || udp(addr, "b.example", A));
    assert!(wait_for(|| slow.seen("b.example") == 1, 10), "the miss reached the upstream");
    assert_eq!(udp(gw.addr, "ads.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(udp(gw.addr, "a.example", A).ips(), ["192.0.2.1"]);
    assert!(!pending.is_finished(), "the miss was still waiting");
    slow.behaviour.hold.store(false, SeqCst);
    assert_eq!(pending.join().unwrap().ips(), ["192.0.2.1"]);
    // Slower than upstream_timeout (silent): the next upstream answers.
    slow.behaviour.silent.store(true, SeqCst);
    assert_eq!(udp(gw.addr, "c.example", A).ips(), ["192.0.2.2"]);
    assert_eq!(other.seen("c.example"), 1);
}

#[test]
fn junk_from_an_upstream_is_never_an_answer() {
    let junk = Upstream::start("192.0.2.1".parse().unwrap());
    let good = Upstream::start("192.0.2.2".parse().unwrap());
    junk.behaviour.garbage.store(true, SeqCst);
    let gw = Gateway::start(&config(&[&junk], ""));
    // Only junk: SERVFAIL after the timeout, not a garbled answer.
    assert_eq!(udp(gw.addr, "j.example", A).rcode, RCODE::ServerFailure);
    assert!(mismatched(&gw) >= 1);
    drop(gw);
    // Junk first, a good upstream next: the good answer.
    let gw = Gateway::start(&config(&[&junk, &good], ""));
    assert_eq!(udp(gw.addr, "k.example", A).ips(), ["192.0.2.2"]);
    // And over TCP (the fake sends junk on UDP only; TCP goes to the good one).
    assert_eq!(tcp(gw.addr, "k.example", A).ips(), ["192.0.2.2"]);
}

#[test]
fn a_flood_of_forged_replies_does_not_win_or_stall() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], ""));
    udp(gw.addr, "cached.example", A);
    // 2,000 replies with wrong IDs (and 6.6.6.6) race the real one, from the
    // upstream's own address and port, as an off-path attacker would try.
    let addr = gw.addr;
    let flooded =
        std::thread::spawn(move || (0..5).map(|i| udp(addr, &format!("flood.{i}.example"), A)).collect::<Vec<_>>());
    for _ in 0..50 {
        assert_eq!(udp(gw.addr, "cached.example", A).ips(), ["192.0.2.1"], "answers go on during the flood");
    }
    for r in flooded.join().unwrap() {
        // The flood can overrun the socket's receive buffer and take the real
        // reply with it: then SERVFAIL, and the client asks again. Never 6.6.6.6.
        match r.rcode {
            RCODE::NoError => assert_eq!(r.ips(), ["192.0.2.1"], "the real answer, never a forged one"),
            rcode => assert_eq!(rcode, RCODE::ServerFailure),
        }
    }
    assert!(mismatched(&gw) >= 100, "forged replies seen and dropped: {}", mismatched(&gw));
    // Once the flood is over, the same upstream serves again.
    assert_eq!(udp(gw.addr, "after.example", A).ips(), ["192.0.2.1"]);
}

/// Runs the gateway in a mount namespace of its own, with a 1 MiB tmpfs on
/// `live` (the query log's directory) holding a copy of `seed_db`, mounted
/// read-only. Creating files in `ctl` flips it: `rw` remounts it writable,
/// `fill` fills it up, `free` deletes the filler; each step answers with an
/// `is-…` file. Works as root (CI) and, through a user namespace, as anyone.
fn gateway_on_a_faulty_disk(dir: TempDir, config: PathBuf, live: &Path, seed_db: &Path) -> Gateway {
    let ctl = dir.0.clone();
    let script = r#"
        live=$1; ctl=$2; seed=$3; shift 3
        mount -t tmpfs -o size=1m hydradns-test "$live" || exit 97
        cp "$seed" "$live/queries.db" && mount -o remount,ro "$live" || exit 98
        step() { # wait for $1 (at most 60 s), do $2, answer with is-$1
            i=0; while [ ! -e "$ctl/$1" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
            [ -e "$ctl/$1" ] && eval "$2" && touch "$ctl/is-$1"
        }
        (
            step rw 'mount -o remount,rw "$live"'
            step fill 'dd if=/dev/zero of="$live/filler" bs=4k 2>/dev/null; true'
            step free 'rm -f "$live/filler"'
        ) &
        exec "$@"
    "#;
    let bin = hydradns();
    let mut cmd = Command::new("unshare");
    cmd.arg(if is_root() { "-m" } else { "-rm" }).args(["sh", "-c", script, "sh"]);
    cmd.arg(live).arg(&ctl).arg(seed_db).arg(bin.get_program()).args(bin.get_args());
    Gateway::start_command(dir, config, cmd)
}

fn flip(gw: &Gateway, step: &str) {
    std::fs::write(gw.dir.0.join(step), b"").unwrap();
    let done = gw.dir.0.join(format!("is-{step}"));
    assert!(wait_for(|| done.exists(), 60), "the disk did not go {step}:\n{}", gw.log());
}

/// Sends `n` queries for new names; every one must be answered.
fn queries(gw: &Gateway, tag: &str, n: usize) {
    for i in 0..n {
        assert_eq!(udp(gw.addr, &format!("{tag}{i}.example"), A).rcode, RCODE::NoError, "{tag}{i}");
    }
}

#[test]
fn read_only_then_full_query_log_disk_keeps_dns_answering_and_counts_every_entry() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let log = "config querylog 'querylog'\n\toption path '@DIR@/live/queries.db'\n\
               \toption flash_path '@DIR@/flash/queries.db'\n\toption batch_interval '20ms'\n\toption flush_interval '0'\n";
    // A first run makes a real database to start from.
    let gw = Gateway::start(&config(&[&up], log));
    queries(&gw, "seed", 5);
    assert!(wait_for(|| gw.report().querylog.written == 5, 60));
    let (_, dir) = gw.stop_keeping_dir();
    let seed = dir.0.join("seed.db");
    std::fs::rename(dir.0.join("live/queries.db"), &seed).unwrap();
    let _ = std::fs::remove_file(dir.0.join("live/queries.db-journal"));
    let config_path = dir.file("faulty.conf", &Gateway::localize(&config(&[&up], log), &dir.0));
    let live = dir.0.join("live");
    let gw = gateway_on_a_faulty_disk(dir, config_path, &live, &seed);

    // Read-only: every entry is lost, counted and reported; DNS answers.
    queries(&gw, "ro", 30);
    assert!(wait_for(|| gw.report().querylog.lost == 30, 60), "{:?}\n{}", gw.report().querylog, gw.log());
    assert!(gw.log().contains("query log: cannot open"), "the reason is logged: {}", gw.log());

    // Writable again: the writer reopens the database and logs again.
    flip(&gw, "rw");
    assert!(
        wait_for(
            || {
                queries(&gw, "rw", 1);
                gw.report().querylog.written > 0
            },
            60
        ),
        "{}",
        gw.log()
    );

    // Full: DNS answers; entries that do not fit are counted as lost.
    flip(&gw, "fill");
    queries(&gw, "full", 3000);
    // Freed: logging resumes.
    flip(&gw, "free");
    let written = gw.report().querylog.written;
    queries(&gw, "freed", 20);
    assert!(wait_for(|| gw.report().querylog.written >= written + 20, 60), "{}", gw.log());

    // Nothing promised is lost: each answered query was written, or dropped
    // or lost and counted, and the full disk cost something.
    let r = gw.report();
    let accounted = r.querylog.written + r.querylog.dropped + r.querylog.lost;
    assert!(
        wait_for(
            || {
                let r = gw.report();
                r.querylog.written + r.querylog.dropped + r.querylog.lost == r.queries
            },
            60
        ),
        "queries {} vs written {} + dropped {} + lost {} = {accounted}",
        r.queries,
        r.querylog.written,
        r.querylog.dropped,
        r.querylog.lost
    );
    assert!(r.querylog.lost > 30, "the full disk cost entries: {:?}", r.querylog);
}

#[test]
fn sigkill_during_a_list_save_keeps_the_saved_copy_whole() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start();
    let v1 = list_body(2000, "v1.example");
    web.set("/l", Route::List { body: v1.clone(), etag: "\"v1\"".into() });
    let text = config(
        &[&up],
        &format!(
            "\toption list_dir '@DIR@/lists'\n\toption download_timeout '60s'\n\
             config blocklist\n\toption name 'remote'\n\toption url '{}'\n",
            web.url("/l")
        ),
    );
    let gw = Gateway::start(&text);
    assert!(wait_for(|| udp(gw.addr, "h7.v1.example", A).ips() == ["0.0.0.0"], 60), "{}", gw.log());
    let lists = gw.dir.0.join("lists");
    let saved = std::fs::read_dir(&lists)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "list"))
        .unwrap();
    assert_eq!(std::fs::read(&saved).unwrap(), v1);

    // The next version arrives half-way, then the host stalls; the gateway
    // is killed while the download is being written.
    web.set("/l", Route::Stall(list_body(200_000, "v2.example")));
    let mut update = hydradns().args(["update", "-c", gw.config.to_str().unwrap()]).spawn().unwrap();
    let mut tmp = saved.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    assert!(wait_for(|| std::fs::metadata(&tmp).is_ok_and(|m| m.len() > 0), 60), "no save in progress");
    let dir = gw.kill_keeping_dir();
    let _ = update.kill();
    let _ = update.wait();
    assert_eq!(std::fs::read(&saved).unwrap(), v1, "the saved copy is the last whole one");

    // Restarted with the list host gone: it serves that copy, and the
    // half-written one is not read as a list.
    web.set("/l", Route::Status(404));
    let config_path = dir.0.join("hydradns.conf");
    let gw = Gateway::start_with(dir, config_path);
    assert_eq!(udp(gw.addr, "h7.v1.example", A).ips(), ["0.0.0.0"]);
    assert_eq!(udp(gw.addr, "h0.v2.example", A).ips(), ["192.0.2.1"], "nothing from the partial download");
}
