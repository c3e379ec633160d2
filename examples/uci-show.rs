//! Prints a UCI file the way `uci show` does, from HydraDNS's own parser, so
//! that tests/openwrt/uci-compat.sh can hold the two side by side.
//!   cargo run --example uci-show -- /etc/config/hydradns
//! The package name is the file name, as for uci. Exits 1 on a syntax error;
//! `--warnings` first prints the parser's warnings to stderr.
#![allow(missing_docs)]

use hydradns::config::uci;

fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', "'\\''"))
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let warnings = args.first().is_some_and(|a| a == "--warnings");
    if warnings {
        args.remove(0);
    }
    let Some(path) = args.into_iter().next() else {
        eprintln!("usage: uci-show [--warnings] FILE");
        std::process::exit(2);
    };
    let package = std::path::Path::new(&path).file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let sections = match uci::parse(&path, &text) {
        Ok(parsed) => {
            for (line, w) in parsed.warnings.iter().filter(|_| warnings) {
                eprintln!("{path}:{line}: warning: {w}");
            }
            parsed.sections
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    // Anonymous sections are shown as @type[n], n counting every section of that type.
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for s in &sections {
        let n = match seen.iter_mut().find(|(k, _)| *k == s.kind) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                seen.push((&s.kind, 1));
                0
            }
        };
        let id = s.name.clone().unwrap_or_else(|| format!("@{}[{n}]", s.kind));
        println!("{package}.{id}={}", s.kind);
        // A key's values in order; the key sits where it first appears.
        let mut keys: Vec<&str> = Vec::new();
        for v in &s.values {
            if !keys.contains(&v.key.as_str()) {
                keys.push(&v.key);
            }
        }
        for key in keys {
            let values: Vec<String> = s.values.iter().filter(|v| v.key == key).map(|v| quote(&v.value)).collect();
            println!("{package}.{id}.{key}={}", values.join(" "));
        }
    }
}
