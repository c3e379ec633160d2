//! Why a name is answered as it is, for a device: `hydradns check`, from
//! the command line (a policy built from the config) or from the running
//! gateway (its own policy, over the control socket, for LuCI's "Why?").
//!
//! Every line is built from what was parsed (names, list names, `file:line`
//! places), never from a list's raw text: a list line's comment is the list
//! author's words, which LuCI shows (issue 58).

use std::net::IpAddr;

use crate::client::names::NameBook;
use crate::client::rules::{ClientRules, Learned};
use crate::config::Config;
use crate::config::groups::{DEFAULT, GroupTable};
use crate::policy::exceptions::{Action, Exception};
use crate::policy::{self, Policy, Verdict, domainset::name_key};
use crate::upstream::sets::Sets;

/// What the router knows of its devices now, as the daemon reads it to
/// find a client's rule: `cfg`'s leases and ethers files, the ARP and IPv6
/// neighbour tables.
pub fn router_book(cfg: &Config) -> NameBook {
    let mut book = NameBook::router(&cfg.leases_file, &cfg.ethers_file);
    book.refresh(std::time::Instant::now());
    book
}

/// Who a device named on the command line is: what `check --client`,
/// `allow --client` and `block --client` take.
#[derive(Debug, Default)]
pub struct Identified {
    /// The `config client` whose rule it falls under, if any.
    pub rule: Option<usize>,
    /// The rule's name was what was given: every device of that rule.
    pub by_rule: bool,
    /// Its addresses, as given or as the leases and neighbour tables have
    /// them now (a MAC's, a hostname's).
    pub ips: Vec<IpAddr>,
    /// Its hardware addresses, as given or as those files have them.
    pub macs: Vec<[u8; 6]>,
}

/// Who `id` (an address, a MAC, a `config client` name or a hostname from
/// the leases) is under `rules`, by what `book` knows of the devices now.
pub fn identify(cfg: &Config, rules: &ClientRules, book: &NameBook, id: &str) -> Result<Identified, String> {
    let learned = Learned::new(rules, book);
    let unknown = IpAddr::from([0u8; 4]);
    if let Ok(ip) = id.parse::<IpAddr>() {
        let ip = ip.to_canonical();
        return Ok(Identified { rule: rules.find(ip, None, &learned), ips: vec![ip], ..Identified::default() });
    }
    let given_mac = crate::mac::parse_mac(id.as_bytes());
    if given_mac.is_none()
        && let Some(i) = cfg.clients.iter().position(|c| c.name == id)
    {
        return Ok(Identified { rule: Some(i), by_rule: true, ..Identified::default() });
    }
    // One walk of the tables, plain loops after it: the iterator chains
    // of a walk per question cost 4 KB of the binary.
    let devices: Vec<_> = book.devices().collect();
    let mut found = Identified::default();
    // The device the rule is found for: a MAC's first address, a
    // hostname's first entry.
    let mut first: Option<(Option<IpAddr>, Option<[u8; 6]>)> = None;
    if let Some(mac) = given_mac {
        found.macs.push(mac);
    } else {
        for &(ip, mac, name) in &devices {
            if name.is_some_and(|n| n.eq_ignore_ascii_case(id)) {
                first.get_or_insert((ip, mac));
                found.macs.extend(mac.filter(|m| !found.macs.contains(m)));
                found.ips.extend(ip.map(|i| i.to_canonical()).filter(|i| !found.ips.contains(i)));
            }
        }
        if first.is_none() {
            return Err(format!(
                "'{id}' is no address, MAC, 'config client' name or hostname in {}",
                cfg.leases_file.display()
            ));
        }
    }
    // Its MACs' addresses: each a table has for them.
    for &(ip, mac, _) in &devices {
        if let (Some(ip), Some(mac)) = (ip, mac)
            && found.macs.contains(&mac)
            && !found.ips.contains(&ip.to_canonical())
        {
            found.ips.push(ip.to_canonical());
        }
    }
    let (ip, mac) = first.unwrap_or((found.ips.first().copied(), found.macs.first().copied()));
    found.rule = rules.find(ip.unwrap_or(unknown), mac, &learned);
    Ok(found)
}

/// Which `config client` `id` (an address, a MAC, a `config client` name or
/// a hostname from the leases) is, its groups and their schedules' state
/// now, as lines to print; the groups whose lists apply to it now; who it
/// is; and its upstream set.
pub fn client(cfg: &Config, table: &GroupTable, id: &str) -> Result<(Vec<String>, u64, Identified, u8), String> {
    let rules = ClientRules::new(&cfg.clients, table);
    let book = router_book(cfg);
    let device = identify(cfg, &rules, &book, id)?;
    let rule = device.rule;
    let member = rules.groups(rule);
    let mut lines = vec![match rule.and_then(|r| cfg.clients.get(r)) {
        Some(c) => {
            format!("client {id}: config client '{}' ({}), groups: {}", c.name, c.origin, table.names_of(member))
        }
        None => format!("client {id}: no config client matches; group: default"),
    }];
    let schedules = crate::policy::schedule::Schedules::new(table, &cfg.time_synced_file);
    let off = schedules.off();
    for (bit, name) in table.names.iter().enumerate().filter(|(b, _)| member >> b & 1 != 0) {
        let Some(s) = table.schedules.get(bit).and_then(Option::as_ref) else { continue };
        let state = if !schedules.clock_synced() {
            format!("the clock is not known good yet ({} missing): its lists apply", cfg.time_synced_file.display())
        } else if off >> bit & 1 != 0 {
            format!("outside its window now ({}): its lists do not apply", schedules.zone())
        } else {
            format!("inside its window now ({}): its lists apply", schedules.zone())
        };
        lines.push(format!("  group '{name}': schedule '{}' {state}", s.name));
    }
    let on = member & !off;
    let sets = Sets::layout(cfg, table);
    let set = sets.of(rule, on);
    lines.push(match sets.own().get(usize::from(set).wrapping_sub(1)) {
        Some(s) => format!(
            "  upstreams: set '{}': {}{} (a config forward rule still wins for its domains)",
            s.name,
            s.upstreams.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            if s.fallback_main { ", then the main upstreams" } else { "" }
        ),
        None => "  upstreams: main".to_string(),
    });
    Ok((lines, on, device, set))
}

/// What `check` says of a name's DNSSEC: nothing where its upstream set
/// does not validate, else a `dnssec:` line, which only the running
/// gateway (its upstreams, keys and anchors) can give for a name it asks
/// upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dnssec {
    /// The set does not validate: no line.
    Off,
    /// The set validates, and the line is among the others: the gateway
    /// answers the name without its upstreams, or a forward rule's
    /// servers do.
    Told,
    /// Validate the name with upstream set `set` (0: main).
    Validate(u8),
}

/// Why `check` validates nothing for a name the gateway answers as
/// `verdict` says, `None` where it asks upstream (a `config forward`
/// rule's names too: they are validated where a trust anchor of their own
/// covers them, which only the running gateway knows).
fn not_validated(verdict: &Verdict, exception: Option<Action>) -> Option<&'static str> {
    match (exception, verdict) {
        (Some(Action::Block), _) => return Some("an exception blocks it"),
        (Some(Action::Allow), _) | (None, Verdict::Pass | Verdict::Allowed { .. }) => {}
        (None, Verdict::Blocked { .. }) => return Some("it is blocked"),
        (None, Verdict::SafeSearch { .. }) => return Some("safe search answers it"),
    }
    None
}

/// Why `name` is answered as it is under `cfg` and `policy`, for the device
/// `client` names (else the default group): the lines `hydradns check`
/// prints, `exceptions` (the running gateway's) included, and what is
/// left to say of its DNSSEC. An error for a name that is not a domain
/// name or a client that cannot be told.
pub fn why(
    cfg: &Config,
    policy: &Policy,
    name: &str,
    client_id: Option<&str>,
    exceptions: &[Exception],
) -> Result<(Vec<String>, Dnssec), String> {
    let (Some(name), Some(key)) = (crate::domain::normalize_name(name), name_key(name)) else {
        return Err(format!("'{name}' is not a domain name"));
    };
    let mut lines = Vec::new();
    let record = policy::records::explain(&cfg.records, &name);
    if let Some(r) = &record {
        let star = if r.wildcard { "*." } else { "" };
        lines.push(format!("{name}: answered by local record '{star}{}' ({}), before any list", r.name, r.origin));
    }
    let bypass = cfg.block_bypass && policy::BYPASS_DOTTED.contains(&name.as_str());
    if bypass {
        lines.push(format!(
            "{name}: NXDOMAIN by block_bypass, before any list (it tells browsers and phones to keep to this resolver)"
        ));
    }
    let (active, device, set) = match client_id {
        Some(id) => {
            let (told, active, device, set) = client(cfg, &policy.groups, id)?;
            lines.extend(told);
            (active, Some(device), set)
        }
        None => (DEFAULT, None, Sets::layout(cfg, &policy.groups).of(None, DEFAULT)),
    };
    let now = crate::policy::exceptions::unix_ms();
    let decided = super::exceptions::deciding(cfg, &policy.groups, exceptions, &key, device.as_ref(), active, now);
    if let Some(e) = decided {
        let (done, beside) = match e.action {
            Action::Allow => ("allowed", "the lists, services and safe search below do not apply"),
            Action::Block => ("blocked", "the lists and allowlists below do not apply"),
        };
        lines.push(format!(
            "{name}: {done} by exception ({}) until {}: {beside} until then",
            e.describe(),
            crate::timetext::iso8601(e.ends.saturating_mul(1000))
        ));
    }
    let otherwise = if decided.is_some() { "  without it, " } else { "" };
    let (block, allow) = policy.entries(&key, active);
    let whose = |source: u16| match policy.group_of(source, active) {
        Some(g) if policy.groups.names.len() > 1 => format!(" of group '{}'", policy.groups.names[g]),
        _ => String::new(),
    };
    let service = |source: u16| policy.source_name(source).strip_prefix(policy::services::PREFIX).map(str::to_string);
    let checked = policy.check(&key, active).verdict;
    let verdict = match checked {
        Verdict::Blocked { source } if service(source).is_some() => format!(
            "{name}: blocked by service '{}'{} (domain {})",
            service(source).unwrap_or_default(),
            whose(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Blocked { source } => format!(
            "{name}: blocked by list '{}'{} (entry {})",
            policy.source_name(source),
            whose(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Allowed { source } => format!(
            "{name}: allowed by list '{}'{} (entry {}), overriding a block (entry {})",
            policy.source_name(source),
            whose(source),
            allow.as_ref().map_or(String::new(), |a| a.1.clone()),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::SafeSearch { target } => format!(
            "{name}: safe search: answered with '{}' (its CNAME and addresses; HTTPS and SVCB get no data)",
            policy::safesearch::TARGETS.get(target as usize).copied().unwrap_or("?")
        ),
        Verdict::Pass => format!("{name}: not blocked"),
    };
    lines.push(format!("{otherwise}{verdict}"));
    for e in policy::explain(&policy::services::with_services(cfg).0, &key) {
        let rule = match e.effect {
            "blocks" => format!("block {} and every name under it", e.name),
            "allows" => format!("allow {} and every name under it", e.name),
            _ => format!("$badfilter {}: cancels a block of that name alone", e.name),
        };
        lines.push(format!("  list '{}' {} it: {}  {rule}", e.list, e.effect, e.location));
    }
    let dnssec = if !Sets::layout(cfg, &policy.groups).validates(set) {
        Dnssec::Off
    } else {
        let answered = match (&record, bypass) {
            (Some(_), _) => Some("a local record answers it"),
            (None, true) => Some("block_bypass answers it"),
            (None, false) => not_validated(&checked, decided.map(|e| e.action)),
        };
        match answered {
            Some(why) => {
                lines.push(format!("dnssec: not validated ({why})"));
                Dnssec::Told
            }
            None => Dnssec::Validate(set),
        }
    };
    Ok((lines, dnssec))
}
