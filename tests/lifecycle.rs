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
        // Left open on line 2, the quote closes at line 3's opening one.
        ("config hydradns\n\toption cache_size '100\n\tlist upstream '192.0.2.1'\n", 2),
        // LuCI's settings may not choose root for the daemon (issue 58).
        ("config hydradns\n\toption user 'root'\n", 2),
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

/// A misspelt option is ignored, so the gateway forwards somewhere else
/// than meant: the warning says what was meant, in check-config's output
/// and in the log at start.
#[test]
fn a_misspelt_option_is_named_with_what_was_meant() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let text = format!("{}\tlist upstrem '192.0.2.99'\n", config(&[&up], ""));
    let meant = "unknown option 'upstrem' in 'hydradns' section ignored; did you mean 'upstream'?";
    let dir = TempDir::new();
    let file = dir.file("typo.conf", &text);
    let (code, out, err) = cli(&["check-config", "-c", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("{}:5: {meant} (warning)", file.display())), "{err}");
    assert!(out.contains(": ok (") && out.contains("1 warning"), "{out}");
    let gw = Gateway::start(&text);
    assert!(gw.log().contains(meant), "{}", gw.log());
}

/// `check` reads the system config or the built-in defaults without `-c`,
/// as every other command but check-config does.
#[test]
fn check_needs_no_config_option() {
    let (code, out, err) = cli(&["check", "example.org"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("example.org: not blocked"), "{out}");
    // --help says what each option does.
    let (_, help, _) = cli(&["check", "--help"]);
    assert!(help.contains("\noptions:\n") && help.contains("as that client is answered"), "{help}");
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
    let (code, _, err) = cli(&["run", "--user", "root", "--log", "stderr", "-c", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains(&format!("{}:2: option 'max_ttl'", bad.display())), "{err}");
}

/// `Name:\tvalue` from a /proc status file.
fn status_field(status: &str, name: &str) -> String {
    status.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).unwrap_or_default().trim().to_string()
}

#[test]
fn started_as_root_it_binds_port_53_then_runs_without_privileges() {
    if !is_root() {
        eprintln!("skipped: needs root, to bind a privileged port and to change user");
        return;
    }
    let dir = TempDir::new();
    // A privileged port on an address of 127/8 nobody else uses.
    let listen = format!("127.0.{}.{}:53", 100 + std::process::id() % 100, 2 + std::process::id() % 200);
    let d = dir.0.display().to_string();
    let text = format!(
        "config hydradns 'main'\n\tlist listen '{listen}'\n\toption control_socket '{d}/run/control.sock'\n\
         \toption list_dir '{d}/lists'\n\tlist upstream '192.0.2.1'\n\
         config blocklist\n\tlist domain 'blocked.example'\n"
    );
    let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    // Started with supplementary groups, which it must shed too.
    let bin = hydradns();
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--groups", "4,20", "--"]).arg(bin.get_program()).args(bin.get_args());
    let g = Gateway::start_as(dir, config, cmd, "nobody");
    assert!(g.log().contains("running as user 'nobody' (uid 65534, gid"), "{}", g.log());
    // Every thread, not only the one that changed user. Under qemu-user
    // (the ARM runs) qemu's own helper thread, started before the program,
    // is not the program's: qemu turns setuid into the host's per-thread
    // call for the guest's threads only.
    let emulator = std::env::var("HYDRADNS_TEST_RUNNER").ok().map(|r| r.rsplit('/').next().unwrap_or("").to_string());
    let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", g.pid()))
        .unwrap()
        .map(|t| std::fs::read_to_string(t.unwrap().path().join("status")).unwrap())
        .filter(|s| {
            let helper = status_field(s, "Pid") != status_field(s, "Tgid");
            !(helper && emulator.as_deref().is_some_and(|e| status_field(s, "Name").starts_with(e)))
        })
        .collect();
    assert!(tasks.len() > 1, "the gateway's threads");
    for status in tasks {
        assert_eq!(status_field(&status, "Uid"), "65534\t65534\t65534\t65534", "{status}");
        assert!(status_field(&status, "Gid").starts_with("65534\t65534\t65534"), "{status}");
        assert_eq!(status_field(&status, "Groups"), "", "no supplementary groups");
        for caps in ["CapEff", "CapPrm", "CapAmb"] {
            assert_eq!(status_field(&status, caps), "0000000000000000", "{caps}: {status}");
        }
        assert_eq!(status_field(&status, "NoNewPrivs"), "1");
    }
    let addr: std::net::SocketAddr = listen.parse().unwrap();
    assert_eq!(udp(addr, "blocked.example", 1).ips(), ["0.0.0.0"]);
    assert_eq!(tcp(addr, "blocked.example", 1).ips(), ["0.0.0.0"]);
    // Directories it had to create are its own, so it can write there.
    for sub in ["run", "live", "flash"] {
        let meta = std::fs::metadata(g.dir.0.join(sub)).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 65534, "{sub}");
    }
    // The control socket it made as that user answers root's CLI.
    let report = g.report();
    assert_eq!((report.queries, report.counters.blocked), (2, 2));
    assert!(g.stop().success());
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
    // Every subcommand answers -h and --help with its own usage, exit 0.
    for cmd in ["run", "check-config", "check", "stats", "log", "top", "update", "lists", "pause", "resume"] {
        for help in ["-h", "--help"] {
            let (code, out, err) = cli(&[cmd, help]);
            assert_eq!(code, 0, "{cmd} {help}: {err}");
            assert!(out.starts_with(&format!("usage:\n  hydradns {cmd} ")), "{cmd} {help}: {out}");
        }
    }
    // A wrong option names the command's usage alone, once.
    let (code, out, err) = cli(&["stats", "--bogus"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.starts_with("hydradns: unknown option --bogus\nusage:\n  hydradns stats "), "{err}");
    assert!(!err.contains("hydradns run"), "{err}");
    assert_eq!(err.matches("unknown option").count(), 1, "{err}");
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
            let end = Instant::now() + Duration::from_secs(120);
            let mut i = 0u32;
            while !stop.load(SeqCst) && Instant::now() < end {
                let name = format!("q{}.new.example", i % 50);
                let q = build_query(i as u16, &name, A, None);
                // A dropped query never has its answer; 5 s is a wait no
                // busy machine makes an answered one miss.
                match udp_raw(addr, &q, Duration::from_secs(5)).map(Reply::parse) {
                    Some(r) if r.rcode == RCODE::NoError => answered.fetch_add(1, SeqCst),
                    _ => failed.fetch_add(1, SeqCst),
                };
                i += 1;
            }
        })
    };
    // The client is under way before the first reload, and after the last.
    let answered_by = |n: u64| {
        let answered = answered.clone();
        wait_for("the client's answers", Duration::from_secs(60), move || answered.load(SeqCst) >= n)
    };
    answered_by(25);
    std::fs::write(&list, "new.example\n").unwrap();
    gw.reload(&base);
    assert_eq!(udp(gw.addr, "sub.new.example", A).ips(), ["0.0.0.0"], "new list in effect");
    assert_eq!(udp(gw.addr, "new.example", A).ips(), ["0.0.0.0"], "cached before the reload, blocked after it");
    assert_eq!(udp(gw.addr, "old.example", A).ips(), ["192.0.2.1"], "old list gone");
    // Reload with a bigger real list while the client keeps going.
    let big = format!(
        "config blocklist\n\toption path '{}'\nconfig blocklist\n\toption path '{}'\n",
        list.display(),
        data("blocklists/hagezi-2026-08-15/domains__light.txt").display()
    );
    gw.reload(&config(&[&up], &big));
    answered_by(answered.load(SeqCst) + 26);
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
    assert!(gw.wait_log(&needle, Duration::from_secs(120)), "{}", gw.log());
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
    let log = log.text();
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

/// `pause 18446744073709551615` over the control socket overflowed the
/// pause's end (a panic, and with `panic = abort` the gateway gone): found
/// by reading the request line's path for a fuzz target. A pause that long
/// is a pause without end, and the gateway answers on.
#[test]
fn an_endless_pause_does_not_take_the_gateway_down() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], "config blocklist\n\tlist domain 'ads.example'\n"));
    let sock = gw.control_socket();
    // The end is the gateway's uptime plus the pause: past a second of it,
    // the sum of seconds overflowed.
    std::thread::sleep(Duration::from_millis(1100));
    for (request, paused) in [("pause 18446744073709551615", true), ("pause 0", false)] {
        let reply = ask_as(0, 0, &sock, request);
        assert!(reply.starts_with("{\"paused_until\":"), "{request}: {reply}\n{}", gw.log());
        let want: &[&str] = if paused { &["192.0.2.1"] } else { &["0.0.0.0"] };
        assert_eq!(udp(gw.addr, "ads.example", A).ips(), want, "{request}");
    }
    let reply = ask_as(0, 0, &sock, "pause 18446744073709551615 nosuchgroup");
    assert!(reply.contains("no group 'nosuchgroup'"), "{reply}");
}

/// An entry covering a whole TLD (`||com^` in a downloaded list blocks the
/// web) loaded without a word. `check-config` and the log warn.
#[test]
fn a_list_entry_covering_a_whole_tld_is_warned_about() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let list = dir.file("wide.txt", "ads.example\n||com^\n");
    let text = config(&[&up], &format!("config blocklist\n\toption name 'wide'\n\toption path '{}'\n", list.display()));
    let conf = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let (code, _, err) = cli(&["check-config", "-c", conf.to_str().unwrap()]);
    let warning = "list 'wide': 1 entry covers a whole top-level domain (com): every name under it is blocked";
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(warning) && err.contains("(warning)"), "{err}");
    let gw = Gateway::start_with(dir, conf);
    assert!(gw.log().contains(&format!("warn: {warning}")), "{}", gw.log());
}

/// A list file the gateway cannot read once it has become its own user
/// (root's 0600 file) was logged at info beside the counts, and `status`,
/// run as root, read the file itself and showed nothing wrong. It is a
/// warning, and `status` shows the running gateway's error.
#[test]
fn a_list_the_gateway_cannot_read_is_a_warning_that_status_shows() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let secret = dir.file("secret.txt", "secret.example\n");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let text = config(
        &[&up],
        &format!(
            "\toption control_socket '@DIR@/run/control.sock'\n\
             config blocklist\n\toption name 'secret'\n\toption path '{}'\n\tlist domain 'still.example'\n",
            secret.display()
        ),
    );
    let conf = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let gw = Gateway::start_as(dir, conf, hydradns(), "nobody");
    let warning = format!("warn: list 'secret': cannot read {}: Permission denied", secret.display());
    assert!(gw.log().contains(&warning), "{}", gw.log());
    assert_eq!(udp(gw.addr, "still.example", A).ips(), ["0.0.0.0"]);
    let (code, out, err) = cli(&["status", "-c", gw.config.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.starts_with("list         secret")).unwrap_or_default();
    assert!(line.contains("last error: ") && line.contains("Permission denied"), "{out}");
    let (_, json, _) = cli(&["status", "-c", gw.config.to_str().unwrap(), "--json"]);
    assert!(json.contains("Permission denied"), "{json}");
}

/// A state directory left by a run as root broke the query log with
/// "unable to open database file", which did not say that the gateway had
/// become another user. The start says so, and what to do.
#[test]
fn a_state_directory_the_gateways_user_cannot_write_is_explained() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let live = dir.0.join("live");
    std::fs::create_dir(&live).unwrap();
    let text = config(&[&up], "\toption control_socket '@DIR@/run/control.sock'\n");
    let conf = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let gw = Gateway::start_as(dir, conf, hydradns(), "nobody");
    let log = gw.log();
    let line = log.lines().find(|l| l.contains(&format!("{} (for the query log)", live.display()))).unwrap_or_default();
    assert!(line.contains("warn: ") && line.contains("belongs to uid 0"), "{log}");
    assert!(line.contains("user 'nobody', which the gateway becomes") && line.contains("chown -R nobody"), "{log}");
    assert_eq!(udp(gw.addr, "a.example", A).ips(), ["192.0.2.1"], "DNS works all the same");
}

/// A quiet house, a quiet gateway: with the query log on, a downloaded list
/// and the summary line, as shipped, no thread wakes while no query comes
/// (it was 50 a second: the log writer polled its queue, each receive
/// thread looked at its stop flag five times a second). A count, not a
/// time: it holds on any machine.
#[test]
fn an_idle_gateway_does_not_wake() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption list_dir '@DIR@/lists'\n\toption refresh_interval '6h'\n\toption stats_interval '1h'\n\
         config blocklist\n\toption url 'http://127.0.0.1:9/list.txt'\n\
         config querylog 'querylog'\n\toption path '@DIR@/live/q.db'\n\toption flash_path '@DIR@/flash/q.db'\n\
         \toption flush_interval '1h'\n\toption batch_interval '60s'\n",
    ));
    // Some work first: a miss (an upstream port opens), a hit, a logged
    // entry; then the quiet sets in (open ports are swept within a second).
    // The entries' batch waits for its deadline meanwhile (a minute, so that
    // it does not come in the middle however long the rest takes): the
    // writer sleeps on it, it does not look in between.
    assert_eq!(udp(gw.addr, "one.example", A).ips(), ["192.0.2.1"]);
    assert_eq!(udp(gw.addr, "one.example", A).ips(), ["192.0.2.1"]);
    assert!(gw.wait_log("download failed", Duration::from_secs(60)), "{}", gw.log());
    // Settled: a whole second without a wake-up (bounded; the 5 s below
    // are what is judged).
    wait_for("a quiet second", Duration::from_secs(60), || {
        let before = wake_ups(gw.pid());
        std::thread::sleep(Duration::from_secs(1));
        wake_ups(gw.pid()) == before
    });
    let before = wake_ups(gw.pid());
    std::thread::sleep(Duration::from_secs(5));
    let woken = wake_ups(gw.pid()) - before;
    assert!(woken <= 2, "{woken} context switches in 5 idle seconds");
    // And it still answers, and logs.
    assert_eq!(udp(gw.addr, "two.example", A).ips(), ["192.0.2.1"]);
    assert!(gw.stop().success());
}

#[test]
fn status_says_whether_it_runs_and_with_what() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "config blocklist\n\toption name 'ads'\n\tlist domain 'ads.example'\n\tlist domain 'more.example'\n",
    ));
    assert_eq!(udp(gw.addr, "x.ads.example", A).ips(), ["0.0.0.0"]);
    let conf = gw.config.clone();
    let c = conf.to_str().unwrap();
    let (code, out, err) = cli(&["status", "-c", c]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("hydradns     running, version "), "{out}");
    assert!(out.contains(&format!("config       {c}")), "{out}");
    assert!(out.contains("listen       127.0.0.1:0 (dnsmasq_mode off)"), "{out}");
    assert!(out.contains(&format!("upstream     {} (up", up.addr)), "{out}");
    assert!(out.contains("blocking     on, 1 names blocked so far"), "{out}");
    assert!(out.contains("list         ads (blocklist): 2 entries"), "{out}");
    let (code, json, _) = cli(&["status", "-c", c, "--json"]);
    assert_eq!(code, 0, "{json}");
    assert!(json.starts_with("{\"schema\":1,\"running\":true,"), "{json}");
    let (code, live, _) = cli(&["status", "-c", c, "--live"]);
    assert_eq!(code, 0, "{live}");
    assert!(live.contains("list         ads (blocklist): 2 entries"), "the gateway's count: {live}");
    let (_, stats, _) = cli(&["stats", "-c", c, "--json"]);
    assert!(stats.starts_with("{\"schema\":1,"), "{stats}");
    // Stopped: says so, exits 3, and still shows the config and the lists (counted from disk).
    let (_, dir) = gw.stop_keeping_dir();
    let (code, out, _) = cli(&["status", "-c", c]);
    assert_eq!(code, 3, "{out}");
    assert!(out.starts_with("hydradns     not running ("), "{out}");
    assert!(out.contains("list         ads (blocklist): 2 entries"), "{out}");
    let (code, json, _) = cli(&["status", "-c", c, "--json"]);
    assert_eq!(code, 3, "--json exits as the text does: {json}");
    assert!(json.contains("\"running\":false") && !json.contains("\"stats\""), "{json}");
    // --live (LuCI's, at every poll, as root) reads no list: nothing counted.
    let (code, out, _) = cli(&["status", "-c", c, "--live"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("list         ads (blocklist): 0 entries"), "{out}");
    drop(dir);
}

/// `cmd` with its address space capped at 512 MiB (a read without end then
/// fails within a second instead of taking the machine), run for at most
/// 10 s: (exit code, stderr); `None` if it had to be killed.
/// `ulimit -v KIB; ` for the shell that starts the binary, or nothing under
/// an emulator (qemu reserves the guest's whole address space up front: the
/// limit would bind the emulator, not the gateway).
fn memory_limit(kib: u32) -> String {
    match std::env::var_os("HYDRADNS_TEST_RUNNER") {
        Some(_) => String::new(),
        None => format!("ulimit -v {kib}; "),
    }
}

fn bounded_run(cmd: std::process::Command) -> Option<(i32, String)> {
    use std::io::Read;
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{}exec \"$0\" \"$@\"", memory_limit(524_288)))
        .arg(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            return Some((status.code().unwrap_or(-1), err));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Root reads the files a config names (LuCI's check runs `check-config`
/// as root on a config the caller sent): `resolv_file '/dev/zero'` was
/// read to the end (1.6 GB in 6 s), a FIFO as a list blocked the open
/// forever, and `check-config` called a FIFO a list file that exists. Only
/// regular files of bounded size are read, in `check-config` and the
/// daemon alike.
#[test]
fn only_regular_files_of_bounded_size_are_read_from_the_config() {
    let dir = TempDir::new();
    let fifo = dir.0.join("list.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let text = format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption resolv_file '/dev/zero'\n\
         \toption leases_file '/dev/zero'\n\toption ethers_file '{fifo}'\n\
         config blocklist 'local'\n\tlist path '{fifo}'\n\tlist path '/dev/zero'\n",
        fifo = fifo.display()
    );
    let conf = dir.file("hydradns.conf", &text);
    let mut check = hydradns();
    check.args(["check-config", "-c"]).arg(&conf);
    let (code, err) = bounded_run(check).expect("check-config finishes");
    assert_eq!(code, 0, "{err}");
    for path in [fifo.to_str().unwrap(), "/dev/zero"] {
        assert!(err.contains(&format!("list file {path}: not a regular file (warning)")), "{err}");
    }
    for option in ["resolv_file", "leases_file", "ethers_file"] {
        assert!(err.contains(&format!("option '{option}': '")), "{option}: {err}");
    }
    assert!(err.contains("is not a regular file; it will not be read (warning)"), "{err}");
    // The config itself.
    for path in [fifo.to_str().unwrap(), "/dev/zero"] {
        let mut check = hydradns();
        check.args(["check-config", "-c", path]);
        let (code, err) = bounded_run(check).expect("check-config finishes");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("not a regular file"), "{err}");
    }
    // The daemon starts and answers, from the built-in resolvers' config.
    // Under an emulator (qemu) the address space is the emulator's: no limit there.
    let bin = hydradns();
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{}exec \"$0\" \"$@\"", memory_limit(1_048_576)))
        .arg(bin.get_program())
        .args(bin.get_args());
    let g = Gateway::start_command(dir, conf, cmd);
    udp(g.addr, "localhost", A);
    assert!(g.log().contains("not a regular file"), "{}", g.log());
}

/// One request on the control socket at `sock` from a process with user
/// `uid` and group `gid` (no others): the answer line.
fn ask_as(uid: u32, gid: u32, sock: &std::path::Path, request: &str) -> String {
    const CLIENT: &str = "import socket, sys\n\
        s = socket.socket(socket.AF_UNIX)\n\
        s.connect(sys.argv[1])\n\
        s.sendall(sys.argv[2].encode() + b'\\n')\n\
        print(s.makefile().readline().strip())\n";
    // The system's Python: a root-only one (pyenv under /root) cannot run as another user.
    let python = if std::path::Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    let out = std::process::Command::new("setpriv")
        .args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups", python, "-c", CLIENT])
        .arg(sock)
        .arg(request)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// Every peer with the gateway's uid or gid could pause it, refresh its
/// lists or make it commit: with the socket's group shared by other
/// accounts (`nobody`'s above all) that was every such service. Reading
/// stays open to the group; acting takes root or the gateway's own user.
#[test]
fn only_root_or_the_gateways_own_user_may_act_on_the_control_socket() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let dir = TempDir::new();
    let d = dir.0.display().to_string();
    let text = format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption control_socket '{d}/run/control.sock'\n\
         \tlist upstream '192.0.2.1'\n"
    );
    let config = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let sock = dir.0.join("run/control.sock");
    // Asked for by name: nobody is the gateway's own user here.
    let g = Gateway::start_as(dir, config, hydradns(), "nobody");
    // Another account in the gateway's group: it reads, it does not act.
    let other = ask_as(12345, 65534, &sock, "stats");
    assert!(other.contains("\"counters\""), "{other}");
    for request in ["pause 60", "update", "commit", "allow 60 group default name x.example", "block 60 x"] {
        let answer = ask_as(12345, 65534, &sock, request);
        assert!(answer.contains("not allowed"), "{request}: {answer}");
    }
    assert_eq!(g.report().paused_until, 0, "not paused");
    // Exceptions with an end: read by anyone there, set by the gateway's
    // own user, who keeps them in a file of its own beside the socket.
    assert_eq!(ask_as(12345, 65534, &sock, "exceptions"), "{\"schema\":1,\"exceptions\":[]}");
    let own = ask_as(65534, 65534, &sock, "block 60 group default name x.example");
    assert!(own.contains("\"changed\":\"set\"") && own.contains("\"name\":\"x.example\""), "{own}");
    let kept = std::fs::symlink_metadata(sock.with_file_name("exceptions.json")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((kept.uid(), kept.mode() & 0o777), (65534, 0o600), "the gateway's, private");
    let own = ask_as(65534, 65534, &sock, "pause 60");
    assert!(own.contains("\"paused_until\":") && !own.contains("error"), "{own}");
    assert!(g.report().paused_until > 0);
    let root = ask_as(0, 0, &sock, "pause 0");
    assert!(root.contains("\"paused_until\":0"), "{root}");
}

/// `option control_socket 'off'` turns it off. An empty option cannot:
/// UCI takes it as no option at all, which left the default socket on
/// although the docs said empty turned it off.
#[test]
fn control_socket_off_turns_it_off() {
    let g = Gateway::start(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\toption control_socket 'off'\n\
         \tlist upstream '192.0.2.1'\n",
    );
    let (code, _, err) = cli(&["stats", "-c", g.config.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("control socket is off"), "{err}");
    // No Unix socket with a path among the gateway's descriptors (the
    // default one was bound before).
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", g.pid()))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
    let bound: Vec<&str> = unix
        .lines()
        .filter(|l| l.split_whitespace().nth(6).is_some_and(|i| inodes.iter().any(|x| x == i)))
        .filter(|l| l.split_whitespace().nth(7).is_some())
        .collect();
    assert!(bound.is_empty(), "{bound:?}");
}

/// `hydradns log | head -1` panicked once `head` had gone (exit 134): any
/// command that prints ends as `cat` does on a closed pipe, by SIGPIPE,
/// without a panic.
#[test]
fn printing_into_a_closed_pipe_ends_quietly() {
    let dir = TempDir::new();
    let conf = dir.file("hydradns.conf", "config hydradns 'main'\n\tlist listen '127.0.0.1:5353'\n");
    let cmd = hydradns();
    let bin: Vec<String> =
        std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(|a| a.to_string_lossy().into_owned()).collect();
    let bin = bin.join(" ");
    for args in ["help", &format!("check-config -c {}", conf.display())] {
        // The reader is gone before the command writes.
        let script = format!("(sleep 0.3; exec {bin} {args}) | true; echo \"status=${{PIPESTATUS[0]}}\"");
        let out = std::process::Command::new("bash").arg("-c").arg(&script).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!stderr.contains("panicked"), "{args}: {stderr}");
        assert!(stdout.contains("status=141"), "{args}: killed by SIGPIPE (128 + 13): {stdout} {stderr}");
    }
}

/// Started twice on one address, the second gateway joined the first's
/// `SO_REUSEPORT` group and took half the queries, silently. It must
/// refuse to start, naming the address, and leave every query to the first.
#[test]
fn a_second_gateway_on_the_same_address_refuses_to_start() {
    use std::io::Read;
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let first = Gateway::start(&config(&[&up], ""));
    let addr = first.addr.to_string();
    let dir = TempDir::new();
    let text = Gateway::localize(&config(&[&up], "").replace("127.0.0.1:0", &addr), &dir.0);
    let conf = dir.file("hydradns.conf", &text);
    let mut second = KillOnDrop(
        hydradns()
            .args(["run", "--user", "root", "--log", "stderr", "-c"])
            .arg(&conf)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let mut status = None;
    while started.elapsed() < Duration::from_secs(30) && status.is_none() {
        status = second.0.try_wait().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    // Asked while the second is still up, if it came up: from many source
    // ports, so the kernel would spread them over both.
    for i in 0..20 {
        assert_eq!(udp(first.addr, &format!("q{i}.example"), A).ips(), ["192.0.2.1"]);
    }
    let answered_by_first = first.stats().get("udp_queries").copied();
    let mut err = String::new();
    if status.is_some() {
        second.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    }
    let status = status.unwrap_or_else(|| panic!("the second gateway started"));
    assert!(!status.success(), "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")) && err.contains("another program listens"), "{err}");
    assert_eq!(answered_by_first, Some(20), "{}", first.log());
}
