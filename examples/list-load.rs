//! Times what start-up spends on the lists: reading and parsing the files
//! alone, then the whole load (parse, insert, sort and pack) as `run` does
//! it. Best of five runs each, as the VM's noise only ever adds time.
//!
//!     cargo run --release --example list-load -- [--once] FILE [FILE…]
//!
//! `--once` does one whole load and nothing else, for callgrind
//! (bench/list-load.sh counts its instructions per name).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hydradns::config::{ListKind, ListSource};
use hydradns::policy::formats::ParseStats;
use hydradns::policy::{Policy, read_list_file};

fn best(mut f: impl FnMut()) -> Duration {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap()
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let once = args.first().is_some_and(|a| a == "--once");
    if once {
        args.remove(0);
    }
    let paths: Vec<PathBuf> = args.iter().map(PathBuf::from).collect();
    let src = ListSource {
        name: "bench".into(),
        kind: ListKind::Block,
        paths: paths.clone(),
        domains: Vec::new(),
        origin: String::new(),
        url: None,
        saved: None,
        groups: Vec::new(),
    };
    if once {
        let p = Policy::load(std::slice::from_ref(&src), Default::default(), 60);
        println!("{} kept", p.blocked_len());
        return;
    }
    let mut names = 0;
    let parse = best(|| {
        let mut stats = ParseStats::default();
        for p in &paths {
            read_list_file(p, &mut stats, &mut |_, _| true).unwrap();
        }
        names = stats.blocks;
    });
    let mut kept = 0;
    let load = best(|| kept = Policy::load(std::slice::from_ref(&src), Default::default(), 60).blocked_len());
    println!("{names} names read and parsed in {:.0} ms; whole load {:.0} ms ({kept} kept)", ms(parse), ms(load));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
