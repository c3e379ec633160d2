//! The Prometheus metrics through the real binary: `hydradns metrics`,
//! `metrics_listen` (GET /metrics) and `metrics_textfile` give the same
//! well-formed text; the counters count what the test sent, never go back
//! across a SIGHUP, and the label sets stay the same size whatever names
//! and types clients ask. The text is also read by the `prometheus_client`
//! Python package's parser when it is installed (scripts/test.sh installs
//! it and sets HYDRADNS_REQUIRE_PROM_PARSER=1 so it cannot be skipped).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;

/// One sample: the name with its labels as written, and its value.
type Samples = BTreeMap<String, f64>;

/// Reads the text format strictly: every sample's family has a TYPE line
/// before it, names and labels are well-formed, histograms are cumulative
/// and end at +Inf with _count. Panics saying what is wrong.
fn parse(text: &str) -> Samples {
    assert!(text.ends_with('\n'), "the last line must end in a newline");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Samples::new();
    let mut last_bucket: Option<(String, f64)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(types.insert(name.to_string(), kind.to_string()).is_none(), "TYPE twice: {line}");
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 =
            value.parse().unwrap_or_else(|_| if value == "+Inf" { f64::INFINITY } else { panic!("{line}") });
        let name = series.split('{').next().unwrap();
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && name.starts_with("hydradns_"), "{line}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for pair in labels[1..labels.len() - 1].split("\",") {
                    let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("label {pair} in {line}"));
                    assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
                    assert!(!v.trim_end_matches('"').contains('\n'), "{line}");
                }
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|k| k == "histogram")))
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE before {line}");
        if name.ends_with("_bucket") {
            if let Some((prev, v)) = &last_bucket {
                assert!(prev != family || value >= *v, "buckets not cumulative at {line}");
            }
            last_bucket = Some((family.to_string(), value));
        }
        if name.ends_with("_count") {
            let inf = samples[&format!("{family}_bucket{{le=\"+Inf\"}}")];
            assert_eq!(inf, value, "+Inf bucket and _count differ");
        }
        assert!(samples.insert(series.to_string(), value).is_none(), "sample twice: {line}");
    }
    samples
}

/// The real Prometheus client library's parser, when installed.
fn python_parse(text: &str, dir: &TempDir) {
    let file = dir.file("metrics.prom", text);
    let code = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as p\n\
                n = sum(len(f.samples) for f in p(open(sys.argv[1]).read()))\nprint(n)";
    match std::process::Command::new("python3").args(["-c", code]).arg(&file).output() {
        Ok(out) if out.status.success() => {
            let n: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            assert_eq!(n, parse(text).len(), "prometheus_client read another number of samples");
        }
        Ok(out)
            if std::env::var_os("HYDRADNS_REQUIRE_PROM_PARSER").is_none()
                && String::from_utf8_lossy(&out.stderr).contains("No module named 'prometheus_client'") => {}
        Ok(out) => panic!("prometheus_client refused the text: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("python3: {e}"),
    }
}

fn metrics(gw: &Gateway) -> String {
    let (code, out, err) = cli(&["metrics", "-c", cfg_path(gw)]);
    assert_eq!(code, 0, "{err}");
    out
}

fn http(addr: SocketAddr, request: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

/// A gateway with the metrics listener on a port the kernel picks
/// (`Gateway::metrics_addr`) and the textfile.
fn gateway(up: &Upstream, extra: &str) -> Gateway {
    Gateway::start(&config(
        &[up],
        &format!(
            "\toption metrics_listen '127.0.0.1:0'\n\toption metrics_textfile '@DIR@/hydradns.prom'\n\
             config blocklist\n\toption name 'ads \"quoted\"'\n\tlist domain 'ads.example'\n{extra}"
        ),
    ))
}

#[test]
fn the_three_ways_give_one_well_formed_text_that_counts_what_was_sent() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up, "");
    let addr = gw.metrics_addr();
    // The textfile is there from the start: written before any query, and
    // well before its first rewrite 15 s on (the main loop writes it as it
    // starts, just after the "ready" line the harness waits for).
    let file = gw.dir.0.join("hydradns.prom");
    wait_for("the first textfile", Duration::from_secs(10), || file.exists());
    let first = std::fs::read_to_string(&file).unwrap();
    assert_eq!(parse(&first)["hydradns_queries_total{proto=\"udp\"}"], 0.0, "{first}");
    for _ in 0..3 {
        assert_eq!(udp(gw.addr, "ads.example", A).ips(), ["0.0.0.0"]);
    }
    udp(gw.addr, "www.example", A);
    udp(gw.addr, "www.example", A);
    udp(gw.addr, "www.example", AAAA);
    udp_raw(gw.addr, &build_query(7, "www.example", 99, None), Duration::from_secs(2)).unwrap();
    tcp(gw.addr, "www.example", 16);

    let text = metrics(&gw);
    let m = parse(&text);
    python_parse(&text, &gw.dir);
    assert_eq!(m["hydradns_queries_total{proto=\"udp\"}"], 7.0);
    assert_eq!(m["hydradns_queries_total{proto=\"tcp\"}"], 1.0);
    assert_eq!(m["hydradns_query_types_total{qtype=\"A\"}"], 5.0);
    assert_eq!(m["hydradns_query_types_total{qtype=\"AAAA\"}"], 1.0);
    assert_eq!(m["hydradns_query_types_total{qtype=\"TXT\"}"], 1.0);
    assert_eq!(m["hydradns_query_types_total{qtype=\"other\"}"], 1.0);
    assert_eq!(m["hydradns_responses_total{result=\"blocked\",rcode=\"NOERROR\"}"], 3.0);
    assert_eq!(m["hydradns_responses_total{result=\"forwarded\",rcode=\"NOERROR\"}"], 4.0);
    assert_eq!(m["hydradns_responses_total{result=\"cached\",rcode=\"NOERROR\"}"], 1.0);
    assert_eq!(m["hydradns_request_duration_seconds_count"], 8.0);
    assert_eq!(m["hydradns_blocked_total"], 3.0);
    assert_eq!(m[&format!("hydradns_upstream_answers_total{{upstream=\"{}\"}}", up.addr)], 4.0);
    assert_eq!(m[&format!("hydradns_upstream_up{{upstream=\"{}\"}}", up.addr)], 1.0);
    // A list name with a quote in it, escaped.
    assert_eq!(m["hydradns_list_entries{list=\"ads \\\"quoted\\\"\",kind=\"blocklist\"}"], 1.0);
    assert_eq!(m["hydradns_build_info{version=\"0.1.0\"}"], 1.0);

    // The same families over HTTP, and nothing else there.
    let (head, body) = http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}", body.len())), "{head}");
    let over_http = parse(&body);
    assert_eq!(over_http.keys().collect::<Vec<_>>(), m.keys().collect::<Vec<_>>());
    assert!(http(addr, "GET / HTTP/1.1\r\n\r\n").0.starts_with("HTTP/1.1 404"));
    assert!(http(addr, "POST /metrics HTTP/1.1\r\n\r\n").0.starts_with("HTTP/1.1 405"));
    // A client that sends nothing holds a connection for at most 5 s and
    // never keeps a scrape from being answered.
    // (The listener accepts in the order the kernel queued the connections:
    // the idle ones are taken before the scrape, however late that is.)
    let idle: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    wait_for("a scrape past idle connections", Duration::from_secs(15), || {
        TcpStream::connect(addr).is_ok_and(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
            let mut r = String::new();
            s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").is_ok()
                && s.read_to_string(&mut r).is_ok()
                && r.starts_with("HTTP/1.1 200")
        })
    });
    drop(idle);

    // The textfile follows (every 15 s at most).
    wait_for("the textfile to be rewritten", Duration::from_secs(20), || {
        std::fs::read_to_string(&file).is_ok_and(|t| parse(&t).get("hydradns_blocked_total") == Some(&3.0))
    });
    assert!(!gw.dir.0.join("hydradns.prom.tmp").exists());
}

#[test]
fn counters_never_go_back_across_a_reload_and_label_sets_stay_bounded() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up, "");
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut ask = |n: usize| {
        for i in 0..n {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let qtype = (seed % 65_535) as u16 + 1;
            let name = format!("r{seed:x}-{i}.example");
            udp_raw(gw.addr, &build_query(i as u16, &name, qtype, None), Duration::from_secs(2));
        }
    };
    ask(300);
    let before = parse(&metrics(&gw));
    let types: BTreeMap<String, String> = metrics(&gw)
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    gw.reload(&config(
        &[&up],
        &format!(
            "\toption metrics_listen '{}'\n\toption metrics_textfile '@DIR@/hydradns.prom'\n\
             config blocklist\n\toption name 'more'\n\tlist domain 'more.example'\n",
            "127.0.0.1:1"
        ),
    ));
    ask(300);
    let after = parse(&metrics(&gw));
    for (series, v) in &before {
        let family = series.split('{').next().unwrap();
        let family = family
            .strip_suffix("_bucket")
            .or(family.strip_suffix("_count"))
            .or(family.strip_suffix("_sum"))
            .unwrap_or(family);
        if matches!(types.get(family).map(String::as_str), Some("counter" | "histogram")) {
            let now = after.get(series).copied().unwrap_or(-1.0);
            assert!(now >= *v, "{series} went from {v} to {now} across the reload");
        }
    }
    // 600 random names of random types: the same fixed type labels, and
    // responses by a bounded outcome and rcode, whatever was asked.
    let count = |m: &Samples, family: &str| m.keys().filter(|k| k.starts_with(&format!("{family}{{"))).count();
    assert_eq!(count(&after, "hydradns_query_types_total"), 13);
    assert!(count(&after, "hydradns_responses_total") <= 8 * 7);
    assert!(after.len() < 200, "{} series", after.len());
    assert_eq!(after["hydradns_queries_total{proto=\"udp\"}"], 600.0);
}

/// Four idle sockets held every place of the metrics listener, and opened
/// again every five seconds they kept the scraper out for good: the oldest
/// one still sending its request is closed for a newcomer. And only
/// `allow_client` is served, as on the DNS ports.
#[test]
fn idle_sockets_cannot_keep_the_scraper_out_and_allow_client_applies() {
    let up = Upstream::start("192.0.2.1".parse().unwrap());
    let gw = gateway(&up, "");
    let addr = gw.metrics_addr();
    // Accepted in the order the kernel queued them: the four idle ones
    // hold every place before the scrape arrives.
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let started = std::time::Instant::now();
    let (head, body) = http(addr, "GET /metrics HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains("hydradns_"), "{body}");
    // Not after an idle one's 5 s limit: within a fifth of it.
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    let mut oldest = &idle[0];
    oldest.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(oldest.read(&mut [0u8; 64]).unwrap_or(0), 0, "the oldest idle one was closed");
    drop(gw);
    let gw = Gateway::start(&format!(
        "config hydradns 'main'\n\tlist listen '127.0.0.1:0'\n\tlist upstream '{}'\n\
         \tlist allow_client '127.0.0.2'\n\toption metrics_listen '127.0.0.1:0'\n",
        up.addr
    ));
    let addr = gw.metrics_addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.is_empty(), "served outside allow_client: {reply}");
    assert!(gw.stats()["denied"] >= 1);
}
