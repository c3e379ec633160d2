//! docs/configuration.md against the parser: every option a section reads
//! (each arm of a `match v.key.as_str()` in src/config/) is documented
//! there, and every section type too, so the two cannot drift apart.

#![allow(clippy::expect_used)]

use std::collections::BTreeSet;

/// The keys of every `match v.key.as_str() { … }` in `src`, up to its `_ =>` arm.
fn option_keys(src: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut inside = false;
    for line in src.lines() {
        let t = line.trim();
        if t.starts_with("match v.key.as_str()") {
            inside = true;
            continue;
        }
        if inside && t.starts_with("_ =>") {
            inside = false;
        }
        if inside && t.starts_with('"') {
            let arm = t.split("=>").next().unwrap_or_default();
            keys.extend(arm.split('|').map(|k| k.trim().trim_matches('"').to_string()));
        }
    }
    keys
}

/// Section types `Config::parse` reads (the arms of `match section.kind.as_str()`).
fn section_types(src: &str) -> BTreeSet<String> {
    let start = src.find("match section.kind.as_str()").expect("the section dispatch");
    src[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().starts_with("other =>"))
        .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next().map(str::to_string))
        .collect()
}

#[test]
fn every_option_and_section_is_documented() {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let doc = read("docs/configuration.md");
    let config = read("src/config/mod.rs");
    let mut keys = BTreeSet::new();
    for entry in std::fs::read_dir("src/config").expect("src/config") {
        let path = entry.expect("src/config").path();
        if path.extension().is_some_and(|e| e == "rs") {
            keys.extend(option_keys(&read(&path.to_string_lossy())));
        }
    }
    assert!(keys.len() > 60, "the scan found the parser's options: {keys:?}");
    let missing: Vec<_> = keys.iter().filter(|k| !doc.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "options the parser reads that docs/configuration.md does not name: {missing:?}");
    let types = section_types(&config);
    assert!(types.contains("hydradns") && types.contains("schedule"), "{types:?}");
    let missing: Vec<_> = types.iter().filter(|t| !doc.contains(&format!("config {t}"))).collect();
    assert!(missing.is_empty(), "section types docs/configuration.md does not show: {missing:?}");
}
