//! Blocking policy: which names are blocked, which are allowed, and what a
//! blocked name is answered with.
//!
//! A [`Policy`] is immutable once built. Loading reads every list off the hot
//! path; the server swaps a whole new policy in atomically, so a query sees
//! either the old lists or the new ones, never a mix.

pub mod domainset;
pub mod exceptions;
pub mod formats;
pub mod pause;
pub mod records;
pub mod safesearch;
pub mod schedule;
pub mod services;
pub mod sketch;
mod sources;

use sources::load_source;
pub use sources::{Explained, SourceReport, WholeTlds, explain, read_list_file, scan_warnings};

use std::io::{BufRead, BufReader};
use std::net::Ipv6Addr;
use std::path::Path;
use std::sync::Arc;

use crate::config::groups::GroupTable;
use crate::config::{BlockMode, ListKind, ListSource};
use crate::wire::{self, Query, rcode, rtype};
use domainset::{DomainSet, SetBuilder, key_to_name};
use formats::{ParseStats, Rule};
use sketch::Sketch;

/// The EDNS option Extended DNS Error (15), info-code 15: Blocked (RFC 8914).
const EDE_BLOCKED: [u8; 6] = [0, 15, 0, 2, 0, 15];

/// Names whose NXDOMAIN tells clients to keep to the network's resolver:
/// Firefox's DoH canary and Apple's iCloud Private Relay, in wire form.
pub const BYPASS_NAMES: [&[u8]; 3] =
    [b"\x13use-application-dns\x03net\x00", b"\x04mask\x06icloud\x03com\x00", b"\x07mask-h2\x06icloud\x03com\x00"];
/// [`BYPASS_NAMES`] as text, for `hydradns check`.
pub const BYPASS_DOTTED: [&str; 3] = ["use-application-dns.net", "mask.icloud.com", "mask-h2.icloud.com"];

/// What the lists say about one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No list mentions it.
    Pass,
    /// An allow entry covers it (whether or not a block entry does too).
    Allowed {
        /// Source of the allow entry.
        source: u16,
    },
    /// A block entry covers it and no allow entry does.
    Blocked {
        /// Source of the block entry.
        source: u16,
    },
    /// A search host, for a client with safe search: answered with the
    /// safe host (blocks win over it).
    SafeSearch {
        /// Index of the safe host in [`safesearch::TARGETS`].
        target: u8,
    },
}

/// A list entry that matched: its source's tag and the entry as a dotted name.
pub type Entry = (u16, String);

/// What the lists say about a name for one client, and whether every
/// client would hear the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// The verdict for the groups asked about.
    pub verdict: Verdict,
    /// No client, whatever its groups, would get this name blocked: each
    /// list that blocks it is overruled by its own group's allow entry. Only
    /// then may a cache hit skip the lookup for everyone (see
    /// `query::Snapshot::passed`).
    pub uniform: bool,
}

/// The lists of one combination of groups: every source with exactly this
/// `list group` set, merged. Sources that share their groups share one set.
#[derive(Debug, Default)]
struct Class {
    /// The groups whose clients these lists apply to.
    groups: u64,
    /// Names to block, tagged with their source index.
    block: DomainSet,
    /// Names exempt from blocking, tagged with their source index.
    allow: DomainSet,
}

impl Class {
    /// [`Policy::check`] when this is the only combination: the lookups of
    /// a config without groups, as many as before groups existed.
    #[inline]
    fn check(&self, key: &[u8], active: u64) -> Checked {
        let pass = Checked { verdict: Verdict::Pass, uniform: true };
        if self.block.is_empty() {
            return pass;
        }
        let Some(b) = self.block.lookup(key) else { return pass };
        // Most routers list nothing to allow: no search of an empty set.
        let own = if self.allow.is_empty() { None } else { self.allow.lookup(key) };
        let verdict = match own {
            _ if self.groups & active == 0 => Verdict::Pass,
            Some(a) => Verdict::Allowed { source: a.tag },
            None => Verdict::Blocked { source: b.tag },
        };
        Checked { verdict, uniform: own.is_some() }
    }
}

/// Compiled lists plus the block answer settings.
#[derive(Debug, Default)]
pub struct Policy {
    /// One per distinct group combination in use, in order of first source:
    /// one for a config without groups, so a lookup is one binary search.
    classes: Vec<Class>,
    /// One report per configured source, indexed by tag.
    pub sources: Vec<SourceReport>,
    /// Source names, indexed by tag, shared with query log entries.
    names: Vec<Arc<str>>,
    /// The group mask of each source, by tag.
    source_groups: Vec<u64>,
    /// The groups, for block answer overrides and reports.
    pub groups: GroupTable,
    /// Answer style for blocked names.
    mode: BlockMode,
    /// Some group has a style of its own.
    modes_vary: bool,
    /// TTL of block answers.
    ttl: u32,
    /// What the load found wrong that is not a list's (unknown services).
    pub warnings: Vec<String>,
    /// The search hosts, when some group has safe search.
    safe: safesearch::SafeSearch,
    /// With several classes: every block entry of all of them but the
    /// largest, merged. A name it does not cover is listed by the largest
    /// class or by none, so a name most clients pass costs two lookups
    /// whatever the number of groups, and a group's services (dozens of
    /// names each) grow only this set, not one per group.
    rest: DomainSet,
    /// The first two labels of each entry of `rest` (`com␀example`), so
    /// that a name under none of them skips that search too: any entry
    /// covering a name shares them.
    rest_sites: Sketch,
    /// Some entry of `rest` is a single label (a whole top-level domain),
    /// which `rest_sites` cannot stand for.
    rest_has_tld: bool,
    /// Index of the largest class (by block entries).
    big: usize,
}

impl Policy {
    /// Reads every source, each list in the `default` group. Never fails:
    /// unreadable files and bad lines are counted in the reports and the rest still loads.
    pub fn load(lists: &[ListSource], mode: BlockMode, ttl: u32) -> Policy {
        Policy::load_grouped(lists, GroupTable::default(), mode, ttl)
    }

    /// The lists, services, groups and block answer of `cfg`.
    pub fn build(cfg: &crate::config::Config) -> Policy {
        let (lists, warnings) = services::with_services(cfg);
        let mut p = Policy::load_grouped(&lists, GroupTable::new(cfg), cfg.block_mode, cfg.block_ttl);
        p.warnings = warnings;
        p.safe = safesearch::SafeSearch::new(cfg, &p.groups);
        p
    }

    /// [`Policy::load`] with each source in the groups `groups` gives its `list group`.
    pub fn load_grouped(lists: &[ListSource], groups: GroupTable, mode: BlockMode, ttl: u32) -> Policy {
        let source_groups: Vec<u64> = lists.iter().map(|l| groups.mask_of(&l.groups)).collect();
        let mut masks: Vec<u64> = Vec::new();
        for &m in &source_groups {
            if !masks.contains(&m) {
                masks.push(m);
            }
        }
        let mut builders: Vec<(SetBuilder, SetBuilder)> =
            masks.iter().map(|_| (SetBuilder::new(), SetBuilder::new())).collect();
        let class_of = |tag: usize| masks.iter().position(|&m| m == source_groups[tag]).unwrap_or(0);
        for (i, src) in lists.iter().enumerate() {
            let bytes: u64 =
                src.paths.iter().chain(&src.saved).filter_map(|p| p.metadata().ok()).map(|m| m.len()).sum();
            let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
            let (block, allow) = &mut builders[class_of(i)];
            match src.kind {
                ListKind::Block => block.expect(bytes),
                ListKind::Allow => allow.expect(bytes),
            }
        }
        let sources = lists
            .iter()
            .enumerate()
            .map(|(i, src)| {
                let tag = u16::try_from(i).unwrap_or(u16::MAX);
                let (block, allow) = &mut builders[class_of(i)];
                load_source(src, tag, block, allow)
            })
            .collect();
        let classes: Vec<Class> = masks
            .iter()
            .zip(builders)
            .map(|(&groups, (block, allow))| Class { groups, block: block.build(), allow: allow.build() })
            .collect();
        let names = lists.iter().map(|l| Arc::from(l.name.as_str())).collect();
        let modes_vary = groups.modes.iter().any(Option::is_some);
        let (rest, big) = merge_rest(&classes);
        let mut rest_sites = Sketch::with_capacity(rest.len());
        let mut rest_has_tld = false;
        for m in rest.iter() {
            match site(m.key) {
                Some(site) => rest_sites.add(site),
                None => rest_has_tld = true,
            }
        }
        Policy {
            classes,
            sources,
            names,
            source_groups,
            groups,
            mode,
            modes_vary,
            ttl,
            warnings: Vec::new(),
            safe: Default::default(),
            rest,
            rest_sites,
            rest_has_tld,
            big,
        }
    }

    /// Blocked names after collapsing subdomains under listed parents (summed over group combinations).
    pub fn blocked_len(&self) -> usize {
        self.classes.iter().map(|c| c.block.len()).sum()
    }

    /// Allowed names after collapsing.
    pub fn allowed_len(&self) -> usize {
        self.classes.iter().map(|c| c.allow.len()).sum()
    }

    /// Heap bytes of all sets, the merged copy of the smaller classes' included.
    pub fn heap_bytes(&self) -> usize {
        let merged = self.rest.heap_bytes() + self.rest_sites.heap_bytes();
        self.classes.iter().map(|c| c.block.heap_bytes() + c.allow.heap_bytes()).sum::<usize>() + merged
    }

    /// Name of the source with tag `source`.
    pub fn source_name(&self, source: u16) -> &str {
        self.sources.get(source as usize).map_or("?", |s| s.name.as_str())
    }

    /// Shared name of the source with tag `source`, for log entries.
    pub fn source_arc(&self, source: u16) -> Option<Arc<str>> {
        self.names.get(source as usize).cloned()
    }

    /// The group a block by `source` is counted under for a client in
    /// `active`: the first of them the source applies to.
    pub fn group_of(&self, source: u16, active: u64) -> Option<usize> {
        GroupTable::first(self.source_groups.get(source as usize).copied().unwrap_or(0) & active)
    }

    /// Looks up a reversed-label key (see [`wire::reversed_key`]) for a
    /// client whose active groups are `active`: blocked if a list of those
    /// groups blocks it and no allow entry of those groups covers it.
    #[inline]
    pub fn check(&self, key: &[u8], active: u64) -> Checked {
        let checked = match &self.classes[..] {
            [one] => one.check(key, active),
            [] => Checked { verdict: Verdict::Pass, uniform: true },
            _ => self.check_classes(key, active),
        };
        // Nearly every name is no search host: the sketch says so inline.
        if !self.safe.may_be_host(key) {
            return checked;
        }
        self.safe_search(key, active, checked)
    }

    /// [`Policy::check`]'s verdict for a search host: the safe host for a
    /// client with safe search, unless a list blocks the name. Either way
    /// not the same for every client, so a cached answer is never served
    /// without this look.
    #[inline(never)]
    fn safe_search(&self, key: &[u8], active: u64, checked: Checked) -> Checked {
        match self.safe.target(key, active) {
            None => checked,
            Some(_) if matches!(checked.verdict, Verdict::Blocked { .. }) => Checked { uniform: false, ..checked },
            Some(None) => Checked { uniform: false, ..checked },
            Some(Some(target)) => Checked { verdict: Verdict::SafeSearch { target }, uniform: false },
        }
    }

    /// [`Policy::check`] over several group combinations: when no class
    /// but the largest lists the name (most names), that class alone
    /// decides; otherwise [`Policy::check_each_class`].
    #[inline(never)]
    fn check_classes(&self, key: &[u8], active: u64) -> Checked {
        // A name's covers are whole top-level domains or share its site.
        let near = self.rest_has_tld || site(key).is_some_and(|site| self.rest_sites.may_hold(site));
        if near && self.rest.lookup(key).is_some() {
            return self.check_each_class(key, active);
        }
        let pass = Checked { verdict: Verdict::Pass, uniform: true };
        let Some(c) = self.classes.get(self.big) else { return pass };
        if c.block.is_empty() {
            return pass;
        }
        let Some(b) = c.block.lookup(key) else { return pass };
        // Passes for everyone only if its own groups allow it.
        let own = || !c.allow.is_empty() && c.allow.lookup(key).is_some();
        if c.groups & active == 0 {
            return Checked { verdict: Verdict::Pass, uniform: own() };
        }
        match self.allowed_by(key, active) {
            None => Checked { verdict: Verdict::Blocked { source: b.tag }, uniform: false },
            Some(source) => Checked { verdict: Verdict::Allowed { source }, uniform: own() },
        }
    }

    /// [`Policy::check`] over every class: the client's own lists first,
    /// and when one blocks the name that is the answer; only a name they
    /// pass needs the other groups' lists, to know whether it passes for
    /// everyone.
    fn check_each_class(&self, key: &[u8], active: u64) -> Checked {
        let mut blocked = None;
        // Classes looked up, and which of them list the name (the first 64).
        let (mut looked, mut listed) = (0u64, 0u64);
        for (i, c) in self.classes.iter().enumerate() {
            if c.groups & active == 0 || c.block.is_empty() {
                continue;
            }
            let hit = c.block.lookup(key);
            if i < 64 {
                looked |= 1 << i;
                listed |= u64::from(hit.is_some()) << i;
            }
            if let Some(b) = hit {
                // The first of the client's lists to block it names the source.
                blocked = Some(b.tag);
                break;
            }
        }
        // Another group of the client may allow what one blocks.
        let allowed = match blocked {
            Some(_) => self.allowed_by(key, active),
            None => None,
        };
        if let (Some(source), None) = (blocked, allowed) {
            return Checked { verdict: Verdict::Blocked { source }, uniform: false };
        }
        let uniform = self.classes.iter().enumerate().all(|(i, c)| {
            let listed = if i < 64 && looked >> i & 1 != 0 {
                listed >> i & 1 != 0
            } else {
                !c.block.is_empty() && c.block.lookup(key).is_some()
            };
            !listed || (!c.allow.is_empty() && c.allow.lookup(key).is_some())
        });
        let verdict = match allowed {
            Some(source) => Verdict::Allowed { source },
            None => Verdict::Pass,
        };
        Checked { verdict, uniform }
    }

    /// The source of an allow entry of the groups in `active` covering `key`.
    fn allowed_by(&self, key: &[u8], active: u64) -> Option<u16> {
        self.classes
            .iter()
            .filter(|c| c.groups & active != 0 && !c.allow.is_empty())
            .find_map(|c| c.allow.lookup(key))
            .map(|m| m.tag)
    }

    /// Does an allow entry of the groups in `active` cover `key` (whether or not anything blocks it)?
    pub fn is_allowed(&self, key: &[u8], active: u64) -> bool {
        self.allowed_by(key, active).is_some()
    }

    /// The matching block and allow entries for `key` among the groups in
    /// `active`: (source, dotted name), the first of each.
    pub fn entries(&self, key: &[u8], active: u64) -> (Option<Entry>, Option<Entry>) {
        let show = |m: domainset::Match<'_>| (m.tag, key_to_name(m.key));
        let on = || self.classes.iter().filter(|c| c.groups & active != 0);
        (on().find_map(|c| c.block.lookup(key)).map(show), on().find_map(|c| c.allow.lookup(key)).map(show))
    }

    /// The block answer style for a name `source` blocks for a client in
    /// `active`: that of the first such group with its own, else the global one.
    #[inline]
    pub fn mode_for(&self, source: u16, active: u64) -> BlockMode {
        if !self.modes_vary {
            return self.mode;
        }
        let mut groups = self.source_groups.get(source as usize).copied().unwrap_or(0) & active;
        while let Some(g) = GroupTable::first(groups) {
            if let Some(Some(mode)) = self.groups.modes.get(g) {
                return *mode;
            }
            groups &= groups - 1;
        }
        self.mode
    }

    /// Writes the answer for a blocked query into `out` (UDP size not yet enforced).
    pub fn write_block_answer(&self, q: &Query, out: &mut Vec<u8>) {
        self.write_block_answer_as(self.mode, q, out)
    }

    /// [`Policy::write_block_answer`] in style `mode`. With EDNS, the
    /// answer carries Extended DNS Error 15, Blocked (RFC 8914), so a
    /// client can tell a block from a real answer.
    pub fn write_block_answer_as(&self, mode: BlockMode, q: &Query, out: &mut Vec<u8>) {
        let ttl = self.ttl;
        let in_class = q.qclass == wire::CLASS_IN;
        let (v4, v6) = match mode {
            BlockMode::Refused => {
                wire::build::start(out, q, rcode::REFUSED);
                wire::build::finish_with(out, q.edns, [0, 0, 0], false, &EDE_BLOCKED);
                return;
            }
            BlockMode::NxDomain => {
                wire::build::start(out, q, rcode::NXDOMAIN);
                wire::build::negative_soa(out, ttl);
                wire::build::finish_with(out, q.edns, [0, 1, 0], false, &EDE_BLOCKED);
                return;
            }
            BlockMode::Null => (Some([0u8; 4]), Some([0u8; 16])),
            BlockMode::Address(v4, v6) => (v4.map(|a| a.octets()), v6.map(|a: Ipv6Addr| a.octets())),
        };
        wire::build::start(out, q, rcode::NOERROR);
        let rdata: Option<&[u8]> = match q.qtype {
            rtype::A if in_class => v4.as_ref().map(|a| &a[..]),
            rtype::AAAA if in_class => v6.as_ref().map(|a| &a[..]),
            _ => None,
        };
        match rdata {
            Some(rdata) => {
                wire::build::record(out, q.qtype, ttl, rdata);
                wire::build::finish_with(out, q.edns, [1, 0, 0], false, &EDE_BLOCKED);
            }
            None => {
                wire::build::negative_soa(out, ttl);
                wire::build::finish_with(out, q.edns, [0, 1, 0], false, &EDE_BLOCKED);
            }
        }
    }

    /// What the owner should see as a warning after a load: files that
    /// could not be read, entries covering a whole top-level domain.
    pub fn warning_lines(&self) -> Vec<String> {
        self.sources
            .iter()
            .flat_map(|s| {
                let read = s.errors.iter().map(move |e| format!("list '{}': cannot read {e}", s.name));
                read.chain(s.warnings.iter().map(move |w| format!("list '{}': {w}", s.name)))
            })
            .collect()
    }

    /// One log line per source plus a total, for syslog after every load.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .sources
            .iter()
            .map(|s| {
                let st = &s.stats;
                // An allowlist's plain entries allow (see `takes_effect`).
                let entries = match s.kind {
                    ListKind::Block => format!("blocklist): {} blocks, {} allows", st.blocks, st.allows),
                    ListKind::Allow => format!("allowlist): {} allows", st.blocks + st.allows),
                };
                let mut line = format!(
                    "list '{}' ({entries}, {} badfilters, {} ignored, {} unsupported, {} invalid, {} lines",
                    s.name, st.badfilters, st.ignored, st.unsupported, st.invalid, st.lines
                );
                if let Some(p) = &s.pending {
                    line.push_str("; ");
                    line.push_str(p);
                }
                line
            })
            .collect();
        lines.push(format!(
            "policy: {} blocked and {} allowed names after merging subdomains, {} KiB",
            self.blocked_len(),
            self.allowed_len(),
            self.heap_bytes() / 1024
        ));
        lines
    }
}

/// The first two labels of a reversed-label key (`com␀example` of
/// `com␀example␀www`), `None` for a single label.
#[inline]
fn site(key: &[u8]) -> Option<&[u8]> {
    let first = find_byte(key, 0, crate::domain::SEP)?;
    key.get(..find_byte(key, first + 1, crate::domain::SEP).unwrap_or(key.len()))
}

/// The index of the first `byte` in `bytes` from `from` on, eight bytes
/// at a time: byte by byte, a list's lines (`for_each_line`) and a key's
/// labels (`site`) cost an instruction or more per byte, with a search set
/// up for each piece of twenty-odd bytes.
#[inline]
fn find_byte(bytes: &[u8], from: usize, byte: u8) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let pattern = ONES * u64::from(byte);
    let mut i = from;
    while let Some(w) = bytes.get(i..).and_then(|rest| rest.first_chunk::<8>()) {
        let x = u64::from_le_bytes(*w) ^ pattern;
        // The lowest bit set marks the first zero byte, the first `byte`
        // (a borrow can only mark bytes above a true one).
        let found = x.wrapping_sub(ONES) & !x & HIGH;
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes.get(i..)?.iter().position(|&b| b == byte).map(|p| i + p)
}

/// The block entries of every class but the largest, merged (tags kept,
/// only ever tested for presence), and the largest's index. Nothing when
/// there is one class: it is looked up directly.
fn merge_rest(classes: &[Class]) -> (DomainSet, usize) {
    let big = (0..classes.len()).max_by_key(|&i| classes[i].block.len()).unwrap_or(0);
    if classes.len() < 2 {
        return (DomainSet::default(), big);
    }
    let mut rest = SetBuilder::new();
    for (_, c) in classes.iter().enumerate().filter(|&(i, _)| i != big) {
        for m in c.block.iter() {
            rest.insert_key(m.key, m.tag);
        }
    }
    (rest.build(), big)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::groups::DEFAULT;
    use crate::wire::{MAX_NAME_LEN, parse_query, reversed_key, tests::query};
    use domainset::name_key;
    use std::net::Ipv4Addr;

    #[test]
    fn site_is_the_first_two_labels() {
        let text = |k: &[u8]| site(k).map(|s| String::from_utf8_lossy(s).into_owned());
        assert_eq!(text(b"com\0example\0www"), Some("com\0example".into()));
        assert_eq!(text(b"com\0example"), Some("com\0example".into()));
        assert_eq!(text(b"uk\0co\0a-rather-long-name\0x"), Some("uk\0co".into()));
        assert_eq!(
            text(b"example12345678\0a-rather-long-label\0www"),
            Some("example12345678\0a-rather-long-label".into())
        );
        assert_eq!(text(b"com"), None);
        assert_eq!(text(b""), None);
        for n in 0..40 {
            let key: Vec<u8> = [vec![b'a'; n], vec![0], vec![b'b'; n], vec![0, b'c']].concat();
            assert_eq!(site(&key).map(<[u8]>::len), Some(2 * n + 1), "labels of {n}");
        }
    }

    fn source(name: &str, kind: ListKind, domains: &[&str]) -> ListSource {
        ListSource {
            name: name.into(),
            kind,
            paths: Vec::new(),
            domains: domains.iter().map(|d| (d.to_string(), 1)).collect(),
            origin: "test".into(),
            url: None,
            saved: None,
            groups: Vec::new(),
        }
    }

    fn verdict(p: &Policy, name: &str) -> Verdict {
        let m = query(1, name, rtype::A, None);
        let q = parse_query(&m).unwrap();
        let mut buf = [0u8; MAX_NAME_LEN];
        let n = reversed_key(q.qname, &mut buf);
        p.check(&buf[..n], DEFAULT).verdict
    }

    #[test]
    fn allow_wins_over_block_for_name_and_subdomains() {
        let p = Policy::load(
            &[
                source("ads", ListKind::Block, &["example.com", "||tracker.example^", "@@||ok.tracker.example^"]),
                source("mine", ListKind::Allow, &["good.example.com"]),
            ],
            BlockMode::Null,
            60,
        );
        assert_eq!(verdict(&p, "example.com"), Verdict::Blocked { source: 0 });
        assert_eq!(verdict(&p, "ads.example.com"), Verdict::Blocked { source: 0 });
        assert_eq!(verdict(&p, "good.example.com"), Verdict::Allowed { source: 1 });
        assert_eq!(verdict(&p, "x.good.example.com"), Verdict::Allowed { source: 1 });
        // A blocklist's `@@` rule allows nothing (see `takes_effect`).
        assert_eq!(verdict(&p, "ok.tracker.example"), Verdict::Blocked { source: 0 });
        assert_eq!(verdict(&p, "a.tracker.example"), Verdict::Blocked { source: 0 });
        assert_eq!(verdict(&p, "example.org"), Verdict::Pass);
    }

    /// `@@||com^` in a third-party blocklist unblocked the owner's own
    /// entries; it is counted as unsupported there and kept in allowlists.
    /// An entry covering a whole TLD loads with a warning.
    #[test]
    fn a_blocklist_cannot_allow_and_whole_tlds_are_warned_about() {
        let sources = [
            source("own", ListKind::Block, &["ads.example.com"]),
            source("third", ListKind::Block, &["@@||com^", "@@||x.example.com^", "tracker.example"]),
            source("mine", ListKind::Allow, &["@@||ok.example^", "good.example"]),
        ];
        let p = Policy::load(&sources, BlockMode::Null, 60);
        assert_eq!(verdict(&p, "ads.example.com"), Verdict::Blocked { source: 0 });
        let third = &p.sources[1].stats;
        assert_eq!((third.blocks, third.allows, third.unsupported), (1, 0, 2), "{third:?}");
        assert!(p.is_allowed(&domainset::name_key("ok.example").unwrap(), DEFAULT));
        assert_eq!((p.sources[2].stats.allows, p.sources[2].stats.unsupported), (1, 0));
        assert!(p.warning_lines().is_empty(), "a rule that does nothing needs no warning: {:?}", p.warning_lines());
        assert!(explain(&sources, &domainset::name_key("x.example.com").unwrap()).is_empty());

        let wide = [
            source("wide", ListKind::Block, &["||com^", "net", "zip.", "fine.example"]),
            source("open", ListKind::Allow, &["@@||org^"]),
        ];
        let p = Policy::load(&wide, BlockMode::Null, 60);
        assert_eq!(verdict(&p, "anything.com"), Verdict::Blocked { source: 0 });
        assert_eq!(
            p.warning_lines(),
            [
                "list 'wide': 3 entries cover a whole top-level domain (com, net, zip): every name under it is blocked",
                "list 'open': 1 entry covers a whole top-level domain (org): every name under it is allowed",
            ]
        );
        assert_eq!(scan_warnings(&wide[0]), [p.sources[0].warnings[0].clone()]);
        assert!(scan_warnings(&sources[1]).is_empty());
    }

    fn answer(mode: BlockMode, qtype: u16, edns: bool) -> simple_dns::Packet<'static> {
        let p = Policy::load(&[source("b", ListKind::Block, &["blocked.example"])], mode, 42);
        let m = query(9, "Blocked.Example", qtype, edns.then_some((1232, false)));
        let q = parse_query(&m).unwrap();
        let mut out = Vec::new();
        p.write_block_answer(&q, &mut out);
        let leaked: &'static [u8] = Box::leak(out.into_boxed_slice());
        simple_dns::Packet::parse(leaked).unwrap()
    }

    #[test]
    fn bypass_names_in_both_forms_agree() {
        for (wire, dotted) in BYPASS_NAMES.iter().zip(BYPASS_DOTTED) {
            assert_eq!(*wire, &wire::build::query(0, dotted, 1, None).unwrap()[12..12 + wire.len()], "{dotted}");
        }
    }

    #[test]
    fn block_answers_per_mode() {
        use simple_dns::{RCODE, rdata::RData};
        let a = answer(BlockMode::Null, rtype::A, false);
        assert_eq!(a.id(), 9);
        assert_eq!(a.rcode(), RCODE::NoError);
        assert_eq!(a.questions[0].qname.to_string(), "Blocked.Example");
        match &a.answers[0].rdata {
            RData::A(r) => assert_eq!(Ipv4Addr::from(r.address), Ipv4Addr::UNSPECIFIED),
            other => panic!("{other:?}"),
        }
        assert_eq!(a.answers[0].ttl, 42);
        assert!(a.opt().is_none());
        let aaaa = answer(BlockMode::Null, rtype::AAAA, true);
        assert!(matches!(&aaaa.answers[0].rdata, RData::AAAA(r) if r.address == 0));
        assert!(aaaa.opt().is_some());
        let mx = answer(BlockMode::Null, 15, false);
        assert!(mx.answers.is_empty());
        assert_eq!(mx.rcode(), RCODE::NoError);
        assert!(matches!(mx.name_servers[0].rdata, RData::SOA(_)));
        let nx = answer(BlockMode::NxDomain, rtype::A, false);
        assert_eq!(nx.rcode(), RCODE::NameError);
        assert!(nx.answers.is_empty());
        assert!(matches!(&nx.name_servers[0].rdata, RData::SOA(s) if s.minimum == 42));
        let refused = answer(BlockMode::Refused, rtype::A, false);
        assert_eq!(refused.rcode(), RCODE::Refused);
        let ip = BlockMode::Address(Some(Ipv4Addr::new(192, 0, 2, 7)), None);
        let a = answer(ip, rtype::A, false);
        assert!(matches!(&a.answers[0].rdata, RData::A(r) if Ipv4Addr::from(r.address) == Ipv4Addr::new(192, 0, 2, 7)));
        let aaaa = answer(ip, rtype::AAAA, false);
        assert!(aaaa.answers.is_empty());
        assert_eq!(aaaa.rcode(), RCODE::NoError);
    }

    #[test]
    fn each_client_gets_the_union_of_its_groups_and_uniform_says_who_else() {
        let cfg = crate::config::Config::parse(
            "t",
            "config blocklist\n\toption name 'ads'\n\tlist domain 'ads.example'\n\tlist domain 'both.example'\n\
             config blocklist\n\toption name 'social'\n\tlist domain 'social.example'\n\tlist group 'kids'\n\
             config blocklist\n\toption name 'shared'\n\tlist domain 'both.example'\n\tlist group 'kids'\n\tlist group 'default'\n\
             config allowlist\n\toption name 'homework'\n\tlist domain 'ads.example'\n\tlist domain 'school.social.example'\n\tlist group 'kids'\n",
        )
        .unwrap();
        let p = Policy::build(&cfg);
        assert_eq!(p.classes.len(), 3, "default, kids, kids+default");
        let (default, kids) = (DEFAULT, 1 << p.groups.bit("kids").unwrap());
        let check = |name: &str, active: u64| {
            let key = name_key(name).unwrap();
            p.check(&key, active)
        };
        let c = check("social.example", default);
        assert_eq!((c.verdict, c.uniform), (Verdict::Pass, false), "blocked for kids: no mark for everyone");
        assert_eq!(check("social.example", kids | default).verdict, Verdict::Blocked { source: 1 });
        assert_eq!(check("x.social.example", kids).verdict, Verdict::Blocked { source: 1 });
        assert_eq!(check("school.social.example", kids).verdict, Verdict::Allowed { source: 3 });
        assert!(check("school.social.example", kids).uniform, "its own group allows what it blocks");
        // The kids' allowlist overrides default's block for a client in both, not for one in default only.
        assert_eq!(check("ads.example", kids | default).verdict, Verdict::Allowed { source: 3 });
        assert_eq!(check("ads.example", default).verdict, Verdict::Blocked { source: 0 });
        assert_eq!(check("both.example", kids).verdict, Verdict::Blocked { source: 2 });
        assert_eq!(check("both.example", default).verdict, Verdict::Blocked { source: 0 });
        let c = check("elsewhere.example", kids);
        assert_eq!((c.verdict, c.uniform), (Verdict::Pass, true));
        assert_eq!(check("social.example", 0).verdict, Verdict::Pass, "no active group: nothing blocks");
    }

    /// The shortcuts of [`Policy::check`] (the largest class alone when
    /// no other lists a name, the sketch of the others' sites, the first
    /// blocking class ending the search) agree with the rule spelled out
    /// class by class, for every client and name of a tangle of groups.
    #[test]
    fn the_shortcuts_agree_with_the_rule_class_by_class() {
        let names = ["a.example", "b.example", "c.example", "x.a.example", "y.x.a.example", "b.example.org", "zip"];
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        let groups = ["default", "kids", "teens"];
        for round in 0..200 {
            let mut text = String::from("config group 'kids'\nconfig group 'teens'\n");
            for i in 0..1 + next(6) {
                let kind = if next(3) == 0 { "allowlist" } else { "blocklist" };
                text += &format!("config {kind}\n\toption name 's{i}'\n");
                for _ in 0..1 + next(3) {
                    text += &format!("\tlist domain '{}'\n", names[next(names.len())]);
                }
                for g in groups.iter().filter(|_| next(2) == 0) {
                    text += &format!("\tlist group '{g}'\n");
                }
            }
            let cfg = crate::config::Config::parse("t", &text).unwrap();
            let p = Policy::build(&cfg);
            for name in names.iter().chain(&["other.example", "www.c.example", "q.zip"]) {
                let key = name_key(name).unwrap();
                for active in 0..8u64 {
                    let on = |c: &&Class| c.groups & active != 0;
                    let blocked = p.classes.iter().filter(on).find_map(|c| c.block.lookup(&key)).map(|m| m.tag);
                    let allowed = p.classes.iter().filter(on).find_map(|c| c.allow.lookup(&key)).map(|m| m.tag);
                    let verdict = match (blocked, allowed) {
                        (_, Some(source)) if blocked.is_some() => Verdict::Allowed { source },
                        (Some(source), None) => Verdict::Blocked { source },
                        _ => Verdict::Pass,
                    };
                    let uniform =
                        p.classes.iter().all(|c| c.block.lookup(&key).is_none() || c.allow.lookup(&key).is_some());
                    let got = p.check(&key, active);
                    assert_eq!(got.verdict, verdict, "round {round}, {name}, active {active:b}:\n{text}");
                    if !matches!(verdict, Verdict::Blocked { .. }) {
                        assert_eq!(got.uniform, uniform, "round {round}, {name}, active {active:b}:\n{text}");
                    }
                }
            }
        }
    }

    #[test]
    fn missing_file_is_reported_not_fatal() {
        let mut src = source("gone", ListKind::Block, &["still.example"]);
        src.paths.push("/nonexistent/list.txt".into());
        let p = Policy::load(&[src], BlockMode::Null, 60);
        assert_eq!(p.sources[0].errors.len(), 1);
        assert_eq!(verdict(&p, "still.example"), Verdict::Blocked { source: 0 });
    }
}
