//! Exceptions with an end in the engine (`hydradns allow`, `block`; the
//! table and its matching are `policy::exceptions`): who a device is and
//! which names a service has, worked out for the table; the query's step
//! that lets an exception decide before the cache and the lists; the file
//! beside the control socket that keeps them across a restart.
//!
//! While any is set, every query looks at them before the cache's fast
//! path, so a cached answer never hides a block; an answer allowed by one
//! is cached as passed by no list, so the first query after the end looks
//! at the lists again. The file is in RAM on a router (/var/run): a
//! reload and a restart keep them, a reboot ends them.

use super::*;

use crate::client::names::NameBook;
use crate::config::groups::GroupTable;
use crate::json::Json;
use crate::policy::exceptions::{
    Action, Asker, Changed, Compiled, Device, Exception, Exceptions, Rule, Subject, Target, Who, unix_ms,
};
use crate::policy::services;
use nanoserde::SerJson;

/// Largest exceptions file read back: [`crate::policy::exceptions::MAX_EXCEPTIONS`]
/// of them at their longest (a 253-byte name, a 128-byte client) take
/// about 120 KiB.
const MAX_FILE: u64 = 256 << 10;
/// The file's name, in the control socket's directory.
const FILE_NAME: &str = "exceptions.json";

/// What an exception made of a query.
pub(super) enum Excepted {
    /// None applies.
    No,
    /// An allow: answered as if no list had the name.
    Allow,
    /// A block, answered.
    Done(Step),
}

impl Engine {
    /// The exception that decides `q` for `origin`'s client, if one does;
    /// a block is answered here. `name` is the query's name as the cache
    /// key starts with it, `scratch` room for its reversed-label key.
    /// Only while some exception is set (`until`, their latest end).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn except(
        &self,
        snap: &Snapshot,
        q: &Query,
        name: &[u8],
        scratch: &mut [u8; MAX_NAME_LEN],
        origin: &Origin,
        until: u64,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Excepted {
        let now = unix_ms();
        if self.exceptions.over(until, now) {
            return Excepted::No;
        }
        let n = wire::reversed_key_folded(name, scratch);
        let rule = if snap.clients.is_empty() {
            None
        } else {
            snap.clients.find(origin.client, origin.mac, &self.learned.load())
        };
        let on = snap.clients.groups(rule) & !snap.schedules.off();
        let asker = Asker {
            ip: origin.client,
            mac: origin.mac,
            rule: rule.and_then(|r| snap.clients.name(r)).map(|r| &**r),
            groups: on,
        };
        let compiled = self.exceptions.compiled();
        match compiled.decide(&scratch[..n], &asker, now) {
            None => Excepted::No,
            Some(Rule { action: Action::Allow, .. }) => Excepted::Allow,
            Some(r) => {
                let groups = match r.who {
                    Who::Groups(g) => g & on,
                    Who::Device(_) => on,
                };
                Excepted::Done(self.block_by_exception(snap, q, groups, origin, out, stats))
            }
        }
    }

    /// Answers a name an exception blocks for a client whose groups
    /// `groups` it applies through: in the first such group's block mode.
    fn block_by_exception(
        &self,
        snap: &Snapshot,
        q: &Query,
        groups: u64,
        origin: &Origin,
        out: &mut Vec<u8>,
        stats: &Counters,
    ) -> Step {
        Counters::bump(&stats.blocked);
        if let Some(g) = GroupTable::first(groups) {
            Counters::bump(&stats.groups.blocked[g]);
        }
        let table = &snap.policy.groups;
        let mut left = groups;
        let mut mode = snap.config.block_mode;
        while let Some(g) = GroupTable::first(left) {
            if let Some(Some(m)) = table.modes.get(g) {
                mode = *m;
                break;
            }
            left &= left - 1;
        }
        snap.policy.write_block_answer_as(mode, q, out);
        fit(out, q, origin.transport, stats);
        let mut a = Answered::of(q, Outcome::Blocked);
        a.list = Some(self.exceptions.list().clone());
        self.done(origin, a, out, stats)
    }

    /// The list name an answer an exception allowed is logged with.
    pub(super) fn exception_list(&self) -> Option<Arc<str>> {
        Some(self.exceptions.list().clone())
    }

    /// Sets, replaces or (an end of 0) removes an exception, checked
    /// against the running config first: `allow` and `block` over the
    /// control socket. The file is written after the change.
    #[inline(never)]
    pub fn set_exception(&self, e: Exception) -> Result<Changed, String> {
        let snap = self.snapshot.load_full();
        let now = unix_ms();
        let changed = self
            .exceptions
            .change(e, now, |e| valid(&snap, e), |set| compile(&snap.config, &snap.policy.groups, &snap.clients, set))
            .map_err(|r| r.0)?;
        if let Some(path) = file_of(&snap.config) {
            let text = to_json(&self.exceptions.current(now));
            if let Err(e) = write_private(&path, text.as_bytes()) {
                log::warn!("{}: {e}; the exceptions hold until a restart", path.display());
            }
        }
        Ok(changed)
    }

    /// Those not ended, as `exceptions --json` and `status` show them.
    pub fn exceptions_json(&self) -> String {
        to_json(&self.exceptions.current(unix_ms()))
    }

    /// Compiles the exceptions for `snapshot`'s groups, clients and catalogue.
    pub(super) fn recompile_exceptions(&self, snapshot: &Snapshot) {
        self.exceptions
            .recompile(unix_ms(), |set| compile(&snapshot.config, &snapshot.policy.groups, &snapshot.clients, set));
    }
}

/// The exceptions a previous run left in the file, for the engine that
/// serves `snapshot` ([`Engine::with_exceptions`]): those not ended are in
/// force again. A file over its cap or unreadable is ignored with a log line.
#[inline(never)]
pub fn restore(snapshot: &Snapshot) -> Exceptions {
    let cfg = &snapshot.config;
    let Some(path) = file_of(cfg) else { return Exceptions::new() };
    let text = match crate::sys::read_unlinked_text(&path, MAX_FILE) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Exceptions::new(),
        Err(e) => {
            log::warn!("{}: {e}; no exceptions restored", path.display());
            return Exceptions::new();
        }
    };
    let (all, bad) = match read(&text) {
        Ok(l) => (l.exceptions, l.unreadable),
        Err(e) => {
            log::warn!("{}: {e}; no exceptions restored", path.display());
            return Exceptions::new();
        }
    };
    let compile = |set: &[Exception]| compile(cfg, &snapshot.policy.groups, &snapshot.clients, set);
    let restored = Exceptions::restored(all, unix_ms(), compile);
    let kept = restored.len();
    if kept > 0 || bad > 0 {
        log::info!(
            "{}: {kept} exceptions restored{}",
            path.display(),
            if bad > 0 { format!(", {bad} unreadable ones left out") } else { String::new() }
        );
    }
    restored
}

/// Where the exceptions are kept: beside the control socket (none while
/// it is off: nothing could set one then).
pub fn file_of(cfg: &Config) -> Option<std::path::PathBuf> {
    let socket = &cfg.control_socket;
    if socket.as_os_str().is_empty() {
        return None;
    }
    Some(socket.parent()?.join(FILE_NAME))
}

/// Writes `bytes` to `path` whole or not at all, readable by the daemon's
/// user alone (the devices and names of a household's rules): a fresh
/// temporary file beside it (never through a link), then a rename.
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = crate::sys::create_fresh(&tmp)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(bytes)?;
    // RAM: no fsync needed for a crash to leave the old file or the new.
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Is `e` one the running config can hold: its group exists, its service
/// is in the catalogue, its device can be told?
#[inline(never)]
fn valid(snap: &Snapshot, e: &Exception) -> Result<(), String> {
    let cfg = &snap.config;
    match &e.subject {
        Subject::Group(g) if snap.policy.groups.bit(g).is_none() => {
            let known: Vec<&str> = snap.policy.groups.names.iter().map(|n| &**n).collect();
            return Err(format!("no group '{g}' (groups: {})", known.join(", ")));
        }
        Subject::Group(_) => {}
        Subject::Client(c) => {
            why::identify(cfg, &snap.clients, &why::router_book(cfg), c)?;
        }
    }
    if let Target::Service(id) = &e.target
        && services::in_use(cfg).0.find(id).is_none()
    {
        return Err(format!("no service '{id}' in the catalogue (see 'hydradns services')"));
    }
    Ok(())
}

/// The exceptions `set` as queries match them under `cfg`, its groups
/// `groups` and client rules `rules`: group names become bits, devices
/// their addresses and MACs as the router's tables have them now,
/// services their domains. What the config no longer has (a group, a
/// service, a hostname not in the leases) matches nobody, and stays set.
#[inline(never)]
pub fn compile(cfg: &Config, groups: &GroupTable, rules: &ClientRules, set: &[Exception]) -> Compiled {
    // The router's tables only for a MAC or a hostname.
    let looked_up = |c: &str| c.parse::<IpAddr>().is_err() && !cfg.clients.iter().any(|r| r.name == c);
    let book = if set.iter().any(|e| matches!(&e.subject, Subject::Client(c) if looked_up(c))) {
        why::router_book(cfg)
    } else {
        NameBook::router(&cfg.leases_file, &cfg.ethers_file)
    };
    let catalogue = set.iter().any(|e| matches!(e.target, Target::Service(_))).then(|| services::in_use(cfg).0);
    let keys = |names: &mut dyn Iterator<Item = &String>| -> Vec<Box<[u8]>> {
        names.filter_map(|n| name_key(n)).map(Vec::into_boxed_slice).collect()
    };
    Compiled::build(
        set,
        |subject| match subject {
            Subject::Group(g) => Who::Groups(groups.bit(g).map_or(0, |b| 1 << b)),
            Subject::Client(c) => Who::Device(match why::identify(cfg, rules, &book, c) {
                Ok(id) => Device {
                    ips: id.ips,
                    macs: id.macs,
                    rule: id.rule.filter(|_| id.by_rule).and_then(|r| rules.name(r).cloned()),
                },
                Err(_) => Device::default(),
            }),
        },
        |target| match target {
            Target::Name(n) => keys(&mut std::iter::once(n)),
            Target::Service(id) => {
                catalogue.as_ref().and_then(|c| c.find(id)).map_or(Vec::new(), |s| keys(&mut s.domains.iter()))
            }
        },
    )
}

/// `{"schema":1,"exceptions":[…]}`: `exceptions --json`, the control
/// socket's answers and the file. Written here rather than derived: a
/// derive's reader and writer cost 13 KB of the binary.
pub fn to_json(set: &[Exception]) -> String {
    format!("{{\"schema\":{},\"exceptions\":{}}}", crate::stats::SCHEMA, rows_json(set))
}

/// The exceptions as a JSON array, each
/// `{"action","group","client","service","name","ends"}`, `null` where
/// another member says it.
pub fn rows_json(set: &[Exception]) -> String {
    let text = |v: Option<&String>| v.map_or_else(|| "null".to_string(), |v| v.serialize_json());
    let mut o = String::from("[");
    for (i, e) in set.iter().enumerate() {
        let (group, client) = match &e.subject {
            Subject::Group(g) => (Some(g), None),
            Subject::Client(c) => (None, Some(c)),
        };
        let (service, name) = match &e.target {
            Target::Service(s) => (Some(s), None),
            Target::Name(n) => (None, Some(n)),
        };
        o.push_str(&format!(
            "{}{{\"action\":\"{}\",\"group\":{},\"client\":{},\"service\":{},\"name\":{},\"ends\":{}}}",
            if i == 0 { "" } else { "," },
            e.action.word(),
            text(group),
            text(client),
            text(service),
            text(name),
            e.ends
        ));
    }
    o.push(']');
    o
}

/// What an object of exceptions holds (the file, the gateway's answers).
#[derive(Debug, Default)]
pub struct Listed {
    /// The exceptions, each checked as a request is.
    pub exceptions: Vec<Exception>,
    /// Rows left out: not one exception (both or neither of group and
    /// client, a word of the wrong shape, no end).
    pub unreadable: usize,
    /// An answer to `allow` or `block`: `set`, `removed` or `not set`.
    pub changed: String,
    /// An answer's refusal.
    pub error: String,
}

/// Reads an object of exceptions, with the reader made for files from
/// outside (a file cut short is an error, never a panic).
pub fn read(text: &str) -> Result<Listed, String> {
    let mut l = Listed::default();
    let mut j = Json::new(text);
    let whole = j.object(&mut |j, key| match key.as_str() {
        "exceptions" => j.array(&mut |j| {
            match read_row(j)? {
                Some(e) => l.exceptions.push(e),
                None => l.unreadable += 1,
            }
            Some(())
        }),
        "changed" => j.string().map(|c| l.changed = c),
        "error" => j.string().map(|e| l.error = e),
        _ => j.skip(0),
    });
    if whole.is_none() || !j.at_end() {
        return Err(format!("not an object of exceptions (at byte {})", j.offset()));
    }
    Ok(l)
}

/// One row of [`rows_json`]: `None` inside when it is no exception.
fn read_row(j: &mut Json<'_>) -> Option<Option<Exception>> {
    let (mut action, mut ends) = (String::new(), None);
    let mut words: [Option<String>; 4] = Default::default();
    j.object(&mut |j, key| {
        let slot = ["group", "client", "service", "name"].iter().position(|k| *k == key);
        match (key.as_str(), slot) {
            ("action", _) => action = j.string()?,
            ("ends", _) => ends = Some(j.number()?),
            (_, Some(i)) => words[i] = j.string_or_null()?,
            _ => j.skip(0)?,
        }
        Some(())
    })?;
    let [group, client, service, name] = words;
    let (kind, who) = match (group, client) {
        (Some(g), None) => ("group", g),
        (None, Some(c)) => ("client", c),
        _ => return Some(None),
    };
    let (what, target) = match (service, name) {
        (Some(s), None) => ("service", s),
        (None, Some(n)) => ("name", n),
        _ => return Some(None),
    };
    Some(ends.and_then(|ends| Exception::from_words(&action, kind, &who, what, &target, ends).ok()))
}

/// The exceptions as a member of `status --json`.
#[derive(Debug, Default)]
pub struct Rows(pub Vec<Exception>);

impl SerJson for Rows {
    fn ser_json(&self, _d: usize, s: &mut nanoserde::SerJsonState) {
        s.out.push_str(&rows_json(&self.0));
    }
}

/// For `check`: the exception among `set` that decides `key` for the
/// device `device` (else a client of `default`) whose groups in force are
/// `on`, at `now_ms`, by the table `cfg` compiles.
pub fn deciding<'a>(
    cfg: &Config,
    groups: &GroupTable,
    set: &'a [Exception],
    key: &[u8],
    device: Option<&why::Identified>,
    on: u64,
    now_ms: u64,
) -> Option<&'a Exception> {
    if set.is_empty() {
        return None;
    }
    let rules = ClientRules::new(&cfg.clients, groups);
    let compiled = compile(cfg, groups, &rules, set);
    let unknown = IpAddr::from([0u8; 4]);
    let rule = device.and_then(|d| d.rule).and_then(|r| rules.name(r));
    let ips: Vec<IpAddr> = device.map_or(Vec::new(), |d| d.ips.clone());
    let macs: Vec<Option<[u8; 6]>> = device.map_or(Vec::new(), |d| d.macs.iter().copied().map(Some).collect());
    let mut found: Option<&Rule> = None;
    for ip in if ips.is_empty() { vec![unknown] } else { ips } {
        for &mac in if macs.is_empty() { &[None][..] } else { &macs[..] } {
            let asker = Asker { ip, mac, rule: rule.map(|r| &**r), groups: on };
            if let Some(r) = compiled.decide(key, &asker, now_ms)
                && found.is_none_or(|f| f.action == Action::Allow)
            {
                found = Some(r);
            }
        }
    }
    found.and_then(|r| set.get(r.index))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rows_go_both_ways_and_odd_ones_are_left_out() {
        let e = Exception::from_words("block", "client", "192.0.2.7", "service", "youtube", 1_800_000_000).unwrap();
        let f = Exception::from_words("allow", "group", "kids", "name", "x.example", 1_800_000_001).unwrap();
        let text = to_json(&[e.clone(), f.clone()]);
        assert_eq!(
            text,
            "{\"schema\":1,\"exceptions\":[{\"action\":\"block\",\"group\":null,\"client\":\"192.0.2.7\",\
             \"service\":\"youtube\",\"name\":null,\"ends\":1800000000},{\"action\":\"allow\",\"group\":\"kids\",\
             \"client\":null,\"service\":null,\"name\":\"x.example\",\"ends\":1800000001}]}"
        );
        let l = read(&text).unwrap();
        assert_eq!((l.exceptions, l.unreadable), (vec![e, f], 0));
        assert!(read(&text[..text.len() - 3]).is_err(), "cut short");
        assert!(read("{\"schema\":1,\"exceptions\":7}").is_err());
        let odd = "{\"exceptions\":[{\"action\":\"allow\",\"group\":\"kids\",\"client\":\"x\",\"name\":\"a.example\",\"ends\":9},\
                   {\"action\":\"allow\",\"group\":\"kids\",\"ends\":9},{\"action\":\"allow\",\"group\":\"kids\",\"name\":\"a\"},\
                   {\"action\":\"allow\",\"group\":\"k ids\",\"name\":\"a\",\"ends\":9,\"extra\":[1,{}]}],\"changed\":\"set\"}";
        let l = read(odd).unwrap();
        assert_eq!((l.exceptions.len(), l.unreadable, l.changed.as_str()), (0, 4, "set"));
        assert_eq!(read("{\"error\":\"no group 'x'\"}").unwrap().error, "no group 'x'");
    }

    #[test]
    fn a_service_is_its_catalogue_domains_and_a_missing_group_matches_nobody() {
        let cfg = Config::parse(
            "t",
            "config group 'kids'\nconfig client\n\toption name 'tablet'\n\tlist match '192.0.2.5'\n\tlist group 'kids'\n",
        )
        .unwrap();
        let groups = GroupTable::new(&cfg);
        let rules = ClientRules::new(&cfg.clients, &groups);
        let set = [
            Exception::from_words("allow", "group", "kids", "service", "youtube", u64::MAX / 2000).unwrap(),
            Exception::from_words("block", "group", "gone", "name", "example.org", u64::MAX / 2000).unwrap(),
            Exception::from_words("block", "client", "tablet", "name", "games.example", u64::MAX / 2000).unwrap(),
        ];
        let c = compile(&cfg, &groups, &rules, &set);
        let kids = 1 << groups.bit("kids").unwrap();
        let ask = |name: &str, rule: Option<&'static str>, g: u64| {
            let a = Asker { ip: "192.0.2.99".parse().unwrap(), mac: None, rule, groups: g };
            c.decide(&name_key(name).unwrap(), &a, 0).map(|r| r.index)
        };
        assert_eq!(ask("www.youtube.com", None, kids), Some(0));
        assert_eq!(ask("i.ytimg.com", None, kids), Some(0), "another of the service's domains");
        assert_eq!(ask("www.youtube.com", None, DEFAULT), None);
        assert_eq!(ask("example.org", None, u64::MAX), None, "no such group in this config");
        assert_eq!(ask("games.example", Some("tablet"), kids), Some(2), "by its config client");
        let tablet = why::identify(&cfg, &rules, &NameBook::router(&cfg.leases_file, &cfg.ethers_file), "192.0.2.5");
        let found = deciding(&cfg, &groups, &set, &name_key("games.example").unwrap(), tablet.ok().as_ref(), kids, 0);
        assert_eq!(found, Some(&set[2]), "check finds it by the device's rule");
    }
}
