//! The real third-party lists in tests/data/blocklists: every one loads,
//! with the entry counts its own header states (or, where it states none,
//! counts derived from the file by a second, independent rule), and the seven
//! formats of one HaGeZi list block exactly the same names.
#![allow(clippy::unwrap_used)]

mod common;
use common::data;
use hydradns::policy::domainset::{DomainSet, SetBuilder, name_key};
use hydradns::policy::formats::{ParseStats, Rule};
use hydradns::policy::read_list_file;

struct Loaded {
    stats: ParseStats,
    block: DomainSet,
    allow: DomainSet,
}

fn list(rel: &str) -> std::path::PathBuf {
    data(&format!("blocklists/{rel}"))
}

fn load(rel: &str) -> Loaded {
    let (mut b, mut a) = (SetBuilder::new(), SetBuilder::new());
    let mut stats = ParseStats::default();
    read_list_file(&list(rel), &mut stats, &mut |rule, name| match rule {
        Rule::Block => b.insert(name, 0),
        Rule::Allow => a.insert(name, 0),
        Rule::BadFilter => b.cancel(name),
    })
    .unwrap();
    Loaded { stats, block: b.build(), allow: a.build() }
}

/// The entry count a list's header announces.
fn header_count(rel: &str) -> u64 {
    let text = std::fs::read_to_string(list(rel)).unwrap();
    let line = text
        .lines()
        .take(40)
        .find(|l| l.contains("Number of entries:") || l.contains("Domains:") || l.contains("Number of unique domains:"))
        .unwrap_or_else(|| panic!("{rel}: no count in header"));
    line.rsplit(':').next().unwrap().trim().replace(',', "").parse().unwrap()
}

fn blocked(set: &DomainSet, name: &str) -> bool {
    set.lookup(&name_key(name).unwrap()).is_some()
}

#[test]
fn lists_load_with_the_counts_their_headers_state() {
    for rel in [
        "hagezi-2026-08-15/domains__light.txt",
        "hagezi-2026-08-15/hosts__light.txt",
        "hagezi-2026-08-15/adblock__light.txt",
        "hagezi-2026-08-15/dnsmasq__light.txt",
        "hagezi-2026-08-15/wildcard__light-onlydomains.txt",
        "hagezi-2026-08-15/rpz__light.txt",
        "hagezi-2026-08-15/adblock__pro.mini.txt",
        "hagezi-2026-08-15/domains__native.tiktok.txt",
        "hagezi-2022-07-24/3p__stevenblack.domains.txt",
        "hagezi-2022-07-24/3p__stevenblack.dnsmasq.txt",
        "hagezi-2022-07-24/3p__stevenblack.adblock.txt",
        "hagezi-2022-07-24/3p__stevenblack.wildcard.txt",
        "hagezi-2022-07-24/3p__adguarddns.hosts.txt",
        "hagezi-2022-07-24/3p__adguarddns.adblock.txt",
        "hagezi-2022-07-24/3p__easylist.unbound.conf",
        "hagezi-2022-07-24/3p__someonewhocares.hosts.txt",
        "hagezi-2022-07-24/3p__adaway.hosts.txt",
        "hagezi-2022-07-24/domains__personal.txt",
        "stevenblack-unified-2026-06-26/unified.domains.txt",
    ] {
        let l = load(rel);
        let s = l.stats;
        assert_eq!(s.blocks, header_count(rel), "{rel}: {s:?}");
        assert_eq!((s.invalid, s.unsupported, s.allows), (0, 0, 0), "{rel}: {s:?}");
        assert!(!l.block.is_empty());
    }
    // The compressed hosts file announces its line count; its names are the domains list's.
    let compressed = load("hagezi-2026-08-15/hosts__light-compressed.txt").stats;
    assert_eq!(compressed.blocks, header_count("hagezi-2026-08-15/domains__light.txt"));
    let entry_lines = compressed.lines - 12; // 12 comment lines above the entries
    assert_eq!(entry_lines, header_count("hagezi-2026-08-15/hosts__light-compressed.txt"));
}

/// The HaGeZi "light" list in seven formats is one list: after merging
/// subdomains under their parents, each format blocks exactly the same names.
#[test]
fn seven_formats_of_one_list_block_the_same_names() {
    let formats = [
        "domains__light.txt",
        "hosts__light.txt",
        "hosts__light-compressed.txt",
        "adblock__light.txt",
        "dnsmasq__light.txt",
        "wildcard__light-onlydomains.txt",
        "rpz__light.txt",
    ];
    let reference: Vec<Vec<u8>> =
        load(&format!("hagezi-2026-08-15/{}", formats[0])).block.iter().map(|m| m.key.to_vec()).collect();
    assert_eq!(reference.len(), 40_961, "the adblock/dnsmasq/wildcard header count");
    for f in &formats[1..] {
        let keys: Vec<Vec<u8>> = load(&format!("hagezi-2026-08-15/{f}")).block.iter().map(|m| m.key.to_vec()).collect();
        assert!(keys == reference, "{f} differs from {}", formats[0]);
    }
}

/// The AdGuard DNS filter uses most of AdGuard's DNS syntax. Its counts are
/// checked against a second, independent reading of the file: every entry
/// line is accounted for exactly once, and the simple rule shapes are counted
/// by a plain string test.
#[test]
fn adguard_filter_as_its_authors_mean_it() {
    let rel = "adguard-dns-filter-noprivacy-2026-08-21/filter.txt";
    let l = load(rel);
    let s = l.stats;
    let text = std::fs::read_to_string(list(rel)).unwrap();
    let entries: Vec<&str> =
        text.lines().map(str::trim).filter(|x| !x.is_empty() && !x.starts_with('!') && !x.starts_with('#')).collect();
    assert_eq!(entries.len(), 71_101, "SOURCES.md entry count");
    let host_char = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_';
    let simple =
        |x: &str| x.strip_prefix("||").and_then(|r| r.strip_suffix('^')).is_some_and(|h| h.chars().all(host_char));
    let simple_blocks = entries.iter().filter(|x| simple(x)).count() as u64;
    let simple_allows = entries.iter().filter(|x| x.strip_prefix("@@").is_some_and(simple)).count() as u64;
    let badfilters = entries.iter().filter(|x| x.ends_with("$badfilter")).count() as u64;
    assert_eq!(badfilters, 5);
    assert_eq!(s.badfilters, badfilters);
    assert!(s.blocks >= simple_blocks && s.blocks - simple_blocks < 100, "{s:?} vs {simple_blocks}");
    assert!(s.allows >= simple_allows && s.allows <= 206, "{s:?} vs {simple_allows} (206 @@ rules in all)");
    // One rule per line in this syntax, so the classes add up to the entry lines.
    assert_eq!(s.blocks + s.allows + s.badfilters + s.ignored + s.unsupported + s.invalid, entries.len() as u64);
    assert!(blocked(&l.block, "doubleclick.net") && blocked(&l.block, "x.doubleclick.net"));
    assert!(blocked(&l.block, "taboola.com") && blocked(&l.allow, "cdn.taboola.com"), "@@ exception");
    assert!(!blocked(&l.block, "linksprf.com"), "cancelled by $badfilter");
    assert!(!blocked(&l.block, "pl.ua") && !blocked(&l.block, "shop.pl.ua"));
    assert!(blocked(&l.block, "exaapi.com"), "||*.exaapi.com^");
    // `-adx-*.rayjump.com^` cannot be expressed; `||rayjump.com^` blocks the domain anyway.
    assert!(blocked(&l.block, "rayjump.com"));
    assert!(!blocked(&l.block, "fxhpaoxqyajvmdg.com"), "`||fxhpaoxqyajvmdg.` (any TLD) is skipped, not guessed");
}

/// Browser lists (EasyList, EasyPrivacy, urlhaus) hold mostly URL rules; the
/// DNS-expressible ones (`||host^`, bare hostnames) load, the rest is counted.
#[test]
fn browser_lists_keep_their_host_rules() {
    for (rel, at_least) in
        [("debian-ublock-origin-1.67.0/easylist.txt", 42_000), ("debian-ublock-origin-1.67.0/easyprivacy.txt", 42_000)]
    {
        let s = load(rel).stats;
        assert!(s.blocks >= at_least, "{rel}: {s:?}");
        assert!(s.unsupported > 10_000, "{rel}: cosmetic and URL rules counted: {s:?}");
    }
    let text = std::fs::read_to_string(list("debian-ublock-origin-1.67.0/urlhaus-filter-online.txt")).unwrap();
    let bare_ips = text.lines().filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit() || c == '.')).count();
    assert_eq!(bare_ips, 2307, "SOURCES.md");
    let s = load("debian-ublock-origin-1.67.0/urlhaus-filter-online.txt").stats;
    assert!(s.unsupported >= bare_ips as u64, "{s:?}");
    assert!(s.blocks > 500, "{s:?}");
}
