//! A downloaded list through the vetting that decides whether to keep it,
//! the line parser for every format, the set builder, and lookups.
#![no_main]

use hydradns::lists;
use hydradns::policy::domainset::{SetBuilder, name_key};
use hydradns::policy::formats::{ParseStats, Rule, parse_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lists::vet(data, Some(1000));
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut stats = ParseStats::default();
    let mut builder = SetBuilder::new();
    let mut names = Vec::new();
    for line in text.lines() {
        parse_line(line, &mut stats, &mut |rule, name| match rule {
            Rule::Block | Rule::Allow => {
                let ok = builder.insert(name, 0);
                if ok {
                    names.push(name.to_string());
                }
                ok
            }
            Rule::BadFilter => builder.cancel(name),
        });
    }
    let set = builder.build();
    assert!(set.len() <= names.len());
    // Whatever went in is found, unless a `$badfilter` took it out.
    if stats.badfilters == 0 {
        for name in &names {
            if let Some(key) = name_key(name) {
                assert!(set.lookup(&key).is_some(), "{name} was inserted but is not found");
            }
        }
    }
});
