//! Reads list files in any format HydraDNS reads and writes the names they
//! block as one plain domain per line, parents only (a name already covered
//! by a blocked parent is left out). The benchmark feeds the same names to
//! every server this way; allow rules are not exported, since the other
//! servers' plain forms cannot express them.
//!
//!     cargo run --release --example list-export -- OUT FILE...
#![allow(clippy::unwrap_used, clippy::expect_used)]
use hydradns::policy::{domainset, domainset::SetBuilder, formats::ParseStats, formats::Rule, read_list_file};
use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let out = args.next().expect("usage: list-export OUT FILE...");
    let mut b = SetBuilder::new();
    for path in args {
        let mut stats = ParseStats::default();
        read_list_file(path.as_ref(), &mut stats, &mut |rule, name| match rule {
            Rule::Block => b.insert(name, 0),
            Rule::Allow => false,
            Rule::BadFilter => b.cancel(name),
        })
        .unwrap();
    }
    let set = b.build();
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).unwrap());
    let mut last: Option<&[u8]> = None;
    for m in set.iter() {
        // Keys sort parents first, so a covered child follows its parent.
        if last.is_some_and(|p| domainset::covers(p, m.key)) {
            continue;
        }
        writeln!(w, "{}", domainset::key_to_name(m.key)).unwrap();
        last = Some(m.key);
    }
    w.flush().unwrap();
}
