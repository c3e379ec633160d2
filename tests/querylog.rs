//! The query log and live statistics through the real binary: entries with
//! the right fields, a full queue that drops and counts instead of blocking,
//! flash copies that survive SIGKILL, restore after a "reboot", retention and
//! max_size, broken databases that leave DNS answering, and the CLI.
#![allow(clippy::unwrap_used)]

mod common;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use hydradns::querylog::history::History;
use hydradns::querylog::read::{LogRow, TopRow};
use nanoserde::DeJson;
use simple_dns::RCODE;

/// Waits (bounded) until the log holds at least `n` rows. The writer runs
/// at a low priority, so the bounds here are generous: a busy machine
/// leaves it little of the CPU.
fn wait_rows(gw: &Gateway, n: usize) -> Vec<LogRow> {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = log_rows(gw, &[]);
        if rows.len() >= n || Instant::now() > end {
            return rows;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn entries_land_with_the_right_fields() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "config blocklist\n\toption name 'ads'\n\tlist domain 'blocked.example'\n{}",
            log_section("\toption batch_interval '50ms'\n")
        ),
    ));
    udp(gw.addr, "Ads.Blocked.Example", A);
    udp(gw.addr, "www.example", AAAA);
    udp(gw.addr, "www.example", AAAA);
    udp(gw.addr, "servfail.example", A);
    let mut bad = build_query(9, "x.example", A, None);
    bad.truncate(14);
    udp_raw(gw.addr, &bad, Duration::from_secs(10)).unwrap();
    let rows = wait_rows(&gw, 5);
    assert_eq!(rows.len(), 5, "{rows:?}");
    // Newest first.
    let (local, servfail, cached, forwarded, blocked) = (&rows[0], &rows[1], &rows[2], &rows[3], &rows[4]);
    assert_eq!(
        (blocked.name.as_str(), blocked.qtype.as_str(), blocked.outcome.as_str()),
        ("ads.blocked.example", "A", "blocked")
    );
    assert_eq!(blocked.list.as_deref(), Some("ads"));
    assert_eq!(blocked.rcode, "NOERROR");
    assert_eq!(blocked.client, "127.0.0.1");
    assert_eq!((forwarded.outcome.as_str(), forwarded.qtype.as_str()), ("forwarded", "AAAA"));
    assert_eq!(forwarded.upstream, Some(up.addr.to_string()));
    assert_eq!(cached.outcome, "cached");
    assert_eq!(cached.upstream, None);
    assert_eq!(
        (servfail.outcome.as_str(), servfail.rcode.as_str()),
        ("forwarded", "SERVFAIL"),
        "the upstream's own SERVFAIL"
    );
    assert_eq!((local.outcome.as_str(), local.rcode.as_str(), local.name.as_str()), ("local", "FORMERR", ""));
    assert!(forwarded.latency_us > 0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(rows.iter().all(|r| r.unix_ms <= now && now - r.unix_ms < 60_000 && r.time.ends_with('Z')));
    // Filters.
    assert_eq!(log_rows(&gw, &["--blocked"]).len(), 1);
    assert_eq!(log_rows(&gw, &["--domain", "example"]).len(), 4, "a domain and everything under it");
    assert_eq!(log_rows(&gw, &["--domain", "*.blocked.*"]).len(), 1);
    assert_eq!(log_rows(&gw, &["--client", "127.0.0.2"]).len(), 0);
    assert_eq!(log_rows(&gw, &["--since", "1h", "--limit", "2"]).len(), 2);
    // Pages: newest first, the next page the rows older than the last one shown.
    let first = log_rows(&gw, &["--limit", "2"]);
    let next = log_rows(&gw, &["--limit", "2", "--before", &first[1].id.to_string()]);
    let all = log_rows(&gw, &[]);
    let ids = |rows: &[LogRow]| rows.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!([ids(&first), ids(&next)].concat(), ids(&all[..4]), "two pages are the first four rows");
    assert!(ids(&all).windows(2).all(|w| w[0] > w[1]));
    assert_eq!(log_rows(&gw, &["--outcome", "blocked"]).len(), 1);
    assert_eq!(log_rows(&gw, &["--outcome", "cached"]).len(), 1);
    assert_eq!(log_rows(&gw, &["--list", "ads"]).len(), 1);
    assert_eq!(log_rows(&gw, &["--list", "ads", "--outcome", "cached"]).len(), 0);
    // The server's own counters agree with what was sent.
    let s = gw.report();
    assert_eq!((s.queries, s.counters.blocked, s.counters.cached, s.counters.formerr), (5, 1, 1, 1));
    assert_eq!(s.querylog.written, 5);
    assert_eq!(s.querylog.dropped + s.querylog.lost, 0);
    assert!(s.latency.samples == 5 && s.latency.p99_us >= s.latency.p50_us);
}

#[test]
fn readers_see_queries_still_waiting_for_their_batch() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &log_section("\toption batch_interval '60s'\n")));
    for name in ["one.example", "two.example", "three.example"] {
        udp(gw.addr, name, A);
    }
    let s = gw.report();
    assert_eq!((s.querylog.written, s.querylog.queued), (0, 3), "the batch waits out its minute");
    // `log` asks the gateway to commit first: no minute's wait.
    let rows = log_rows(&gw, &[]);
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["three.example", "two.example", "one.example"]);
    assert_eq!(gw.report().querylog.written, 3);
    udp(gw.addr, "four.example", A);
    let (code, out, err) = cli(&["top", "-c", cfg_path(&gw), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("four.example"), "top asks too: {out}");
}

#[test]
fn full_queue_drops_and_counts_without_blocking_dns() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    // A queue of 16 that the writer leaves alone for a minute.
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "config blocklist\n\tlist domain 'blocked.example'\n{}",
            log_section("\toption queue_size '16'\n\toption batch_size '1000'\n\toption batch_interval '60s'\n")
        ),
    ));
    let t = Instant::now();
    for i in 0..100 {
        assert_eq!(udp(gw.addr, &format!("q{i}.blocked.example"), A).ips(), ["0.0.0.0"]);
    }
    // Not after the writer's minute: a sixth of it, for 100 queries.
    assert!(t.elapsed() < Duration::from_secs(10));
    let s = gw.report();
    assert_eq!(s.counters.blocked, 100);
    assert_eq!((s.querylog.queued, s.querylog.dropped), (16, 84), "{:?}", s.querylog);
    assert_eq!(s.querylog.queue_size, 16);
    // At stop the writer drains what it holds.
    let (status, dir) = gw.stop_keeping_dir();
    assert!(status.success());
    let conn = rusqlite::Connection::open(dir.0.join("live/queries.db")).unwrap();
    let n: i64 = conn.query_row("SELECT count(*) FROM queries", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 16);
}

fn integrity_ok(path: &Path) -> Result<i64, String> {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| e.to_string())?;
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    if ok != "ok" {
        return Err(ok);
    }
    c.query_row("SELECT count(*) FROM queries", [], |r| r.get(0)).map_err(|e| e.to_string())
}

#[test]
fn flash_copy_on_interval_and_at_stop_then_restore_after_reboot() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let text = Gateway::localize(
        &config(&[&up], &log_section("\toption flush_interval '1s'\n\toption batch_interval '50ms'\n")),
        &dir.0,
    );
    let cfg = dir.file("hydradns.conf", &text);
    let flash = dir.0.join("flash/queries.db");
    let live = dir.0.join("live/queries.db");
    let gw = Gateway::start_with(dir, cfg.clone());
    for i in 0..10 {
        udp(gw.addr, &format!("n{i}.example"), A);
    }
    assert!(gw.wait_log("query log copied to", Duration::from_secs(60)), "{}", gw.log());
    assert!(integrity_ok(&flash).unwrap() >= 1);
    udp(gw.addr, "last.example", A);
    let (status, dir) = gw.stop_keeping_dir();
    assert!(status.success());
    assert_eq!(integrity_ok(&flash).unwrap(), 11, "the stop copy has every entry");
    // Reboot: tmpfs is empty again.
    for f in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{f}", live.display()));
    }
    let gw = Gateway::start_with(dir, cfg);
    assert!(gw.log().contains("query log restored from"), "{}", gw.log());
    let rows = log_rows(&gw, &[]);
    assert_eq!(rows.len(), 11);
    assert_eq!(rows[0].name, "last.example");
}

/// Fills a live database with `n` rows at `ts`, as if written earlier.
fn prefill(path: &Path, n: usize, ts: i64) {
    let mut conn = hydradns::querylog::writer::open(path, 1 << 30).unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut stmt = tx
            .prepare("INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us) VALUES (?1, ?2, '10.0.0.9', ?3, 1, 'cached', 0, 7)")
            .unwrap();
        // Row ids are the time in ms shifted left by 12, plus a sequence (see the writer).
        for i in 0..n {
            stmt.execute(((ts << 12) + i as i64, ts, format!("host{i}.prefilled.example"))).unwrap();
        }
    }
    tx.commit().unwrap();
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE").unwrap();
}

/// Polls `what` every millisecond (a flush's journal lives for moments);
/// false if it does not hold within a minute.
fn eventually(what: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(60);
    while !what() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Adds `n` rows after the newest one of a live database the gateway may be
/// writing (another connection, as `sqlite3` would), a millisecond apart.
fn append_rows(path: &Path, n: usize) {
    let mut conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    // Immediate: a read-then-write transaction could not take the write lock
    // after the gateway's writer committed in between.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).unwrap();
    {
        let newest: i64 = tx.query_row("SELECT coalesce(max(id), 0) FROM queries", [], |r| r.get(0)).unwrap();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
        let from = (newest >> 12).max(now - 3_600_000) + 1;
        let mut stmt = tx
            .prepare("INSERT INTO queries (id, ts, client, name, qtype, outcome, rcode, latency_us) VALUES (?1, ?2, '10.0.0.9', ?3, 1, 'cached', 0, 7)")
            .unwrap();
        for i in 0..n as i64 {
            stmt.execute(((from + i) << 12, from + i, format!("host{i}.appended.example"))).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// The flash copy opens, passes SQLite's check, and holds the oldest rows
/// of the live database, none missing in between (a prefix); its row count.
fn prefix_of_live(flash: &Path, live: &Path) -> Result<i64, String> {
    // Read-write, as sqlite3 opens it: the first read rolls back the journal
    // a cut flush left (a read-only connection may not).
    let c = rusqlite::Connection::open(flash).map_err(|e| e.to_string())?;
    let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(|e| e.to_string())?;
    if ok != "ok" {
        return Err(ok);
    }
    let views: i64 = c
        .query_row("SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND name = 'queries'", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if views == 0 {
        // Cut while the very first flush set the copy up: the empty file it
        // started from, or that with the `totals` table, which is made before
        // the transaction that adds the first slice and the view. No rows; the
        // gateway's next open of the copy finishes it (flash::try_open).
        return Ok(0);
    }
    let (n, newest): (i64, i64) = c
        .query_row("SELECT count(*), coalesce(max(id), 0) FROM queries", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(|e| e.to_string())?;
    let l = rusqlite::Connection::open(live).unwrap();
    let below: i64 = l.query_row("SELECT count(*) FROM queries WHERE id <= ?1", [newest], |r| r.get(0)).unwrap();
    if below != n {
        return Err(format!("{n} rows on flash, {below} live rows up to its newest"));
    }
    Ok(n)
}

/// kill -9 while a flush is writing (its rollback journal exists), round
/// after round, each with new rows to copy: the copy SQLite opens next is
/// always whole, a prefix of the live rows; then a clean stop completes it
/// and a reboot restores from it. A flush is a few transactions (the copy's
/// tables first), so the journal comes and goes within one: a flush that
/// ended is told by the gateway's log, not by its journal being gone.
#[test]
fn sigkill_during_flushes_never_leaves_a_torn_copy() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let live = dir.0.join("live/queries.db");
    let flash = dir.0.join("flash/queries.db");
    let journal = PathBuf::from(format!("{}-journal", flash.display()));
    // Many rows make each flush take long enough to be cut in the middle.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    prefill(&live, 200_000, now - 7_200_000);
    let text = Gateway::localize(
        &config(&[&up], &log_section("\toption flush_interval '1s'\n\toption max_size '256M'\n")),
        &dir.0,
    );
    let cfg = dir.file("hydradns.conf", &text);
    let (mut before, mut rows, mut mid_flush) = (0, 200_000i64, 0);
    for round in 0..4 {
        if round > 0 {
            append_rows(&live, 50_000);
            rows += 50_000;
        }
        let mut child = common::hydradns()
            .args(["run", "--user", "root", "--log", "stderr", "-c", cfg.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (stderr, sink) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        // A flush in progress shows as SQLite's journal beside the copy.
        assert!(eventually(|| journal.exists()), "round {round}: no flush started");
        if round % 2 == 1 {
            // Let this flush commit, then cut the next one: the copy has rows to lose.
            let end = Instant::now() + Duration::from_secs(120);
            while !log.lock().unwrap().contains("query log copied to") {
                assert!(Instant::now() < end, "round {round}: the flush did not end:\n{}", log.lock().unwrap());
                std::thread::sleep(Duration::from_millis(20));
            }
            append_rows(&live, 50_000);
            rows += 50_000;
            assert!(eventually(|| journal.exists()), "round {round}: no second flush");
        } else {
            // Somewhere later in the flush, or (rarely) just after it.
            std::thread::sleep(Duration::from_millis(round * 60));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        mid_flush += usize::from(journal.exists());
        let n = prefix_of_live(&flash, &live).unwrap_or_else(|e| panic!("round {round}: flash copy: {e}"));
        assert!(n >= before, "round {round}: {n} rows, {before} before");
        before = n;
    }
    assert!(mid_flush >= 2, "{mid_flush} of the kills landed mid-flush");
    assert!(before >= 200_000, "the committed flushes kept their rows: {before}");
    let gw = Gateway::start_with(dir, cfg.clone());
    assert!(gw.wait_log("query log copied to", Duration::from_secs(60)), "{}", gw.log());
    let (status, dir) = gw.stop_keeping_dir();
    assert!(status.success());
    assert!(!journal.exists());
    assert_eq!(prefix_of_live(&flash, &live).unwrap(), rows, "the last flush completes it");
    // Reboot: tmpfs is empty again; the copy comes back whole.
    for f in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{f}", live.display()));
    }
    let gw = Gateway::start_with(dir, cfg);
    assert!(gw.log().contains("query log restored from"), "{}", gw.log());
    assert_eq!(gw.report().querylog.written, 0);
    let (_, _dir) = gw.stop_keeping_dir();
    assert_eq!(integrity_ok(&live).unwrap(), rows);
}

/// The previous version's flash copy (a whole-database copy by SQLite's
/// backup, a WAL database) is taken over: restored at boot with its rows,
/// then added to, and it becomes a rollback-journal database.
#[test]
fn the_previous_versions_flash_copy_is_taken_over() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let live = dir.0.join("live/queries.db");
    let flash = dir.0.join("flash/queries.db");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    prefill(&live, 500, now - 60_000);
    {
        let src = rusqlite::Connection::open(&live).unwrap();
        std::fs::create_dir_all(flash.parent().unwrap()).unwrap();
        let mut dst = rusqlite::Connection::open(&flash).unwrap();
        rusqlite::backup::Backup::new(&src, &mut dst).unwrap().step(-1).unwrap();
    }
    for f in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{f}", live.display()));
    }
    let text = Gateway::localize(
        &config(&[&up], &log_section("\toption flush_interval '1s'\n\toption batch_interval '20ms'\n")),
        &dir.0,
    );
    let cfg = dir.file("hydradns.conf", &text);
    let gw = Gateway::start_with(dir, cfg);
    assert!(gw.log().contains("query log restored from"), "{}", gw.log());
    udp(gw.addr, "after.example", A);
    assert!(gw.wait_log("(1 new rows", Duration::from_secs(60)), "{}", gw.log());
    let (status, _dir) = gw.stop_keeping_dir();
    assert!(status.success());
    assert_eq!(integrity_ok(&flash).unwrap(), 501);
    let c = rusqlite::Connection::open(&flash).unwrap();
    let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete");
}

/// The flash copy grows by the new rows only, and a flush with nothing new
/// writes nothing: the copy's file is not touched, no bytes are counted.
#[test]
fn only_new_rows_reach_flash_and_an_idle_flush_writes_nothing() {
    use std::os::unix::fs::MetadataExt;
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    // The live database on tmpfs, as on a router: reading a WAL database
    // marks its -shm, which a disk-backed file system would count as the
    // flusher's writes. Elsewhere the counter is not compared.
    let tmpfs = std::path::Path::new("/dev/shm").is_dir();
    let live_dir = if tmpfs {
        TempDir(PathBuf::from(format!("/dev/shm/{}", dir.0.file_name().unwrap().to_string_lossy())))
    } else {
        TempDir(dir.0.join("live"))
    };
    let live = live_dir.0.join("queries.db");
    let flash = dir.0.join("flash/queries.db");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    // About 1.5 MB of rows: the full copy a flush used to write every time.
    prefill(&live, 20_000, now - 60_000);
    let section = format!(
        "config querylog 'querylog'\n\toption path '{}'\n\toption flash_path '@DIR@/flash/queries.db'\n\
         \toption flush_interval '1s'\n\toption batch_interval '50ms'\n",
        live.display()
    );
    let text = Gateway::localize(&config(&[&up], &section), &dir.0);
    let cfg = dir.file("hydradns.conf", &text);
    let gw = Gateway::start_with(dir, cfg);
    assert!(gw.wait_log("(20000 new rows", Duration::from_secs(60)), "{}", gw.log());
    let first = gw.report().querylog;
    assert_eq!((first.flushes, first.flush_errors), (1, 0));
    let size = std::fs::metadata(&flash).unwrap().len();
    assert!(size > 1_000_000, "{size}");
    // Idle: three more intervals pass, and the copy is left alone.
    let stamp = |p: &Path| std::fs::metadata(p).map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino())).unwrap();
    // On a relatime mount (a test machine; OpenWrt mounts its overlay
    // noatime) the first read after a write updates the access time, and
    // the kernel may charge that inode page to the reader: read the copy and
    // its directory here, so an idle flush's bytes are its own.
    let _ = std::fs::read(&flash).unwrap();
    let _ = std::fs::read_dir(flash.parent().unwrap()).unwrap().count();
    let seen = stamp(&flash);
    // Three more intervals, the flusher's own clock (whole seconds) says.
    wait_for("three idle flushes", Duration::from_secs(60), || {
        gw.report().querylog.last_flush_unix >= first.last_flush_unix + 3
    });
    let idle = gw.report().querylog;
    assert_eq!(idle.flushes, 1, "{idle:?}");
    assert_eq!((first.flash_files_written, idle.flash_files_written), (2, 2), "the copy and its journal, once");
    if tmpfs {
        assert_eq!(idle.flash_bytes_written, first.flash_bytes_written, "{idle:?}");
    }
    assert!(idle.last_flush_unix >= first.last_flush_unix, "the idle flushes ran");
    assert_eq!(stamp(&flash), seen, "the idle flushes did not touch the copy");
    // Five queries: the next flush adds five rows, and a few pages, not the copy.
    for i in 0..5 {
        udp(gw.addr, &format!("new{i}.example"), A);
    }
    assert!(gw.wait_log("(5 new rows", Duration::from_secs(60)), "{}", gw.log());
    let after = gw.report().querylog;
    assert_eq!((after.flushes, after.flash_files_written), (2, 4));
    let grew = std::fs::metadata(&flash).unwrap().len() - size;
    assert!(grew <= 16 * 1024, "the copy grew by {grew} bytes for 5 rows");
    // Where the kernel accounts writes (not on tmpfs), the second flush
    // wrote a few pages and the journal: under a tenth of the first's.
    let second = after.flash_bytes_written - first.flash_bytes_written;
    assert!(second * 10 <= first.flash_bytes_written.max(1) || first.flash_bytes_written == 0, "{second} {first:?}");
    assert_eq!(integrity_ok(&flash).unwrap(), 20_005);
    assert_eq!(integrity_ok(&live).unwrap(), 20_005);
}

/// The query log is every device's DNS history: its files are 0600 and the
/// directories it makes 0700, on tmpfs and on flash alike (issue 49).
#[test]
fn query_log_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw =
        Gateway::start(&config(&[&up], &log_section("\toption flush_interval '1s'\n\toption batch_interval '20ms'\n")));
    udp(gw.addr, "private.example", A);
    assert!(gw.wait_log("query log copied to", Duration::from_secs(60)), "{}", gw.log());
    let mode = |rel: &str| std::fs::metadata(gw.dir.0.join(rel)).unwrap().permissions().mode() & 0o777;
    for file in ["live/queries.db", "live/queries.db-wal", "live/queries.db-shm", "flash/queries.db"] {
        assert_eq!(mode(file), 0o600, "{file}");
    }
    for d in ["live", "flash"] {
        assert_eq!(mode(d), 0o700, "{d}");
    }
}

/// Started as root, the gateway makes the directories it writes before it
/// becomes its own user: those of the query log were made 0755 there
/// (issue 58), where the log itself makes them 0700. Each one it makes is
/// 0700 and its user's; one that exists (the test's directory, as `/tmp`
/// is on a router) keeps its mode and owner.
#[test]
fn the_query_logs_directories_are_private_when_made_before_the_user_switch() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if !is_root() {
        eprintln!("skipped: needs root, to change user");
        return;
    }
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o751)).unwrap();
    let text = config(
        &[&up],
        "\toption control_socket '@DIR@/run/control.sock'\n\
         config querylog 'querylog'\n\toption path '@DIR@/tmpfs/hydradns/queries.db'\n\
         \toption flash_path '@DIR@/flash/a/b/queries.db'\n\toption flush_interval '1s'\n\
         \toption batch_interval '20ms'\n",
    );
    let conf = dir.file("hydradns.conf", &Gateway::localize(&text, &dir.0));
    let base = dir.0.clone();
    let gw = Gateway::start_as(dir, conf, hydradns(), "nobody");
    udp(gw.addr, "private.example", A);
    assert!(gw.wait_log("query log copied to", Duration::from_secs(60)), "{}", gw.log());
    let meta = |rel: &str| std::fs::metadata(base.join(rel)).unwrap();
    for d in ["tmpfs", "tmpfs/hydradns", "flash", "flash/a", "flash/a/b"] {
        assert_eq!(meta(d).permissions().mode() & 0o7777, 0o700, "{d}");
        assert_eq!(meta(d).uid(), 65534, "{d} is the gateway's user's");
    }
    assert_eq!(meta("").permissions().mode() & 0o7777, 0o751, "a directory it did not make keeps its mode");
    assert_eq!(meta("").uid(), 0);
}

/// A flash copy that is not a database is renamed aside, logged, and a
/// fresh copy started; DNS and the live log go on.
#[test]
fn a_corrupt_flash_copy_is_set_aside() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("flash")).unwrap();
    let junk = vec![0x5a; 64 * 1024];
    std::fs::write(dir.0.join("flash/queries.db"), &junk).unwrap();
    let text = Gateway::localize(
        &config(&[&up], &log_section("\toption flush_interval '1s'\n\toption batch_interval '20ms'\n")),
        &dir.0,
    );
    let cfg = dir.file("hydradns.conf", &text);
    let gw = Gateway::start_with(dir, cfg);
    assert!(gw.log().contains("is unusable"), "a reboot's restore found it: {}", gw.log());
    assert_eq!(udp(gw.addr, "after.example", A).rcode, RCODE::NoError);
    assert!(gw.wait_log("query log copied to", Duration::from_secs(60)), "{}", gw.log());
    assert_eq!(integrity_ok(&gw.dir.0.join("flash/queries.db")).unwrap(), 1);
    let aside: Vec<_> = std::fs::read_dir(gw.dir.0.join("flash"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("queries.db.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "kept for inspection");
    assert_eq!(std::fs::read(aside[0].path()).unwrap(), junk);
    assert_eq!(gw.report().querylog.flush_errors, 0);
}

#[test]
fn retention_and_max_size_hold() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let live = dir.0.join("live/queries.db");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    prefill(&live, 50, now - 8 * 86_400_000);
    let text = Gateway::localize(
        &config(
            &[&up],
            &format!(
                "config blocklist\n\tlist domain 'blocked.example'\n{}",
                log_section(
                    "\toption retention '7d'\n\toption max_size '256K'\n\toption batch_interval '20ms'\n\toption batch_size '64'\n"
                )
            ),
        ),
        &dir.0,
    );
    let cfg = dir.file("hydradns.conf", &text);
    let gw = Gateway::start_with(dir, cfg);
    // Entries older than the retention go at start.
    let end = Instant::now() + Duration::from_secs(60);
    while !log_rows(&gw, &["--domain", "prefilled.example"]).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(log_rows(&gw, &["--domain", "prefilled.example"]).len(), 0, "8-day-old entries deleted");
    // Far more than 256 KiB of entries: the database stays under its cap, newest kept.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 512];
    for i in 0..6000u32 {
        let q = build_query(i as u16, &format!("a-rather-long-label-{i}.blocked.example"), A, None);
        sock.send_to(&q, gw.addr).unwrap();
        sock.recv_from(&mut buf).unwrap();
        // What this test holds is the cap, not the writer's pace: the writer
        // (at nice 15) catches up every 1,000, so a busy machine cannot fill
        // the 4,096-entry queue and make it drop (a test of its own does that).
        if i % 1000 == 999 {
            let end = Instant::now() + Duration::from_secs(60);
            while gw.report().querylog.written < u64::from(i + 1) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let end = Instant::now() + Duration::from_secs(60);
    while gw.report().querylog.written < 6000 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = gw.report();
    assert_eq!((s.querylog.written, s.querylog.lost, s.querylog.dropped), (6000, 0, 0), "{:?}", s.querylog);
    let size = std::fs::metadata(&live).unwrap().len();
    assert!(size <= 256 * 1024, "database is {size} bytes");
    let rows = log_rows(&gw, &[]);
    assert!(rows.len() < 6000, "oldest entries deleted to stay under max_size");
    assert_eq!(rows[0].name, "a-rather-long-label-5999.blocked.example");
}

#[test]
fn unwritable_or_corrupt_database_leaves_dns_answering() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    // /proc refuses new files even to root: the database cannot be created.
    let gw = Gateway::start(&config(
        &[&up],
        "config querylog 'querylog'\n\toption path '/proc/hydradns-test/queries.db'\n\toption flash_path '@DIR@/flash/q.db'\n\toption batch_interval '20ms'\n",
    ));
    for i in 0..20 {
        assert_eq!(udp(gw.addr, &format!("w{i}.example"), A).rcode, RCODE::NoError);
    }
    let end = Instant::now() + Duration::from_secs(60);
    while gw.report().querylog.lost < 20 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(gw.report().querylog.lost, 20, "every entry counted as lost");
    assert!(gw.log().contains("query log: cannot open /proc/hydradns-test/queries.db"), "{}", gw.log());
    drop(gw);

    // A damaged file is moved aside and a fresh database started.
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.0.join("live")).unwrap();
    std::fs::write(dir.0.join("live/queries.db"), vec![0x5a; 64 * 1024]).unwrap();
    let text = Gateway::localize(&config(&[&up], &log_section("\toption batch_interval '20ms'\n")), &dir.0);
    let cfg = dir.file("hydradns.conf", &text);
    let gw = Gateway::start_with(dir, cfg);
    assert_eq!(udp(gw.addr, "after.example", A).rcode, RCODE::NoError);
    assert_eq!(wait_rows(&gw, 1).len(), 1);
    let aside = std::fs::read_dir(gw.dir.0.join("live"))
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().contains("corrupt-"));
    assert!(aside, "damaged file kept aside for inspection");
    assert!(gw.log().contains("was damaged"), "{}", gw.log());
}

#[test]
fn stats_and_top_in_text_and_json() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "config blocklist\n\toption name 'ads'\n\tlist domain 'blocked.example'\n{}",
            log_section("\toption batch_interval '20ms'\n")
        ),
    ));
    for _ in 0..3 {
        udp(gw.addr, "popular.example", A);
    }
    udp(gw.addr, "rare.example", A);
    for _ in 0..2 {
        udp(gw.addr, "x.blocked.example", A);
    }
    wait_rows(&gw, 6);
    let (code, text, err) = cli(&["stats", "-c", cfg_path(&gw)]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("queries      6 (6 udp, 0 tcp)"), "{text}");
    assert!(text.contains("blocked    2 (33.3%)"), "{text}");
    assert!(text.contains("hit ratio 50.0%"), "{text}");
    assert!(text.contains("ads (blocklist): 1 blocks"), "{text}");
    assert!(text.contains(&format!("upstream     {}: 2 answers", up.addr)), "{text}");
    assert!(text.contains("query log    6 written, 0 dropped"), "{text}");
    assert!(text.contains("\nflash        ") && text.contains(" files written since start ("), "{text}");
    let s = gw.report();
    assert_eq!((s.queries, s.counters.forwarded, s.counters.cached, s.counters.blocked), (6, 2, 2, 2));
    assert_eq!(s.upstreams[0].answers, 2);

    let (code, out, _) = cli(&["top", "-c", cfg_path(&gw), "--json"]);
    assert_eq!(code, 0);
    let (_, log, _) = cli(&["log", "-c", cfg_path(&gw), "--json"]);
    assert!(log.starts_with("{\"schema\":1,\"entries\":[{"), "{log}");
    let top = TopPage::deserialize_json(out.trim()).unwrap();
    assert_eq!(top.schema, 1, "{out}");
    assert_eq!(top.entries[0], TopRow { key: "popular.example".into(), count: 3 });
    let (_, out, _) = cli(&["top", "-c", cfg_path(&gw), "--blocked", "--json"]);
    assert_eq!(
        TopPage::deserialize_json(out.trim()).unwrap().entries,
        [TopRow { key: "x.blocked.example".into(), count: 2 }]
    );
    let (_, out, _) = cli(&["top", "-c", cfg_path(&gw), "--clients"]);
    assert_eq!(out.trim(), "6  127.0.0.1");
    // The history: 144 buckets of 10 minutes, the six queries in the current one.
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() / 600 * 600;
    let (code, out, err) = cli(&["stats", "-c", cfg_path(&gw), "--history", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("{\"schema\":1,\"buckets\":[{\"start\":"), "{out}");
    let h = History::deserialize_json(out.trim()).unwrap();
    assert_eq!(h.buckets.len(), 144);
    let last = h.buckets.last().unwrap();
    assert!(last.start == before || last.start == before + 600, "the current bucket is the last: {last:?}");
    let (allowed, blocked) = h.buckets.iter().fold((0, 0), |(a, b), x| (a + x.allowed, b + x.blocked));
    assert_eq!((allowed, blocked), (4, 2), "{out}");
    let (_, text, _) = cli(&["stats", "-c", cfg_path(&gw), "--history"]);
    assert!(text.trim_end().ends_with("last 24 h                 4         2"), "{text}");
    let (_, out, _) = cli(&["log", "-c", cfg_path(&gw), "--limit", "1"]);
    assert!(out.contains(" x.blocked.example blocked NOERROR ") && out.contains("list ads"), "{out}");
    // Usage errors and a gateway that is not running.
    assert_eq!(cli(&["top", "-c", cfg_path(&gw), "--blocked", "--clients"]).0, 2);
    assert_eq!(cli(&["stats", "-c", cfg_path(&gw), "--blocked"]).0, 2);
    let cfg = gw.config.clone();
    let (_, _dir) = gw.stop_keeping_dir();
    let (code, _, err) = cli(&["stats", "-c", cfg.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is it running?"), "{err}");
}

#[test]
fn locked_database_costs_entries_then_recovers() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], &log_section("\toption batch_interval '20ms'\n")));
    udp(gw.addr, "before.example", A);
    assert_eq!(wait_rows(&gw, 1).len(), 1);
    // Another process holds the write lock until the writer gave up on it
    // (it waits 2 s): taken before the queries, let go once the loss is counted.
    let live = gw.dir.0.join("live/queries.db");
    let (taken_tx, taken) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let locker = std::thread::spawn(move || {
        let c = rusqlite::Connection::open(live).unwrap();
        c.execute_batch("BEGIN EXCLUSIVE").unwrap();
        taken_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(Duration::from_secs(120));
        c.execute_batch("COMMIT").unwrap();
    });
    taken.recv().unwrap();
    // Within the writer's 2 s wait on the lock: a fixed wait of the writer's,
    // the one bound here that is not five times the time it measures.
    let t = Instant::now();
    for i in 0..5 {
        assert_eq!(udp(gw.addr, &format!("during{i}.example"), A).rcode, RCODE::NoError);
    }
    assert!(t.elapsed() < Duration::from_secs(2), "DNS did not wait for the lock");
    let end = Instant::now() + Duration::from_secs(60);
    while gw.report().querylog.lost == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    release.send(()).unwrap();
    locker.join().unwrap();
    assert_eq!(gw.report().querylog.lost, 5, "the batch that met the lock is counted as lost");
    // After the lock is gone the writer reopens (within 5 s) and logs again.
    udp(gw.addr, "after.example", A);
    let end = Instant::now() + Duration::from_secs(60);
    while log_rows(&gw, &["--domain", "after.example"]).is_empty() && Instant::now() < end {
        udp(gw.addr, "after.example", A);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!log_rows(&gw, &["--domain", "after.example"]).is_empty(), "{}", gw.log());
    assert!(gw.log().contains("entries lost: database is locked"), "{}", gw.log());
}

#[test]
fn anonymized_clients_and_periodic_summary() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &log_section("\toption anonymize_clients '1'\n\toption batch_interval '20ms'\n\toption stats_interval '1s'\n"),
    ));
    udp(gw.addr, "who.example", A);
    let rows = wait_rows(&gw, 1);
    assert_eq!(rows[0].client, "127.0.0.0");
    assert!(gw.wait_log("summary: uptime=", Duration::from_secs(30)), "{}", gw.log());
    let log = gw.log();
    let line = log.lines().find(|l| l.contains("summary: ")).unwrap();
    assert!(line.contains(" queries=1 ") && line.contains(" log_written="), "{line}");
}

/// `hydradns top --json`.
#[derive(DeJson)]
struct TopPage {
    schema: u64,
    entries: Vec<TopRow>,
}
