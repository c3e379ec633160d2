//! Exceptions with an end: "allow YouTube for the kids for an hour",
//! "block this game on that tablet until tomorrow" (`hydradns allow` and
//! `hydradns block`). AdGuard Home's users asked for them (#8036, #8622);
//! a pause or a permanent allow entry is not what a parent means.
//!
//! An exception names who (a group, or one device), what (a service of the
//! catalogue, or a name and everything under it) and when it ends, as a
//! wall-clock Unix time: a daemon that is down meanwhile does not stretch
//! it. Precedence, for the query it matches: an exception beats the lists,
//! the blocked services and safe search of every group of the client; a
//! block beats an allow, timed or permanent. Local names are answered
//! before any of this.
//!
//! Here: the exceptions as given ([`Exception`]), the bounded table that
//! holds them ([`Exceptions`]) and their compiled form that queries match
//! against ([`Compiled`]). Who a device is (its addresses and MACs, its
//! `config client`) and which names a service has are worked out by the
//! engine, which sees the client stage and the catalogue, and handed in.
//!
//! A query pays one atomic load while none is set ([`Exceptions::until`]);
//! then a clock read, and a walk over the few that are.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::domain::SEP;

/// Exceptions set at once: a household sets a handful; the table, the file
/// that keeps it and each query's walk while one is set stay small.
pub const MAX_EXCEPTIONS: usize = 256;
/// Longest exception: a reboot ends them all anyway, and what should last
/// longer is a list entry. Keeps every end a number JSON readers hold exactly.
pub const MAX_SECS: u64 = 366 * 86_400;
/// Longest client text: an address, a MAC, a `config client` name or a hostname.
pub const MAX_CLIENT: usize = 128;
/// The list name an exception's answers are logged with.
pub const LIST: &str = "exception";

/// What an exception does to the names it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Answered as if no list had them.
    Allow,
    /// Answered with the block answer, whatever the allowlists say.
    Block,
}

impl Action {
    /// The command's word.
    pub fn word(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Block => "block",
        }
    }

    /// The action a word names.
    pub fn parse(word: &str) -> Option<Action> {
        match word {
            "allow" => Some(Action::Allow),
            "block" => Some(Action::Block),
            _ => None,
        }
    }
}

/// Whom an exception applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// The clients of a group, while the group is in force (its schedule).
    Group(String),
    /// One device, whatever its groups: an address, a MAC, a `config
    /// client` name or a hostname from the leases, as given (an address or
    /// a MAC written the one way).
    Client(String),
}

/// The names an exception covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A service of the catalogue, by id: its domains.
    Service(String),
    /// A domain name (lowercase, no trailing dot) and every name under it.
    Name(String),
}

/// One exception as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// Allow or block.
    pub action: Action,
    /// Whom.
    pub subject: Subject,
    /// Which names.
    pub target: Target,
    /// When it ends, Unix seconds.
    pub ends: u64,
}

impl Exception {
    /// Reads the words of a request or of the file, checking their shape
    /// (not whether the group, the service or the device exists: that is
    /// the running config's to say). `kind` is `group` or `client`, `what`
    /// `service` or `name`.
    pub fn from_words(
        action: &str,
        kind: &str,
        who: &str,
        what: &str,
        target: &str,
        ends: u64,
    ) -> Result<Exception, String> {
        let action = Action::parse(action).ok_or_else(|| format!("'{action}' is neither allow nor block"))?;
        let subject = match kind {
            "group" if is_group_name(who) => Subject::Group(who.to_string()),
            "group" => return Err(format!("'{who}' is not a group name (letters, digits, - and _)")),
            "client" => Subject::Client(client_text(who)?),
            _ => return Err(format!("'{kind}' is neither group nor client")),
        };
        let target = match what {
            "service" if crate::policy::services::is_id(target) => Target::Service(target.to_string()),
            "service" => return Err(format!("'{target}' is not a service id (see 'hydradns services')")),
            "name" => match crate::domain::normalize_name(target) {
                Some(n) if crate::policy::domainset::name_key(&n).is_some() => Target::Name(n),
                _ => return Err(format!("'{target}' is not a domain name")),
            },
            _ => return Err(format!("'{what}' is neither service nor name")),
        };
        Ok(Exception { action, subject, target, ends })
    }

    /// Whether `other` is the same exception, whatever its end: the one a
    /// new `allow` or `block` replaces, or `--for 0` removes.
    pub fn same(&self, other: &Exception) -> bool {
        (self.action, &self.subject, &self.target) == (other.action, &other.subject, &other.target)
    }

    /// Said to people: `allow service 'youtube' for group 'kids'`.
    pub fn describe(&self) -> String {
        let what = match &self.target {
            Target::Service(id) => format!("service '{id}'"),
            Target::Name(n) => format!("'{n}'"),
        };
        let who = match &self.subject {
            Subject::Group(g) => format!("group '{g}'"),
            Subject::Client(c) => format!("client '{c}'"),
        };
        format!("{} {what} for {who}", self.action.word())
    }
}

/// `--group`'s shape: that of a `list group` value.
fn is_group_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
}

/// `--client`'s text, checked and written the one way: an address or a MAC
/// as its canonical text, anything else as given (one word of printable
/// characters, shown in LuCI and written to the file).
pub fn client_text(who: &str) -> Result<String, String> {
    if let Ok(ip) = who.parse::<IpAddr>() {
        return Ok(ip.to_canonical().to_string());
    }
    if let Some(mac) = crate::mac::parse_mac(who.as_bytes()) {
        return Ok(crate::mac::mac_text(&mac));
    }
    let printable = who.chars().all(|c| !c.is_whitespace() && !c.is_control() && !"<>&\"'\\".contains(c));
    if who.is_empty() || who.len() > MAX_CLIENT || !printable {
        return Err(format!(
            "'{}' is not a client: an address, a MAC, a 'config client' name or a hostname",
            who.escape_default()
        ));
    }
    Ok(who.to_string())
}

/// The wall clock in milliseconds since 1970 (0 before).
#[inline]
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The end of an exception of `d` from `now_ms`, in whole Unix seconds,
/// rounded up: `--for 2s` lasts two seconds at least.
pub fn end_after(now_ms: u64, d: Duration) -> u64 {
    let ms = now_ms.saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    ms.div_ceil(1000)
}

/// Who a device is, as the engine worked it out for an exception's
/// `client` (see the module doc): any one of these is enough.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    /// Its addresses (canonical: IPv4 as IPv4).
    pub ips: Vec<IpAddr>,
    /// Its hardware addresses.
    pub macs: Vec<[u8; 6]>,
    /// The `config client` it is, by name: every device that rule matches.
    pub rule: Option<Arc<str>>,
}

/// Whom a compiled exception applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// Clients with any of these groups in force (none: a group the
    /// current config lacks, so nobody).
    Groups(u64),
    /// One device.
    Device(Device),
}

/// One exception as queries match it.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Allow or block.
    pub action: Action,
    /// When it ends, Unix seconds.
    pub ends: u64,
    /// Whom.
    pub who: Who,
    /// Reversed-label keys of the names it covers (and what is under them).
    pub names: Vec<Box<[u8]>>,
    /// Its place in the table, for `check` to say which one decided.
    pub index: usize,
}

/// The client of one query, as far as the exceptions care.
#[derive(Debug, Clone, Copy)]
pub struct Asker<'a> {
    /// Its address.
    pub ip: IpAddr,
    /// Its MAC, if known.
    pub mac: Option<[u8; 6]>,
    /// The `config client` it is.
    pub rule: Option<&'a str>,
    /// Its groups in force now.
    pub groups: u64,
}

/// The exceptions as queries match them.
#[derive(Debug, Default)]
pub struct Compiled {
    rules: Vec<Rule>,
}

impl Compiled {
    /// The table for `rules`.
    pub fn new(rules: Vec<Rule>) -> Compiled {
        Compiled { rules }
    }

    /// The table for `set`, in its order: `who` says whom an exception's
    /// subject matches now, `names` which names (reversed-label keys) its
    /// target covers. The engine, its tests and the fuzzer differ only in those.
    pub fn build(
        set: &[Exception],
        mut who: impl FnMut(&Subject) -> Who,
        mut names: impl FnMut(&Target) -> Vec<Box<[u8]>>,
    ) -> Compiled {
        let rules = set
            .iter()
            .enumerate()
            .map(|(index, e)| Rule {
                action: e.action,
                ends: e.ends,
                who: who(&e.subject),
                names: names(&e.target),
                index,
            })
            .collect();
        Compiled { rules }
    }

    /// The exception that decides `key` (reversed-label) for `asker` at
    /// `now_ms`: a block if one matches, else an allow, else none.
    pub fn decide(&self, key: &[u8], asker: &Asker<'_>, now_ms: u64) -> Option<&Rule> {
        let mut allow = None;
        for r in &self.rules {
            if now_ms >= r.ends.saturating_mul(1000) || !r.covers(key) || !r.applies_to(asker) {
                continue;
            }
            match r.action {
                Action::Block => return Some(r),
                Action::Allow => allow = allow.or(Some(r)),
            }
        }
        allow
    }
}

impl Rule {
    /// Whether `key` is one of its names or under one.
    fn covers(&self, key: &[u8]) -> bool {
        self.names.iter().any(|d| key.starts_with(d) && (key.len() == d.len() || key[d.len()] == SEP))
    }

    /// Whether it applies to `asker`.
    fn applies_to(&self, asker: &Asker<'_>) -> bool {
        match &self.who {
            Who::Groups(g) => g & asker.groups != 0,
            Who::Device(d) => {
                d.ips.contains(&asker.ip.to_canonical())
                    || asker.mac.is_some_and(|m| d.macs.contains(&m))
                    || d.rule.as_deref().is_some_and(|r| asker.rule == Some(r))
            }
        }
    }
}

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// Set, new.
    Added,
    /// Set, replacing the same one with another end.
    Replaced,
    /// `--for 0`: removed.
    Removed,
    /// `--for 0` for one that was not set (or had ended).
    NotSet,
}

/// The exceptions in force: set through the control socket, kept across
/// reloads (by group name, so a renumbering keeps them on the right group).
#[derive(Debug, Default)]
pub struct Exceptions {
    /// The latest end of those set, Unix seconds; 0 while none is: the one
    /// load a query pays then.
    until: AtomicU64,
    /// What queries match; swapped whole.
    compiled: ArcSwap<Compiled>,
    /// The exceptions as given, in the order set. The control socket and
    /// reloads take it, never a query; held while one of them compiles, so
    /// the compiled table is always that of the latest list.
    set: Mutex<Vec<Exception>>,
    /// [`LIST`], shared with the log entries of the answers they decide.
    list: Arc<str>,
}

impl Exceptions {
    /// An empty table.
    pub fn new() -> Exceptions {
        Exceptions { list: Arc::from(LIST), ..Exceptions::default() }
    }

    /// The latest end of those set, Unix seconds; 0 while none is.
    #[inline]
    pub fn until(&self) -> u64 {
        self.until.load(Relaxed)
    }

    /// Nothing to match any more: every exception has ended by `now_ms`.
    /// Cleared, so the queries after it pay the one load again (unless a
    /// change came in between, which the exchange sees).
    #[inline]
    pub fn over(&self, until: u64, now_ms: u64) -> bool {
        if now_ms < until.saturating_mul(1000) {
            return false;
        }
        let _ = self.until.compare_exchange(until, 0, Relaxed, Relaxed);
        true
    }

    /// What queries match now.
    pub fn compiled(&self) -> arc_swap::Guard<Arc<Compiled>> {
        self.compiled.load()
    }

    /// The list name logged.
    pub fn list(&self) -> &Arc<str> {
        &self.list
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Exception>> {
        self.set.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Those whose end has not passed at `now_ms`, in the order set.
    pub fn current(&self, now_ms: u64) -> Vec<Exception> {
        self.lock().iter().filter(|e| e.ends.saturating_mul(1000) > now_ms).cloned().collect()
    }

    /// Sets `e` (replacing the same one), or removes the same one when its
    /// end is 0; refused beyond [`MAX_EXCEPTIONS`]. `check` refuses it
    /// (a group or a service the config lacks) before anything changes;
    /// `compile` makes the new table of the new list, under the lock.
    pub fn change(
        &self,
        e: Exception,
        now_ms: u64,
        check: impl FnOnce(&Exception) -> Result<(), String>,
        compile: impl FnOnce(&[Exception]) -> Compiled,
    ) -> Result<Changed, Refused> {
        let mut set = self.lock();
        if e.ends != 0 {
            check(&e).map_err(Refused)?;
        }
        set.retain(|x| x.ends.saturating_mul(1000) > now_ms);
        let at = set.iter().position(|x| x.same(&e));
        let changed = match (at, e.ends) {
            (None, 0) => Changed::NotSet,
            (Some(i), 0) => {
                set.remove(i);
                Changed::Removed
            }
            (Some(i), _) => {
                set[i] = e;
                Changed::Replaced
            }
            (None, _) if set.len() >= MAX_EXCEPTIONS => {
                return Err(Refused(format!(
                    "{MAX_EXCEPTIONS} exceptions are set, the most there may be: remove one (--for 0) or wait \
                     for one to end"
                )));
            }
            (None, _) => {
                set.push(e);
                Changed::Added
            }
        };
        self.install(&set, compile(&set));
        Ok(changed)
    }

    /// A table of `all` (the file read back at start): the first
    /// [`MAX_EXCEPTIONS`] of those not ended at `now_ms`. Made whole, not
    /// stored into: a thread that stores into, loads or drops an `ArcSwap`
    /// joins the list of threads every cache insert walks (`arc_swap`'s
    /// debts), +141 instructions a miss for the main thread that starts
    /// the gateway.
    pub fn restored(
        mut all: Vec<Exception>,
        now_ms: u64,
        compile: impl FnOnce(&[Exception]) -> Compiled,
    ) -> Exceptions {
        all.retain(|x| x.ends.saturating_mul(1000) > now_ms);
        all.truncate(MAX_EXCEPTIONS);
        Exceptions {
            until: AtomicU64::new(all.iter().map(|e| e.ends).max().unwrap_or(0)),
            compiled: ArcSwap::from_pointee(compile(&all)),
            set: Mutex::new(all),
            list: Arc::from(LIST),
        }
    }

    /// How many are set (ended or not).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Compiles the list again (those ended at `now_ms` dropped): after a
    /// reload, whose config may number the groups, name the clients and
    /// list the services differently.
    pub fn recompile(&self, now_ms: u64, compile: impl FnOnce(&[Exception]) -> Compiled) {
        let mut set = self.lock();
        if set.is_empty() {
            return;
        }
        set.retain(|x| x.ends.saturating_mul(1000) > now_ms);
        self.install(&set, compile(&set));
    }

    fn install(&self, set: &[Exception], compiled: Compiled) {
        self.compiled.store(Arc::new(compiled));
        // After the table: a query that sees the end sees the rules too.
        self.until.store(set.iter().map(|e| e.ends).max().unwrap_or(0), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::policy::domainset::name_key;

    fn ex(action: &str, kind: &str, who: &str, what: &str, target: &str, ends: u64) -> Exception {
        Exception::from_words(action, kind, who, what, target, ends).unwrap()
    }

    /// Compiles as the engine would for groups `kids` = bit 1 and names
    /// given directly (a service here is its id as a name).
    fn compile(set: &[Exception]) -> Compiled {
        Compiled::build(
            set,
            |subject| match subject {
                Subject::Group(g) => Who::Groups(if g == "kids" { 0b10 } else { 0 }),
                Subject::Client(c) => Who::Device(Device {
                    ips: c.parse().ok().into_iter().collect(),
                    macs: crate::mac::parse_mac(c.as_bytes()).into_iter().collect(),
                    rule: Some(Arc::from(c.as_str())),
                }),
            },
            |target| match target {
                Target::Name(n) | Target::Service(n) => vec![name_key(&n.replace('_', ".")).unwrap().into()],
            },
        )
    }

    fn asker(ip: &str, groups: u64) -> Asker<'static> {
        Asker { ip: ip.parse().unwrap(), mac: None, rule: None, groups }
    }

    #[test]
    fn words_are_checked_and_written_one_way() {
        let e = ex("allow", "client", "AA-BB-CC-DD-EE-0F", "name", "WWW.Example.COM.", 9);
        assert_eq!(e.subject, Subject::Client("aa:bb:cc:dd:ee:0f".into()));
        assert_eq!(e.target, Target::Name("www.example.com".into()));
        assert_eq!(
            ex("block", "client", "::ffff:192.0.2.1", "service", "youtube", 1).subject,
            Subject::Client("192.0.2.1".into())
        );
        fn bad(a: &str, k: &str, w: &str, t: &str, v: &str) -> String {
            Exception::from_words(a, k, w, t, v, 1).unwrap_err()
        }
        assert!(bad("permit", "group", "kids", "name", "x.example").contains("neither allow nor block"));
        assert!(bad("allow", "group", "ki ds", "name", "x.example").contains("not a group name"));
        assert!(bad("allow", "group", "kids", "name", "bad..name").contains("not a domain name"));
        assert!(bad("allow", "group", "kids", "service", "You-Tube").contains("not a service id"));
        assert!(bad("allow", "client", "<b>x</b>", "name", "x.example").contains("not a client"));
        assert!(bad("allow", "client", &"x".repeat(MAX_CLIENT + 1), "name", "x.example").contains("not a client"));
        assert!(bad("allow", "everyone", "x", "name", "x.example").contains("neither group nor client"));
    }

    #[test]
    fn block_beats_allow_and_each_applies_to_its_own() {
        let t = Exceptions::new();
        let now = 1_000_000;
        assert_eq!(t.until(), 0);
        let allow = ex("allow", "group", "kids", "name", "video.example", 2000);
        assert_eq!(t.change(allow.clone(), now, |_| Ok(()), compile), Ok(Changed::Added));
        assert_eq!(t.until(), 2000);
        let c = t.compiled();
        let key = name_key("cdn.video.example").unwrap();
        assert_eq!(c.decide(&key, &asker("192.0.2.1", 0b10), now).map(|r| r.action), Some(Action::Allow));
        assert!(c.decide(&key, &asker("192.0.2.1", 0b01), now).is_none(), "another group");
        assert!(c.decide(&name_key("video.example.org").unwrap(), &asker("192.0.2.1", 0b10), now).is_none());
        assert!(c.decide(&name_key("xvideo.example").unwrap(), &asker("192.0.2.1", 0b10), now).is_none());
        assert!(c.decide(&key, &asker("192.0.2.1", 0b10), 2_000_000).is_none(), "ended");
        drop(c);
        let block = ex("block", "client", "192.0.2.1", "name", "example", 3000);
        t.change(block, now, |_| Ok(()), compile).unwrap();
        let c = t.compiled();
        assert_eq!(c.decide(&key, &asker("192.0.2.1", 0b10), now).map(|r| r.action), Some(Action::Block));
        assert_eq!(c.decide(&key, &asker("192.0.2.2", 0b10), now).map(|r| r.action), Some(Action::Allow));
        // The same one again replaces it; --for 0 removes it, once.
        let mut again = allow.clone();
        again.ends = 2500;
        assert_eq!(t.change(again, now, |_| Ok(()), compile), Ok(Changed::Replaced));
        assert_eq!(t.current(now).len(), 2);
        let mut gone = allow;
        gone.ends = 0;
        assert_eq!(t.change(gone.clone(), now, |_| Err("not asked".into()), compile), Ok(Changed::Removed));
        assert_eq!(t.change(gone, now, |_| Ok(()), compile), Ok(Changed::NotSet));
        assert_eq!(t.current(now).len(), 1);
        assert_eq!(t.until(), 3000);
    }

    #[test]
    fn a_refused_change_changes_nothing_and_the_table_has_a_cap() {
        let t = Exceptions::new();
        let now = 5_000;
        let e = |i: usize| ex("block", "group", "kids", "name", &format!("n{i}.example"), 100);
        assert_eq!(
            t.change(e(0), now, |_| Err("no group 'kids'".into()), compile),
            Err(Refused("no group 'kids'".into()))
        );
        assert_eq!((t.until(), t.current(now).len()), (0, 0));
        for i in 0..MAX_EXCEPTIONS {
            t.change(e(i), now, |_| Ok(()), compile).unwrap();
        }
        let full = t.change(e(MAX_EXCEPTIONS), now, |_| Ok(()), compile).unwrap_err();
        assert!(full.0.contains("256 exceptions are set"), "{full:?}");
        assert_eq!(t.current(now).len(), MAX_EXCEPTIONS);
        // Replacing one is no new one; ended ones make room.
        assert_eq!(t.change(e(3), now, |_| Ok(()), compile), Ok(Changed::Replaced));
        let mut later = e(MAX_EXCEPTIONS);
        later.ends = 200;
        assert_eq!(t.change(later, 150_000, |_| Ok(()), compile), Ok(Changed::Added));
        assert_eq!(t.current(150_000).len(), 1);
    }

    #[test]
    fn the_end_is_a_time_and_an_ended_table_costs_one_load_again() {
        assert_eq!(end_after(10_001, Duration::from_secs(2)), 13, "rounded up: two seconds at least");
        assert_eq!(end_after(10_000, Duration::from_secs(2)), 12);
        let t = Exceptions::restored(
            vec![
                ex("allow", "group", "kids", "name", "a.example", 9),
                ex("allow", "group", "kids", "name", "b.example", 20),
            ],
            10_000,
            compile,
        );
        assert_eq!(t.len(), 1, "one had ended before the start");
        let key = name_key("b.example").unwrap();
        assert!(t.compiled().decide(&key, &asker("192.0.2.1", 0b10), 10_000).is_some());
        assert_eq!(t.until(), 20);
        assert!(!t.over(20, 19_999));
        assert!(t.over(20, 20_000));
        assert_eq!(t.until(), 0, "cleared");
        // A change made between the read and the clear is not lost.
        t.change(ex("allow", "group", "kids", "name", "c.example", 40), 20_000, |_| Ok(()), compile).unwrap();
        assert!(t.over(20, 20_000));
        assert_eq!(t.until(), 40);
        // A reload after the end drops what has ended: no clock read for it.
        t.recompile(40_000, compile);
        assert_eq!((t.until(), t.current(0).len()), (0, 0));
    }

    #[test]
    fn a_device_is_matched_by_address_mac_or_rule() {
        let d = Rule {
            action: Action::Allow,
            ends: u64::MAX / 1000,
            who: Who::Device(Device {
                ips: vec!["192.0.2.9".parse().unwrap()],
                macs: vec![[2, 0, 0, 0, 0, 1]],
                rule: Some(Arc::from("kids-tablet")),
            }),
            names: vec![name_key("example").unwrap().into()],
            index: 0,
        };
        let c = Compiled::new(vec![d]);
        let key = name_key("a.example").unwrap();
        let hit = |a: Asker<'_>| c.decide(&key, &a, 0).is_some();
        assert!(hit(asker("::ffff:192.0.2.9", 0)));
        assert!(hit(Asker { mac: Some([2, 0, 0, 0, 0, 1]), ..asker("192.0.2.10", 0) }));
        assert!(hit(Asker { rule: Some("kids-tablet"), ..asker("192.0.2.10", 0) }));
        assert!(!hit(Asker { rule: Some("kids"), mac: Some([2, 0, 0, 0, 0, 2]), ..asker("192.0.2.10", 1) }));
    }
}
