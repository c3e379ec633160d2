//! Local names (`config record`) against the real binary: they beat the
//! blocklists, the cache and rebind protection, and never reach the upstream.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use simple_dns::RCODE;

const MX: u16 = 15;
const PTR: u16 = 12;
const CNAME: u16 = 5;

const RECORDS: &str = "config record\n\toption name 'nas.example.com'\n\tlist ip '192.168.1.10'\n\tlist ip 'fd00::10'\n\
config record\n\toption name '*.dev.home'\n\tlist ip '10.0.0.1'\n\toption ttl '60'\n\
config record\n\toption name 'media.home'\n\toption cname 'nas.example.com'\n\
config blocklist\n\tlist domain 'example.com'\n";

#[test]
fn local_names_beat_lists_and_rebind_protection_and_stay_off_the_upstream() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = Gateway::start(&config(&[&up], RECORDS));
    // Under a blocked domain, a private address under a public name: local data wins both.
    let a = udp(gw.addr, "NAS.example.com", A);
    assert_eq!((a.rcode, a.answers.clone()), (RCODE::NoError, vec![(A, 300, "192.168.1.10".to_string())]));
    assert_eq!(udp(gw.addr, "nas.example.com", AAAA).ips(), ["fd00::10"]);
    let mx = udp(gw.addr, "nas.example.com", MX);
    assert_eq!((mx.rcode, mx.answers.len(), mx.authority.len()), (RCODE::NoError, 0, 1), "NODATA with an SOA");
    let ptr = udp(gw.addr, "10.1.168.192.in-addr.arpa", PTR);
    assert!(ptr.answers.len() == 1 && ptr.answers[0].2.contains("nas.example.com"), "{ptr:?}");
    assert_eq!(udp(gw.addr, "a.b.dev.home", A).answers, vec![(A, 60, "10.0.0.1".to_string())]);
    let chain = udp(gw.addr, "media.home", A);
    assert_eq!(chain.answers.len(), 2, "{chain:?}");
    assert_eq!((chain.answers[0].0, chain.answers[1].2.as_str()), (CNAME, "192.168.1.10"));
    // Over TCP the same.
    assert_eq!(tcp(gw.addr, "nas.example.com", A).ips(), ["192.168.1.10"]);
    // The rest of the blocked domain stays blocked; names outside go upstream.
    assert_eq!(udp(gw.addr, "www.example.com", A).ips(), ["0.0.0.0"]);
    assert_eq!(udp(gw.addr, "dev.home", A).ips(), ["192.0.2.1"], "a wildcard covers names under it only");
    assert_eq!(up.seen("nas.example.com") + up.seen("a.b.dev.home") + up.seen("media.home"), 0);
    assert_eq!(gw.report().counters.local_records, 7);
}

#[test]
fn a_reload_adds_a_local_name_over_a_cached_answer() {
    let up = Upstream::start("192.0.2.2".parse().unwrap());
    let plain = config(&[&up], "");
    let gw = Gateway::start(&plain);
    assert_eq!(udp(gw.addr, "printer.home", A).ips(), ["192.0.2.2"]);
    gw.reload(&format!("{plain}config record\n\toption name 'printer.home'\n\tlist ip '192.168.1.20'\n"));
    assert_eq!(udp(gw.addr, "printer.home", A).ips(), ["192.168.1.20"], "the record, not the cached answer");
    gw.reload(&plain);
    assert_eq!(udp(gw.addr, "printer.home", A).ips(), ["192.0.2.2"]);
    assert_eq!(up.seen("printer.home"), 1, "the cached answer came back with the record gone");
}

#[test]
fn a_bad_record_stops_the_start_with_its_line() {
    let up = Upstream::start("192.0.2.3".parse().unwrap());
    let bad = config(&[&up], "config record\n\toption name 'x.home'\n\tlist ip '10.0.0.1'\n\toption cname 'y.home'\n");
    let dir = TempDir::new();
    let path = dir.file("hydradns.conf", &bad);
    let (code, _out, err) = cli(&["check-config", "-c", path.to_str().unwrap()]);
    let line = bad.lines().position(|l| l.contains("cname")).unwrap() + 1;
    assert_ne!(code, 0);
    assert!(err.contains(&format!(":{line}:")) && err.contains("both an ip and a cname"), "{err}");
}

#[test]
fn check_says_which_record_answers_before_the_lists() {
    let up = Upstream::start("192.0.2.4".parse().unwrap());
    let dir = TempDir::new();
    let path = dir.file("hydradns.conf", &config(&[&up], RECORDS));
    let (code, out, err) = cli(&["check", "-c", path.to_str().unwrap(), "x.dev.home"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("answered by local record '*.dev.home'"), "{out}");
    let (_, out, _) = cli(&["check", "-c", path.to_str().unwrap(), "nas.example.com"]);
    assert!(out.contains("local record 'nas.example.com'") && out.contains("blocked by list"), "{out}");
}

#[test]
fn an_alias_to_an_outside_name_answers_the_chain_and_the_upstreams_records() {
    let up = Upstream::start("192.0.2.9".parse().unwrap());
    let gw = Gateway::start(&config(
        &[&up],
        "\toption upstream_timeout '500ms'\n\
         config record\n\toption name 'web.home'\n\toption cname 'www.example.org'\n\
         config record\n\toption name 'tv.home'\n\toption cname 'web.home'\n\
         config record\n\toption name 'track.home'\n\toption cname 'cloaked.example.org'\n\
         config record\n\toption name 'ad.home'\n\toption cname 'x.ads.example'\n\
         config record\n\toption name 'down.home'\n\toption cname 'servfail.example.org'\n\
         config blocklist\n\tlist domain 'ads.example'\n",
    ));
    let web = udp(gw.addr, "web.home", A);
    assert_eq!(web.rcode, RCODE::NoError);
    assert_eq!(web.qname.as_deref(), Some("web.home"), "the client's question");
    assert_eq!((web.answers[0].0, web.answers[1].clone()), (CNAME, (A, 300, "192.0.2.9".to_string())), "{web:?}");
    // Again, through a local alias first, and over TCP: from the cache.
    let tv = udp(gw.addr, "tv.home", A);
    assert_eq!(tv.answers.iter().map(|a| a.0).collect::<Vec<_>>(), [CNAME, CNAME, A], "{tv:?}");
    assert_eq!(tcp(gw.addr, "web.home", A).ips().last().unwrap(), "192.0.2.9");
    assert_eq!(up.seen("www.example.org"), 1);
    // The upstream's own chain, its names compressed against its question, placed anew.
    let track = udp(gw.addr, "track.home", A);
    assert_eq!(track.answers.len(), 3, "{track:?}");
    assert!(track.answers[1].2.contains("tracker.cname-target.example"), "{track:?}");
    // The target goes through the lists like any name.
    assert_eq!(udp(gw.addr, "ad.home", A).ips().last().unwrap(), "0.0.0.0");
    // An upstream failure: the chain, then SERVFAIL.
    let down = udp(gw.addr, "down.home", A);
    assert_eq!((down.rcode, down.answers.len()), (RCODE::ServerFailure, 1), "{down:?}");
}
