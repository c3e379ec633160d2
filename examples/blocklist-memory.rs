//! Measures the blocklist structure for N synthetic names (default 1,000,000):
//! bytes held against the names' own bytes, build time, lookup cost, RSS.
//!
//!     cargo run --release --example blocklist-memory -- [N]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../bench/synth.rs"]
mod synth;

use std::hint::black_box;
use std::time::Instant;

use hydradns::policy::domainset::{SetBuilder, name_key};

fn proc_status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let names = synth::names(n, 42);
    let name_bytes: usize = names.iter().map(String::len).sum();
    let queries: Vec<Vec<u8>> = names.iter().step_by(7).filter_map(|n| name_key(&format!("www.{n}"))).collect();
    let misses: Vec<Vec<u8>> = synth::names(queries.len(), 7).iter().filter_map(|n| name_key(n)).collect();
    let rss_before = proc_status("VmRSS:");
    // Reset the high-water mark so VmHWM below is the build's own peak.
    let _ = std::fs::write("/proc/self/clear_refs", "5");

    let t = Instant::now();
    let mut b = SetBuilder::new();
    for name in &names {
        b.insert(name, 0);
    }
    let insert = t.elapsed();
    let set = b.build();
    let build = t.elapsed() - insert;
    let rss_after = proc_status("VmRSS:");
    let build_peak = proc_status("VmHWM:");

    let t = Instant::now();
    let hits = queries.iter().filter(|k| black_box(set.lookup(k)).is_some()).count();
    let hit_ns = t.elapsed().as_nanos() as f64 / queries.len() as f64;
    let t = Instant::now();
    let false_hits = misses.iter().filter(|k| black_box(set.lookup(k)).is_some()).count();
    let miss_ns = t.elapsed().as_nanos() as f64 / misses.len() as f64;

    println!("| figure | value |");
    println!("|---|---|");
    println!("| names | {n} ({} after merging duplicates and subdomains) |", set.len());
    println!("| names' own bytes | {name_bytes} ({:.1} per name) |", name_bytes as f64 / n as f64);
    println!(
        "| structure bytes | {} ({:.3}× the names) |",
        set.heap_bytes(),
        set.heap_bytes() as f64 / name_bytes as f64
    );
    println!("| insert (keys into buckets) | {} ms |", insert.as_millis());
    println!("| build (sort + pack) | {} ms |", build.as_millis());
    println!("| lookup, listed parent (`www.` + name) | {hit_ns:.0} ns ({hits} of {} hit) |", queries.len());
    println!("| lookup, unlisted name | {miss_ns:.0} ns ({false_hits} hit) |");
    println!("| RSS kept after building | {} KiB |", rss_after.saturating_sub(rss_before));
    println!("| peak RSS growth while building | {} KiB |", build_peak.saturating_sub(rss_before));
}
