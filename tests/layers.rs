//! The layers of `src/` (docs/architecture.md), held: a module may use the
//! modules of the layers below its own, and of its own layer only what
//! [`SIDEWAYS`] lists with its reason. Reads the sources, so no new crate:
//! comments, strings and `#[cfg(test)]` modules are skipped, and every
//! `crate::…` path (also inside `use crate::{…}` and `super::…` chains that
//! climb to the crate root) is an import.
//!
//! `cargo test --test layers`.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Bottom first. Each top-level module of `src/` is in exactly one layer.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "domain",
            "mac",
            "json",
            "timetext",
            "access",
            "ratelimit",
            "netlink",
            "logging",
            "plaintext",
            "sys",
            "trust",
            "wire",
            "answer",
        ],
    ),
    ("config", &["config"]),
    (
        "stages",
        &["stats", "cache", "client", "policy", "upstream", "querylog", "lists", "localnet", "privileges", "dnssec"],
    ),
    ("engine", &["query"]),
    ("service", &["rebuild", "status", "metrics", "control", "watchdog", "server"]),
    ("cli", &["cli"]),
];

/// Uses inside one layer: (from, to, why). Each must still be used, and
/// together they must not form a cycle.
const SIDEWAYS: &[(&str, &str, &str)] = &[
    ("trust", "sys", "certificates are files read with the shared size-capped reader"),
    ("wire", "domain", "wire builds the reversed-label keys that domain defines"),
    ("answer", "wire", "a prepared answer is a DNS message"),
    ("querylog", "client", "log rows carry the device's name from the client name book"),
    ("querylog", "stats", "log rows and counters share one outcome vocabulary"),
    ("lists", "policy", "lists turn downloaded sources into the policy"),
    ("status", "rebuild", "the status holds the handle that asks the lists thread for work"),
    ("metrics", "status", "metrics render the status"),
    ("control", "status", "the control socket answers from the status"),
    ("control", "metrics", "the control socket serves the metrics text too"),
    ("server", "rebuild", "the server starts the lists thread"),
    ("server", "status", "the server builds the status"),
    ("server", "metrics", "the server starts the metrics listener"),
    ("server", "control", "the server starts the control socket"),
    ("watchdog", "control", "the watchdog asks the daemon whether it still reads queries"),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

/// `code` without comments, and with string and char literals emptied.
fn strip(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &code[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if let Some(hashes) = raw_string_start(rest, i == 0 || !is_ident(b[i - 1])) {
            let end = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += rest[body..].find(&end).map_or(rest.len(), |e| body + e + end.len());
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(rest).is_some() {
            i += char_literal_len(rest).unwrap_or(1);
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `r"` or `r#…#"` at the start of `s`: the number of `#`.
fn raw_string_start(s: &str, at_word_start: bool) -> Option<usize> {
    let rest = s.strip_prefix('r').filter(|_| at_word_start)?;
    let hashes = rest.bytes().take_while(|&c| c == b'#').count();
    rest[hashes..].starts_with('"').then_some(hashes)
}

/// Length of a char literal at the start of `s` (not a lifetime).
fn char_literal_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(1) == Some(&b'\\') {
        return s[2..].find('\'').map(|e| e + 3);
    }
    let c = s[1..].chars().next()?;
    (s[1 + c.len_utf8()..].starts_with('\'')).then_some(2 + c.len_utf8())
}

/// `code` without its `#[cfg(test)]` items (the tests may use anything).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        // The item ends at its block's closing brace, or at `;`.
        let (mut depth, mut end) = (0usize, after.len());
        for (i, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The top-level modules `code`, from the module at `module_path`
/// (`["query", "refresh"]`), names through `crate::` or `super::`.
fn imports(code: &str, module_path: &[&str]) -> BTreeSet<String> {
    let code = without_tests(&strip(code));
    let b = code.as_bytes();
    let mut found = BTreeSet::new();
    // Inline `mod x { … }` blocks open: each is one more `super::` to the root.
    let (mut braces, mut inline): (usize, Vec<usize>) = (0, Vec::new());
    for start in 0..b.len() {
        match b[start] {
            b'{' => braces += 1,
            b'}' => {
                braces = braces.saturating_sub(1);
                if inline.last() == Some(&braces) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if start > 0 && is_ident(b[start - 1]) {
            continue;
        }
        let mut rest = &code[start..];
        if let Some(r) = rest.strip_prefix("mod ") {
            let name_len = r.bytes().take_while(|&c| is_ident(c)).count();
            if r[name_len..].trim_start().starts_with('{') {
                inline.push(braces);
            }
            continue;
        }
        if let Some(r) = rest.strip_prefix("crate::") {
            rest = r;
        } else if rest.starts_with("super::") {
            let mut depth = module_path.len() + inline.len();
            while let Some(r) = rest.strip_prefix("super::") {
                rest = r;
                depth = depth.saturating_sub(1);
            }
            if depth > 0 {
                continue;
            }
        } else {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a::X, b}`: every name at the top of the group.
            let mut level = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => level += 1,
                    '}' if level == 0 => break,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        push_first(&mut found, &item);
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            push_first(&mut found, &item);
        } else {
            push_first(&mut found, rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(""));
        }
    }
    if let Some(own) = module_path.first() {
        found.remove(*own);
    }
    found
}

fn push_first(found: &mut BTreeSet<String>, item: &str) {
    let first = item.trim().split("::").next().unwrap_or("").trim();
    if !first.is_empty() && first.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        found.insert(first.to_string());
    }
}

/// `src/query/refresh.rs` → `["query", "refresh"]` (`mod.rs` is its directory's module).
fn module_path(path: &str) -> Vec<&str> {
    path.trim_start_matches("src/").trim_end_matches(".rs").split('/').filter(|p| *p != "mod").collect()
}

/// Every use against the layers, as `file: module uses other (layer → layer)`.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (path, code) in files {
        let parts = module_path(path);
        let Some(module) = parts.first().copied() else { continue };
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own) = layer_of(module) else {
            bad.push(format!("{path}: module '{module}' is in no layer of tests/layers.rs"));
            continue;
        };
        for used in imports(code, &parts) {
            let ok = match layer_of(&used) {
                Some(l) if l < own => true,
                Some(l) if l == own => SIDEWAYS.iter().any(|(f, t, _)| *f == module && *t == used),
                Some(_) => false,
                None => {
                    bad.push(format!("{path}: uses '{used}', which is in no layer"));
                    continue;
                }
            };
            if !ok {
                let name = |l: Option<usize>| l.map_or("?", |l| LAYERS[l].0);
                bad.push(format!("{path}: {module} ({}) uses {used} ({})", name(Some(own)), name(layer_of(&used))));
            }
        }
    }
    bad
}

fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

#[test]
fn src_keeps_to_its_layers() {
    let files = sources();
    let bad = violations(&files);
    assert!(bad.is_empty(), "imports against the layers (docs/architecture.md):\n{}", bad.join("\n"));
    let lib = &files.iter().find(|(p, _)| p == "src/lib.rs").unwrap().1;
    let declared: BTreeSet<&str> = lib.lines().filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';')).collect();
    let layered: BTreeSet<&str> = LAYERS.iter().flat_map(|(_, ms)| ms.iter().copied()).collect();
    assert_eq!(declared, layered, "src/lib.rs's modules and the layers differ");
    // The diagram in docs/architecture.md names every module in its layer's row.
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap();
    let diagram = doc.split("```").nth(1).unwrap_or_default();
    for (layer, modules) in LAYERS {
        let row: String = diagram
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(layer))
            .take_while(|l| l.trim_start().starts_with(layer) || !l.starts_with(' ') || l.starts_with("  "))
            .take(4)
            .collect::<Vec<_>>()
            .join(" ");
        for m in *modules {
            assert!(
                row.split(|c: char| !c.is_alphanumeric()).any(|w| w == *m),
                "docs/architecture.md: {m} not in the {layer} row"
            );
        }
    }
}

#[test]
fn each_sideways_use_is_needed_and_they_make_no_cycle() {
    let files = sources();
    let mut used: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (path, code) in &files {
        let parts = module_path(path);
        used.entry(parts[0]).or_default().extend(imports(code, &parts));
    }
    for (from, to, why) in SIDEWAYS {
        assert_eq!(layer_of(from), layer_of(to), "{from} → {to} crosses layers: not sideways");
        assert!(used.get(from).is_some_and(|u| u.contains(*to)), "{from} no longer uses {to} ({why}): drop the entry");
    }
    // No cycle: take away modules with no sideways use left until none remain.
    let mut left: BTreeSet<&str> = SIDEWAYS.iter().flat_map(|(f, t, _)| [*f, *t]).collect();
    while let Some(free) = left.iter().copied().find(|m| !SIDEWAYS.iter().any(|(f, t, _)| f == m && left.contains(t))) {
        left.remove(free);
    }
    assert!(left.is_empty(), "sideways uses form a cycle among {left:?}");
}

#[test]
fn a_planted_back_import_is_caught() {
    let file = |path: &str, code: &str| vec![(path.to_string(), code.to_string())];
    // The engine reached from the bottom, in each way a path can be written.
    assert_eq!(
        violations(&file("src/wire.rs", "use crate::query::Engine;")),
        ["src/wire.rs: wire (base) uses query (engine)"]
    );
    assert_eq!(violations(&file("src/config/mod.rs", "use crate::{domain, upstream::Server};")).len(), 1);
    assert_eq!(violations(&file("src/upstream/resolv.rs", "fn f(e: &crate::query::Engine) {}")).len(), 1);
    assert_eq!(violations(&file("src/cache.rs", "use super::policy::Policy;")).len(), 1);
    // Stages may not use each other unless listed.
    assert_eq!(violations(&file("src/cache.rs", "use crate::upstream::Group;")).len(), 1);
    assert!(violations(&file("src/querylog/mod.rs", "use crate::client::names::NameBook;")).is_empty());
    // Down is fine; so are tests, comments, strings and a module's own paths.
    assert!(
        violations(&file("src/query/refresh.rs", "use crate::{cache::Cache, wire};\nuse super::Engine;")).is_empty()
    );
    assert!(violations(&file("src/wire.rs", "pub mod build {\n    use super::put_u16;\n}\n")).is_empty());
    let quiet = "// crate::server\n/* crate::cli */\nconst S: &str = \"crate::query\";\n\
                 #[cfg(test)]\nmod tests { use crate::query::Engine; }\nuse crate::wire::{self, rtype};\n";
    assert!(violations(&file("src/cache.rs", quiet)).is_empty(), "{:?}", violations(&file("src/cache.rs", quiet)));
    assert_eq!(
        violations(&file("src/newthing.rs", "")),
        ["src/newthing.rs: module 'newthing' is in no layer of tests/layers.rs"]
    );
}
