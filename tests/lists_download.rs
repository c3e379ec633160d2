//! List sources by URL through the real binary, against a local HTTP(S)
//! server written in the tests: first fetch, conditional 304s, every kind of
//! failed download keeping the last good copy, starting offline from the
//! saved copy, swaps under continuous queries, HTTPS with a configured CA,
//! and CNAME cloaking.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/http.rs"]
mod http;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use common::*;
use http::{HttpServer, Route, list_body};
use hydradns::lists::{ListInfo, Refreshed};
use nanoserde::DeJson;
use simple_dns::RCODE;

/// Downloads run on the lists thread at nice 15, which a busy machine
/// leaves little of the CPU: a 5 s download_timeout (the hanging server's
/// wait), and up to two minutes for a list to be swapped in.
fn list_config(up: &Upstream, url: &str, extra: &str) -> String {
    config(
        &[up],
        &format!(
            "\toption list_dir '@DIR@/lists'\n\toption download_timeout '5s'\n{extra}\
             config blocklist\n\toption name 'remote'\n\toption url '{url}'\n"
        ),
    )
}

fn update(gw: &Gateway) -> Vec<Refreshed> {
    let (code, out, err) = cli(&["update", "-c", gw.config.to_str().unwrap(), "--json"]);
    assert!(code == 0 || code == 1, "{err}");
    Vec::<Refreshed>::deserialize_json(out.trim()).unwrap_or_else(|e| panic!("{e}: {out} {err}"))
}

fn lists(gw: &Gateway) -> Vec<ListInfo> {
    let (code, out, err) = cli(&["lists", "-c", gw.config.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    Vec::<ListInfo>::deserialize_json(out.trim()).unwrap()
}

fn wait_blocked(gw: &Gateway, name: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end {
        if udp(gw.addr, name, A).ips() == ["0.0.0.0"] {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn first_fetch_then_304s_and_every_failure_keeps_the_last_good_copy() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start();
    web.set("/list.txt", Route::List { body: list_body(2000, "remote.example"), etag: "\"v1\"".into() });
    let gw = Gateway::start(&list_config(&up, &web.url("/list.txt"), "\toption max_list_size '256K'\n"));
    // No copy at start: fetched in the background, then swapped in.
    assert!(wait_blocked(&gw, "h7.remote.example"), "{}", gw.log());
    assert!(gw.log().contains("list 'remote': updated, 2000 entries"), "{}", gw.log());
    let info = &lists(&gw)[0];
    assert_eq!((info.entries, info.etag.as_deref()), (2000, Some("\"v1\"")));
    assert!(info.last_success.is_some() && info.last_error.is_none(), "{info:?}");
    assert!(info.files[0].ends_with(".list") && std::path::Path::new(&info.files[0]).exists());

    // Unchanged: one conditional request, a 304, nothing rebuilt.
    let r = update(&gw);
    assert_eq!(r[0].status, "not-modified", "{r:?}");
    assert_eq!(web.conditional_hits("/list.txt"), 1);

    let failures: Vec<(&str, Route, &str)> = vec![
        ("404", Route::Status(404), "HTTP 404"),
        ("server error", Route::Status(503), "HTTP 503"),
        ("hang", Route::Hang, ""),
        ("truncated body", Route::Truncated(list_body(3000, "remote.example")), ""),
        ("over max_list_size", Route::Endless(1 << 30), "max_list_size"),
        (
            "binary junk",
            Route::List { body: (0..5000u32).map(|i| (i * 7919 % 251) as u8).collect(), etag: "\"bin\"".into() },
            "binary",
        ),
        (
            "shrank",
            Route::List { body: list_body(10, "remote.example"), etag: "\"tiny\"".into() },
            "shrank from 2000 to 10",
        ),
        (
            "an HTML error page",
            Route::List {
                body: b"<html>\n<body>\n<h1>Oops</h1>\n</body>\n</html>\n".to_vec(),
                etag: "\"html\"".into(),
            },
            "",
        ),
    ];
    for (what, route, needle) in failures {
        web.set("/list.txt", route);
        let t = Instant::now();
        let r = update(&gw);
        assert_eq!(r[0].status, "failed", "{what}: {r:?}");
        assert!(r[0].error.as_deref().unwrap_or("").contains(needle), "{what}: {r:?}");
        // A hung server costs the 5 s download_timeout; far from a wait without end.
        assert!(t.elapsed() < Duration::from_secs(30), "{what}: bounded by download_timeout: {:?}", t.elapsed());
        assert_eq!(r[0].entries, 2000, "{what}: the good copy is still the one in use");
        assert_eq!(udp(gw.addr, "h1999.remote.example", A).ips(), ["0.0.0.0"], "{what}");
    }
    assert!(gw.log().contains("download failed (HTTP 404); keeping the saved copy (2000 entries)"), "{}", gw.log());
    let info = &lists(&gw)[0];
    assert!(info.last_error.is_some() && info.entries == 2000, "{info:?}");

    // A real update goes through again.
    web.set("/list.txt", Route::List { body: list_body(3000, "remote.example"), etag: "\"v2\"".into() });
    let r = update(&gw);
    assert_eq!((r[0].status.as_str(), r[0].entries), ("updated", 3000), "{r:?}");
    assert_eq!(udp(gw.addr, "h2999.remote.example", A).ips(), ["0.0.0.0"]);
}

/// Every file in `dir` with what would show a write: size, change time, inode.
fn stamps(dir: &std::path::Path) -> Vec<(String, u64, i64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (e.file_name().to_string_lossy().into_owned(), m.len(), m.ctime(), m.ctime_nsec(), m.ino())
        })
        .collect();
    v.sort();
    v
}

/// A list whose content equals the saved copy writes nothing to `list_dir`:
/// not on a 304, not when the server sends the same bytes under a new ETag
/// (or none), and the new ETag still makes the next check a 304.
#[test]
fn an_unchanged_list_writes_nothing_to_flash() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start();
    let body = list_body(2000, "remote.example");
    web.set("/list.txt", Route::List { body: body.clone(), etag: "\"v1\"".into() });
    let gw = Gateway::start(&list_config(&up, &web.url("/list.txt"), ""));
    assert!(wait_blocked(&gw, "h7.remote.example"), "{}", gw.log());
    let dir = gw.dir.0.join("lists");
    let before = stamps(&dir);
    assert_eq!(before.len(), 2, "the copy and its metadata: {before:?}");
    let worn = gw.report().lists_flash_bytes_written;
    let files = gw.report().lists_flash_files_written;
    assert_eq!(files, 2, "the copy and its metadata");

    let r = update(&gw);
    assert_eq!(r[0].status, "not-modified", "{r:?}");
    assert_eq!(web.conditional_hits("/list.txt"), 1);
    assert_eq!(stamps(&dir), before, "a 304 writes nothing");

    // The same bytes, but the server's ETag changed: a full download, compared, not written.
    web.set("/list.txt", Route::List { body: body.clone(), etag: "\"v1-gzip\"".into() });
    let r = update(&gw);
    assert_eq!((r[0].status.as_str(), r[0].entries), ("not-modified", 2000), "{r:?}");
    assert_eq!(stamps(&dir), before, "the same bytes write nothing");
    // It remembers the new ETag (in memory): the next check is a 304.
    assert_eq!(update(&gw)[0].status, "not-modified");
    assert_eq!(web.last_if_none_match("/list.txt").as_deref(), Some("\"v1-gzip\""));
    assert_eq!(stamps(&dir), before);
    assert_eq!(gw.report().lists_flash_bytes_written, worn, "the gateway's own count agrees");
    assert_eq!(gw.report().lists_flash_files_written, files, "no file written");

    // A change is saved as before.
    web.set("/list.txt", Route::List { body: list_body(2100, "remote.example"), etag: "\"v2\"".into() });
    assert_eq!(update(&gw)[0].status, "updated");
    assert_ne!(stamps(&dir), before);
    assert_eq!(udp(gw.addr, "h2099.remote.example", A).ips(), ["0.0.0.0"]);
}

#[test]
fn starts_from_the_saved_copy_with_no_network() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start();
    web.set("/l", Route::List { body: list_body(500, "saved.example"), etag: "\"a\"".into() });
    let url = web.url("/l");
    let gw = Gateway::start(&list_config(&up, &url, ""));
    assert!(wait_blocked(&gw, "h3.saved.example"));
    let (_, dir) = gw.stop_keeping_dir();
    drop(web); // the list host is gone: no network
    let text = std::fs::read_to_string(dir.0.join("hydradns.conf")).unwrap();
    let t = Instant::now();
    // A second config file in the test's own directory, removed with it.
    let offline = dir.0.join("offline.conf");
    std::fs::write(&offline, text).unwrap();
    let gw = Gateway::start_with(dir, offline);
    assert_eq!(udp(gw.addr, "h3.saved.example", A).ips(), ["0.0.0.0"], "served from the saved copy at once");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(gw.log().contains("list 'remote' (blocklist): 500 blocks"), "{}", gw.log());
    let _ = url;
}

#[test]
fn update_and_sighup_swap_lists_while_a_client_queries() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start();
    web.set("/l", Route::List { body: list_body(20_000, "one.example"), etag: "\"1\"".into() });
    let gw = Gateway::start(&list_config(&up, &web.url("/l"), ""));
    assert!(wait_blocked(&gw, "h1.one.example"));
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, bad) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let addr = gw.addr;
    let client = {
        let (stop, ok, bad) = (stop.clone(), ok.clone(), bad.clone());
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(300);
            let mut i = 0u32;
            while !stop.load(SeqCst) && Instant::now() < end {
                let q = build_query(i as u16, &format!("h{}.one.example", i % 100), A, None);
                // A dropped query never has its answer; 5 s is a wait no
                // busy machine makes an answered one miss.
                match udp_raw(addr, &q, Duration::from_secs(5)).map(Reply::parse) {
                    Some(r) if r.rcode == RCODE::NoError => ok.fetch_add(1, SeqCst),
                    _ => bad.fetch_add(1, SeqCst),
                };
                i += 1;
            }
        })
    };
    web.set(
        "/l",
        Route::List {
            body: [list_body(20_000, "one.example"), list_body(5, "two.example")].concat(),
            etag: "\"2\"".into(),
        },
    );
    assert_eq!(update(&gw)[0].status, "updated");
    assert_eq!(udp(gw.addr, "h4.two.example", A).ips(), ["0.0.0.0"], "update swapped the new list in");
    web.set(
        "/l",
        Route::List {
            body: [list_body(20_000, "one.example"), list_body(5, "three.example")].concat(),
            etag: "\"3\"".into(),
        },
    );
    gw.signal("HUP");
    assert!(wait_blocked(&gw, "h4.three.example"), "SIGHUP refreshed the download");
    assert_eq!(udp(gw.addr, "h4.two.example", A).ips(), ["192.0.2.1"], "the old entries are gone");
    // However the swaps and the client's pace compare, it asked throughout.
    let asked = ok.clone();
    wait_for("the client's answers", Duration::from_secs(60), move || asked.load(SeqCst) > 50);
    stop.store(true, SeqCst);
    client.join().unwrap();
    assert_eq!(bad.load(SeqCst), 0, "no query failed during the swaps");
    assert!(ok.load(SeqCst) > 50);
}

#[test]
fn https_with_the_configured_ca_and_not_without_it() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start_tls();
    web.set("/l", Route::List { body: list_body(100, "tls.example"), etag: "\"t\"".into() });
    // The system bundle does not know the test CA: the download must fail.
    let gw = Gateway::start(&list_config(&up, &web.url("/l"), ""));
    let r = update(&gw);
    assert_eq!(r[0].status, "failed", "{r:?}");
    assert_eq!(udp(gw.addr, "h1.tls.example", A).ips(), ["192.0.2.1"]);
    drop(gw);
    let gw = Gateway::start(&list_config(
        &up,
        &web.url("/l"),
        &format!("\toption ca_file '{}'\n", http::test_ca().display()),
    ));
    assert!(wait_blocked(&gw, "h1.tls.example"), "{}", gw.log());
}

/// An `https://` list redirected to plain `http://` was followed: anyone on
/// the path could then write the list. The download fails, the last good
/// copy stays, and the log says why; a redirect that stays on HTTPS works.
#[test]
fn an_https_list_is_not_taken_over_plain_http() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start_tls();
    let plain = HttpServer::start();
    web.set("/l", Route::List { body: list_body(100, "tls.example"), etag: "\"t\"".into() });
    let gw = Gateway::start(&list_config(
        &up,
        &web.url("/l"),
        &format!("\toption ca_file '{}'\n", http::test_ca().display()),
    ));
    assert!(wait_blocked(&gw, "h1.tls.example"), "{}", gw.log());
    plain.set("/l", Route::List { body: list_body(200, "plain.example"), etag: "\"p\"".into() });
    web.set("/l", Route::Redirect(plain.url("/l")));
    let r = update(&gw);
    assert_eq!(r[0].status, "failed", "{r:?}");
    assert!(r[0].error.as_deref().unwrap_or("").contains("redirected to plain HTTP"), "{r:?}");
    assert_eq!(plain.hits("/l"), 0, "nothing asked over plain HTTP");
    assert_eq!(udp(gw.addr, "h1.plain.example", A).ips(), ["192.0.2.1"]);
    assert_eq!(udp(gw.addr, "h1.tls.example", A).ips(), ["0.0.0.0"], "the last good copy stays");
    assert!(gw.log().contains("redirected to plain HTTP"), "{}", gw.log());
    web.set("/moved", Route::List { body: list_body(150, "moved.example"), etag: "\"m\"".into() });
    web.set("/l", Route::Redirect(web.url("/moved")));
    let r = update(&gw);
    assert_eq!(r[0].status, "updated", "{r:?}");
}

/// Issue 58: a list server (or anyone on the path of an `http://` list)
/// answering `302` with a `Location` of markup had it stored as the list's
/// error, which LuCI's Overview showed at every poll. A server's header
/// never reaches the stored words, in part or in full; an ETag of markup
/// is not kept either, and nothing stored holds `<>&"'` or a control
/// character.
#[test]
fn a_servers_headers_never_become_the_lists_stored_words() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let web = HttpServer::start();
    web.set("/l", Route::List { body: list_body(100, "first.example"), etag: "\"<svg onload=alert(1)>\"".into() });
    let gw = Gateway::start(&list_config(&up, &web.url("/l"), ""));
    assert!(wait_blocked(&gw, "h1.first.example"), "{}", gw.log());
    assert_eq!(lists(&gw)[0].etag, None, "an entity tag of markup is not kept");
    let payload = "/<img src=x onerror=\"window.__pwned=1\">";
    for to in [payload.to_string(), format!("http://{}{payload}", web.addr), "http://[::1".to_string()] {
        web.set("/l", Route::Redirect(to.clone()));
        let r = update(&gw);
        assert_eq!(r[0].status, "failed", "{to}: {r:?}");
        let info = &lists(&gw)[0];
        for (what, text) in [("update", r[0].error.clone()), ("status", info.last_error.clone())] {
            let text = text.unwrap_or_default();
            assert!(!text.is_empty(), "{to}: {what} says why");
            assert!(
                !text.contains(['<', '>', '&', '"', '\'']) && !text.contains("img") && !text.contains("onerror"),
                "{to}: {what}: {text}"
            );
        }
        assert_eq!(udp(gw.addr, "h1.first.example", A).ips(), ["0.0.0.0"], "the last good copy stays");
    }
    assert!(!gw.log().contains("onerror"), "{}", gw.log());
}

#[test]
fn update_without_a_running_gateway_saves_the_copies() {
    let web = HttpServer::start();
    web.set("/l", Route::List { body: list_body(50, "offline.example"), etag: "\"o\"".into() });
    let dir = TempDir::new();
    let cfg = dir.file(
        "c.conf",
        &format!("config hydradns 'main'\n\toption list_dir '{}/lists'\n\toption control_socket '{}/none.sock'\nconfig blocklist\n\toption url '{}'\n", dir.0.display(), dir.0.display(), web.url("/l")),
    );
    let (code, out, err) = cli(&["update", "-c", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("updated, 50 entries"), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg.to_str().unwrap(), "h3.offline.example"]);
    assert!(out.contains("blocked by list"), "{out}");
    assert!(
        out.contains(".list:5  block h3.offline.example and every name under it"),
        "the rule's file and line (after one comment line): {out}"
    );
    // Run as root, it downloaded as the gateway's user, for whom it made list_dir.
    if is_root() {
        let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir.0.join("lists")).unwrap());
        assert_ne!(owner, 0, "list_dir is the gateway's user's");
    }
}

#[test]
fn cname_cloaked_trackers_are_blocked() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "config blocklist\n\toption name 'trackers'\n\tlist domain 'cname-target.example'\n\
         config allowlist\n\tlist domain 'cloaked.trusted.example'\n",
    ));
    // The name itself is clean; its CNAME points into a blocked domain.
    let r = udp(gw.addr, "cloaked.shop.example", A);
    assert_eq!(r.ips(), ["0.0.0.0"], "{r:?}");
    let r = udp(gw.addr, "cloaked.shop.example", A);
    assert_eq!(r.ips(), ["0.0.0.0"]);
    assert_eq!(up.seen("cloaked.shop.example"), 1, "the upstream's answer is cached");
    // An allowlisted name keeps its real answer.
    let r = udp(gw.addr, "cloaked.trusted.example", A);
    assert_eq!(r.answers.len(), 2, "{r:?}");
    let s = gw.stats();
    // The second ask is a cache hit whose CNAMEs are looked at again for
    // the client (they could be blocked for one group and not another):
    // blocked from the cache, not forwarded.
    assert_eq!((s["cname_blocked"], s["blocked"], s["cached"], s["forwarded"]), (2, 1, 0, 2), "{s:?}");
    drop(gw);
    let gw = Gateway::start(&config(
        &[&up],
        "\toption cname_inspection '0'\nconfig blocklist\n\tlist domain 'cname-target.example'\n",
    ));
    assert_eq!(udp(gw.addr, "cloaked.other.example", A).answers.len(), 2, "off: answered as is");
}
