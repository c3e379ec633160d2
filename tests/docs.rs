//! docs/configuration.md against the parser: every option a section reads
//! (each arm of a `match v.key.as_str()` in src/config/) is documented
//! there, and every section type too, so the two cannot drift apart.

#![allow(clippy::expect_used)]

use std::collections::BTreeSet;

/// The keys of every `match v.key.as_str() { … }` in `src`: its arms, not
/// those of a `match` on a value nested inside one.
fn option_keys(src: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    // Brace depth inside the match; 0 outside one.
    let mut depth = 0usize;
    for line in src.lines() {
        let t = line.trim();
        if depth == 0 {
            if t.starts_with("match v.key.as_str()") {
                depth = 1;
            }
            continue;
        }
        if depth == 1 && t.starts_with('"') {
            let arm = t.split("=>").next().unwrap_or_default();
            keys.extend(arm.split('|').map(|k| k.trim().trim_matches('"').to_string()));
        }
        for c in t.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    keys
}

/// The options every reader in src/config/ takes.
fn config_option_keys() -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for entry in std::fs::read_dir("src/config").expect("src/config") {
        let path = entry.expect("src/config").path();
        if path.extension().is_some_and(|e| e == "rs") {
            keys.extend(option_keys(&std::fs::read_to_string(&path).expect("a config source")));
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
    let keys = config_option_keys();
    assert!(keys.len() > 60, "the scan found the parser's options: {keys:?}");
    let missing: Vec<_> = keys.iter().filter(|k| !doc.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "options the parser reads that docs/configuration.md does not name: {missing:?}");
    let types = section_types(&config);
    assert!(types.contains("hydradns") && types.contains("schedule"), "{types:?}");
    let missing: Vec<_> = types.iter().filter(|t| !doc.contains(&format!("config {t}"))).collect();
    assert!(missing.is_empty(), "section types docs/configuration.md does not show: {missing:?}");
}

/// The other direction of `options_table_matches_the_readers` (in
/// src/config/reader.rs): every option a reader takes is in the table the
/// "did you mean" suggestions come from, so a typo of a new option gets one.
#[test]
fn every_option_read_can_be_suggested() {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let reader = read("src/config/reader.rs");
    let start = reader.find("const OPTIONS").expect("the OPTIONS table");
    let end = start + reader[start..].find("\n];").expect("the end of the OPTIONS table");
    let table: BTreeSet<&str> = reader[start..end].split('"').skip(1).step_by(2).collect();
    let keys = config_option_keys();
    let missing: Vec<_> = keys.iter().filter(|k| !table.contains(k.as_str())).collect();
    assert!(missing.is_empty(), "options read but not in config/reader.rs's OPTIONS table: {missing:?}");
}
