//! Blocklists and allowlists through the real binary: what is blocked, how
//! it is answered, and that blocked names never reach the upstream.

#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use simple_dns::RCODE;

#[test]
fn exact_subdomain_and_allowlisted_names() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    let list = dir.file("ads.txt", "# my list\n0.0.0.0 ads.example\n||tracker.example^\n");
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "config blocklist\n\toption name 'ads'\n\toption path '{}'\n\tlist domain 'inline.example'\n\
             config allowlist\n\tlist domain 'good.tracker.example'\n",
            list.display()
        ),
    ));
    for blocked in
        ["ads.example", "deep.sub.ads.example", "ADS.Example", "tracker.example", "x.tracker.example", "inline.example"]
    {
        let r = udp(gw.addr, blocked, A);
        assert_eq!(r.rcode, RCODE::NoError, "{blocked}");
        assert_eq!(r.ips(), ["0.0.0.0"], "{blocked}");
        assert_eq!(r.answers[0].1, 60, "default block_ttl");
        assert_eq!(r.qname.as_deref(), Some(blocked), "question echoed in the client's case");
    }
    assert_eq!(up.total(), 0, "blocked names never go upstream");
    // Twice: the second round comes from the cache, which skips the list
    // lookup for names these lists passed, and must still count overrides.
    for _ in 0..2 {
        for allowed in ["good.tracker.example", "a.good.tracker.example", "notads.example", "example"] {
            assert_eq!(udp(gw.addr, allowed, A).ips(), ["192.0.2.1"], "{allowed}");
        }
    }
    assert_eq!(up.total(), 4);
    let stats = gw.stats();
    assert_eq!(stats["blocked"], 6);
    assert_eq!(stats["allowed"], 4, "allowlist overrides counted, cached or not");
    assert_eq!(stats["forwarded"], 4);
    assert_eq!(stats["cached"], 4);
    assert!(gw.log().contains("list 'ads' (blocklist): 3 blocks"), "{}", gw.log());
    // An allowlist's entries allow; its load line calls none of them a block.
    assert!(gw.log().contains("list 'allowlist2' (allowlist): 1 allows, "), "{}", gw.log());
    let (_, text, _) = cli(&["stats", "-c", gw.config.to_str().unwrap()]);
    assert!(text.contains("  allowlist2 (allowlist): 1 allows, 0 unsupported"), "{text}");
}

fn mode_answers(mode: &str) -> (Reply, Reply, Reply) {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "\toption block_mode '{mode}'\n\toption block_ttl '120'\nconfig blocklist\n\tlist domain 'blocked.example'\n"
        ),
    ));
    let r = (
        udp(gw.addr, "blocked.example", A),
        udp(gw.addr, "blocked.example", AAAA),
        udp(gw.addr, "blocked.example", MX),
    );
    assert_eq!(up.total(), 0);
    r
}

#[test]
fn block_mode_null() {
    let (a, aaaa, mx) = mode_answers("null");
    assert_eq!(a.ips(), ["0.0.0.0"]);
    assert_eq!(aaaa.ips(), ["::"]);
    assert_eq!(a.answers[0].1, 120);
    assert_eq!((mx.rcode, mx.answers.len()), (RCODE::NoError, 0), "other types: empty NOERROR");
}

#[test]
fn block_mode_nxdomain() {
    let (a, aaaa, mx) = mode_answers("nxdomain");
    for r in [&a, &aaaa, &mx] {
        assert_eq!(r.rcode, RCODE::NameError);
        assert!(r.answers.is_empty());
        assert_eq!(r.authority, [(6, 120)], "SOA lets clients cache the denial for block_ttl");
    }
}

#[test]
fn block_mode_refused() {
    let (a, aaaa, _) = mode_answers("refused");
    assert_eq!((a.rcode, aaaa.rcode), (RCODE::Refused, RCODE::Refused));
}

#[test]
fn block_mode_addresses() {
    let (a, aaaa, mx) = mode_answers("192.0.2.99 2001:db8::99");
    assert_eq!(a.ips(), ["192.0.2.99"]);
    assert_eq!(aaaa.ips(), ["2001:db8::99"]);
    assert!(mx.answers.is_empty());
    let (a, aaaa, _) = mode_answers("192.0.2.98");
    assert_eq!(a.ips(), ["192.0.2.98"]);
    assert_eq!((aaaa.rcode, aaaa.answers.len()), (RCODE::NoError, 0), "no IPv6 given: empty answer");
}

/// The AdGuard DNS filter: blocks and `$badfilter` cancellations; its `@@`
/// exceptions are not taken from a blocklist (a third-party list must not
/// unblock anything: issue 49); plus a HaGeZi hosts file next to it.
#[test]
fn real_third_party_lists() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "config blocklist\n\toption name 'adguard'\n\toption path '{}'\n\
             config blocklist\n\toption name 'hagezi'\n\toption path '{}'\n",
            data("blocklists/adguard-dns-filter-noprivacy-2026-08-21/filter.txt").display(),
            data("blocklists/hagezi-2026-08-15/hosts__light.txt").display(),
        ),
    ));
    for blocked in
        ["doubleclick.net", "ad.doubleclick.net", "taboola.com", "ads.tvb.com", "000free.us", "herobet88.000.pe"]
    {
        assert_eq!(udp(gw.addr, blocked, A).ips(), ["0.0.0.0"], "{blocked}");
    }
    assert_eq!(up.total(), 0);
    // ||linksprf.com^ cancelled by ||linksprf.com^$badfilter.
    for allowed in ["linksprf.com", "pe", "example.org"] {
        assert_eq!(udp(gw.addr, allowed, A).ips(), ["192.0.2.1"], "{allowed}");
    }
    // The filter's own @@ exceptions, skipped in a blocklist.
    for excepted in ["cdn.taboola.com", "api.ads.tvb.com"] {
        assert_eq!(udp(gw.addr, excepted, A).ips(), ["0.0.0.0"], "{excepted}");
    }
    let log = gw.log();
    assert!(log.contains("list 'hagezi' (blocklist): 86359 blocks"), "{log}");
    assert!(log.contains("list 'adguard' (blocklist): "), "{log}");
}

#[test]
fn check_command_names_list_and_entry() {
    let dir = TempDir::new();
    // The comment is a list author's free text: it never reaches `check`'s
    // words, which LuCI's "Why?" shows (issue 58).
    let list = dir.file(
        "l.txt",
        "||example.com^\n@@||good.example.com^\n0.0.0.0 ads.example.com # <img src=x onerror=\"alert('x')\">\n",
    );
    let cfg = dir.file(
        "c.conf",
        &format!(
            "config blocklist\n\toption name 'ads'\n\toption path '{}'\nconfig allowlist\n\toption name 'mine'\n\tlist domain 'safe.example.com'\n",
            list.display()
        ),
    );
    let cfg = cfg.to_str().unwrap();
    let (code, out, _) = cli(&["check", "-c", cfg, "Ads.Example.com"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("ads.example.com: blocked by list 'ads' (entry example.com)"), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg, "x.safe.example.com"]);
    assert!(out.starts_with("x.safe.example.com: allowed by list 'mine' (entry safe.example.com)"), "{out}");
    assert!(
        out.contains("list 'ads' blocks it: ") && out.contains("l.txt:1  block example.com and every name"),
        "{out}"
    );
    assert!(out.contains("list 'mine' allows it: ") && out.contains("c.conf:6  allow safe.example.com and"), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg, "ads.example.com"]);
    assert!(out.contains("l.txt:3  block ads.example.com and every name under it\n"), "{out}");
    assert!(!out.contains('<') && !out.contains("onerror"), "{out}");
    // A blocklist's `@@` rule allows nothing, and `check` does not name it.
    let (_, out, _) = cli(&["check", "-c", cfg, "good.example.com"]);
    assert!(out.starts_with("good.example.com: blocked by list 'ads' (entry example.com)"), "{out}");
    assert!(!out.contains("@@"), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg, "example.org"]);
    assert_eq!(out.trim(), "example.org: not blocked");
    let (code, _, err) = cli(&["check", "-c", cfg, "not a name"]);
    assert_eq!(code, 2, "{err}");
}

/// LuCI's "Why?" runs `check --live` as root for any logged-in reader: the
/// running gateway answers from its own lists, one check at a time (a
/// second, asked meanwhile, is refused as busy rather than read every list
/// again beside it), and with no gateway it exits 4 without reading any.
#[test]
fn check_live_asks_the_running_gateway_one_at_a_time() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let dir = TempDir::new();
    // Enough lines that reading them again takes a while.
    let mut text = String::from("0.0.0.0 ads.example # <b>bold</b>\n");
    for i in 0..200_000 {
        text.push_str(&format!("n{i}.filler.example\n"));
    }
    let list = dir.file("big.txt", &text);
    let conf_text =
        config(&[&up], &format!("config blocklist\n\toption name 'big'\n\toption path '{}'\n", list.display()));
    let conf = dir.file("hydradns.conf", &Gateway::localize(&conf_text, &dir.0));
    let gw = Gateway::start_with(dir, conf.clone());
    let c = conf.to_str().unwrap();
    let (code, live, err) = cli(&["check", "--live", "-c", c, "x.ads.example"]);
    assert_eq!(code, 0, "{err}");
    let (_, local, _) = cli(&["check", "-c", c, "x.ads.example"]);
    assert_eq!(live, local, "the gateway's words are the command line's");
    assert!(live.contains("big.txt:1  block ads.example and every name under it"), "{live}");
    let mut busy = false;
    for _ in 0..5 {
        let asks: Vec<_> = (0..2)
            .map(|_| {
                let c = c.to_string();
                std::thread::spawn(move || cli(&["check", "--live", "-c", &c, "x.ads.example"]))
            })
            .collect();
        let answers: Vec<_> = asks.into_iter().map(|a| a.join().unwrap()).collect();
        assert!(answers.iter().any(|(code, _, _)| *code == 0), "{answers:?}");
        if let Some((code, _, err)) = answers.iter().find(|(code, _, _)| *code != 0) {
            assert_eq!(*code, 2, "{err}");
            assert!(err.contains("busy"), "{err}");
            busy = true;
            break;
        }
    }
    assert!(busy, "two checks at once were both answered, five times over");
    let (status, _dir) = gw.stop_keeping_dir();
    assert!(status.success());
    let (code, _, err) = cli(&["check", "--live", "-c", c, "x.ads.example"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("is it running?"), "{err}");
}

/// Queries queued while the server is stopped reach it in full batches of
/// the receive loop, and each gets its own answer: blocked, allowed over a
/// block, forwarded or cached (a runt among them is dropped).
#[test]
fn a_burst_of_mixed_queries_gets_each_its_own_answer() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "config blocklist\n\tlist domain 'ads.example'\n\tlist domain 'tracker.example'\n\
         config allowlist\n\tlist domain 'good.tracker.example'\n",
    ));
    let blocked = ["ads.example", "x.ads.example", "Tracker.Example", "deep.x.tracker.example"];
    let allowed = ["good.tracker.example", "a.good.tracker.example"];
    let passed = ["example.org", "www.example.org", "ads.example.org", "xads.example"];
    let names: Vec<&str> = blocked.iter().chain(&allowed).chain(&passed).copied().collect();
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 4096];
    // Round 0 forwards the names that pass; round 1 finds them in the cache.
    for round in 0..2u16 {
        gw.signal("STOP");
        let mut sent = 0u16;
        // Three times over, then a runt: 31 datagrams, two batches.
        for rep in 0..3u16 {
            for (i, name) in names.iter().enumerate() {
                let id = round << 12 | rep << 8 | i as u16;
                sock.send_to(&build_query(id, name, A, None), gw.addr).unwrap();
                sent += 1;
            }
        }
        sock.send_to(&[0xab, 0xcd, 0x01], gw.addr).unwrap();
        gw.signal("CONT");
        let mut seen = std::collections::HashSet::new();
        for _ in 0..sent {
            let (n, _) = sock.recv_from(&mut buf).expect("an answer to every query of the burst");
            let r = Reply::parse(buf[..n].to_vec());
            assert!(seen.insert(r.id), "one answer per query");
            let name = names[usize::from(r.id & 0xff)];
            assert_eq!(r.qname.as_deref(), Some(name), "the answer to its own query");
            let want = if blocked.contains(&name) { "0.0.0.0" } else { "192.0.2.1" };
            assert_eq!(r.ips(), [want], "{name}, round {round}");
        }
    }
    for name in passed.iter().chain(&allowed) {
        assert_eq!(up.seen(name), 1, "{name}: forwarded once, then cached");
    }
    assert_eq!(up.total(), passed.len() + allowed.len());
    let stats = gw.stats();
    assert_eq!(stats["blocked"], 2 * 3 * blocked.len() as u64);
    assert_eq!(stats["allowed"], 2 * 3 * allowed.len() as u64, "counted whether cached or not");
    assert_eq!(stats["dropped"], 2, "the runts");
}

/// RFC 8914: a block answer to a client that sent EDNS carries Extended DNS
/// Error 15 (Blocked), whatever the block mode; without EDNS, no OPT at all.
#[test]
fn block_answers_carry_extended_error_blocked_with_edns() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    for mode in ["null", "nxdomain", "refused", "192.0.2.9"] {
        let gw = Gateway::start(&config(
            &[&up],
            &format!("\toption block_mode '{mode}'\nconfig blocklist\n\tlist domain 'ads.example'\n"),
        ));
        for qtype in [A, AAAA, 16] {
            let r = udp_edns(gw.addr, "ads.example", qtype, Some(1232));
            assert_eq!(r.opt_size, Some(1232), "{mode} {qtype}");
            assert!(r.raw.ends_with(&[0, 15, 0, 2, 0, 15]), "{mode} {qtype}: no EDE 15 in {:?}", r.raw);
            let plain = udp(gw.addr, "ads.example", qtype);
            assert_eq!(plain.opt_size, None, "{mode} {qtype}");
        }
        // An answer from upstream carries none.
        assert!(!udp_edns(gw.addr, "fine.example", A, Some(1232)).raw.ends_with(&[0, 15, 0, 2, 0, 15]));
    }
}

/// `block_bypass` (on by default): Firefox's DoH canary and iCloud Private
/// Relay's names get NXDOMAIN, so those clients keep to this resolver;
/// never asked upstream, counted and logged as blocked. Off, they are
/// resolved like any name.
#[test]
fn bypass_canaries_get_nxdomain_unless_turned_off() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let names = ["use-application-dns.net", "mask.icloud.com", "MASK-H2.icloud.com"];
    let gw = Gateway::start(&config(&[&up], &log_section("\toption batch_interval '50ms'\n")));
    for name in names {
        for qtype in [A, AAAA, 65] {
            let r = udp_edns(gw.addr, name, qtype, Some(1232));
            assert_eq!(r.rcode, RCODE::NameError, "{name} {qtype}");
            assert_eq!(r.authority.len(), 1, "{name}: a SOA, so the NXDOMAIN is cached");
            assert!(r.raw.ends_with(&[0, 15, 0, 2, 0, 15]), "{name}");
        }
    }
    // Names beside and under them are not touched.
    for name in ["www.use-application-dns.net", "icloud.com", "x.mask.icloud.com"] {
        assert_eq!(udp(gw.addr, name, A).ips(), ["192.0.2.1"], "{name}");
    }
    assert_eq!(up.total(), 3);
    assert_eq!(gw.report().counters.blocked, 9);
    wait_for("the log", std::time::Duration::from_secs(60), || log_rows(&gw, &["--blocked"]).len() == 9);
    assert!(log_rows(&gw, &["--blocked"]).iter().all(|r| r.list.as_deref() == Some("block_bypass")));

    let (code, out, _) = cli(&["check", "-c", cfg_path(&gw), "Use-Application-DNS.net"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("use-application-dns.net: NXDOMAIN by block_bypass"), "{out}");

    let gw = Gateway::start(&config(&[&up], "\toption block_bypass '0'\n"));
    let (_, out, _) = cli(&["check", "-c", cfg_path(&gw), "use-application-dns.net"]);
    assert!(!out.contains("block_bypass"), "{out}");
    assert_eq!(udp(gw.addr, "use-application-dns.net", A).ips(), ["192.0.2.1"]);
    assert_eq!(up.seen("use-application-dns.net"), 1);
}
