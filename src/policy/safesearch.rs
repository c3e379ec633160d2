//! Safe search: a group with `option safe_search '1'` gets the search
//! engines' and YouTube's restricted hosts for their usual names.
//!
//! A and AAAA queries for an engine's search hosts are answered with a
//! CNAME to the engine's safe host and that host's addresses of the asked
//! type, resolved like any query (`query`, through [`crate::policy::records::Alias`]):
//! one answer a stub resolver that does not chase CNAMEs can use (a CNAME
//! alone leaves some unresolved: AdguardTeam/AdGuardHome#3746,
//! duckduckgo/duckduckgo-help-pages#451). HTTPS and SVCB queries for them
//! get NODATA, so a browser cannot take an unrestricted address from a hint.
//!
//! The names are exact (no subdomains), kept in one hash map looked at only
//! when some group has safe search ([`crate::policy::Policy::check`]).

use rustc_hash::FxHashMap;

use super::sketch::Sketch;

use crate::config::Config;
use crate::config::groups::GroupTable;
use crate::policy::domainset::name_key;

/// Safe hosts, by target index.
pub const TARGETS: [&str; 9] = [
    "forcesafesearch.google.com",
    "strict.bing.com",
    "safe.duckduckgo.com",
    "restrictmoderate.youtube.com",
    "forcesafe.search.brave.com",
    "strict-safe-search.ecosia.org",
    "safesearch.pixabay.com",
    "familysearch.yandex.ru",
    "restrict.youtube.com",
];
const GOOGLE: u8 = 0;
const BING: u8 = 1;
const DUCKDUCKGO: u8 = 2;
const YOUTUBE: u8 = 3;
const BRAVE: u8 = 4;
const ECOSIA: u8 = 5;
const PIXABAY: u8 = 6;
const YANDEX: u8 = 7;
/// YouTube with `youtube_restrict 'strict'`.
const YOUTUBE_STRICT: u8 = 8;

/// Google's search domains, from Google's own list of them
/// (https://www.google.com/supported_domains); each is asked as `www.` and bare.
pub const GOOGLE_DOMAINS: &str = "google.com google.ad google.ae google.com.af google.com.ag google.com.ai \
google.al google.am google.co.ao google.com.ar google.as google.at google.com.au google.az google.ba \
google.com.bd google.be google.bf google.bg google.com.bh google.bi google.bj google.com.bn google.com.bo \
google.com.br google.bs google.bt google.co.bw google.by google.com.bz google.ca google.cd google.cf \
google.cg google.ch google.ci google.co.ck google.cl google.cm google.cn google.com.co google.co.cr \
google.com.cu google.cv google.com.cy google.cz google.de google.dj google.dk google.dm google.com.do \
google.dz google.com.ec google.ee google.com.eg google.es google.com.et google.fi google.com.fj google.fm \
google.fr google.ga google.ge google.gg google.com.gh google.com.gi google.gl google.gm google.gr \
google.com.gt google.gy google.com.hk google.hn google.hr google.ht google.hu google.co.id google.ie \
google.co.il google.im google.co.in google.iq google.is google.it google.je google.com.jm google.jo \
google.co.jp google.co.ke google.com.kh google.ki google.kg google.co.kr google.com.kw google.kz google.la \
google.com.lb google.li google.lk google.co.ls google.lt google.lu google.lv google.com.ly google.co.ma \
google.md google.me google.mg google.mk google.ml google.com.mm google.mn google.ms google.com.mt google.mu \
google.mv google.mw google.com.mx google.com.my google.co.mz google.com.na google.com.ng google.com.ni \
google.ne google.nl google.no google.com.np google.nr google.nu google.co.nz google.com.om google.com.pa \
google.com.pe google.com.pg google.com.ph google.com.pk google.pl google.pn google.com.pr google.ps \
google.pt google.com.py google.com.qa google.ro google.ru google.rw google.com.sa google.com.sb google.sc \
google.se google.com.sg google.sh google.si google.sk google.com.sl google.sn google.so google.sm google.sr \
google.st google.com.sv google.td google.tg google.co.th google.com.tj google.tl google.tm google.tn \
google.to google.com.tr google.tt google.com.tw google.co.tz google.com.ua google.co.ug google.co.uk \
google.com.uy google.co.uz google.com.vc google.co.ve google.vg google.co.vi google.com.vn google.vu \
google.ws google.rs google.co.za google.co.zm google.co.zw google.cat";

/// Yandex's search domains, each asked as `www.` and bare.
const YANDEX_DOMAINS: &str = "yandex.ru yandex.com yandex.by yandex.kz yandex.ua yandex.uz yandex.az \
yandex.com.am yandex.com.ge yandex.co.il yandex.kg yandex.lt yandex.lv yandex.md yandex.tj yandex.tm \
yandex.ee yandex.fr yandex.com.tr ya.ru";

/// The other engines' search hosts, exactly as asked.
const HOSTS: [(&str, u8); 12] = [
    ("www.bing.com", BING),
    ("duckduckgo.com", DUCKDUCKGO),
    ("www.duckduckgo.com", DUCKDUCKGO),
    ("start.duckduckgo.com", DUCKDUCKGO),
    ("www.youtube.com", YOUTUBE),
    ("m.youtube.com", YOUTUBE),
    ("youtubei.googleapis.com", YOUTUBE),
    ("youtube.googleapis.com", YOUTUBE),
    ("www.youtube-nocookie.com", YOUTUBE),
    ("search.brave.com", BRAVE),
    ("www.ecosia.org", ECOSIA),
    ("pixabay.com", PIXABAY),
];

/// The search hosts of one config, and which groups get their safe hosts.
#[derive(Debug, Default)]
pub struct SafeSearch {
    /// Reversed-label key of each search host → its engine.
    names: FxHashMap<Box<[u8]>, u8>,
    /// The search hosts' keys again: nearly every name asked is none, and
    /// the sketch says so in a few instructions where hashing the whole
    /// key for the map took ~95 (callgrind, mix).
    sketch: Sketch,
    /// Groups with `safe_search 1`, as a mask.
    groups: u64,
    /// Those of them with `youtube_restrict strict`.
    strict: u64,
}

impl SafeSearch {
    /// Nothing unless a group of `cfg` has safe search: then every engine's hosts.
    pub fn new(cfg: &Config, table: &GroupTable) -> SafeSearch {
        let mut s = SafeSearch::default();
        for g in cfg.groups.iter().filter(|g| g.safe_search) {
            let Some(bit) = table.bit(&g.name) else { continue };
            s.groups |= 1 << bit;
            if g.youtube_strict {
                s.strict |= 1 << bit;
            }
        }
        if s.groups == 0 {
            return s;
        }
        let mut add = |name: &str, engine: u8| {
            if let Some(k) = name_key(name) {
                s.names.insert(k.into_boxed_slice(), engine);
            }
        };
        for (list, engine) in [(GOOGLE_DOMAINS, GOOGLE), (YANDEX_DOMAINS, YANDEX)] {
            for d in list.split_whitespace() {
                add(d, engine);
                add(&format!("www.{d}"), engine);
            }
        }
        for (name, engine) in HOSTS {
            add(name, engine);
        }
        s.sketch = Sketch::with_capacity(s.names.len());
        for k in s.names.keys() {
            s.sketch.add(k);
        }
        s
    }

    /// No group has safe search.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Might `key` be a search host? `false` is certain, and always so
    /// when no group has safe search.
    #[inline]
    pub fn may_be_host(&self, key: &[u8]) -> bool {
        !self.names.is_empty() && self.sketch.may_hold(key)
    }

    /// Is `key` (reversed-label) a search host: `Some` with the index in
    /// [`TARGETS`] of its safe host when a group in `active` has safe
    /// search, `Some(None)` when only other clients' groups have.
    pub fn target(&self, key: &[u8], active: u64) -> Option<Option<u8>> {
        let &engine = self.names.get(key)?;
        if active & self.groups == 0 {
            return Some(None);
        }
        // A client in a strict group and a moderate one gets strict.
        let strict = engine == YOUTUBE && active & self.strict != 0;
        Some(Some(if strict { YOUTUBE_STRICT } else { engine }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn search_hosts_map_to_their_safe_hosts_for_safe_groups_only() {
        let cfg = Config::parse(
            "t",
            "config group 'kids'\n\toption safe_search '1'\n\
             config group 'teens'\n\toption safe_search '1'\n\toption youtube_restrict 'strict'\n\
             config group 'parents'\n",
        )
        .unwrap();
        let table = GroupTable::new(&cfg);
        let s = SafeSearch::new(&cfg, &table);
        let bit = |n: &str| 1u64 << table.bit(n).unwrap();
        let (kids, teens, parents) = (bit("kids"), bit("teens"), bit("parents"));
        let t = |name: &str, active: u64| {
            s.target(&name_key(name).unwrap(), active).map(|t| t.map(|i| TARGETS[i as usize]))
        };
        assert_eq!(t("www.google.com", kids), Some(Some("forcesafesearch.google.com")));
        assert_eq!(t("google.co.uk", kids), Some(Some("forcesafesearch.google.com")));
        assert_eq!(t("www.google.cat", kids), Some(Some("forcesafesearch.google.com")));
        assert_eq!(t("WWW.Bing.com", kids), Some(Some("strict.bing.com")));
        assert_eq!(t("www.youtube.com", kids), Some(Some("restrictmoderate.youtube.com")));
        assert_eq!(t("m.youtube.com", teens), Some(Some("restrict.youtube.com")));
        assert_eq!(t("m.youtube.com", teens | kids), Some(Some("restrict.youtube.com")), "strict wins");
        assert_eq!(t("ya.ru", kids), Some(Some("familysearch.yandex.ru")));
        assert_eq!(t("www.google.com", parents), Some(None));
        assert_eq!(t("mail.google.com", kids), None, "exact names only");
        assert_eq!(t("example.com", kids), None);
        assert!(GOOGLE_DOMAINS.split_whitespace().count() > 180);
        let none = Config::parse("t", "config group 'kids'\n").unwrap();
        assert!(SafeSearch::new(&none, &GroupTable::new(&none)).is_empty());
    }
}
