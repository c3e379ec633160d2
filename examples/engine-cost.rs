//! CPU cost of the engine's in-process answer path, without sockets:
//! parse → policy → cache → answer, for blocked names and cache hits.
//!
//!     cargo run --release --example engine-cost -- [LIST_SIZE] [ROUNDS]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../bench/synth.rs"]
mod synth;

use std::sync::Arc;
use std::time::Instant;

use hydradns::answer::Stored;
use hydradns::cache;
use hydradns::config::{Config, ListKind, ListSource};
use hydradns::policy::Policy;
use hydradns::query::{Engine, Origin, Snapshot, Step, Transport};
use hydradns::stats::Counters;
use hydradns::wire;

fn query(id: u16, name: &str) -> Vec<u8> {
    wire::build::query(id, name, wire::rtype::A, Some((1232, false))).expect("a valid name")
}

/// An upstream-style answer with one A record, for filling the cache.
fn answer(q: &[u8]) -> Vec<u8> {
    let qend = q.len() - 11;
    let mut a = q[..qend].to_vec();
    a[2] = 0x81;
    a[3] = 0x80;
    a[7] = 1;
    a[11] = 0;
    a.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 192, 0, 2, 1]);
    a
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let names = synth::names(n, 42);
    let src = ListSource {
        name: "synthetic".into(),
        kind: ListKind::Block,
        paths: vec![],
        domains: names.iter().map(|d| (d.clone(), 0)).collect(),
        origin: "bench".into(),
        url: None,
        saved: None,
        groups: Vec::new(),
    };
    let mut cfg = Config::builtin();
    cfg.cache_size = 65536;
    let policy = Policy::load(&[src], cfg.block_mode, cfg.block_ttl);
    // LOG=1 adds a query log whose 16-entry queue is full almost all the
    // time (the writer waits 60 s for a batch): the hot-path cost of logging
    // is then one try_send that fails and a counted drop.
    let log = std::env::var("LOG").ok();
    let qlcfg = hydradns::config::QueryLogConfig {
        path: std::env::temp_dir().join(format!("engine-cost-{}.db", std::process::id())),
        flash_path: std::env::temp_dir().join(format!("engine-cost-{}-flash.db", std::process::id())),
        queue_size: 16,
        batch_size: 65_536,
        batch_interval: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    let querylog = log.as_deref().map(|_| {
        hydradns::querylog::QueryLog::start(
            &qlcfg,
            hydradns::client::names::NameBook::new(
                "/nonexistent".as_ref(),
                "/nonexistent".as_ref(),
                "/nonexistent".as_ref(),
            ),
        )
        .expect("query log")
    });
    let engine =
        Engine::new(Snapshot::new(Arc::new(cfg), Arc::new(policy), None), querylog.as_ref().map(|q| q.logger.clone()));
    let stats = Counters::default();

    let blocked: Vec<Vec<u8>> =
        names.iter().step_by(13).take(4096).enumerate().map(|(i, d)| query(i as u16, d)).collect();
    let hits: Vec<Vec<u8>> = synth::names(2048, 9).iter().map(|d| query(1, &format!("ok.{d}.test"))).collect();
    let snap = engine.snapshot.load();
    for q in &hits {
        let pq = wire::parse_query(q).expect("query");
        let mut kb = [0u8; cache::MAX_KEY_LEN];
        let k = cache::key(&pq, 0, &mut kb);
        let stored = Stored::from_response(&answer(q), 0, 86400).expect("answer");
        snap.cache.insert(&kb[..k], snap.cache.hash(&kb[..k]), &stored, snap.passed(false), snap.cache_sweep);
    }
    let mut out = Vec::with_capacity(4096);
    println!("| path ({n} listed names) | ns per query |");
    println!("|---|---|");
    for (label, set) in [("blocked", &blocked), ("cache hit", &hits)] {
        let rounds: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(200);
        let t = Instant::now();
        for _ in 0..rounds {
            for q in set.iter() {
                let origin = Origin {
                    client: [127, 0, 0, 1].into(),
                    mac: None,
                    received: Instant::now(),
                    transport: Transport::Udp,
                    safe_search: false,
                };
                match engine.handle(q, &origin, &mut out, &stats) {
                    Step::Reply => {}
                    other => panic!("{label}: {other:?}"),
                }
            }
        }
        let ns = t.elapsed().as_nanos() as f64 / (rounds * set.len()).max(1) as f64;
        println!("| {label} | {ns:.0} |");
    }
    if let Some(q) = querylog {
        q.shutdown();
    }
    let _ = std::fs::remove_file(&qlcfg.path);
    let _ = std::fs::remove_file(&qlcfg.flash_path);
}
