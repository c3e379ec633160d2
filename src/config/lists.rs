//! The `config blocklist` and `config allowlist` sections: where a list
//! comes from, its name, groups and download options, and the file its
//! saved copy lives in.

use super::*;

/// Whether a list source blocks or allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `config blocklist`
    Block,
    /// `config allowlist`
    Allow,
}

/// One `config blocklist` / `config allowlist` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListSource {
    /// Name shown in logs and by `hydradns check`.
    pub name: String,
    /// Block or allow.
    pub kind: ListKind,
    /// List files to read, in any supported format.
    pub paths: Vec<PathBuf>,
    /// Inline `list domain` entries, each with the line it came from.
    pub domains: Vec<(String, usize)>,
    /// `file:line` of the section, for messages about it.
    pub origin: String,
    /// Where the list is downloaded from, if anywhere.
    pub url: Option<String>,
    /// The saved copy of the download (under `list_dir`), read like a `path`.
    pub saved: Option<PathBuf>,
    /// `list group`: the groups whose clients it applies to; empty: `default`.
    pub groups: Vec<String>,
}

/// File name of a downloaded list's saved copy: the list's name made safe,
/// plus a hash of the URL so two lists never share a file.
pub fn saved_file_name(name: &str, url: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(48)
        .collect();
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    format!("{safe}-{:08x}.list", hash as u32)
}

/// The file name of a URL's path without its extension
/// (`https://host/lists/ads.txt?x=1` → `ads`); none for a bare host.
fn url_file_stem(url: &str) -> Option<String> {
    let path = url.split(['?', '#']).next()?.splitn(4, '/').nth(3)?;
    let file = path.rsplit('/').next().filter(|f| !f.is_empty())?;
    let stem = Path::new(file).file_stem()?.to_string_lossy().into_owned();
    (!stem.is_empty()).then_some(stem)
}

impl SectionReader<'_> {
    pub(super) fn list(&mut self, kind: ListKind, earlier: &[ListSource]) -> Result<ListSource, ConfigError> {
        let mut src = ListSource {
            name: String::new(),
            kind,
            paths: Vec::new(),
            domains: Vec::new(),
            origin: format!("{}:{}", self.file, self.section.line),
            url: None,
            saved: None,
            groups: Vec::new(),
        };
        let mut enabled = true;
        for v in &self.section.values {
            match v.key.as_str() {
                "name" => src.name = v.value.clone(),
                "path" => src.paths.push(PathBuf::from(&v.value)),
                "domain" => src.domains.push((v.value.clone(), v.line)),
                "group" => src.groups.push(self.group_name(v)?),
                "enabled" => enabled = self.boolean(v)?,
                "url" => {
                    if src.url.is_some() {
                        return Err(self.error(v.line, "one 'url' per section; add a section per list".into()));
                    }
                    let lower = v.value.to_ascii_lowercase();
                    if !(lower.starts_with("http://") || lower.starts_with("https://")) || v.value.len() < 10 {
                        return Err(self.bad(v, "an http:// or https:// URL"));
                    }
                    src.url = Some(v.value.clone());
                }
                _ => self.unknown(v),
            }
        }
        if src.name.is_empty() {
            // The section's name, else the file's: the URL's file name too,
            // since two lists from one host would share the host's name
            // (and so their metrics series and log name).
            let stem = src.paths.first().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
            let url_stem = src.url.as_deref().and_then(url_file_stem);
            let host = src.url.as_deref().and_then(|u| u.split('/').nth(2)).map(str::to_string);
            let name = self.section.name.clone().or(stem).or(url_stem).or(host);
            let fallback = format!("{}{}", self.section.kind, earlier.len() + 1);
            src.name = match name {
                // Still one name for two lists: the second gets its position.
                Some(n) if earlier.iter().any(|l| l.name == n) => format!("{n}-{}", earlier.len() + 1),
                Some(n) => n,
                None => fallback,
            };
        }
        if !enabled {
            src.paths.clear();
            src.domains.clear();
            src.url = None;
        }
        Ok(src)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The default name is the section's, else the file's (of a path or a
    /// URL), never one name for two lists.
    #[test]
    fn unnamed_lists_get_distinct_names() {
        let text = "config blocklist\n\toption url 'https://lists.example/ads.txt'\n\
                    config blocklist\n\toption url 'https://lists.example/trackers/hosts?v=2'\n\
                    config blocklist 'mine'\n\toption url 'https://lists.example/x.txt'\n\
                    config blocklist\n\toption url 'https://lists.example/'\n\
                    config allowlist\n\toption url 'https://other.example/ads.txt'\n\
                    config blocklist\n\toption path '/etc/hydradns/local.txt'\n";
        let c = Config::parse("f", text).unwrap();
        let names: Vec<&str> = c.lists.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["ads", "hosts", "mine", "lists.example", "ads-5", "local"]);
        assert_eq!(url_file_stem("https://h.example"), None);
    }

    #[test]
    fn list_urls_and_download_options() {
        let c = Config::parse(
            "f",
            "config hydradns\n\toption list_dir '/tmp/lists'\n\toption refresh_interval '12h'\n\toption max_list_size '8M'\n\toption cname_inspection '0'\n\
             config blocklist\n\toption name 'hagezi light'\n\toption url 'https://example.com/light.txt'\n\
             config blocklist\n\toption url 'http://lists.example/hosts'\n",
        )
        .unwrap();
        assert_eq!(c.refresh_interval, Duration::from_secs(12 * 3600));
        assert_eq!(c.max_list_size, 8 << 20);
        assert!(!c.cname_inspection);
        let saved = c.lists[0].saved.as_ref().unwrap();
        assert!(saved.starts_with("/tmp/lists"));
        assert!(saved.file_name().unwrap().to_str().unwrap().starts_with("hagezi_light-"), "{saved:?}");
        assert_eq!(c.lists[1].name, "hosts", "the URL's file name, as the docs say");
        assert_ne!(c.lists[0].saved, c.lists[1].saved);
        for (text, line) in [
            ("config blocklist\n\toption url 'ftp://x.example/l'\n", 2),
            (
                "config blocklist\n\toption url 'https://a.example/1'\nconfig blocklist\n\toption name 'x'\n\toption url 'https://a.example/1'\n",
                3,
            ),
        ] {
            let e = Config::parse("f", text).unwrap_err();
            assert_eq!(e.line, line, "{e}");
        }
    }
}
