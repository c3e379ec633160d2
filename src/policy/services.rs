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
    fn read(j: &mut Json<'_>) -> Option<RawService> {
        let mut s = RawService::default();
        j.object(&mut |j, key| {
            match key.as_str() {
                "id" => s.id = Some(j.string()?),
                "name" => s.name = Some(j.string()?),
                "category" => s.category = j.string()?,
                "group" => s.group = j.string()?,
                "rules" => {
                    let mut rules = Vec::new();
                    j.array(&mut |j| j.string().map(|r| rules.push(r)))?;
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

impl Catalogue {
    /// Reads a services.json. Services without an id, or without one
    /// usable rule, are left out; a file that is not such JSON is an error.
    pub fn parse(text: &str) -> Result<Catalogue, String> {
        let mut raw: Option<Vec<RawService>> = None;
        let mut j = Json::new(text);
        let read = j.object(&mut |j, key| {
            if key != "blocked_services" {
                return j.skip(0);
            }
            let mut all = Vec::new();
            j.array(&mut |j| RawService::read(j).map(|s| all.push(s)))?;
            raw = Some(all);
            Some(())
        });
        let whole = read.is_some() && j.at_end();
        let Some(raw) = raw.filter(|_| whole) else {
            return Err(format!("not a services.json (JSON with blocked_services) at byte {}", j.offset()));
        };
        let mut cat = Catalogue::default();
        for s in raw {
            // Of a service, only id, name and rules are required.
            let (Some(id), Some(name), Some(rules)) = (s.id, s.name, s.rules) else {
                return Err("a service without id, name or rules".into());
            };
            let id = id.trim().to_ascii_lowercase();
            if id.is_empty() || cat.find(&id).is_some() {
                continue;
            }
            let mut domains = Vec::with_capacity(rules.len());
            for r in &rules {
                match rule_domain(r) {
                    Some(d) if !domains.contains(&d) => domains.push(d),
                    Some(_) => {}
                    None => cat.skipped_rules += 1,
                }
            }
            if domains.is_empty() {
                continue;
            }
            let category = if s.category.is_empty() { s.group } else { s.category };
            cat.services.push(Service { id, name: name.trim().to_string(), category, domains });
        }
        Ok(cat)
    }

    /// The compiled-in catalogue, parsed once.
    pub fn builtin() -> &'static Catalogue {
        static CAT: OnceLock<Catalogue> = OnceLock::new();
        // The file is checked by a test; were it ever unreadable, no service is known.
        CAT.get_or_init(|| Catalogue::parse(BUILTIN).unwrap_or_default())
    }

    /// The service `id`.
    pub fn find(&self, id: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.id == id)
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
/// services block from the first start), with a note when it falls back.
pub fn in_use(cfg: &Config) -> (std::borrow::Cow<'static, Catalogue>, Option<String>) {
    let Some(saved) = &cfg.services_saved else { return (std::borrow::Cow::Borrowed(Catalogue::builtin()), None) };
    match read_saved(saved) {
        Ok(cat) => (std::borrow::Cow::Owned(cat), None),
        Err(e) => (
            std::borrow::Cow::Borrowed(Catalogue::builtin()),
            Some(format!("services_url: {e}; using the built-in catalogue")),
        ),
    }
}

/// A saved services.json.
pub fn read_saved(path: &Path) -> Result<Catalogue, String> {
    let text = match crate::sys::open_regular(path) {
        Ok(f) => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 << 20), &mut s)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            s
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err("not downloaded yet".into()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    Catalogue::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
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
    let (cat, note) = in_use(cfg);
    let (extra, mut warnings) = sources(cfg, &cat);
    warnings.extend(note.filter(|_| cfg.groups.iter().any(|g| !g.services.is_empty())));
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
        assert_eq!(cat.services.len(), file.blocked_services.len());
        assert_eq!(cat.skipped_rules, 0);
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
}
