//! What `hydradns lists` and the status show of each source: where it
//! comes from, its saved copy, when it was last checked and why it failed,
//! and how many entries it gave.
// nanoserde's DeJson derive expands to code clippy would write with `?`.
#![allow(clippy::question_mark)]

use super::*;

/// One source as `hydradns lists` shows it.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct ListInfo {
    /// Source name.
    pub name: String,
    /// `blocklist` or `allowlist`.
    pub kind: String,
    /// Download URL, if any.
    pub url: Option<String>,
    /// Files read (the saved copy for a download).
    pub files: Vec<String>,
    /// Block and allow entries.
    pub entries: u64,
    /// Lines skipped as unsupported or invalid.
    pub skipped: u64,
    /// Last good check, ISO 8601 UTC (downloads).
    pub last_success: Option<String>,
    /// Last error (downloads, or files that could not be read).
    pub last_error: Option<String>,
    /// `ETag` of the saved copy.
    pub etag: Option<String>,
    /// Size on disk.
    pub bytes: u64,
    /// What the owner should look at although the list loaded (entries
    /// covering a whole top-level domain).
    #[nserde(default)]
    pub warnings: Vec<String>,
}

/// Describes every source of `cfg` from disk (works with the gateway stopped).
pub fn describe(cfg: &Config) -> Vec<ListInfo> {
    describe_with(cfg, true)
}

/// [`describe`]; `count`: read every list to count its entries (a 1M-name
/// list takes a fraction of a second), else leave the counts at 0.
pub fn describe_with(cfg: &Config, count: bool) -> Vec<ListInfo> {
    cfg.lists
        .iter()
        .map(|src| {
            let kind = match src.kind {
                ListKind::Block => "blocklist",
                ListKind::Allow => "allowlist",
            };
            let mut files: Vec<PathBuf> = src.paths.clone();
            files.extend(src.saved.clone());
            let report = if count {
                Policy::load(std::slice::from_ref(src), cfg.block_mode, cfg.block_ttl).sources.remove(0)
            } else {
                crate::policy::SourceReport {
                    name: src.name.clone(),
                    kind: src.kind,
                    stats: Default::default(),
                    errors: Vec::new(),
                    pending: None,
                    warnings: Vec::new(),
                }
            };
            let meta = src.saved.as_deref().map(load_meta);
            let iso = |t: u64| (t > 0).then(|| crate::timetext::iso8601(t * 1000));
            ListInfo {
                name: src.name.clone(),
                kind: kind.into(),
                url: src.url.clone(),
                files: files.iter().map(|p| p.display().to_string()).collect(),
                entries: report.stats.blocks + report.stats.allows,
                skipped: report.stats.unsupported + report.stats.invalid,
                last_success: meta.as_ref().and_then(|m| iso(m.last_success_unix)),
                last_error: meta
                    .as_ref()
                    .and_then(|m| m.last_error.clone())
                    .or_else(|| report.errors.first().map(|e| crate::plaintext::plain(e)))
                    .or(report.pending),
                warnings: report.warnings,
                etag: meta.as_ref().and_then(|m| m.etag.clone()),
                // The saved copy is the daemon's: its size, not a link's target's.
                bytes: src
                    .paths
                    .iter()
                    .filter_map(|f| std::fs::metadata(f).ok())
                    .chain(src.saved.iter().filter_map(|f| std::fs::symlink_metadata(f).ok()))
                    .map(|m| m.len())
                    .sum(),
            }
        })
        .chain(describe_services(cfg))
        .collect()
}

/// `services_url`'s download beside the lists (kind `services`): its
/// services' domains as entries, and what the gateway falls back to while
/// there is no good copy. The counts come from the metadata written when
/// the copy was vetted, so `status` (run as root on every LuCI poll) does
/// not parse the catalogue; only a copy whose metadata lacks them (saved
/// by a version before the caps, or not the copy vetted) is read, under
/// the caps and in linear time.
fn describe_services(cfg: &Config) -> Option<ListInfo> {
    let (url, saved) = (cfg.services_url.as_ref()?, cfg.services_saved.as_ref()?);
    let meta = load_meta(saved);
    let size = crate::sys::open_regular(saved).and_then(|f| f.metadata()).map(|m| m.len()).ok();
    let vetted = meta.services > 0 && size == Some(meta.bytes) && meta.bytes <= crate::policy::services::MAX_BYTES;
    let (entries, skipped, dropped, fallback) = if vetted {
        (meta.entries, meta.skipped, meta.dropped, None)
    } else {
        match crate::policy::services::read_saved(saved) {
            Ok(cat) => (
                cat.services.iter().map(|s| s.domains.len() as u64).sum(),
                (cat.skipped_rules + cat.dropped_count) as u64,
                cat.dropped_count as u64,
                None,
            ),
            Err(e) => (0, 0, 0, Some(format!("{e}; the built-in catalogue is in use"))),
        }
    };
    let iso = |t: u64| (t > 0).then(|| crate::timetext::iso8601(t * 1000));
    Some(ListInfo {
        name: SERVICES_SOURCE.into(),
        kind: "services".into(),
        url: Some(url.clone()),
        files: vec![saved.display().to_string()],
        entries,
        skipped,
        last_success: iso(meta.last_success_unix),
        last_error: meta.last_error.clone().or(fallback.map(|e| crate::plaintext::plain(&e))),
        etag: meta.etag.clone(),
        bytes: size.unwrap_or(0),
        warnings: (dropped > 0)
            .then(|| format!("{dropped} services dropped as not conforming (the log names them)"))
            .into_iter()
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// `status` runs as root on every LuCI poll: a copy vetted by this
    /// version is described from its metadata, not parsed (the file here is
    /// no catalogue at all, so a parse would show it); one whose metadata
    /// does not vouch for it is read, and what it falls back to is said.
    #[test]
    fn a_vetted_catalogue_is_described_from_its_metadata() {
        let dir = std::env::temp_dir().join(format!("hydradns-describe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!(
            "config hydradns\n\toption list_dir '{}'\n\toption services_url 'https://s.example/services.json'\n",
            dir.display()
        );
        let cfg = Config::parse("/etc/config/hydradns", &text).unwrap();
        let saved = cfg.services_saved.clone().unwrap();
        std::fs::write(&saved, b"not parsed").unwrap();
        let write_meta = |m: &Meta| std::fs::write(meta_path(&saved), m.serialize_json()).unwrap();
        let vetted = Meta {
            url: cfg.services_url.clone().unwrap(),
            last_success_unix: 1_700_000_000,
            bytes: 10,
            entries: 7,
            skipped: 4,
            services: 2,
            dropped: 3,
            ..Meta::default()
        };
        write_meta(&vetted);
        let info = describe_services(&cfg).unwrap();
        assert_eq!((info.entries, info.skipped, info.last_error.as_deref()), (7, 4, None), "{info:?}");
        assert_eq!(info.warnings, ["3 services dropped as not conforming (the log names them)"]);
        for (what, meta) in [
            ("saved by a version without the caps", Meta { services: 0, ..vetted.clone() }),
            ("not the copy vetted", Meta { bytes: 11, ..vetted.clone() }),
        ] {
            write_meta(&meta);
            let info = describe_services(&cfg).unwrap();
            let error = info.last_error.unwrap_or_default();
            assert_eq!(info.entries, 0, "{what}");
            assert!(
                error.contains("not a services.json") && error.ends_with("the built-in catalogue is in use"),
                "{what}: {error}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
