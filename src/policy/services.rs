//! Blocked services: a catalogue of services a household blocks by name
//! (`list service 'tiktok'` in a `config group`), each the domains it uses.
//!
//! The catalogue is `services/services.json`, compiled in, in the schema of
//! AdGuard's HostlistsRegistry (`{"blocked_services":[{"id","name","rules"}]}`)
//! so that `option services_url` can point at a published file instead.
//! A service a group lists becomes one more block source of that group,
//! named `service:ID`: it is merged into the group's sets at load like any
//! list, so a query pays no search through services, the group's block
//! mode, schedule and allow entries apply, and CNAMEs are followed as for
//! lists.

use std::path::Path;
use std::sync::OnceLock;

use nanoserde::SerJson;

use crate::config::{Config, ListKind, ListSource};
use crate::domain::normalize_name;
use crate::policy::domainset::name_key;

/// The catalogue this project keeps (each service's source: services/SOURCES.md).
const BUILTIN: &str = include_str!("../../services/services.json");

/// Prefix of the source name a service blocks under (the log's `list` column).
pub const PREFIX: &str = "service:";

use crate::json::Json;

/// Largest services.json taken, downloaded or saved: room for several
/// times AdGuard's HostlistsRegistry file, icons and all (an SVG a
/// service), and a download is cut off here rather than at
/// `max_list_size` (64 MiB shipped). Parsed in about 0.15 s at most on the
/// 2-core x86_64 dev VM (release build).
pub const MAX_BYTES: u64 = 4 << 20;
/// Entries of `blocked_services` taken: HostlistsRegistry has about 235;
/// LuCI lists every service on one page.
pub const MAX_SERVICES: usize = 1000;
/// Rules of one service: YouTube's, among HostlistsRegistry's largest, has about 170.
pub const MAX_RULES: usize = 5000;
/// Longest service id (bytes of `[a-z0-9_]`): it becomes a source name.
const MAX_ID: usize = 64;
/// Dropped entries named one by one in the notes; the rest are counted.
const NOTES_SHOWN: usize = 5;

/// One service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// What `list service` names.
    pub id: String,
    /// Shown to people.
    pub name: String,
    /// `video`, `social`, `chat`, `games`, … (empty if the file gives none).
    pub category: String,
    /// The domains it uses; each blocks everything under it too.
    pub domains: Vec<String>,
}

/// The services of one file, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalogue {
    /// In file order.
    pub services: Vec<Service>,
    /// Rules skipped because they are not `||domain^`.
    pub skipped_rules: usize,
    /// Why entries were dropped as not conforming (the first
    /// [`NOTES_SHOWN`]), for the log and `check-config`.
    pub dropped: Vec<String>,
    /// Entries dropped as not conforming, all of them.
    pub dropped_count: usize,
    /// Positions in `services`, in the order of their ids: `list service`
    /// lines and duplicate ids are found by a binary search, not by a walk
    /// through every service (a sorted index rather than a hash map: no
    /// hash an author could make collide, and no hasher's code).
    index: Vec<u16>,
}

/// One entry of `blocked_services` as the file has it (only these members are read).
#[derive(Default)]
struct RawService {
    id: Option<String>,
    name: Option<String>,
    rules: Option<Vec<String>>,
    category: String,
    /// HostlistsRegistry's name for the category.
    group: String,
}

impl RawService {
    /// Reads one entry; `None` with `over` set when its rules pass [`MAX_RULES`].
    fn read(j: &mut Json<'_>, over: &mut bool) -> Option<RawService> {
        let mut s = RawService::default();
        j.object(&mut |j, key| {
            match key.as_str() {
                "id" => s.id = Some(j.string()?),
                "name" => s.name = Some(j.string()?),
                "category" => s.category = j.string()?,
                "group" => s.group = j.string()?,
                "rules" => {
                    let mut rules = Vec::new();
                    j.array(&mut |j| {
                        if rules.len() == MAX_RULES {
                            *over = true;
                            return None;
                        }
                        j.string().map(|r| rules.push(r))
                    })?;
                    s.rules = Some(rules);
                }
                _ => j.skip(0)?,
            }
            Some(())
        })?;
        Some(s)
    }
}

/// The domain of a `||domain^` rule (what services.json uses), lowercase;
/// `None` for any other rule (a modifier would change its meaning).
fn rule_domain(rule: &str) -> Option<String> {
    let d = rule.trim().strip_prefix("||")?.strip_suffix('^')?;
    let d = normalize_name(d)?;
    (d.contains('.') && name_key(&d).is_some()).then_some(d)
}

/// Whether `id` is a service id: 1 to [`MAX_ID`] of `[a-z0-9_]`.
pub fn is_id(id: &str) -> bool {
    (1..=MAX_ID).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl Catalogue {
    /// Reads a services.json in one pass, in time linear in its size.
    /// Services without an id, or without one usable rule, are left out,
    /// as are entries that do not conform (an id not `[a-z0-9_]{1,64}`, a
    /// name or category that is long or holds markup or control
    /// characters; see [`Catalogue::dropped`]). A file that is not such
    /// JSON, or is over a cap ([`MAX_BYTES`], [`MAX_SERVICES`],
    /// [`MAX_RULES`]), is an error: none of it is used.
    pub fn parse(text: &str) -> Result<Catalogue, String> {
        if text.len() as u64 > MAX_BYTES {
            return Err(over_size());
        }
        let mut cat = Catalogue::default();
        // Over a cap: which one, and the entry's place in the file.
        let mut over: Option<String> = None;
        let mut listed = false;
        let mut j = Json::new(text);
        let read = j.object(&mut |j, key| {
            if key != "blocked_services" {
                return j.skip(0);
            }
            // A second `blocked_services` replaces the first, as it did when read whole.
            (cat, listed) = (Catalogue::default(), true);
            let mut n = 0;
            j.array(&mut |j| {
                n += 1;
                if n > MAX_SERVICES {
                    over = Some(format!("more than {MAX_SERVICES} services, the cap for a catalogue"));
                    return None;
                }
                let mut too_many = false;
                let Some(s) = RawService::read(j, &mut too_many) else {
                    if too_many {
                        over = Some(format!("service #{n} has more than {MAX_RULES} rules, the cap for a service"));
                    }
                    return None;
                };
                cat.add(s, n).map_err(|e| over = Some(e)).ok()
            })
        });
        if let Some(e) = over {
            return Err(e);
        }
        if read.is_none() || !j.at_end() || !listed {
            return Err(format!("not a services.json (JSON with blocked_services) at byte {}", j.offset()));
        }
        Ok(cat)
    }

    /// Takes entry `n` (from 1) of the file, or drops it with a note.
    fn add(&mut self, s: RawService, n: usize) -> Result<(), String> {
        // Of a service, only id, name and rules are required.
        let (Some(id), Some(name), Some(rules)) = (s.id, s.name, s.rules) else {
            return Err("a service without id, name or rules".into());
        };
        let id = id.trim().to_ascii_lowercase();
        let name = name.trim().to_string();
        let category = if s.category.is_empty() { s.group } else { s.category };
        // The notes name a service by its place, and by its id once that is
        // known to be plain; no quotes: they reach the log, `check-config` and LuCI.
        let why = if !is_id(&id) {
            Some(format!("service #{n}: its id is not 1 to {MAX_ID} of a-z, 0-9 and _"))
        } else if !crate::plaintext::is_plain(&name) {
            Some(format!(
                "service #{n} ({id}): its name is longer than {} characters or holds markup or control characters",
                crate::plaintext::MAX_CHARS
            ))
        } else if !crate::plaintext::is_plain(&category) {
            Some(format!(
                "service #{n} ({id}): its category is longer than {} characters or holds markup or control characters",
                crate::plaintext::MAX_CHARS
            ))
        } else {
            None
        };
        if let Some(why) = why {
            self.dropped_count += 1;
            if self.dropped.len() < NOTES_SHOWN {
                self.dropped.push(why);
            }
            return Ok(());
        }
        let Err(at) = self.position(&id) else { return Ok(()) };
        let mut domains = Vec::with_capacity(rules.len());
        for r in &rules {
            match rule_domain(r) {
                Some(d) => domains.push(d),
                None => self.skipped_rules += 1,
            }
        }
        // Without repeats, in order: n log n whatever the file holds (a
        // hash set could be made to collide by its author). A sort keeping
        // the file's order cost 7 KB more of code, for no use.
        domains.sort_unstable();
        domains.dedup();
        if domains.is_empty() {
            return Ok(());
        }
        // Below MAX_SERVICES, so a u16; the insert moves at most that many.
        self.index.insert(at, self.services.len() as u16);
        self.services.push(Service { id, name, category, domains });
        Ok(())
    }

    /// What the log and `check-config` say of the entries dropped.
    pub fn drop_notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.dropped.iter().map(|d| format!("{d}: dropped")).collect();
        if let Some(more) = self.dropped_count.checked_sub(self.dropped.len()).filter(|&m| m > 0) {
            notes.push(format!("{more} more services dropped as not conforming"));
        }
        notes
    }

    /// The compiled-in catalogue, parsed once.
    pub fn builtin() -> &'static Catalogue {
        static CAT: OnceLock<Catalogue> = OnceLock::new();
        // The file is checked by a test; were it ever unreadable, no service is known.
        CAT.get_or_init(|| Catalogue::parse(BUILTIN).unwrap_or_default())
    }

    /// The service `id`.
    pub fn find(&self, id: &str) -> Option<&Service> {
        self.position(id).ok().and_then(|at| self.services.get(usize::from(self.index[at])))
    }

    /// Where `id` is in the index, or where it would go.
    fn position(&self, id: &str) -> Result<usize, usize> {
        self.index.binary_search_by(|&i| self.services[usize::from(i)].id.as_str().cmp(id))
    }

    /// `hydradns services --json`.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"schema\":1,\"services\":[");
        for (i, s) in self.services.iter().enumerate() {
            out.push_str(if i == 0 { "{\"id\":" } else { ",{\"id\":" });
            out.push_str(&s.id.serialize_json());
            out.push_str(",\"name\":");
            out.push_str(&s.name.serialize_json());
            out.push_str(",\"category\":");
            out.push_str(&s.category.serialize_json());
            out.push_str(",\"domains\":");
            out.push_str(&s.domains.serialize_json());
            out.push('}');
        }
        out.push_str("]}");
        out
    }
}

/// The catalogue `cfg` uses: the last good download of `services_url`,
/// else the built-in one (before the first download too, so a group's
/// services block from the first start), with notes when it falls back
/// or dropped entries. A saved copy over a cap (planted in `list_dir`, or
/// kept from a version without caps) is refused whole for the built-in
/// catalogue: no download this version vetted was ever saved over one, so
/// nothing else known good is left on disk, and a process that starts
/// (the daemon, `hydradns services`, `check`) must agree with the others.
/// Read at every policy build (start, reload, a list that changed), which
/// re-reads every list anyway: 4 MiB costs about 0.15 s there, and keeping
/// the parsed catalogue between builds would hold all of it in memory.
pub fn in_use(cfg: &Config) -> (std::borrow::Cow<'static, Catalogue>, Vec<String>) {
    let Some(saved) = &cfg.services_saved else {
        return (std::borrow::Cow::Borrowed(Catalogue::builtin()), Vec::new());
    };
    match read_saved(saved) {
        Ok(cat) => {
            let notes = cat.drop_notes().into_iter().map(|n| format!("services_url: {n}")).collect();
            (std::borrow::Cow::Owned(cat), notes)
        }
        Err(e) => (
            std::borrow::Cow::Borrowed(Catalogue::builtin()),
            vec![format!("services_url: {e}; using the built-in catalogue")],
        ),
    }
}

/// The refusal of a catalogue over [`MAX_BYTES`].
pub fn over_size() -> String {
    format!("larger than {} MiB, the cap for a catalogue", MAX_BYTES >> 20)
}

/// A saved services.json, read under [`MAX_BYTES`] (a larger file is not read at all).
pub fn read_saved(path: &Path) -> Result<Catalogue, String> {
    // In the daemon's list_dir, and `status` may read it as root.
    let bytes = match crate::sys::read_unlinked(path, MAX_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err("not downloaded yet".into()),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            return Err(format!("{}: {}", path.display(), over_size()));
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    Catalogue::parse(text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The block sources the groups' `list service` entries make: one per
/// service a group lists, in that group; and a warning per id the
/// catalogue lacks (it blocks nothing until it appears).
pub fn sources(cfg: &Config, cat: &Catalogue) -> (Vec<ListSource>, Vec<String>) {
    let mut out: Vec<ListSource> = Vec::new();
    let mut warnings = Vec::new();
    let file = cfg.groups.first().map_or("", |g| g.origin.rsplit_once(':').map_or(g.origin.as_str(), |(f, _)| f));
    for g in &cfg.groups {
        for (id, line) in &g.services {
            let Some(s) = cat.find(id) else {
                warnings.push(format!(
                    "{file}:{line}: group '{}': unknown service '{id}' (see 'hydradns services'); it blocks nothing until the catalogue has it",
                    g.name
                ));
                continue;
            };
            // One source per group, not one for all the groups that list the
            // service: a source in two groups would make a set of its own
            // for that combination, one more binary search for every query
            // of a client in both; in one group it joins that group's set.
            out.push(ListSource {
                name: format!("{PREFIX}{id}"),
                kind: ListKind::Block,
                paths: Vec::new(),
                domains: s.domains.iter().map(|d| (d.clone(), *line)).collect(),
                origin: format!("{file}:{line}"),
                url: None,
                saved: None,
                groups: vec![g.name.clone()],
            });
        }
    }
    (out, warnings)
}

/// `cfg`'s lists followed by the sources its groups' services make, and
/// the warnings about them: what the policy loads and `hydradns check` explains.
pub fn with_services(cfg: &Config) -> (Vec<ListSource>, Vec<String>) {
    let (cat, notes) = in_use(cfg);
    let (extra, mut warnings) = sources(cfg, &cat);
    // The catalogue matters only to a group that lists a service.
    if cfg.groups.iter().any(|g| !g.services.is_empty()) {
        warnings.extend(notes);
    }
    let mut lists = cfg.lists.clone();
    lists.extend(extra);
    (lists, warnings)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The catalogue file itself: every id unique and usable in a config,
    /// every service named, in a category, with a source (a row of
    /// services/SOURCES.md) and at least one domain, and every rule a valid
    /// `||domain^`.
    #[test]
    fn the_builtin_catalogue_is_sound() {
        use nanoserde::DeJson;
        #[derive(DeJson)]
        struct Checked {
            blocked_services: Vec<Entry>,
        }
        #[derive(DeJson)]
        struct Entry {
            id: String,
            name: String,
            category: String,
            rules: Vec<String>,
        }
        let file = Checked::deserialize_json(BUILTIN).unwrap();
        // services/SOURCES.md: `| id | service | https://… | notes |`, a row per service.
        let sources: std::collections::HashMap<&str, &str> = include_str!("../../services/SOURCES.md")
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split(" | ").collect();
                (cells.len() >= 3 && l.starts_with("| ")).then(|| (cells[0].trim_start_matches("| "), cells[2]))
            })
            .collect();
        assert!(file.blocked_services.len() >= 40, "{}", file.blocked_services.len());
        let mut ids = std::collections::HashSet::new();
        for s in &file.blocked_services {
            assert!(ids.insert(s.id.as_str()), "id '{}' twice", s.id);
            assert!(
                !s.id.is_empty() && s.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "id '{}'",
                s.id
            );
            assert!(!s.name.trim().is_empty() && !s.category.is_empty(), "{}", s.id);
            let source = sources.get(s.id.as_str()).copied().unwrap_or_default();
            assert!(source.starts_with("https://"), "{}: no source in services/SOURCES.md ('{source}')", s.id);
            assert!(!s.rules.is_empty(), "{} has no domain", s.id);
            for r in &s.rules {
                assert!(rule_domain(r).is_some(), "{}: rule '{r}' is not ||domain^ with a valid name", s.id);
            }
        }
        let rows = sources.keys().filter(|id| **id != "id").count();
        assert_eq!(rows, file.blocked_services.len(), "a row per service, and none for a service gone");
        let cat = Catalogue::builtin();
        assert_eq!(cat.services.len(), file.blocked_services.len(), "loads whole: {:?}", cat.dropped);
        assert_eq!((cat.skipped_rules, cat.dropped_count), (0, 0));
        assert!(cat.find("tiktok").unwrap().domains.contains(&"tiktok.com".to_string()));
        assert!(cat.find("youtube").unwrap().domains.contains(&"youtube.com".to_string()));
    }

    #[test]
    fn a_hostlistsregistry_file_needs_only_id_name_and_rules() {
        let text = r#"{"blocked_services":[
            {"id":"Extra","name":"Extra","rules":["||extra.example^","||Extra.example^","/regex/","||x.example^$important"],
             "icon_svg":"<svg/>","group":"social","groups":["a"]},
            {"id":"empty","name":"Empty","rules":["/only a regex/"]},
            {"id":"extra","name":"Again","rules":["||again.example^"]}],
            "groups":[{"id":"social"}]}"#;
        let cat = Catalogue::parse(text).unwrap();
        assert_eq!(cat.services.len(), 1);
        let s = &cat.services[0];
        assert_eq!((s.id.as_str(), s.category.as_str()), ("extra", "social"));
        assert_eq!(s.domains, ["extra.example"]);
        assert_eq!(cat.skipped_rules, 3);
        assert!(Catalogue::parse("[1,2]").is_err());
        assert!(Catalogue::parse("{\"blocked_services\":[{\"id\":\"a\"}]}").is_err());
    }

    #[test]
    fn any_json_reads_and_nothing_else_does() {
        let ok = r#" { "version": 2.5e3, "ok": true, "none": null, "nested": {"a": [1, {"b": [[]]}, "x\"y"]},
            "blocked_services": [ {"id": "a\u0062c", "name": "N\ud83d\ude00", "rules": ["||abc.example^"],
            "extra": [-1, false, {"k": "v"}]} ] } "#;
        let cat = Catalogue::parse(ok).unwrap();
        assert_eq!((cat.services[0].id.as_str(), cat.services[0].domains[0].as_str()), ("abc", "abc.example"));
        let deep = format!("{{\"x\":{}1{},\"blocked_services\":[]}}", "[".repeat(100), "]".repeat(100));
        for bad in [
            "",
            "{",
            "{\"blocked_services\":[",
            "{\"blocked_services\":[]} junk",
            "{\"blocked_services\":{}}",
            "{\"a\":}",
            "{\"blocked_services\":[{\"id\":\"x\",\"name\":\"y\",\"rules\":[\"\\u12\"]}]}",
            "[]",
            deep.as_str(),
            "{\"blocked_services\":[{\"id\":\"x\"\"name\":\"y\"}]}",
        ] {
            assert!(Catalogue::parse(bad).is_err(), "{bad}");
        }
        // Every prefix of a good file is refused, none panics (nanoserde 0.2.1 did, in `whole_field`).
        for n in 0..ok.len() {
            if ok.is_char_boundary(n) && !ok[n..].trim().is_empty() {
                assert!(Catalogue::parse(&ok[..n]).is_err(), "{}", &ok[..n]);
            }
        }
    }

    #[test]
    fn each_group_listing_a_service_gets_its_source_and_unknown_ids_warn() {
        let cfg = Config::parse(
            "/etc/config/hydradns",
            "config group 'kids'\n\tlist service 'tiktok'\n\tlist service 'nosuch'\nconfig group 'teens'\n\tlist service 'TikTok'\n",
        )
        .unwrap();
        let (lists, warnings) = with_services(&cfg);
        assert_eq!(lists.len(), 2);
        assert!(lists.iter().all(|l| l.name == "service:tiktok"));
        assert_eq!(
            (&lists[0].groups[..], &lists[1].groups[..]),
            (&["kids".to_string()][..], &["teens".to_string()][..])
        );
        assert!(lists[0].domains.iter().any(|(d, l)| d == "tiktok.com" && *l == 2));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("/etc/config/hydradns:3: group 'kids': unknown service 'nosuch'"),
            "{warnings:?}"
        );
    }

    /// A catalogue of `services` services of `rules` rules each, ids `s0`, `s1`, ….
    fn catalogue(services: usize, rules: usize) -> String {
        let body: Vec<String> = (0..services)
            .map(|i| {
                let rules: Vec<String> = (0..rules).map(|r| format!("\"||r{r}.s{i}.example^\"")).collect();
                format!("{{\"id\":\"s{i}\",\"name\":\"S {i}\",\"rules\":[{}]}}", rules.join(","))
            })
            .collect();
        format!("{{\"blocked_services\":[{}]}}", body.join(","))
    }

    /// Issue 58: 80,000 rules in one service took 5.6 s (a `Vec::contains`
    /// per rule); now each cap refuses the whole file, at the cap exactly it
    /// loads, and the services are found by id through the index.
    #[test]
    fn a_catalogue_over_a_cap_is_refused_whole() {
        let e = Catalogue::parse(&catalogue(1, 80_000)).unwrap_err();
        assert_eq!(e, "service #1 has more than 5000 rules, the cap for a service");
        let e = Catalogue::parse(&format!(
            "{{\"blocked_services\":[{{\"id\":\"ok\",\"name\":\"Ok\",\"rules\":[\"||ok.example^\"]}},{}",
            &catalogue(1, MAX_RULES + 1)["{\"blocked_services\":[".len()..]
        ))
        .unwrap_err();
        assert!(e.starts_with("service #2 has more than 5000 rules"), "{e}");
        let cat = Catalogue::parse(&catalogue(1, MAX_RULES)).unwrap();
        assert_eq!(cat.services[0].domains.len(), MAX_RULES);

        let e = Catalogue::parse(&catalogue(MAX_SERVICES + 1, 1)).unwrap_err();
        assert_eq!(e, "more than 1000 services, the cap for a catalogue");
        let cat = Catalogue::parse(&catalogue(MAX_SERVICES, 2)).unwrap();
        assert_eq!(cat.services.len(), MAX_SERVICES);
        for i in [0, 1, 500, 999] {
            let s = cat.find(&format!("s{i}")).unwrap();
            assert_eq!(
                (s.name.as_str(), s.domains[1].as_str()),
                (format!("S {i}").as_str(), format!("r1.s{i}.example").as_str())
            );
        }
        assert!(cat.find("s1000").is_none() && cat.find("").is_none());

        // Bytes: what is skipped counts too (HostlistsRegistry's icons are most of its file).
        let padded = |n: usize| format!("{{\"icons\":\"{}\",{}", "x".repeat(n), &catalogue(1, 1)[1..]);
        let at_cap = padded(MAX_BYTES as usize - padded(0).len());
        assert_eq!(at_cap.len() as u64, MAX_BYTES);
        assert_eq!(Catalogue::parse(&at_cap).unwrap().services.len(), 1);
        let over = padded(MAX_BYTES as usize - padded(0).len() + 1);
        assert_eq!(Catalogue::parse(&over).unwrap_err(), "larger than 4 MiB, the cap for a catalogue");
    }

    /// A saved copy over a cap (planted, or kept from a version without the
    /// caps) is refused for the built-in catalogue, with a note; one over
    /// 4 MiB is not even read (a sparse 1 GiB file here).
    #[test]
    fn a_saved_copy_over_a_cap_gives_way_to_the_builtin_catalogue() {
        let dir = std::env::temp_dir().join(format!("hydradns-catalogue-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = "config hydradns\n\toption list_dir '@D'\n\toption services_url 'https://s.example/services.json'\n\
                    config group 'kids'\n\tlist service 'tiktok'\n";
        let cfg = Config::parse("/etc/config/hydradns", &text.replace("@D", &dir.display().to_string())).unwrap();
        let saved = cfg.services_saved.clone().unwrap();
        let huge = std::fs::File::create(&saved).unwrap();
        huge.set_len(1 << 30).unwrap();
        let (cat, notes) = in_use(&cfg);
        assert!(cat.find("tiktok").is_some(), "the built-in catalogue");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("larger than 4 MiB, the cap for a catalogue; using the built-in catalogue"),
            "{notes:?}"
        );
        std::fs::write(&saved, catalogue(MAX_SERVICES + 1, 1)).unwrap();
        let (cat, notes) = in_use(&cfg);
        assert!(cat.find("tiktok").is_some() && cat.find("s0").is_none());
        assert!(notes[0].contains("more than 1000 services"), "{notes:?}");
        let (lists, warnings) = with_services(&cfg);
        assert_eq!(lists.iter().filter(|l| l.name == "service:tiktok").count(), 1);
        assert!(warnings.iter().any(|w| w.contains("more than 1000 services")), "check-config shows it: {warnings:?}");
        std::fs::write(&saved, catalogue(3, 2)).unwrap();
        let (cat, notes) = in_use(&cfg);
        assert!(cat.find("s2").is_some() && cat.find("tiktok").is_none() && notes.is_empty(), "{notes:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Ids, names and categories reach LuCI and the log: an entry that does
    /// not conform is dropped with a note that repeats none of it, and the
    /// rest of the catalogue stays.
    #[test]
    fn entries_that_do_not_conform_are_dropped_not_the_catalogue() {
        let entry = |id: &str, name: &str, category: &str| {
            format!(
                "{{\"id\":{},\"name\":{},\"category\":{},\"rules\":[\"||{}.example^\"]}}",
                id.serialize_json(),
                name.serialize_json(),
                category.serialize_json(),
                id.len()
            )
        };
        let long_id = "a".repeat(65);
        let entries = [
            entry("Upper_Case_1", "Kept", "video"),
            entry(&"b".repeat(64), "Kept too", "video"),
            entry("__proto__", "Kept", "__proto__"),
            entry("accented", &"é".repeat(200), "chat"),
            entry("with-dash", "Dropped", "video"),
            entry("", "Dropped", "video"),
            entry(&long_id, "Dropped", "video"),
            entry("dot.ted", "Dropped", "video"),
            entry("markup", "<img src=x onerror=alert(1)>", "video"),
            entry("amp", "AT&T", "video"),
            entry("quote", "Bob's", "video"),
            entry("dquote", "say \"hi\"", "video"),
            entry("bell", "ring\u{7}", "video"),
            entry("newline", "two\nlines", "video"),
            entry("toolong", &"é".repeat(201), "video"),
            entry("catmarkup", "Fine", "<b>video</b>"),
            entry("catlong", "Fine", &"c".repeat(201)),
        ];
        let group = r#"{"id":"grouped","name":"G","group":"x'y","rules":["||g.example^"]}"#;
        let text = format!("{{\"blocked_services\":[{},{group}]}}", entries.join(","));
        let cat = Catalogue::parse(&text).unwrap();
        let ids: Vec<&str> = cat.services.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["upper_case_1", "b".repeat(64).as_str(), "__proto__", "accented"]);
        assert_eq!(cat.find("__proto__").unwrap().category, "__proto__", "LuCI's concern, not a reason to drop");
        assert_eq!(cat.dropped_count, 14);
        let notes = cat.drop_notes();
        assert_eq!(notes.len(), NOTES_SHOWN + 1, "{notes:?}");
        assert_eq!(notes[0], "service #5: its id is not 1 to 64 of a-z, 0-9 and _: dropped");
        assert!(notes.iter().any(|n| n.starts_with("service #9 (markup): its name is longer than 200")), "{notes:?}");
        assert_eq!(notes[NOTES_SHOWN], "9 more services dropped as not conforming");
        for n in &notes {
            assert!(!n.chars().any(|c| c.is_control() || "<>&\"'".contains(c)) && n.len() < 200, "{n}");
        }
        // A file of such entries alone gives no service (and as a download is refused for that).
        assert!(
            Catalogue::parse(&format!("{{\"blocked_services\":[{}]}}", entry("a-b", "X", "y")))
                .unwrap()
                .services
                .is_empty()
        );
    }

    #[test]
    fn repeated_rules_are_dropped() {
        let text = r#"{"blocked_services":[{"id":"x","name":"X","rules":
            ["||b.example^","||a.example^","||B.example^","/re/","||c.example^","||a.example^","||b.example^"]}]}"#;
        let cat = Catalogue::parse(text).unwrap();
        assert_eq!(cat.services[0].domains, ["a.example", "b.example", "c.example"]);
        assert_eq!(cat.skipped_rules, 1);
        let many: Vec<String> = (0..3000).map(|i| format!("\"||d{}.example^\"", (i * 7) % 1000)).collect();
        let text = format!(r#"{{"blocked_services":[{{"id":"x","name":"X","rules":[{}]}}]}}"#, many.join(","));
        let kept = &Catalogue::parse(&text).unwrap().services[0].domains;
        assert_eq!(kept.len(), 1000);
        assert_eq!(&kept[..3], ["d0.example", "d1.example", "d10.example"]);
    }
}
