//! Exceptions with an end (`hydradns allow`, `block`, `exceptions`)
//! through the real binary: YouTube allowed for the kids' group answers
//! them and no other group, across a reload and a restart, and is blocked
//! again once its end has passed (its answers cached meanwhile
//! notwithstanding), also when the end passed while the gateway was down;
//! a timed block beats a permanent allowlist entry and a cached answer;
//! `--for 0` removes one; `exceptions --json`, `status`, `check` and the
//! query log show them; bad arguments and the cap refuse with nothing
//! changed; a bad file is ignored.
//!
//! Deadlines are generous (the suite runs with every core busy): what is
//! asserted is the order of events, read from the gateway's own ends.

#![allow(clippy::unwrap_used)]
// nanoserde's DeJson derive expands to code clippy would write with `?`.
#![allow(clippy::question_mark)]

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::*;

/// Queries from these loopback addresses play the devices.
const KID: &str = "127.0.0.2";
const TEEN: &str = "127.0.0.3";
const PARENT: &str = "127.0.0.4";
const GAMER: &str = "127.0.0.5";

/// The upstream's answer to every name.
const UP: &str = "192.0.2.1";
/// The block answer (block_mode null).
const BLOCKED: &str = "0.0.0.0";

fn ask(source: &str, server: SocketAddr, name: &str) -> Vec<String> {
    let s = UdpSocket::bind(format!("{source}:0")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.send_to(&build_query(7, name, A, Some(1232)), server).unwrap();
    let mut buf = [0u8; 1500];
    let n = s.recv(&mut buf).unwrap_or_else(|e| panic!("no answer for {name} from {source}: {e}"));
    Reply::parse(buf[..n].to_vec()).ips()
}

fn extra(leases: &std::path::Path) -> String {
    format!(
        "\toption leases_file '{}'
config group 'kids'
\tlist service 'youtube'
config group 'teens'
\tlist service 'youtube'
config client
\toption name 'kids-tablet'
\tlist match '{KID}'
\tlist group 'kids'
config client
\toption name 'teen-phone'
\tlist match '{TEEN}'
\tlist group 'teens'
config blocklist
\toption name 'ads'
\tlist domain 'games.example'
config allowlist
\toption name 'mine'
\tlist domain 'games.example'
{}",
        leases.display(),
        log_section("\toption batch_interval '50ms'\n")
    )
}

fn gateway(up: &Upstream, files: &TempDir) -> Gateway {
    let leases = files.file("dhcp.leases", &format!("1764720000 02:00:5e:10:00:05 {GAMER} gaming-pc *\n"));
    Gateway::start(&config(&[up], &extra(&leases)))
}

/// Runs `hydradns CMD -c CONFIG ARGS…`: (exit code, stdout, stderr).
fn run(gw: &Gateway, cmd: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec![cmd, "-c", cfg_path(gw)];
    all.extend_from_slice(args);
    cli(&all)
}

/// As [`run`], which must succeed: its stdout.
fn ok(gw: &Gateway, cmd: &str, args: &[&str]) -> String {
    let (code, out, err) = run(gw, cmd, args);
    assert_eq!(code, 0, "{cmd} {args:?}: {err}");
    out
}

/// `exceptions --json`, read by a reader of the test's own.
#[derive(nanoserde::DeJson)]
struct Listed {
    schema: u64,
    exceptions: Vec<Listing>,
}

#[derive(nanoserde::DeJson)]
struct Listing {
    action: String,
    group: Option<String>,
    client: Option<String>,
    service: Option<String>,
    name: Option<String>,
    ends: u64,
}

/// (action, group, client, service, name, ends) each.
type Row = (String, Option<String>, Option<String>, Option<String>, Option<String>, u64);

fn parse(out: &str) -> Vec<Row> {
    let r: Listed = nanoserde::DeJson::deserialize_json(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r.schema, 1);
    r.exceptions.into_iter().map(|e| (e.action, e.group, e.client, e.service, e.name, e.ends)).collect()
}

fn listed(gw: &Gateway) -> Vec<Row> {
    let out = ok(gw, "exceptions", &["--json"]);
    // Each member there, `null` included: the shape the API promises.
    for member in ["\"action\":", "\"group\":", "\"client\":", "\"service\":", "\"name\":", "\"ends\":"] {
        assert_eq!(out.matches(member).count(), out.matches("{\"action\"").count(), "{member} in {out}");
    }
    parse(&out)
}

fn unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// Waits (60 s at most) until the wall clock has passed `ends`.
fn wait_past(ends: u64) {
    wait_for("the exception's end", Duration::from_secs(60), || unix() >= ends);
}

/// Sets `--for` on the kids' YouTube exception; its end, checked to be
/// `secs` from when it was set (whole seconds either side).
fn allow_youtube(gw: &Gateway, secs: u64) -> u64 {
    let before = unix();
    let out = ok(gw, "allow", &["--group", "kids", "--service", "youtube", "--for", &format!("{secs}s")]);
    let after = unix();
    assert!(out.starts_with("allow service 'youtube' for group 'kids' until "), "{out}");
    let rows = listed(gw);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let ends = rows[0].5;
    assert!((before + secs..=after + secs + 1).contains(&ends), "{ends} set in {before}..={after}");
    ends
}

#[test]
fn an_allow_for_the_kids_holds_across_a_reload_and_a_restart_and_ends_on_time() {
    let up = Upstream::start(UP.parse().unwrap());
    let files = TempDir::new();
    let gw = gateway(&up, &files);
    assert_eq!(ask(KID, gw.addr, "www.youtube.com"), [BLOCKED]);
    assert_eq!(ask(TEEN, gw.addr, "www.youtube.com"), [BLOCKED]);

    // Ten minutes: everything checked while it lasts takes a fraction of
    // that, a busy machine's reload and restart included.
    let ends = allow_youtube(&gw, 600);
    assert_eq!(
        listed(&gw),
        [("allow".into(), Some("kids".into()), None, Some("youtube".into()), None, ends)],
        "exactly the issue's shape"
    );
    // Upstream, then from the cache; the service's other domains too.
    assert_eq!(ask(KID, gw.addr, "www.youtube.com"), [UP]);
    assert_eq!(ask(KID, gw.addr, "www.youtube.com"), [UP]);
    assert_eq!(ask(KID, gw.addr, "i.ytimg.com"), [UP]);
    assert_eq!(up.seen("www.youtube.com"), 1, "the second was a cache hit");
    // Not for another group's client, the cached answer notwithstanding.
    assert_eq!(ask(TEEN, gw.addr, "www.youtube.com"), [BLOCKED]);
    assert_eq!(ask(PARENT, gw.addr, "www.youtube.com"), [UP], "default never blocked it");
    // The log says which answers the exception made.
    wait_for("the log", Duration::from_secs(60), || {
        log_rows(&gw, &["--client", KID, "--domain", "www.youtube.com"]).len() >= 3
    });
    let rows = log_rows(&gw, &["--client", KID, "--domain", "www.youtube.com"]);
    let seen: Vec<_> = rows.iter().map(|r| (r.outcome.as_str(), r.list.as_deref())).collect();
    assert_eq!(
        seen,
        [("cached", Some("exception")), ("forwarded", Some("exception")), ("blocked", Some("service:youtube"))]
    );
    // status and check say so, with the end.
    let status = ok(&gw, "status", &["--live"]);
    assert!(status.contains("exception    allow service 'youtube' for group 'kids' until "), "{status}");
    let status = ok(&gw, "status", &["--live", "--json"]);
    let row = format!(
        "\"exceptions\":[{{\"action\":\"allow\",\"group\":\"kids\",\"client\":null,\"service\":\"youtube\",\"name\":null,\"ends\":{ends}}}]"
    );
    assert!(status.contains(&row), "{status}");
    let why = ok(&gw, "check", &["--client", KID, "--live", "www.youtube.com"]);
    assert!(
        why.contains("www.youtube.com: allowed by exception (allow service 'youtube' for group 'kids') until "),
        "{why}"
    );
    assert!(why.contains("  without it, www.youtube.com: blocked by service 'youtube'"), "{why}");
    let teen = ok(&gw, "check", &["--client", TEEN, "--live", "www.youtube.com"]);
    assert!(!teen.contains("exception"), "{teen}");

    // A reload keeps it.
    gw.reload(&std::fs::read_to_string(&gw.config).unwrap());
    assert_eq!(listed(&gw)[0].5, ends, "kept across SIGHUP");
    assert_eq!(ask(KID, gw.addr, "m.youtube.com"), [UP]);
    assert_eq!(ask(TEEN, gw.addr, "m.youtube.com"), [BLOCKED]);
    // A restart keeps it too, from the file beside the control socket.
    let config = gw.config.clone();
    let (_, dir) = gw.stop_keeping_dir();
    let gw = Gateway::start_with(dir, config.clone());
    assert!(gw.log().contains("1 exceptions restored"), "{}", gw.log());
    assert_eq!(listed(&gw)[0].5, ends, "kept across a restart");
    assert_eq!(ask(KID, gw.addr, "youtu.be"), [UP]);
    assert_eq!(ask(TEEN, gw.addr, "youtu.be"), [BLOCKED]);

    // Two seconds, with a reload in between: blocked again once it is
    // over, the answers cached under it notwithstanding.
    let ends = allow_youtube(&gw, 2);
    gw.reload(&std::fs::read_to_string(&gw.config).unwrap());
    wait_past(ends);
    assert_eq!(ask(KID, gw.addr, "www.youtube.com"), [BLOCKED]);
    assert_eq!(ask(KID, gw.addr, "m.youtube.com"), [BLOCKED]);
    assert!(listed(&gw).is_empty(), "over: not listed");

    // Two seconds, with the gateway down until they are over: the end is
    // a time, not a countdown that stops while nothing runs.
    let ends = allow_youtube(&gw, 2);
    // Cached under it, if asked before its end (a busy machine may be late).
    let _ = ask(KID, gw.addr, "www.youtube.com");
    let (_, dir) = gw.stop_keeping_dir();
    wait_past(ends);
    let gw = Gateway::start_with(dir, config);
    assert_eq!(ask(KID, gw.addr, "www.youtube.com"), [BLOCKED]);
    assert!(listed(&gw).is_empty());
}

#[test]
fn a_timed_block_beats_a_permanent_allow_and_the_cache_and_for_0_removes_it() {
    let up = Upstream::start(UP.parse().unwrap());
    let files = TempDir::new();
    let gw = gateway(&up, &files);
    // The allowlist passes it for everyone: cached so that hits skip the lists.
    assert_eq!(ask(PARENT, gw.addr, "games.example"), [UP]);
    assert_eq!(ask(PARENT, gw.addr, "games.example"), [UP]);
    assert_eq!(up.seen("games.example"), 1);

    let out = ok(&gw, "block", &["--client", PARENT, "games.example", "--for", "10m"]);
    assert!(out.starts_with("block 'games.example' for client '127.0.0.4' until "), "{out}");
    assert_eq!(ask(PARENT, gw.addr, "games.example"), [BLOCKED], "the cached answer does not hide it");
    assert_eq!(ask(PARENT, gw.addr, "www.games.example"), [BLOCKED], "a name covers what is under it");
    assert_eq!(ask(KID, gw.addr, "games.example"), [UP], "another device");
    // Among exceptions, a block beats an allow.
    ok(&gw, "allow", &["--client", PARENT, "games.example", "--for", "10m"]);
    assert_eq!(ask(PARENT, gw.addr, "games.example"), [BLOCKED]);
    assert_eq!(listed(&gw).len(), 2);
    ok(&gw, "allow", &["--client", PARENT, "games.example", "--for", "0"]);
    // A device by its hostname in the leases, and by its MAC there.
    assert_eq!(ask(GAMER, gw.addr, "chess.example"), [UP]);
    ok(&gw, "block", &["--client", "gaming-pc", "chess.example", "--for", "10m"]);
    assert_eq!(ask(GAMER, gw.addr, "chess.example"), [BLOCKED], "the cached answer does not hide it");
    assert_eq!(ask(PARENT, gw.addr, "chess.example"), [UP]);
    ok(&gw, "block", &["--client", "gaming-pc", "chess.example", "--for", "0"]);
    assert_eq!(ask(GAMER, gw.addr, "chess.example"), [UP]);
    ok(&gw, "block", &["--client", "02:00:5E:10:00:05", "chess.example", "--for", "10m"]);
    assert_eq!(ask(GAMER, gw.addr, "chess.example"), [BLOCKED]);
    let rows = listed(&gw);
    assert_eq!(rows.last().unwrap().2.as_deref(), Some("02:00:5e:10:00:05"), "a MAC written the one way");

    // check, local and live, names the exception.
    for live in [&["--live"][..], &[]] {
        let mut args = vec!["--client", PARENT];
        args.extend_from_slice(live);
        args.push("games.example");
        let why = ok(&gw, "check", &args);
        assert!(
            why.contains("games.example: blocked by exception (block 'games.example' for client '127.0.0.4') until "),
            "{why}"
        );
    }
    wait_for("the log", Duration::from_secs(60), || {
        log_rows(&gw, &["--client", PARENT, "--domain", "www.games.example"]).len() == 1
    });
    let row = &log_rows(&gw, &["--client", PARENT, "--domain", "www.games.example"])[0];
    assert_eq!((row.outcome.as_str(), row.list.as_deref()), ("blocked", Some("exception")));

    // --for 0 removes it before its end; again, there is nothing to remove.
    let out = ok(&gw, "block", &["--client", PARENT, "games.example", "--for", "0", "--json"]);
    assert_eq!(parse(&out).len(), 1, "the MAC's block is left: {out}");
    assert_eq!(ask(PARENT, gw.addr, "games.example"), [UP]);
    let out = ok(&gw, "block", &["--client", PARENT, "games.example", "--for", "0"]);
    assert!(out.contains("was not set"), "{out}");
    assert!(gw.log().contains("exception: block 'games.example' for client '127.0.0.4' until "), "{}", gw.log());
    assert!(gw.log().contains("exception removed: block 'games.example' for client '127.0.0.4'"), "{}", gw.log());
}

#[test]
fn bad_arguments_and_the_cap_are_refused_with_nothing_changed() {
    let up = Upstream::start(UP.parse().unwrap());
    let files = TempDir::new();
    let gw = gateway(&up, &files);
    let refused = |code: i32, args: &[&str], says: &str| {
        let (c, out, err) = run(&gw, args[0], &args[1..]);
        assert_eq!(c, code, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    refused(1, &["allow", "--group", "nobody", "--service", "youtube", "--for", "1h"], "no group 'nobody'");
    refused(1, &["allow", "--group", "kids", "--service", "no_such", "--for", "1h"], "no service 'no_such'");
    refused(1, &["block", "--client", "no-such-host", "x.example", "--for", "1h"], "is no address, MAC");
    refused(2, &["allow", "--group", "kids", "--service", "youtube", "--for", "soon"], "is not a duration");
    refused(2, &["allow", "--group", "kids", "--service", "youtube", "--for", "400d"], "longer than 366 days");
    refused(2, &["allow", "--group", "kids", "--service", "youtube"], "needs --for");
    refused(2, &["allow", "--group", "kids", "bad..name", "--for", "1h"], "not a domain name");
    refused(2, &["allow", "--group", "kids", "--service", "YouTube!", "--for", "1h"], "not a service id");
    refused(2, &["allow", "--group", "kids", "--client", KID, "x.example", "--for", "1h"], "one of them");
    refused(2, &["allow", "--service", "youtube", "--for", "1h"], "one of them");
    refused(2, &["block", "--group", "kids", "--service", "youtube", "x.example", "--for", "1h"], "one of them");
    refused(2, &["block", "--group", "kids", "x.example", "--for", "1h", "--limit", "3"], "does not apply");
    assert!(listed(&gw).is_empty(), "nothing was set");

    // The cap: 256 at once; the next is refused, replacing one is not.
    for i in 0..256 {
        ok(&gw, "block", &["--group", "kids", &format!("n{i}.example"), "--for", "1h"]);
    }
    refused(1, &["block", "--group", "kids", "n256.example", "--for", "1h"], "256 exceptions are set");
    ok(&gw, "block", &["--group", "kids", "n7.example", "--for", "2h"]);
    assert_eq!(listed(&gw).len(), 256);
    assert_eq!(ask(KID, gw.addr, "n255.example"), [BLOCKED]);
    assert_eq!(ask(KID, gw.addr, "n256.example"), [UP]);
}

#[test]
fn a_file_cut_short_or_too_large_is_ignored_and_a_stopped_gateway_refuses() {
    let up = Upstream::start(UP.parse().unwrap());
    let files = TempDir::new();
    let gw = gateway(&up, &files);
    allow_youtube(&gw, 600);
    let config = gw.config.clone();
    let (_, dir) = gw.stop_keeping_dir();
    let file = dir.0.join("exceptions.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"service\":\"youtube\""), "{text}");
    // Cut short, as a full disk might leave it: ignored, said so, no panic.
    std::fs::write(&file, &text[..text.len() / 2]).unwrap();
    let gw = Gateway::start_with(dir, config.clone());
    assert!(gw.log().contains("exceptions.json: not an object of exceptions (at byte "), "{}", gw.log());
    assert!(listed(&gw).is_empty());
    assert_eq!(ask(KID, gw.addr, "www.youtube.com"), [BLOCKED]);
    let (_, dir) = gw.stop_keeping_dir();
    std::fs::write(&file, " ".repeat(300 << 10) + &text).unwrap();
    let mut gw = Gateway::start_with(dir, config);
    assert!(gw.log().contains("no exceptions restored"), "{}", gw.log());
    assert!(gw.alive());
    let (_, dir) = gw.stop_keeping_dir();
    // Nothing runs: refused, exit 1.
    let (code, _, err) = cli(&[
        "allow",
        "-c",
        dir.0.join("hydradns.conf").to_str().unwrap(),
        "--group",
        "kids",
        "--service",
        "youtube",
        "--for",
        "1h",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot reach the gateway"), "{err}");
}
