//! Prints how each list file parses: `cargo run --example liststats -- FILE...`
#![allow(clippy::unwrap_used, clippy::expect_used)]
use hydradns::policy::{domainset::SetBuilder, formats::ParseStats, read_list_file};
fn main() {
    for path in std::env::args().skip(1) {
        let mut stats = ParseStats::default();
        let mut b = SetBuilder::new();
        let mut a = SetBuilder::new();
        let r = read_list_file(path.as_ref(), &mut stats, &mut |rule, name| match rule {
            hydradns::policy::formats::Rule::Block => b.insert(name, 0),
            hydradns::policy::formats::Rule::Allow => a.insert(name, 0),
            hydradns::policy::formats::Rule::BadFilter => b.cancel(name),
        });
        let (b, a) = (b.build(), a.build());
        println!("{path}: {r:?} {stats:?} collapsed_blocks={} collapsed_allows={}", b.len(), a.len());
    }
}
