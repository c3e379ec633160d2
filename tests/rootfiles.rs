//! Root and the daemon's files (issue 58). LuCI runs `hydradns status`,
//! `check` and `update` as root, in directories the daemon's user writes
//! (`list_dir`, the control socket's): whatever that user put there — a
//! link, a FIFO, a file without end, a socket that never stops talking —
//! must cost root nothing but a refusal. Root never writes through a link
//! there, never downloads a list itself, and reads what it reads under a
//! size cap and a time limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "common/http.rs"]
mod http;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use http::{HttpServer, Route, list_body};

/// `nobody`'s ids, which the tests give the daemon's directories.
const NOBODY: u32 = 65534;

/// Runs `cmd` to its end or `limit`, whichever comes first: its exit code
/// (`None`: killed at the limit), its peak resident memory in KiB as last
/// seen (sampled every 10 ms: a run that took more would take long enough
/// to be seen), and its output.
fn run_bounded(mut cmd: Command, limit: Duration) -> (Option<i32>, u64, String) {
    let mut child = cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let status = format!("/proc/{}/status", child.id());
    let end = Instant::now() + limit;
    let mut peak = 0;
    let code = loop {
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        });
        peak = peak.max(hwm.unwrap_or(0));
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (code, peak, reader.join().unwrap())
}

/// A directory of the test that `nobody` may enter, and in it one that is
/// `nobody`'s, as `list_dir` is the daemon's user's on a router.
fn daemon_dir(dir: &TempDir, name: &str) -> PathBuf {
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = dir.0.join(name);
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
    d
}

/// The saved copy of the config's one downloaded list, as `hydradns lists` names it.
fn saved_copy(conf: &Path, list_dir: &Path) -> PathBuf {
    let (code, out, err) = cli(&["lists", "-c", conf.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("file").map(str::trim))
        .map(PathBuf::from)
        .find(|p| p.starts_with(list_dir))
        .unwrap_or_else(|| panic!("no saved copy named in:\n{out}"))
}

/// With the control socket gone (the daemon's user can remove it), root's
/// `update` downloaded by itself into `list_dir` and created `<list>.tmp`
/// and `<meta>.tmp` with a plain create: links planted at those names had
/// root overwrite, or create, any file. Now it downloads as the gateway's
/// user, whose temporary files are made anew, exclusively; what it saves
/// is that user's, and no link's target is touched.
#[test]
fn root_updating_alone_writes_through_no_link_and_downloads_as_the_gateways_user() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let http = HttpServer::start();
    http.set("/ads.txt", Route::List { body: list_body(50, "ads.example"), etag: "\"v1\"".into() });
    let dir = TempDir::new();
    let lists = daemon_dir(&dir, "lists");
    let victims = dir.0.join("root-only");
    std::fs::create_dir(&victims).unwrap();
    std::fs::set_permissions(&victims, std::fs::Permissions::from_mode(0o700)).unwrap();
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\toption user 'nobody'\n\toption list_dir '{}'\n\
             \toption control_socket '{}/run/control.sock'\n\
             config blocklist\n\toption name 'ads'\n\toption url '{}'\n",
            lists.display(),
            dir.0.display(),
            http.url("/ads.txt")
        ),
    );
    let saved = saved_copy(&conf, &lists);
    let meta = saved.with_extension("meta");
    let with_tmp = |p: &Path| PathBuf::from(format!("{}.tmp", p.display()));
    // Every name root could write: the copy, its metadata, and their
    // temporary files; half the links lead to a file of root's, half to
    // one that does not exist yet.
    let names = [saved.clone(), meta.clone(), with_tmp(&saved), with_tmp(&meta)];
    let mut planted = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let target = victims.join(format!("victim-{i}"));
        if i % 2 == 0 {
            std::fs::write(&target, "root's own\n").unwrap();
        }
        std::os::unix::fs::symlink(&target, name).unwrap();
        std::os::unix::fs::lchown(name, Some(NOBODY), Some(NOBODY)).unwrap();
        planted.push((target, i % 2 == 0));
    }
    let (code, out, err) = cli(&["update", "-c", conf.to_str().unwrap()]);
    for (target, existed) in &planted {
        if *existed {
            assert_eq!(
                std::fs::read_to_string(target).unwrap(),
                "root's own\n",
                "{} written through",
                target.display()
            );
        } else {
            assert!(!target.exists(), "{} created through a link", target.display());
        }
    }
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ads: updated, 50 entries"), "{out}{err}");
    let copy = std::fs::symlink_metadata(&saved).unwrap();
    assert!(copy.file_type().is_file(), "the link itself was replaced by the copy");
    assert_eq!(copy.uid(), NOBODY, "downloaded and saved as the gateway's user, not root");
    assert_eq!(std::fs::symlink_metadata(&meta).unwrap().uid(), NOBODY);
}

/// `status` as root reads the lists' metadata in `list_dir`: a FIFO there
/// held it (and LuCI's every poll) forever, a link to /dev/zero or a file
/// of 1 GiB took all the memory it could get; the control socket's answer
/// had no end either. Each now costs a bounded time and memory.
#[test]
fn status_reads_the_daemons_files_under_a_cap_and_waits_on_nothing() {
    let dir = TempDir::new();
    let lists = dir.0.join("lists");
    std::fs::create_dir(&lists).unwrap();
    let socket = dir.0.join("control.sock");
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\toption list_dir '{}'\n\toption control_socket '{}'\n\
             config blocklist\n\toption name 'ads'\n\toption url 'http://127.0.0.1:9/ads.txt'\n",
            lists.display(),
            socket.display()
        ),
    );
    let meta = saved_copy(&conf, &lists).with_extension("meta");
    let status = || {
        let mut c = hydradns();
        c.args(["status", "--json", "-c", conf.to_str().unwrap()]);
        c
    };
    assert!(Command::new("mkfifo").arg(&meta).status().unwrap().success());
    let (code, _, out) = run_bounded(status(), Duration::from_secs(5));
    assert_eq!(code, Some(3), "a FIFO at the metadata: not running, answered at once: {out}");
    std::fs::remove_file(&meta).unwrap();

    std::os::unix::fs::symlink("/dev/zero", &meta).unwrap();
    let (code, rss, out) = run_bounded(status(), Duration::from_secs(10));
    assert_eq!(code, Some(3), "{out}");
    assert!(rss < 256 * 1024, "{rss} KiB for a link to /dev/zero");
    std::fs::remove_file(&meta).unwrap();

    let big = std::fs::File::create(&meta).unwrap();
    big.set_len(1 << 30).unwrap();
    let (code, rss, out) = run_bounded(status(), Duration::from_secs(10));
    assert_eq!(code, Some(3), "{out}");
    assert!(rss < 256 * 1024, "{rss} KiB for a metadata file of 1 GiB");
    std::fs::remove_file(&meta).unwrap();

    // Something on the socket's path whose answer never ends.
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let junk = vec![b'x'; 64 * 1024];
                while std::io::Write::write_all(&mut s, &junk).is_ok() {}
            });
        }
    });
    let (code, rss, out) = run_bounded(status(), Duration::from_secs(10));
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("longer than"), "{out}");
    assert!(rss < 256 * 1024, "{rss} KiB for an answer without end");
}

/// `metrics_textfile '/etc/x.prom'` had the init script make /etc
/// group-writable for the daemon. The daemon now writes it only in a
/// directory it may write already (or one it makes): elsewhere it starts
/// without it, says why, and the directory is as it was.
#[test]
fn a_textfile_in_a_directory_the_gateway_may_not_write_is_left_out_and_said_so() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let etc = dir.0.join("etc");
    std::fs::create_dir(&etc).unwrap();
    std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = config(
        &[&up],
        &format!(
            "\toption control_socket '@DIR@/run/control.sock'\n\toption metrics_textfile '{}/x.prom'\n\
             config querylog 'querylog'\n\toption enabled '0'\n",
            etc.display()
        ),
    );
    let conf = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let gw = Gateway::start_as(dir, conf, hydradns(), "nobody");
    assert!(gw.log().contains("cannot write in") && gw.log().contains("no textfile"), "{}", gw.log());
    assert_eq!(udp(gw.addr, "a.example", A).ips(), ["192.0.2.1"], "the service runs without it");
    let m = std::fs::metadata(&etc).unwrap();
    assert_eq!((m.permissions().mode() & 0o7777, m.uid(), m.gid()), (0o755, 0, 0), "the directory as it was");
    assert!(!etc.join("x.prom").exists());
}

/// LuCI reads the query log as root (`log`, `top`, `stats --history`,
/// `devices`) from the gateway's directory: a link planted at the log's
/// name had root open whatever database it pointed at (another of root's),
/// and a FIFO there held it forever. Root now reads it as the directory's
/// owner, and only a regular file that is not a link.
#[test]
fn root_reads_the_query_log_as_its_owner_and_not_through_a_link() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    // A query log of root's holding a name nobody may see.
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let secret = TempDir::new();
    let text = config(
        &[&up],
        "config querylog 'querylog'\n\toption path '@DIR@/live/queries.db'\n\toption flash_path '@DIR@/flash/queries.db'\n",
    );
    let conf = secret.file("hydradns.conf", &Gateway::localize(&text, &secret.0));
    let gw = Gateway::start_with(TempDir(secret.0.clone()), conf);
    udp(gw.addr, "secret.example", A);
    let (status, _kept) = gw.stop_keeping_dir();
    assert!(status.success());
    let root_db = secret.0.join("live/queries.db");
    let (_, out, err) = cli(&["log", "--json", "-c", secret.0.join("hydradns.conf").to_str().unwrap()]);
    assert!(out.contains("secret.example"), "the secret is in root's log: {out}{err}");

    let dir = TempDir::new();
    let live = daemon_dir(&dir, "live");
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\toption control_socket '{d}/run/control.sock'\n\
             config querylog 'querylog'\n\toption path '{d}/live/queries.db'\n\toption flash_path '{d}/flash/queries.db'\n",
            d = dir.0.display()
        ),
    );
    let db = live.join("queries.db");
    std::os::unix::fs::symlink(&root_db, &db).unwrap();
    let log = || {
        let mut c = hydradns();
        c.args(["log", "--json", "-c", conf.to_str().unwrap()]);
        c
    };
    let (code, _, out) = run_bounded(log(), Duration::from_secs(10));
    assert_ne!(code, Some(0));
    assert!(!out.contains("secret.example"), "root read another database through the link: {out}");
    std::fs::remove_file(&db).unwrap();
    assert!(Command::new("mkfifo").arg(&db).status().unwrap().success());
    let (code, _, out) = run_bounded(log(), Duration::from_secs(5));
    assert!(code.is_some_and(|c| c != 0), "a FIFO as the log: refused at once, not waited on ({code:?}): {out}");
}

/// `check` without a gateway (rpcd's fallback, as root) builds the policy
/// from the lists in `list_dir`: a link planted as a list's saved copy had
/// root read a file of its own as a list and say whether a name is in it.
/// It reads them as list_dir's owner.
#[test]
fn check_as_root_reads_the_gateways_lists_as_their_owner() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let dir = TempDir::new();
    let lists = daemon_dir(&dir, "lists");
    let private = dir.0.join("root-only");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(private.join("known_hosts"), "secret-host.example\n").unwrap();
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\toption list_dir '{}'\n\toption control_socket '{}/run/control.sock'\n\
             config blocklist\n\toption name 'ads'\n\toption url 'http://127.0.0.1:9/ads.txt'\n",
            lists.display(),
            dir.0.display()
        ),
    );
    let saved = saved_copy(&conf, &lists);
    std::os::unix::fs::symlink(private.join("known_hosts"), &saved).unwrap();
    let (code, out, err) = cli(&["check", "-c", conf.to_str().unwrap(), "secret-host.example"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("secret-host.example: not blocked") && !out.contains("known_hosts"), "{out}");
}

/// `check` ends with the process that started it (rpcd's timeout kills
/// the plugin's shell): the kernel clears that setting when a process
/// changes user, which `check` does as root on the gateway's lists, so it
/// is set again after the switch.
#[test]
fn a_check_that_became_the_gateways_user_still_ends_with_its_caller() {
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let dir = TempDir::new();
    let lists = daemon_dir(&dir, "lists");
    let mut big = String::new();
    for i in 0..1_000_000 {
        big.push_str(&format!("n{i}.big.example\n"));
    }
    let list = dir.file("big.txt", &big);
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\toption list_dir '{}'\n\toption control_socket '{}/run/control.sock'\n\
             config blocklist\n\toption name 'big'\n\toption path '{}'\n",
            lists.display(),
            dir.0.display(),
            list.display()
        ),
    );
    let bin = hydradns();
    // A shell that waits for the check, as rpcd's plugin does.
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(r#""$@" check -c "$CONF" n1.big.example > /dev/null; echo done"#)
        .arg("sh")
        .arg(bin.get_program())
        .args(bin.get_args())
        .env("CONF", &conf)
        .spawn()
        .unwrap();
    let sh = shell.id();
    let child = || -> Option<u32> {
        std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ")?.1.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(sh)
        })
    };
    let mut pid = None;
    wait_for("the check to start", Duration::from_secs(10), || {
        pid = child();
        pid.is_some()
    });
    let pid = pid.unwrap();
    // Until it has become the gateway's user: then the setting is the one that matters.
    wait_for("the check to change user", Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.contains(&NOBODY.to_string())))
    });
    shell.kill().unwrap();
    shell.wait().unwrap();
    wait_for("the check to end with its shell", Duration::from_secs(30), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
    });
}

/// rpcd's plugins (LuCI's `luci.hydradns`, the API's `hydradns`) run
/// `stats`, `devices` and `exceptions` as root for any logged-in reader, and rpcd ends a
/// call past its time limit by killing the plugin's shell (SIGKILL): the
/// command goes with it, killed by the kernel, rather than wait on for
/// nobody. Here each waits on a control socket that never answers; this
/// test is the subreaper its orphan comes to, so how it ended is seen.
#[test]
fn stats_devices_and_exceptions_end_with_the_plugin_shell_that_ran_them() {
    let dir = TempDir::new();
    let socket = dir.0.join("control.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let (accepted, connected) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        for s in listener.incoming() {
            kept.push(s);
            let _ = accepted.send(());
        }
    });
    let conf = dir.file(
        "hydradns.conf",
        &format!(
            "config hydradns 'main'\n\toption control_socket '{}'\n\toption leases_file '{}/leases'\n\
             config querylog\n\toption path '{}/queries.db'\n",
            socket.display(),
            dir.0.display(),
            dir.0.display()
        ),
    );
    // `devices` asks the gateway to commit its log when there is one.
    dir.file("queries.db", "");
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let bin = hydradns();
    for cmd in ["stats", "devices", "exceptions"] {
        // As the plugin runs it: the shell's own child. Backgrounded, so the
        // shell can say its pid first.
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(r#""$@" "$CMD" -c "$CONF" --json > /dev/null 2>&1 & echo $!; wait"#)
            .arg("sh")
            .arg(bin.get_program())
            .args(bin.get_args())
            .env("CMD", cmd)
            .env("CONF", &conf)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(shell.stdout.take().unwrap()), &mut line).unwrap();
        let pid = rustix::process::Pid::from_raw(line.trim().parse().unwrap()).unwrap();
        // Asking the gateway, which does not answer: the call is under way.
        connected
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{cmd}: no request on the control socket"));
        shell.kill().unwrap();
        shell.wait().unwrap();
        let (_, status) = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()).unwrap().unwrap();
        assert_eq!(
            status.terminating_signal(),
            Some(rustix::process::Signal::KILL.as_raw()),
            "{cmd} outlived its shell (exit {:?})",
            status.exit_status()
        );
    }
}
