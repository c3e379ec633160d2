//! List formats: one line of a downloaded list in, zero or more rules out.
//!
//! Every line is classified on its own, so one file may mix formats and a
//! broken line never stops the rest. Understood: hosts files, plain domain
//! lists, `*.domain` wildcard lists, AdBlock/AdGuard DNS rules, dnsmasq
//! `address=`/`local=`/`server=` lines, Unbound `local-zone:` lines and RPZ
//! zones. What a DNS gateway cannot express (URL paths, cosmetic rules,
//! regular expressions, IP rules, most `$` modifiers) is counted as
//! unsupported; what is malformed is counted as invalid.

use std::net::IpAddr;

/// What a rule does to the name it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Block the name and everything under it.
    Block,
    /// Exempt the name and everything under it from every block.
    Allow,
    /// AdGuard `$badfilter`: cancel a block rule for exactly this name.
    BadFilter,
}

/// How the lines of one source were classified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Lines read, blank and comment lines included.
    pub lines: u64,
    /// Names accepted as blocks.
    pub blocks: u64,
    /// Names accepted as allows (`@@` rules, RPZ passthru, allowlists).
    pub allows: u64,
    /// `$badfilter` rules.
    pub badfilters: u64,
    /// Names deliberately skipped: `localhost` and friends in hosts files, zone
    /// bookkeeping records in RPZ.
    pub ignored: u64,
    /// Rules this gateway cannot express (paths, cosmetic, regex, IPs, modifiers).
    pub unsupported: u64,
    /// Lines or names that are malformed.
    pub invalid: u64,
}

impl ParseStats {
    /// Adds another source's counts into this one.
    pub fn add(&mut self, o: &ParseStats) {
        self.lines += o.lines;
        self.blocks += o.blocks;
        self.allows += o.allows;
        self.badfilters += o.badfilters;
        self.ignored += o.ignored;
        self.unsupported += o.unsupported;
        self.invalid += o.invalid;
    }
}

/// Names a hosts file maps to itself or to the local network; blocking them would break the box.
const HOSTS_IGNORED: &[&str] = &[
    "localhost",
    "localhost.localdomain",
    "local",
    "broadcasthost",
    "ip6-localhost",
    "ip6-loopback",
    "ip6-localnet",
    "ip6-mcastprefix",
    "ip6-allnodes",
    "ip6-allrouters",
    "ip6-allhosts",
    "0.0.0.0",
];

/// Unbound local-zone types that refuse or blank the zone.
const UNBOUND_BLOCKING_ZONES: &[&str] =
    &["always_null", "always_nxdomain", "always_refuse", "always_deny", "refuse", "deny", "static", "inform_deny"];

/// Classifies one line, passing each rule to `emit` (which answers whether the
/// name was acceptable) and counting the outcome in `stats`.
pub fn parse_line(line: &str, stats: &mut ParseStats, emit: &mut impl FnMut(Rule, &str) -> bool) {
    stats.lines += 1;
    // `trim` decodes characters from both ends; a line that starts and ends
    // in printable ASCII, as nearly every line does, has nothing to trim.
    let printable = |b: Option<&u8>| b.is_some_and(|&b| b > b' ' && b < 0x7f);
    let line = if printable(line.as_bytes().first()) && printable(line.as_bytes().last()) { line } else { line.trim() };
    if plain_name(line) {
        // Most lines of most lists: one name, nothing else to recognise.
        return emit_counted(Rule::Block, line, stats, emit);
    }
    // Every other form through one `dyn` call per name: generic, each
    // parser was compiled once per caller (four), 28 KB of the aarch64
    // binary; the plain names above keep the direct call.
    let emit: &mut dyn FnMut(Rule, &str) -> bool = emit;
    if line.is_empty() || line.starts_with(['#', '!', ';']) || (line.starts_with('[') && line.ends_with(']')) {
        return;
    }
    if ["$TTL", "$ORIGIN", "$INCLUDE"].iter().any(|d| line.starts_with(d)) {
        // Zone-file directives of an RPZ list.
        stats.ignored += 1;
        return;
    }
    if let Some(rest) = line.strip_prefix("@@") {
        return adblock(rest, Rule::Allow, stats, emit);
    }
    if ["##", "#@#", "#?#", "#$#", "#%#", "$$"].iter().any(|m| line.contains(m)) || line.starts_with('/') {
        stats.unsupported += 1;
        return;
    }
    if line.starts_with('|') || line.starts_with("://") || line.contains(['^', '$']) {
        return adblock(line, Rule::Block, stats, emit);
    }
    for prefix in ["address=/", "local=/", "server=/"] {
        if let Some(rest) = line.strip_prefix(prefix) {
            return dnsmasq(rest, prefix == "address=/", stats, emit);
        }
    }
    if let Some(rest) = line.strip_prefix("local-zone:") {
        return unbound_zone(rest, stats, emit);
    }
    if line == "server:" {
        return;
    }
    if line.starts_with("local-data") {
        stats.unsupported += 1;
        return;
    }
    let mut words = line.split_whitespace().take_while(|w| !w.starts_with('#'));
    let Some(first) = words.next() else { return };
    let second = words.next();
    if first.parse::<IpAddr>().is_ok() {
        return hosts(second.into_iter().chain(words), stats, emit);
    }
    match second {
        None => single(first, Rule::Block, stats, emit),
        Some(_) => rpz(line, stats, emit),
    }
}

/// `IP name [name…]`: every name is blocked, except loopback-style names.
fn hosts<'a>(names: impl Iterator<Item = &'a str>, stats: &mut ParseStats, emit: &mut dyn FnMut(Rule, &str) -> bool) {
    let mut any = false;
    for name in names {
        any = true;
        if HOSTS_IGNORED.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            stats.ignored += 1;
        } else {
            single(name, Rule::Block, stats, emit);
        }
    }
    if !any {
        // A bare IP address: an IP rule (e.g. urlhaus), which needs answer inspection.
        stats.unsupported += 1;
    }
}

/// One name with an optional `*.` or `.` prefix, both meaning "this domain
/// and everything under it" (wildcard lists, AdBlock, Squid).
fn single(name: &str, rule: Rule, stats: &mut ParseStats, emit: &mut dyn FnMut(Rule, &str) -> bool) {
    if plain_name(name) {
        return emit_counted(rule, name, stats, emit);
    }
    let dotted = name.strip_prefix('.');
    let name = name.strip_prefix("*.").or(dotted).unwrap_or(name);
    // `.300x250.` and `%2Fevent.gif%3F` are URL fragments from browser lists, not names.
    let fragment = (dotted.is_some() && name.ends_with('.')) || name.contains('%');
    if fragment || looks_like_ip(name) || name.contains(['*', '/', ':', '?', '=', '&']) {
        stats.unsupported += 1;
    } else {
        emit_counted(rule, name, stats, emit);
    }
}

/// Only letters, digits, `-`, `_` and dots, not starting with a dot, and not
/// all digits and dots (an address): a name as it stands, which [`single`]
/// would pass on unchanged. Telling that costs one pass over the bytes,
/// where the general path tries each format and parses an address.
fn plain_name(s: &str) -> bool {
    // No early exit: a branch-free pass is faster on names this short.
    let (mut all, mut any) = (1u8, 0u8);
    for &b in s.as_bytes() {
        let c = PLAIN[b as usize];
        all &= c;
        any |= c;
    }
    all & 1 == 1 && any & 2 == 2 && !s.starts_with('.')
}

/// Byte classes for [`plain_name`]: bit 0, allowed in a plain name; bit 1,
/// neither a digit nor a dot.
const PLAIN: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = if b.is_ascii_alphabetic() || b == b'-' || b == b'_' {
            3
        } else if b.is_ascii_digit() || b == b'.' {
            1
        } else {
            0
        };
        i += 1;
    }
    t
};

fn emit_counted<F: FnMut(Rule, &str) -> bool + ?Sized>(rule: Rule, name: &str, stats: &mut ParseStats, emit: &mut F) {
    if emit(rule, name) {
        match rule {
            Rule::Block => stats.blocks += 1,
            Rule::Allow => stats.allows += 1,
            Rule::BadFilter => stats.badfilters += 1,
        }
    } else {
        stats.invalid += 1;
    }
}

/// An IPv4/IPv6 address, or the dotted-number prefix of one (`23.109.82.`).
fn looks_like_ip(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok() || (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// AdBlock / AdGuard DNS syntax, `@@` already stripped.
fn adblock(rule: &str, kind: Rule, stats: &mut ParseStats, emit: &mut dyn FnMut(Rule, &str) -> bool) {
    let (pattern, modifiers) = match rule.split_once('$') {
        Some((p, m)) => (p, Some(m)),
        None => (rule, None),
    };
    let mut kind = kind;
    if let Some(modifiers) = modifiers {
        for m in modifiers.split(',') {
            match m.trim() {
                // Priority over exceptions: still a plain block for us.
                "important" if kind == Rule::Block => {}
                "badfilter" if kind == Rule::Block => kind = Rule::BadFilter,
                // uBlock's "all request types": the whole host, which is what DNS blocks.
                "all" | "document" | "doc" => {}
                _ => {
                    stats.unsupported += 1;
                    return;
                }
            }
        }
    }
    let host = if let Some(r) = pattern.strip_prefix("||") {
        r
    } else if let Some(r) = pattern.strip_prefix("://") {
        r
    } else if let Some(r) = pattern.strip_prefix('|') {
        if r.contains("://") {
            stats.unsupported += 1;
            return;
        }
        r
    } else {
        // `.example.com^` means "under example.com"; like `*.` it also covers the apex here.
        pattern
    };
    let host = host.strip_suffix('|').unwrap_or(host);
    let host = host.strip_suffix('^').unwrap_or(host);
    if host.is_empty() || host.ends_with('.') || host.contains('^') {
        // `||name.` is "any TLD"; a `^` inside means a path or port follows.
        stats.unsupported += 1;
        return;
    }
    single(host, kind, stats, emit);
}

/// `address=/a/b/target`, `local=/a/`, `server=/a/` with the prefix stripped.
fn dnsmasq(rest: &str, is_address: bool, stats: &mut ParseStats, emit: &mut dyn FnMut(Rule, &str) -> bool) {
    let Some((domains, target)) = rest.rsplit_once('/') else {
        stats.invalid += 1;
        return;
    };
    let target = target.trim();
    let blocks = match target {
        "" | "#" => true,
        t => is_address && t.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified() || ip.is_loopback()),
    };
    if !blocks {
        // A redirect to a real address or a forwarding rule, not a block.
        stats.unsupported += 1;
        return;
    }
    for domain in domains.split('/') {
        if domain == "#" || domain.is_empty() {
            stats.unsupported += 1;
        } else {
            single(domain, Rule::Block, stats, emit);
        }
    }
}

/// `local-zone: "name." always_null` with the prefix stripped.
fn unbound_zone(rest: &str, stats: &mut ParseStats, emit: &mut dyn FnMut(Rule, &str) -> bool) {
    let mut words = rest.split_whitespace();
    let (Some(zone), Some(kind)) = (words.next(), words.next()) else {
        stats.invalid += 1;
        return;
    };
    let zone = zone.trim_matches('"');
    if UNBOUND_BLOCKING_ZONES.contains(&kind) {
        single(zone, Rule::Block, stats, emit);
    } else {
        stats.unsupported += 1;
    }
}

/// An RPZ record: `name [ttl] [IN] CNAME target`. `CNAME .` (NXDOMAIN) and
/// `CNAME *.` (NODATA) block; `CNAME rpz-passthru.` allows.
fn rpz(line: &str, stats: &mut ParseStats, emit: &mut dyn FnMut(Rule, &str) -> bool) {
    let words: Vec<&str> = line.split_whitespace().take_while(|w| !w.starts_with(';')).collect();
    let Some(pos) = words.iter().position(|w| w.eq_ignore_ascii_case("CNAME")) else {
        let bookkeeping = words.first().is_some_and(|w| *w == "@" || w.starts_with('$'))
            || words.iter().any(|w| w.eq_ignore_ascii_case("SOA") || w.eq_ignore_ascii_case("NS"));
        if bookkeeping {
            stats.ignored += 1;
        } else if words.len() > 1 && words[1..].iter().all(|w| w.parse::<IpAddr>().is_ok()) {
            stats.unsupported += 1;
        } else {
            stats.invalid += 1;
        }
        return;
    };
    let (Some(owner), Some(target)) = (words.first(), words.get(pos + 1)) else {
        stats.invalid += 1;
        return;
    };
    if pos == 0 {
        stats.invalid += 1;
        return;
    }
    let rule = match *target {
        "." | "*." => Rule::Block,
        "rpz-passthru." => Rule::Allow,
        _ => {
            stats.unsupported += 1;
            return;
        }
    };
    single(owner, rule, stats, emit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(line: &str) -> (Vec<(Rule, String)>, ParseStats) {
        let mut out = Vec::new();
        let mut stats = ParseStats::default();
        parse_line(line, &mut stats, &mut |r, n| {
            let ok = crate::domain::normalize_name(n).is_some();
            if ok {
                out.push((r, n.to_string()));
            }
            ok
        });
        (out, stats)
    }

    fn block(line: &str) -> Vec<String> {
        let (r, _) = rules(line);
        assert!(r.iter().all(|(k, _)| *k == Rule::Block), "{line}: {r:?}");
        r.into_iter().map(|(_, n)| n).collect()
    }

    #[test]
    fn hosts_lines() {
        assert_eq!(block("0.0.0.0 a.com b.com # comment"), ["a.com", "b.com"]);
        assert_eq!(block("127.0.0.1\tads.example"), ["ads.example"]);
        assert_eq!(block(":: ads.example"), ["ads.example"]);
        let (r, s) = rules("127.0.0.1 localhost localhost.localdomain");
        assert!(r.is_empty());
        assert_eq!(s.ignored, 2);
        let (r, s) = rules("1.1.104.12");
        assert!(r.is_empty());
        assert_eq!(s.unsupported, 1);
    }

    #[test]
    fn plain_and_wildcard_lines() {
        assert_eq!(block("Ads.Example.COM"), ["Ads.Example.COM"]);
        assert_eq!(block("*.example.com"), ["example.com"]);
        assert_eq!(block("example.com."), ["example.com."]);
        assert_eq!(block(".example.com"), ["example.com"]);
        for fragment in [".300x250.", "%2Fevent.gif%3F", ".com/b.js|"] {
            assert_eq!(rules(fragment).1.unsupported, 1, "{fragment}");
        }
        let (_, s) = rules("bad name here");
        assert_eq!(s.invalid, 1);
        let (_, s) = rules("exa mple");
        assert_eq!(s.invalid, 1);
        let (_, s) = rules("ex!ample.com");
        assert_eq!(s.invalid, 1);
        for comment in ["# x", "! y", "; z", "[Adblock Plus 2.0]", "", "   "] {
            let (r, s) = rules(comment);
            assert!(r.is_empty() && s.invalid == 0 && s.unsupported == 0, "{comment}");
        }
    }

    #[test]
    fn adblock_rules() {
        assert_eq!(block("||ads.example.com^"), ["ads.example.com"]);
        assert_eq!(block("||ads.example.com^|"), ["ads.example.com"]);
        assert_eq!(block("||ads.example.com^$important"), ["ads.example.com"]);
        assert_eq!(block("||*.exaapi.com^"), ["exaapi.com"]);
        assert_eq!(block(".bbelements.com^"), ["bbelements.com"]);
        assert_eq!(block("://jhf.ru^"), ["jhf.ru"]);
        assert_eq!(block("|cdn.example^"), ["cdn.example"]);
        assert_eq!(block("||direct-specific.com"), ["direct-specific.com"]);
        assert_eq!(block("||mal.example^$all"), ["mal.example"]);
        assert_eq!(rules("@@||good.example^").0, [(Rule::Allow, "good.example".to_string())]);
        assert_eq!(rules("@@|cdn.taboola.com^|").0, [(Rule::Allow, "cdn.taboola.com".to_string())]);
        assert_eq!(rules("||pl.ua^$badfilter").0, [(Rule::BadFilter, "pl.ua".to_string())]);
        for unsupported in [
            "||example.com^$third-party",
            "||example.com/ads/*",
            "||ads*.example.com^",
            "||fxhpaoxqyajvmdg.",
            "||158.247.208.",
            "188.72.219.36^",
            "/^ad[0-9]+\\.example\\.com$/",
            "example.com##.banner",
            "@@||example.com^$dnstype=AAAA",
            "|https://example.com/x",
            "-ad-manager/$~stylesheet",
            "||mal.example/path^$all",
        ] {
            let (r, s) = rules(unsupported);
            assert!(r.is_empty(), "{unsupported}: {r:?}");
            assert_eq!(s.unsupported, 1, "{unsupported}");
        }
    }

    #[test]
    fn dnsmasq_unbound_rpz() {
        assert_eq!(block("address=/ads.example/#"), ["ads.example"]);
        assert_eq!(block("address=/a.example/b.example/0.0.0.0"), ["a.example", "b.example"]);
        assert_eq!(block("address=/a.example/"), ["a.example"]);
        assert_eq!(block("local=/ads.example/"), ["ads.example"]);
        assert_eq!(block("server=/ads.example/"), ["ads.example"]);
        assert_eq!(rules("address=/nas.example/192.168.1.5").1.unsupported, 1);
        assert_eq!(rules("server=/lan/192.168.1.1").1.unsupported, 1);
        assert_eq!(block("local-zone: \"ads.example.\" always_null"), ["ads.example."]);
        assert_eq!(rules("local-zone: \"ads.example.\" transparent").1.unsupported, 1);
        assert!(rules("server:").0.is_empty());
        assert_eq!(block("ads.example CNAME ."), ["ads.example"]);
        assert_eq!(block("*.ads.example CNAME ."), ["ads.example"]);
        assert_eq!(block("ads.example 3600 IN CNAME *."), ["ads.example"]);
        assert_eq!(rules("ok.example CNAME rpz-passthru.").0, [(Rule::Allow, "ok.example".to_string())]);
        assert_eq!(rules("@ SOA localhost. root.localhost. 1 43200 3600 259200 3600").1.ignored, 1);
        assert_eq!(rules("  NS  localhost.").1.ignored, 1);
        assert_eq!(rules("$TTL 3600").1.ignored, 1);
        assert_eq!(rules("x.example CNAME elsewhere.example.").1.unsupported, 1);
    }
}
