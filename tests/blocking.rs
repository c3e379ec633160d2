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

/// The AdGuard DNS filter as its authors mean it: blocks, `@@` exceptions,
/// `$badfilter` cancellations; plus a HaGeZi hosts file next to it.
#[test]
fn real_third_party_lists() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        &format!(
            "config blocklist\n\toption name 'adguard'\n\toption path '{}'\n\
             config blocklist\n\toption name 'hagezi'\n\toption path '{}'\n",
            shared("blocklists/adguard-dns-filter-noprivacy-2026-08-21/filter.txt").display(),
            shared("blocklists/hagezi-2026-08-15/hosts__light.txt").display(),
        ),
    ));
    for blocked in
        ["doubleclick.net", "ad.doubleclick.net", "taboola.com", "ads.tvb.com", "000free.us", "herobet88.000.pe"]
    {
        assert_eq!(udp(gw.addr, blocked, A).ips(), ["0.0.0.0"], "{blocked}");
    }
    assert_eq!(up.total(), 0);
    // @@ exceptions in the filter, and ||linksprf.com^ cancelled by ||linksprf.com^$badfilter.
    for allowed in ["cdn.taboola.com", "api.ads.tvb.com", "linksprf.com", "pe", "example.org"] {
        assert_eq!(udp(gw.addr, allowed, A).ips(), ["192.0.2.1"], "{allowed}");
    }
    let log = gw.log();
    assert!(log.contains("list 'hagezi' (blocklist): 86359 blocks"), "{log}");
    assert!(log.contains("list 'adguard' (blocklist): "), "{log}");
}

#[test]
fn check_command_names_list_and_entry() {
    let dir = TempDir::new();
    let list = dir.file("l.txt", "||example.com^\n@@||good.example.com^\n");
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
    assert!(out.contains("list 'ads' blocks it: ") && out.contains("l.txt:1  ||example.com^"), "{out}");
    assert!(out.contains("list 'mine' allows it: ") && out.contains("c.conf:6  safe.example.com"), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg, "good.example.com"]);
    assert!(out.contains("allowed by list 'ads' (entry good.example.com)"), "{out}");
    let (_, out, _) = cli(&["check", "-c", cfg, "example.org"]);
    assert_eq!(out.trim(), "example.org: not blocked");
    let (code, _, err) = cli(&["check", "-c", cfg, "not a name"]);
    assert_eq!(code, 2, "{err}");
}
