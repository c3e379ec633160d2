//! Reading list sources into the sets: a file line by line (bounded lines,
//! any size of file), what each rule does in its kind of list, warnings
//! about whole top-level domains, and, for `hydradns check`, which sources
//! list a name.

use super::*;

/// How one source loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// Source name from the config.
    pub name: String,
    /// Block or allow.
    pub kind: ListKind,
    /// Line classification counts.
    pub stats: ParseStats,
    /// Files that could not be read, with the reason (logged as warnings).
    pub errors: Vec<String>,
    /// A downloaded source with no copy yet: normal before the first download.
    pub pending: Option<String>,
    /// What the owner should look at although it loaded: entries covering
    /// a whole top-level domain ([`WholeTlds`]).
    pub warnings: Vec<String>,
}

/// Whether a rule of a source of `kind` takes effect. An `@@` allow rule in
/// a *blocklist* does not: a third-party blocklist's `@@||com^` would
/// unblock the owner's own entries and every other list's, so only an
/// allowlist may allow (its blocks are allows too); such rules are counted
/// as unsupported.
pub(super) fn takes_effect(kind: ListKind, rule: Rule) -> bool {
    !matches!((kind, rule), (ListKind::Block, Rule::Allow) | (ListKind::Allow, Rule::BadFilter))
}

/// Entries that cover a whole top-level domain (`com`, `||com^`): legal,
/// and now and then meant (an unused TLD such as `zip`), but in a
/// downloaded list far likelier a mistake or an attack that blocks, or
/// allows, every name of a country or of the web. The load logs them as a
/// warning, `check-config` and `status` show them. The first few are named.
#[derive(Debug, Default)]
pub struct WholeTlds {
    /// Entries seen.
    pub(super) count: u64,
    /// The first [`WHOLE_TLDS_NAMED`] distinct ones.
    pub(super) names: Vec<String>,
}

/// Whole-TLD entries a warning names; the rest are counted.
pub(super) const WHOLE_TLDS_NAMED: usize = 5;

impl WholeTlds {
    /// Notes `name` (an entry that took effect) if it is one label.
    pub(super) fn note(&mut self, name: &str) {
        let name = name.strip_suffix('.').unwrap_or(name);
        if name.contains('.') {
            return;
        }
        self.count += 1;
        if self.names.len() < WHOLE_TLDS_NAMED && !self.names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            self.names.push(name.to_ascii_lowercase());
        }
    }

    /// The warning for a source of `kind`, if any entry was seen.
    pub(super) fn warning(&self, kind: ListKind) -> Option<String> {
        (self.count > 0).then(|| {
            let more = if self.count > self.names.len() as u64 { ", ..." } else { "" };
            format!(
                "{} {} a whole top-level domain ({}{more}): every name under it is {}",
                self.count,
                if self.count == 1 { "entry covers" } else { "entries cover" },
                self.names.join(", "),
                match kind {
                    ListKind::Block => "blocked",
                    ListKind::Allow => "allowed",
                }
            )
        })
    }
}

/// The warnings of `src` without building anything (`check-config`):
/// entries covering a whole top-level domain. Files that cannot be read
/// are left to the caller.
pub fn scan_warnings(src: &ListSource) -> Vec<String> {
    let mut wide = WholeTlds::default();
    let mut stats = ParseStats::default();
    let mut emit = |rule: Rule, name: &str| {
        let valid = crate::domain::for_each_label_rev(name, |_| {}).is_some();
        if valid && takes_effect(src.kind, rule) && rule != Rule::BadFilter {
            wide.note(name);
        }
        valid
    };
    let saved = src.saved.iter().filter(|_| src.url.is_some());
    for path in src.paths.iter().chain(saved) {
        let _ = read_list_file(path, &mut stats, &mut emit);
    }
    for (name, _line) in &src.domains {
        formats::parse_line(name, &mut stats, &mut emit);
    }
    wide.warning(src.kind).into_iter().collect()
}

/// Reads one source's files and inline entries into the builders.
pub(super) fn load_source(src: &ListSource, tag: u16, block: &mut SetBuilder, allow: &mut SetBuilder) -> SourceReport {
    let mut report = SourceReport {
        name: src.name.clone(),
        kind: src.kind,
        stats: ParseStats::default(),
        errors: Vec::new(),
        pending: None,
        warnings: Vec::new(),
    };
    let mut wide = WholeTlds::default();
    // Valid `@@` rules of a blocklist, counted as allows by the parser.
    let mut not_taken = 0u64;
    let mut emit = |rule: Rule, name: &str| {
        let taken = match (src.kind, rule) {
            (ListKind::Block, Rule::Block) => block.insert(name, tag),
            (ListKind::Block, Rule::BadFilter) => return block.cancel(name),
            (ListKind::Block, Rule::Allow) => {
                let valid = crate::domain::for_each_label_rev(name, |_| {}).is_some();
                not_taken += u64::from(valid);
                return valid;
            }
            (ListKind::Allow, Rule::Allow | Rule::Block) => allow.insert(name, tag),
            (ListKind::Allow, Rule::BadFilter) => return false,
        };
        if taken {
            wide.note(name);
        }
        taken
    };
    for path in &src.paths {
        if let Err(e) = read_list_file(path, &mut report.stats, &mut emit) {
            report.errors.push(format!("{}: {e}", path.display()));
        }
    }
    if let (Some(saved), Some(url)) = (&src.saved, &src.url) {
        match read_list_file(saved, &mut report.stats, &mut emit) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                report.pending = Some(format!("no copy of {url} yet; waiting for the first download"))
            }
            Err(e) => report.errors.push(format!("{}: {e}", saved.display())),
        }
    }
    for (name, _line) in &src.domains {
        formats::parse_line(name, &mut report.stats, &mut emit);
    }
    report.stats.allows = report.stats.allows.saturating_sub(not_taken);
    report.stats.unsupported += not_taken;
    report.warnings.extend(wide.warning(src.kind));
    report
}

/// A list line longer than this is counted invalid and skipped, not
/// gathered: a hosts line with many names is a few hundred bytes, and a
/// file without newlines must not be read into memory whole.
pub(super) const MAX_LIST_LINE: usize = 64 << 10;

/// Feeds a list file line by line; a line that is not UTF-8 counts as invalid.
/// Lines are parsed where they lie in the read buffer; only one that spans
/// two reads is copied, up to [`MAX_LIST_LINE`]. Only a regular file is
/// read ([`crate::sys::open_regular`]): the path comes from the config.
pub fn read_list_file(
    path: &Path,
    stats: &mut ParseStats,
    emit: &mut impl FnMut(Rule, &str) -> bool,
) -> std::io::Result<()> {
    let mut reader = BufReader::with_capacity(256 * 1024, crate::sys::open_regular(path)?);
    let mut spanning = Vec::new();
    // Inside a line over the limit: the rest of it is dropped.
    let mut overlong = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            if !spanning.is_empty() {
                parse_bytes(&spanning, stats, emit);
            }
            return Ok(());
        }
        // The whole lines of this read, each ending in a newline.
        let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let (mut whole, mut rest) = buf.split_at(end);
        if (overlong || !spanning.is_empty())
            && let Some(i) = whole.iter().position(|&b| b == b'\n')
        {
            if !overlong {
                spanning.extend_from_slice(&whole[..i]);
                parse_bytes(&spanning, stats, emit);
            }
            spanning.clear();
            overlong = false;
            whole = &whole[i + 1..];
        }
        if overlong {
            rest = &[];
        } else if spanning.len() + rest.len() > MAX_LIST_LINE {
            stats.lines += 1;
            stats.invalid += 1;
            spanning.clear();
            overlong = true;
            rest = &[];
        }
        if let Some(lines) = whole.strip_suffix(b"\n") {
            match std::str::from_utf8(lines) {
                // One UTF-8 check for all of them, usually.
                Ok(text) => for_each_line(text, |line| formats::parse_line(line, stats, emit)),
                Err(_) => lines.split(|&b| b == b'\n').for_each(|line| parse_bytes(line, stats, emit)),
            }
        }
        spanning.extend_from_slice(rest);
        let n = buf.len();
        reader.consume(n);
    }
}

/// Calls `f` with each piece of `text` between newlines, as
/// `text.split('\n')` yields them. `split`'s searcher took 9 % of a 1M
/// list's load (perf, static musl build), most of it setting up a search
/// per line of twenty-odd bytes; this tests eight bytes at a time.
pub(super) fn for_each_line<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let mut start = 0;
    while let Some(at) = find_byte(text.as_bytes(), start, b'\n') {
        f(&text[start..at]);
        start = at + 1;
    }
    f(&text[start..]);
}

/// One line as read; one that is not UTF-8 counts as invalid.
pub(super) fn parse_bytes(line: &[u8], stats: &mut ParseStats, emit: &mut impl FnMut(Rule, &str) -> bool) {
    match std::str::from_utf8(line) {
        Ok(text) => formats::parse_line(text, stats, emit),
        Err(_) => {
            stats.lines += 1;
            stats.invalid += 1;
        }
    }
}

/// One rule that matches a name, for `hydradns check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    /// Source name.
    pub list: String,
    /// `blocks`, `allows` or `cancels` (a `$badfilter` rule).
    pub effect: &'static str,
    /// `file:line` of the rule.
    pub location: String,
    /// The name the rule names, as parsed: never the line as written,
    /// whose comment is the list author's free text.
    pub name: String,
}

/// Every rule in every source that matches the name with reversed-label
/// `key` (the name itself or a parent). Reads the files again, line by line,
/// so it can name each line: for the CLI, not the query path.
pub fn explain(lists: &[ListSource], key: &[u8]) -> Vec<Explained> {
    let mut found = Vec::new();
    for src in lists {
        let mut check = |location: String, line: &str| {
            let mut hits: Vec<(Rule, String)> = Vec::new();
            let mut stats = ParseStats::default();
            formats::parse_line(line, &mut stats, &mut |rule, name| {
                let ok = domainset::name_key(name);
                if let Some(k) = &ok
                    && domainset::covers(k, key)
                {
                    hits.push((rule, name.to_ascii_lowercase()));
                }
                ok.is_some()
            });
            for (rule, name) in hits.into_iter().filter(|(r, _)| *r == Rule::BadFilter || takes_effect(src.kind, *r)) {
                let effect = match (src.kind, rule) {
                    (_, Rule::BadFilter) => "cancels",
                    (ListKind::Block, Rule::Block) => "blocks",
                    _ => "allows",
                };
                found.push(Explained { list: src.name.clone(), effect, location: location.clone(), name });
            }
        };
        for path in src.paths.iter().chain(src.saved.iter().filter(|_| src.url.is_some())) {
            let Ok(file) = crate::sys::open_regular(path) else { continue };
            let mut reader = BufReader::new(file);
            let mut buf = Vec::new();
            let mut n = 0;
            while reader.read_until(b'\n', &mut buf).is_ok_and(|read| read > 0) {
                n += 1;
                if let Ok(text) = std::str::from_utf8(&buf) {
                    check(format!("{}:{n}", path.display()), text);
                }
                buf.clear();
            }
        }
        let config_file = src.origin.rsplit_once(':').map_or(src.origin.as_str(), |(f, _)| f);
        for (domain, line) in &src.domains {
            check(format!("{config_file}:{line}"), domain);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lines_split_as_str_split_does() {
        let mut texts: Vec<String> = ["", "\n", "a", "a\n", "\na", "a\n\nb", "ünï\ncode\n\n", "\n\n\n\n\n\n\n\n\n"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        // Newlines at every offset within and across eight-byte words.
        for len in 0..40 {
            for nl in 0..len {
                let mut t: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                t[nl] = b'\n';
                t[(nl * 7 + 3) % len] = b'\n';
                texts.push(String::from_utf8(t).unwrap());
            }
        }
        for t in &texts {
            let mut got = Vec::new();
            for_each_line(t, |l| got.push(l));
            assert_eq!(got, t.split('\n').collect::<Vec<_>>(), "{t:?}");
        }
    }

    /// `text` written to a file of its own (`tag` names it) and read with
    /// [`read_list_file`]: its counts and the names it passed on.
    fn read_names(tag: &str, text: &[u8]) -> (ParseStats, Vec<String>) {
        let path = std::env::temp_dir().join(format!("hydradns-{tag}-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let (mut stats, mut got) = (ParseStats::default(), Vec::new());
        read_list_file(&path, &mut stats, &mut |_, name| {
            got.push(name.to_string());
            true
        })
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        (stats, got)
    }

    #[test]
    fn list_files_are_read_line_by_line_across_read_boundaries() {
        // Lines of every length around the 256 KiB read size, one that is
        // not UTF-8, CRLF endings, and a last line without a newline.
        let mut text = Vec::new();
        let mut want = Vec::new();
        for i in 0..40_000 {
            let name = format!("n{i}.{}.example", "x".repeat(i % 23));
            text.extend_from_slice(name.as_bytes());
            text.extend_from_slice(if i % 7 == 0 { b"\r\n" } else { b"\n" });
            want.push(name);
            if i == 20_000 {
                text.extend_from_slice(b"bad\xff.example\n");
            }
        }
        text.extend_from_slice(b"last.example");
        want.push("last.example".into());
        let (stats, got) = read_names("read-list", &text);
        assert!(text.len() > 2 * 256 * 1024);
        assert_eq!(got, want);
        assert_eq!((stats.lines, stats.invalid), (40_002, 1));
    }

    /// A line past [`MAX_LIST_LINE`] (here one of 600 KiB, across three
    /// reads) is one invalid line, skipped without being gathered; the
    /// lines around it count as ever.
    #[test]
    fn an_overlong_list_line_is_skipped_not_gathered() {
        let mut text = b"before.example\n".to_vec();
        text.extend(std::iter::repeat_n(b'a', 600 << 10));
        text.extend_from_slice(b"\nafter.example\n");
        text.extend(std::iter::repeat_n(b'b', MAX_LIST_LINE + 1));
        let (stats, got) = read_names("long-line", &text);
        assert_eq!(got, ["before.example", "after.example"]);
        assert_eq!((stats.lines, stats.invalid), (4, 2));
    }
}
