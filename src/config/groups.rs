//! The `config client`, `config group` and `config schedule` sections: who
//! is which device, which groups of lists apply to it, and when.
//!
//! Read here, checked against each other once all sections are in (a group
//! a client names must exist; a schedule a group names must exist); turned
//! into lookups by `client::rules` and the policy; [`GroupTable`] numbers
//! them. A group is a bit in a 64-bit mask: bit 0 is `default`, then the
//! `config group` sections, then groups only a list names, in file order
//! ([`group_names`]). A client's groups are a mask; the lists that apply to
//! it are those whose mask meets the client's active groups (its groups
//! minus those outside their schedule or paused).

use std::net::IpAddr;
use std::sync::Arc;

use super::upstream::Upstream;
use super::{BlockMode, Config, ConfigError, SectionReader, file_name_of, line_of_origin, parse_block_mode};

/// The group every client without a `config client` is in, and every list without `list group`.
pub const DEFAULT_GROUP: &str = "default";

/// Most groups a config may define: a client's groups are one 64-bit mask.
pub const MAX_GROUPS: usize = 64;

/// Most distinct `list upstream` sets of the groups (see
/// `upstream::sets`): a set's number shares a byte of the cache key with
/// two flags.
pub const MAX_SETS: usize = 63;

/// One `config client` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRule {
    /// Shown in the log and by `hydradns check --client`.
    pub name: String,
    /// What identifies the device, any one of them enough.
    pub matches: Vec<ClientMatch>,
    /// Its groups, in file order; a section listing none is in `default`.
    pub groups: Vec<String>,
    /// `file:line` of the section.
    pub origin: String,
}

/// One `list match` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMatch {
    /// `aa:bb:cc:dd:ee:ff`
    Mac([u8; 6]),
    /// A single address.
    Ip(IpAddr),
    /// `192.168.1.0/24`, `fd00::/64`: the network and the prefix length.
    Cidr(IpAddr, u8),
    /// A hostname from the leases, `*` and `?` as wildcards, lowercase.
    Host(String),
}

/// One `config group` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// The section's name.
    pub name: String,
    /// The group's lists apply only inside this schedule.
    pub schedule: Option<String>,
    /// Overrides the global `block_mode` for names this group's lists block.
    pub block_mode: Option<BlockMode>,
    /// `list service`: catalogue ids, each with its line.
    pub services: Vec<(String, usize)>,
    /// `option safe_search`: search engines and YouTube answer with their safe hosts.
    pub safe_search: bool,
    /// `option youtube_restrict 'strict'` (else moderate), with `safe_search`.
    pub youtube_strict: bool,
    /// `option querylog`: what the query log keeps of this group's clients.
    pub querylog: GroupLog,
    /// `list upstream`: the resolvers this group's clients ask while the
    /// group is in force; empty: the main ones.
    pub upstreams: Vec<Upstream>,
    /// `option fallback_main`: when all of `upstreams` fail, ask the main
    /// ones rather than answer SERVFAIL.
    pub fallback_main: bool,
    /// `option dnssec`: this group's own upstream set validates DNSSEC
    /// (see [`super::Config::dnssec`]); without `list upstream`, the main
    /// set's setting applies.
    pub dnssec: bool,
    /// `file:line` of the section.
    pub origin: String,
}

/// What the query log keeps of a group's queries, least private first: a
/// client in several groups gets the most private of them (the greatest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupLog {
    /// Every column.
    #[default]
    Full,
    /// No address, MAC or device name.
    Anonymous,
    /// No row (the counters still count).
    None,
}

/// One `config schedule` section: a weekly window in the router's local time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// The section's name.
    pub name: String,
    /// Days the window starts on, bit 0 Sunday … bit 6 Saturday; all when none are listed.
    pub days: u8,
    /// Minutes after midnight the window opens.
    pub start: u16,
    /// Minutes after midnight it closes; at or before `start`, on the next day.
    pub end: u16,
    /// `file:line` of the section.
    pub origin: String,
}

const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// `HH:MM`, 00:00 to 24:00, as minutes.
fn parse_clock(s: &str) -> Option<u16> {
    let (h, m) = s.trim().split_once(':')?;
    let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
    (h <= 24 && m < 60 && h * 60 + m <= 24 * 60).then_some(h * 60 + m)
}

/// A day name: `sun`, `Sunday`, `SUN`.
fn parse_day(s: &str) -> Option<u8> {
    let s = s.trim().to_ascii_lowercase();
    let i = DAYS.iter().zip(FULL_DAYS).position(|(short, full)| s == *short || s == full)?;
    Some(1 << i)
}

const FULL_DAYS: [&str; 7] = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];

/// A hostname glob: letters, digits, `-`, `.`, `_`, `*` and `?`.
fn parse_glob(s: &str) -> Option<String> {
    let s = s.trim().to_ascii_lowercase();
    (!s.is_empty() && s.len() <= 253 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._*?".contains(&b)))
        .then_some(s)
}

/// What a `list match` value is: a MAC, an address, a network, or a hostname glob.
pub fn parse_match(s: &str) -> Option<ClientMatch> {
    let t = s.trim();
    if let Some(mac) = crate::mac::parse_mac(t.as_bytes()) {
        return Some(ClientMatch::Mac(mac));
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Some(ClientMatch::Ip(ip.to_canonical()));
    }
    if let Some((a, p)) = t.split_once('/') {
        let ip = a.parse::<IpAddr>().ok()?.to_canonical();
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len: u8 = p.parse().ok().filter(|&l| l <= max)?;
        return Some(if len == max { ClientMatch::Ip(ip) } else { ClientMatch::Cidr(ip, len) });
    }
    // A name that parses as neither is a hostname glob only if it could be one.
    t.bytes()
        .any(|b| b.is_ascii_alphabetic() || b == b'*' || b == b'?')
        .then(|| parse_glob(t))
        .flatten()
        .map(ClientMatch::Host)
}

impl SectionReader<'_> {
    /// A `config client` section.
    pub(super) fn client(&mut self) -> Result<ClientRule, ConfigError> {
        let origin = format!("{}:{}", self.file, self.section.line);
        let mut rule = ClientRule {
            name: self.section.name.clone().unwrap_or_default(),
            matches: Vec::new(),
            groups: Vec::new(),
            origin,
        };
        for v in &self.section.values {
            match v.key.as_str() {
                "name" => rule.name = v.value.trim().to_string(),
                "match" => rule.matches.push(
                    parse_match(&v.value)
                        .ok_or_else(|| self.bad(v, "a MAC, an IP address, a network (CIDR) or a hostname glob"))?,
                ),
                "group" => rule.groups.push(self.group_name(v)?),
                _ => self.unknown(v),
            }
        }
        if rule.matches.is_empty() {
            return Err(self.error(self.section.line, "a 'client' section needs at least one 'list match'".into()));
        }
        if rule.name.is_empty() {
            rule.name = match &rule.matches[0] {
                ClientMatch::Mac(m) => crate::mac::mac_text(m),
                ClientMatch::Ip(ip) => ip.to_string(),
                ClientMatch::Cidr(ip, len) => format!("{ip}/{len}"),
                ClientMatch::Host(h) => h.clone(),
            };
        }
        // A device added without a group (LuCI's Devices grid makes that
        // easy) is meant to be filtered like any other, not exempted: the
        // same reading as a list without groups.
        if rule.groups.is_empty() {
            rule.groups.push(DEFAULT_GROUP.to_string());
        }
        Ok(rule)
    }

    /// A `config group NAME` section.
    pub(super) fn group(&mut self) -> Result<GroupConfig, ConfigError> {
        let line = self.section.line;
        let Some(name) = self.section.name.clone() else {
            return Err(self.error(line, "a 'group' section needs a name: config group 'kids'".into()));
        };
        let mut g = GroupConfig {
            name,
            schedule: None,
            block_mode: None,
            services: Vec::new(),
            safe_search: false,
            youtube_strict: false,
            querylog: GroupLog::Full,
            upstreams: Vec::new(),
            fallback_main: false,
            dnssec: false,
            origin: format!("{}:{line}", self.file),
        };
        let mut youtube_restrict = None;
        for v in &self.section.values {
            match v.key.as_str() {
                "schedule" => g.schedule = Some(v.value.trim().to_string()),
                "block_mode" => {
                    g.block_mode = Some(
                        parse_block_mode(&v.value)
                            .ok_or_else(|| self.bad(v, "null, nxdomain, refused or an IP address"))?,
                    )
                }
                "service" => {
                    let id = v.value.trim().to_ascii_lowercase();
                    let ok = !id.is_empty()
                        && id.len() <= 64
                        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
                    if !ok {
                        return Err(self.bad(v, "a service id from 'hydradns services' (letters, digits, - _ .)"));
                    }
                    if !g.services.iter().any(|(s, _)| *s == id) {
                        g.services.push((id, v.line));
                    }
                }
                "safe_search" => g.safe_search = self.boolean(v)?,
                "youtube_restrict" => {
                    youtube_restrict = Some(match v.value.trim() {
                        "moderate" => false,
                        "strict" => true,
                        _ => return Err(self.bad(v, "moderate or strict")),
                    })
                }
                "upstream" => g.upstreams.push(
                    Upstream::parse(&v.value)
                        .map_err(|e| self.error(v.line, format!("option 'upstream': '{}': {e}", v.value)))?,
                ),
                "fallback_main" => g.fallback_main = self.boolean(v)?,
                "dnssec" => g.dnssec = self.boolean(v)?,
                "querylog" => {
                    g.querylog = match v.value.trim() {
                        "full" => GroupLog::Full,
                        "anonymous" => GroupLog::Anonymous,
                        "none" => GroupLog::None,
                        _ => return Err(self.bad(v, "full, anonymous or none")),
                    }
                }
                _ => self.unknown(v),
            }
        }
        if youtube_restrict.is_some() && !g.safe_search {
            self.warn_section(&format!(
                "group '{}' sets youtube_restrict without safe_search '1': it applies only with safe search",
                g.name
            ));
        }
        g.youtube_strict = youtube_restrict.unwrap_or(false);
        if g.fallback_main && g.upstreams.is_empty() {
            self.warn_section(&format!(
                "group '{}' sets fallback_main without any 'list upstream': it asks the main upstreams anyway",
                g.name
            ));
        }
        if g.dnssec && g.upstreams.is_empty() {
            self.warn_section(&format!(
                "group '{}' sets dnssec without any 'list upstream': the main upstreams' 'option dnssec' applies",
                g.name
            ));
        }
        Ok(g)
    }

    /// A `config schedule NAME` section.
    pub(super) fn schedule(&mut self) -> Result<ScheduleConfig, ConfigError> {
        let line = self.section.line;
        let Some(name) = self.section.name.clone() else {
            return Err(self.error(line, "a 'schedule' section needs a name: config schedule 'school-nights'".into()));
        };
        let (mut days, mut start, mut end) = (0u8, None, None);
        for v in &self.section.values {
            match v.key.as_str() {
                "day" => days |= parse_day(&v.value).ok_or_else(|| self.bad(v, "a day (sun, mon, … sat)"))?,
                "start" => start = Some(parse_clock(&v.value).ok_or_else(|| self.bad(v, "a time HH:MM"))?),
                "end" => end = Some(parse_clock(&v.value).ok_or_else(|| self.bad(v, "a time HH:MM"))?),
                _ => self.unknown(v),
            }
        }
        let (Some(start), Some(end)) = (start, end) else {
            return Err(self.error(line, format!("schedule '{name}' needs a start and an end (HH:MM)")));
        };
        Ok(ScheduleConfig {
            name,
            days: if days == 0 { 0x7f } else { days },
            start,
            end,
            origin: format!("{}:{line}", self.file),
        })
    }

    /// A `list group` value: a group's name.
    pub(super) fn group_name(&self, v: &crate::config::uci::Value) -> Result<String, ConfigError> {
        let n = v.value.trim();
        let ok = !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        if ok { Ok(n.to_string()) } else { Err(self.bad(v, "a group name (letters, digits, - and _)")) }
    }
}

/// Checks the three kinds of section against each other and the lists: a
/// group named anywhere exists (`default`, a `config group`, or a list's
/// `list group`), a schedule a group names exists, no name is defined twice,
/// and there are at most [`MAX_GROUPS`].
pub(super) fn check(cfg: &Config) -> Result<(), ConfigError> {
    let at = |origin: &str, message: String| ConfigError {
        file: file_name_of(origin),
        line: line_of_origin(origin),
        message,
    };
    for (i, s) in cfg.schedules.iter().enumerate() {
        if cfg.schedules[..i].iter().any(|o| o.name == s.name) {
            return Err(at(&s.origin, format!("schedule '{}' is defined twice", s.name)));
        }
    }
    for (i, g) in cfg.groups.iter().enumerate() {
        if cfg.groups[..i].iter().any(|o| o.name == g.name) {
            return Err(at(&g.origin, format!("group '{}' is defined twice", g.name)));
        }
        if let Some(s) = &g.schedule
            && !cfg.schedules.iter().any(|c| &c.name == s)
        {
            return Err(at(
                &g.origin,
                format!("group '{}' names schedule '{s}', which no 'config schedule' defines", g.name),
            ));
        }
    }
    let mut lists: Vec<(&[super::upstream::Upstream], bool, bool)> = Vec::new();
    for g in cfg.groups.iter().filter(|g| !g.upstreams.is_empty()) {
        if !lists.contains(&(&g.upstreams[..], g.fallback_main, g.dnssec)) {
            lists.push((&g.upstreams, g.fallback_main, g.dnssec));
        }
        if lists.len() > MAX_SETS {
            return Err(at(
                &g.origin,
                format!("more than {MAX_SETS} different groups' upstream lists; groups may share one"),
            ));
        }
    }
    let names = group_names(cfg);
    if names.len() > MAX_GROUPS {
        return Err(at(&cfg.source, format!("{} groups; at most {MAX_GROUPS} are supported", names.len())));
    }
    for c in &cfg.clients {
        for g in &c.groups {
            if !names.contains(&g.as_str()) {
                return Err(at(
                    &c.origin,
                    format!("client '{}' is in group '{g}', which no 'config group' or list names", c.name),
                ));
            }
        }
    }
    Ok(())
}

/// Every group, each once: `default` first, then the `config group`
/// sections, then groups only lists name, in file order. A group's index
/// here is its bit in a client's group mask.
pub fn group_names(cfg: &Config) -> Vec<&str> {
    let mut names = vec![DEFAULT_GROUP];
    let named = cfg
        .groups
        .iter()
        .map(|g| g.name.as_str())
        .chain(cfg.lists.iter().flat_map(|l| l.groups.iter().map(String::as_str)));
    for n in named {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// The `default` group's bit.
pub const DEFAULT: u64 = 1;

/// The groups of one config: names, block answer overrides, schedules.
#[derive(Debug, Clone)]
pub struct GroupTable {
    /// By bit.
    pub names: Vec<Arc<str>>,
    /// `option block_mode` of each group, by bit.
    pub modes: Vec<Option<BlockMode>>,
    /// The schedule of each group, by bit.
    pub schedules: Vec<Option<ScheduleConfig>>,
    /// What the query log keeps of each group's clients, by bit.
    pub logs: Vec<GroupLog>,
}

impl Default for GroupTable {
    /// Only `default`, unscheduled.
    fn default() -> GroupTable {
        GroupTable {
            names: vec![Arc::from("default")],
            modes: vec![None],
            schedules: vec![None],
            logs: vec![GroupLog::Full],
        }
    }
}

impl GroupTable {
    /// The groups `cfg` defines or names.
    pub fn new(cfg: &Config) -> GroupTable {
        let names: Vec<Arc<str>> = group_names(cfg).into_iter().map(Arc::from).collect();
        let section = |n: &str| cfg.groups.iter().find(|g| g.name == n);
        let modes = names.iter().map(|n| section(n).and_then(|g| g.block_mode)).collect();
        let schedules = names
            .iter()
            .map(|n| {
                let s = section(n)?.schedule.as_ref()?;
                cfg.schedules.iter().find(|c| &c.name == s).cloned()
            })
            .collect();
        let logs = names.iter().map(|n| section(n).map_or(GroupLog::Full, |g| g.querylog)).collect();
        GroupTable { names, modes, schedules, logs }
    }

    /// Some group's clients are logged other than in full.
    pub fn logs_vary(&self) -> bool {
        self.logs.iter().any(|l| *l != GroupLog::Full)
    }

    /// What the log keeps of a client in groups `mask`: the most private of theirs.
    pub fn log_of(&self, mask: u64) -> GroupLog {
        self.logs.iter().enumerate().filter(|(i, _)| mask >> i & 1 != 0).map(|(_, l)| *l).max().unwrap_or_default()
    }

    /// The mask of groups named in `names`; an empty list is `default`.
    /// Names not in the table are left out (the config checks them).
    pub fn mask_of(&self, names: &[String]) -> u64 {
        if names.is_empty() {
            return DEFAULT;
        }
        names.iter().filter_map(|n| self.bit(n)).fold(0, |m, b| m | 1 << b)
    }

    /// The bit of group `name`.
    pub fn bit(&self, name: &str) -> Option<u32> {
        self.names.iter().position(|n| &**n == name).map(|i| i as u32)
    }

    /// The names of the groups in `mask`, comma-separated.
    pub fn names_of(&self, mask: u64) -> String {
        self.names
            .iter()
            .enumerate()
            .filter(|(i, _)| mask >> i & 1 != 0)
            .map(|(_, n)| &**n)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The lowest group in `mask`, if any.
    pub fn first(mask: u64) -> Option<usize> {
        (mask != 0).then(|| mask.trailing_zeros() as usize)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse("/etc/config/hydradns", text)
    }

    const KIDS: &str = "
config client
\toption name 'kids-tablet'
\tlist match '192.168.1.50'
\tlist match '02:00:5e:10:00:01'
\tlist match 'tablet-*'
\tlist match '192.168.2.0/24'
\tlist group 'kids'
\tlist group 'default'
config group 'kids'
\toption schedule 'school-nights'
\toption block_mode 'nxdomain'
config schedule 'school-nights'
\tlist day 'sun'
\tlist day 'Thursday'
\toption start '21:00'
\toption end '07:00'
config blocklist
\toption name 'social'
\toption path '/etc/hydradns/lists/social.txt'
\tlist group 'kids'
";

    #[test]
    fn the_issue_example_reads() {
        let cfg = parse(KIDS).unwrap();
        let c = &cfg.clients[0];
        assert_eq!(c.name, "kids-tablet");
        assert_eq!(
            c.matches,
            [
                ClientMatch::Ip("192.168.1.50".parse().unwrap()),
                ClientMatch::Mac([2, 0, 0x5e, 0x10, 0, 1]),
                ClientMatch::Host("tablet-*".into()),
                ClientMatch::Cidr("192.168.2.0".parse().unwrap(), 24),
            ]
        );
        assert_eq!(c.groups, ["kids", "default"]);
        assert_eq!(cfg.groups[0].block_mode, Some(BlockMode::NxDomain));
        let s = &cfg.schedules[0];
        assert_eq!((s.days, s.start, s.end), (0b1_0001, 21 * 60, 7 * 60));
        assert_eq!(cfg.lists[0].groups, ["kids"]);
        assert_eq!(group_names(&cfg), ["default", "kids"]);
    }

    #[test]
    fn mistakes_name_their_line() {
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert!(err("config client\n\tlist match 'nope!'\n").contains(":2:"));
        assert!(err("config client\n\toption name 'x'\n").contains(":1: a 'client' section needs"));
        let e = err("config client\n\tlist match '10.0.0.1'\n\tlist group 'kdis'\n");
        assert!(e.contains(":1:") && e.contains("'kdis'"), "{e}");
        let e = err("config group 'kids'\n\toption schedule 'nights'\n");
        assert!(e.contains(":1:") && e.contains("'nights'"), "{e}");
        assert!(err("config schedule 'n'\n\toption start '25:00'\n\toption end '07:00'\n").contains(":2:"));
        assert!(err("config schedule 'n'\n\tlist day 'someday'\n").contains(":2:"));
        assert!(err("config schedule 'n'\n\toption start '21:00'\n").contains("needs a start and an end"));
        assert!(err("config group\n").contains("needs a name"));
    }

    #[test]
    fn match_values() {
        assert_eq!(parse_match("fd00::/64"), Some(ClientMatch::Cidr("fd00::".parse().unwrap(), 64)));
        assert_eq!(parse_match("10.0.0.1/32"), Some(ClientMatch::Ip("10.0.0.1".parse().unwrap())));
        assert_eq!(parse_match("::ffff:10.0.0.1"), Some(ClientMatch::Ip("10.0.0.1".parse().unwrap())));
        assert_eq!(parse_match("AA-BB-CC-DD-EE-FF"), Some(ClientMatch::Mac([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])));
        assert_eq!(parse_match("Laptop?"), Some(ClientMatch::Host("laptop?".into())));
        assert_eq!(parse_match("10.0.0.0/33"), None);
        assert_eq!(parse_match("1234"), None);
        assert_eq!(parse_clock("24:00"), Some(1440));
        assert_eq!(parse_clock("7:5"), Some(425));
        assert_eq!(parse_clock("24:01"), None);
    }

    #[test]
    fn a_client_without_group_is_in_default() {
        let cfg = parse("config client\n\tlist match '192.168.1.50'\n").unwrap();
        assert_eq!(cfg.clients[0].groups, ["default"]);
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    }

    #[test]
    fn lists_without_group_are_default() {
        let cfg = parse("config blocklist\n\toption path '/x'\n").unwrap();
        assert!(cfg.lists[0].groups.is_empty());
        assert!(cfg.clients.is_empty());
    }

    #[test]
    fn bits_follow_the_config() {
        let cfg = Config::parse(
            "t",
            "config group 'kids'\n\toption block_mode 'nxdomain'\nconfig blocklist\n\toption path '/x'\n\tlist group 'guests'\n",
        )
        .unwrap();
        let t = GroupTable::new(&cfg);
        assert_eq!(t.names.iter().map(|n| &**n).collect::<Vec<_>>(), ["default", "kids", "guests"]);
        assert_eq!(t.modes[1], Some(BlockMode::NxDomain));
        assert_eq!(t.mask_of(&[]), DEFAULT);
        assert_eq!(t.mask_of(&["guests".into(), "default".into()]), 0b101);
        assert_eq!(t.names_of(0b110), "kids,guests");
        assert!(t.schedules.iter().all(Option::is_none));
    }
}
