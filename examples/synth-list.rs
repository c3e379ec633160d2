//! Writes N synthetic blocklist names (plain domains format), the same names
//! the benchmarks use: `cargo run --release --example synth-list -- N FILE`
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../bench/synth.rs"]
mod synth;

use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).expect("usage: synth-list N FILE");
    let path = args.next().expect("usage: synth-list N FILE");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(out, "# {n} synthetic names (bench/synth.rs, seed 42)").unwrap();
    for name in synth::names(n, 42) {
        writeln!(out, "{name}").unwrap();
    }
    out.flush().unwrap();
}
