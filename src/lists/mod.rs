//! List sources: downloads, their saved copies on flash, refreshes, and the
//! policy built from them (the thread that swaps it in is `rebuild`; what
//! `hydradns lists` shows of each is `describe.rs`).
//!
//! A downloaded list lives as `<list_dir>/<name>-<hash>.list` with a `.meta`
//! beside it (validators, last success, last error, counts). At start the
//! gateway serves from these copies at once, since the router may boot
//! before its WAN is up, and fetches fresh ones in the background. A failed
//! download (timeout, HTTP error, TLS error, over `max_list_size`, binary
//! junk, no entries, or a list that shrank to a tenth) keeps the last good
//! copy and says so in the log; the other lists still update.
// nanoserde's DeJson derive expands to code clippy would write with `?`.
#![allow(clippy::question_mark)]

mod describe;
pub mod download;

pub use describe::{ListInfo, describe, describe_with};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nanoserde::{DeJson, SerJson};

use crate::config::{Config, ListKind, ListSource};
use crate::domain::for_each_label_rev;
use crate::plaintext::plain;
use crate::policy::Policy;
use crate::policy::formats::{ParseStats, parse_line};
use crate::policy::services;
use crate::sys::{unix_now, write_atomic};
use download::{Downloader, Fetched, Validators};

/// A list that once had this many entries may not shrink below a tenth of
/// it in one download: that is a broken mirror, not a list update.
const SHRINK_GUARD_MIN: u64 = 1000;
/// Bytes examined for NUL bytes when deciding a download is binary.
const BINARY_SNIFF: usize = 64 * 1024;

/// What is known about a downloaded list, kept beside its saved copy.
#[derive(Debug, Clone, Default, PartialEq, Eq, SerJson, DeJson)]
pub struct Meta {
    /// Where it comes from.
    #[nserde(default)]
    pub url: String,
    /// `ETag` of the saved copy.
    #[nserde(default)]
    pub etag: Option<String>,
    /// `Last-Modified` of the saved copy.
    #[nserde(default)]
    pub last_modified: Option<String>,
    /// Unix time of the last good check (200 or 304).
    #[nserde(default)]
    pub last_success_unix: u64,
    /// Unix time of the last attempt.
    #[nserde(default)]
    pub last_attempt_unix: u64,
    /// Why the last attempt failed, if it did.
    #[nserde(default)]
    pub last_error: Option<String>,
    /// Size of the saved copy.
    #[nserde(default)]
    pub bytes: u64,
    /// Block and allow entries in the saved copy.
    #[nserde(default)]
    pub entries: u64,
    /// Lines skipped as unsupported or invalid.
    #[nserde(default)]
    pub skipped: u64,
    /// Failed attempts since the last success, for the retry backoff.
    #[nserde(default)]
    pub failures: u64,
    /// Of a services.json: its services, counted when it was vetted under
    /// the catalogue's caps, so that `status` need not parse it (0: a list,
    /// or a copy saved by a version without the caps).
    #[nserde(default)]
    pub services: u64,
    /// Of a services.json: entries dropped as not conforming.
    #[nserde(default)]
    pub dropped: u64,
}

fn meta_path(saved: &Path) -> PathBuf {
    saved.with_extension("meta")
}

/// Metadata held in memory instead of on flash, one entry per downloaded
/// source at most: metadata that could not be written (`list_dir` not
/// writable, flash full), so that the retry backoff still holds (without it
/// every wake-up found "never tried" and downloaded again at once, hundreds
/// of times a second); and metadata whose only change is the time of a check
/// that found the list unchanged, which is not worth a flash write (issue
/// 46: an unchanged list writes nothing). After a restart the saved times
/// make such a list due at once: one more conditional request, nothing written.
static UNSAVED: std::sync::Mutex<Vec<(PathBuf, Meta)>> = std::sync::Mutex::new(Vec::new());

/// The most a metadata file may hold: a URL, two validators, an error
/// and a few numbers.
const META_MAX: u64 = 64 * 1024;

/// The metadata of a saved copy (empty if none or unreadable).
pub fn load_meta(saved: &Path) -> Meta {
    let path = meta_path(saved);
    if let Ok(held) = UNSAVED.lock()
        && let Some((_, m)) = held.iter().find(|(p, _)| *p == path)
    {
        return m.clone();
    }
    meta_on_disk(&path)
}

fn meta_on_disk(path: &Path) -> Meta {
    // Cut short (a power cut, a full disk) it reads as nothing known, not a
    // panic. It is in the daemon's directory, and `status` reads it as root
    // (LuCI's Overview, at every poll): no link followed, no FIFO waited
    // on, no more read than a metadata file takes, and its error shown as
    // text, whoever wrote it.
    let mut meta: Meta = crate::sys::read_unlinked_text(path, META_MAX)
        .ok()
        .filter(|s| crate::json::is_whole(s))
        .and_then(|s| Meta::deserialize_json(&s).ok())
        .unwrap_or_default();
    meta.last_error = meta.last_error.map(|e| plain(&e));
    meta
}

/// Whether two metadata differ in more than the times of checks and the
/// validators: a new ETag for the same bytes is kept in memory, and after a
/// restart the old one costs one full download that writes nothing.
fn differs_beyond_checks(a: &Meta, b: &Meta) -> bool {
    let strip =
        |m: &Meta| Meta { last_success_unix: 0, last_attempt_unix: 0, etag: None, last_modified: None, ..m.clone() };
    strip(a) != strip(b)
}

/// Writes a source's metadata when `new_copy` was saved or its state
/// changed (counts, an error, the failures); held in memory instead when
/// writing fails or only the checks' times and validators changed (see
/// [`UNSAVED`]). Whether it wrote.
fn save_meta(saved: &Path, meta: &Meta, new_copy: bool) -> std::io::Result<bool> {
    let path = meta_path(saved);
    let write = new_copy || !path.exists() || differs_beyond_checks(meta, &meta_on_disk(&path));
    let written = if write { write_atomic(&path, meta.serialize_json().as_bytes()).map(|()| true) } else { Ok(false) };
    if matches!(written, Ok(true)) {
        FLASH_FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Ok(mut held) = UNSAVED.lock() {
        held.retain(|(p, _)| *p != path);
        if !matches!(written, Ok(true)) {
            held.push((path, meta.clone()));
        }
    }
    written
}

/// Checks, piece by piece as it arrives, that a download is a list worth
/// replacing the old copy with.
#[derive(Debug, Default)]
pub struct Vetter {
    stats: ParseStats,
    /// An unfinished last line, carried to the next piece.
    partial: Vec<u8>,
    /// Bytes seen.
    bytes: u64,
    /// A NUL byte showed up early: binary data.
    binary: bool,
    /// A services.json, gathered whole to be parsed at the end, never
    /// past the catalogue's own cap (see [`Vetter::refusal`]).
    json: Option<Vec<u8>>,
}

impl Vetter {
    /// A vetter for a services.json (`option services_url`) rather than a list.
    pub fn services() -> Vetter {
        Vetter { json: Some(Vec::new()), ..Vetter::default() }
    }

    /// Feeds the next piece of the download.
    pub fn feed(&mut self, piece: &[u8]) {
        if let Some(json) = self.json.as_mut() {
            self.bytes += piece.len() as u64;
            if self.bytes <= services::MAX_BYTES {
                json.extend_from_slice(piece);
            }
            return;
        }
        if self.bytes < BINARY_SNIFF as u64 {
            let look = &piece[..piece.len().min(BINARY_SNIFF - self.bytes as usize)];
            self.binary |= look.contains(&0);
        }
        self.bytes += piece.len() as u64;
        let mut rest = piece;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            if self.partial.is_empty() {
                self.line(&rest[..nl]);
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&rest[..nl]);
                self.line(&line);
            }
            rest = &rest[nl + 1..];
        }
        // A line longer than any list rule is junk: keep only its start.
        if self.partial.len() < 4096 {
            self.partial.extend_from_slice(&rest[..rest.len().min(4096 - self.partial.len())]);
        }
    }

    /// Why the download must stop now, before any more of it is read or
    /// written: a services.json past its cap ([`services::MAX_BYTES`],
    /// far below `max_list_size`).
    pub fn refusal(&self) -> Option<String> {
        (self.json.is_some() && self.bytes > services::MAX_BYTES).then(services::over_size)
    }

    fn line(&mut self, line: &[u8]) {
        let mut valid = |_rule, name: &str| for_each_label_rev(name, |_| {}).is_some();
        match std::str::from_utf8(line) {
            Ok(text) => parse_line(text, &mut self.stats, &mut valid),
            Err(_) => {
                self.stats.lines += 1;
                self.stats.invalid += 1;
            }
        }
    }

    /// The verdict once the download is complete.
    pub fn finish(mut self, previous_entries: Option<u64>) -> Result<ParseStats, String> {
        if let Some(e) = self.refusal() {
            return Err(e);
        }
        if let Some(json) = self.json.take() {
            let text = std::str::from_utf8(&json).map_err(|_| "not UTF-8 text".to_string())?;
            let cat = services::Catalogue::parse(text)?;
            let domains: u64 = cat.services.iter().map(|s| s.domains.len() as u64).sum();
            if cat.services.is_empty() {
                return Err("no service with a usable rule".into());
            }
            for n in cat.drop_notes() {
                log::warn!("services_url: {n}");
            }
            // For a catalogue: services, their domains, rules skipped, entries dropped.
            return Ok(ParseStats {
                lines: cat.services.len() as u64,
                blocks: domains,
                unsupported: cat.skipped_rules as u64,
                invalid: cat.dropped_count as u64,
                ..ParseStats::default()
            });
        }
        if !self.partial.is_empty() {
            let last = std::mem::take(&mut self.partial);
            self.line(&last);
        }
        if self.bytes == 0 {
            return Err("empty download".into());
        }
        if self.binary {
            return Err("binary data, not a list".into());
        }
        let stats = self.stats;
        let entries = stats.blocks + stats.allows;
        if entries == 0 {
            return Err(format!("no entries in {} lines", stats.lines));
        }
        if stats.invalid > entries {
            return Err(format!("mostly malformed ({} invalid lines, {entries} entries)", stats.invalid));
        }
        if let Some(prev) = previous_entries
            && prev >= SHRINK_GUARD_MIN
            && entries * 10 < prev
        {
            return Err(format!("shrank from {prev} to {entries} entries"));
        }
        Ok(stats)
    }
}

/// Checks a whole download at once (see [`Vetter`]).
pub fn vet(bytes: &[u8], previous_entries: Option<u64>) -> Result<ParseStats, String> {
    let mut v = Vetter::default();
    v.feed(bytes);
    v.finish(previous_entries)
}

/// How one source's refresh went.
#[derive(Debug, Clone, PartialEq, Eq, SerJson, DeJson)]
pub struct Refreshed {
    /// Source name.
    pub name: String,
    /// `updated`, `not-modified` or `failed`.
    pub status: String,
    /// Entries in the copy now in use (0 if there is none).
    pub entries: u64,
    /// Bytes of the copy now in use.
    pub bytes: u64,
    /// Why it failed.
    pub error: Option<String>,
}

/// Downloads one source and replaces its saved copy if the download is good.
pub fn refresh_source(dl: Result<&Downloader, &str>, src: &ListSource) -> Option<Refreshed> {
    let (url, saved) = (src.url.as_ref()?, src.saved.as_ref()?);
    let mut meta = load_meta(saved);
    let have_copy = saved.exists() && meta.url == *url;
    if !have_copy {
        meta = Meta { url: url.clone(), ..Meta::default() };
    }
    meta.last_attempt_unix = unix_now();
    let have = if have_copy {
        Validators { etag: meta.etag.clone(), last_modified: meta.last_modified.clone() }
    } else {
        Validators::default()
    };
    let result = match dl {
        Err(why) => Err(why.to_string()),
        Ok(dl) => download_into(dl, url, &have, saved, have_copy.then_some(meta.entries)),
    };
    let same = matches!(result, Ok(Downloaded::Same(..)));
    let status = match result {
        Ok(Downloaded::NotModified) => {
            meta.last_success_unix = meta.last_attempt_unix;
            meta.last_error = None;
            meta.failures = 0;
            "not-modified"
        }
        // The same bytes (perhaps under new validators, which are kept so
        // the next check can be a 304): only the metadata may need writing.
        Ok(Downloaded::Same(bytes, stats, validators)) | Ok(Downloaded::New(bytes, stats, validators)) => {
            meta.last_success_unix = meta.last_attempt_unix;
            meta.last_error = None;
            meta.failures = 0;
            meta.etag = validators.etag;
            meta.last_modified = validators.last_modified;
            meta.bytes = bytes;
            meta.entries = stats.blocks + stats.allows;
            meta.skipped = stats.unsupported + stats.invalid;
            if saved.extension().is_some_and(|e| e == "json") {
                (meta.services, meta.dropped) = (stats.lines, stats.invalid);
            }
            // Unchanged content is reported as such: nothing to rebuild.
            if same { "not-modified" } else { "updated" }
        }
        Err(e) => {
            meta.last_error = Some(plain(&e));
            meta.failures += 1;
            "failed"
        }
    };
    if let Err(e) = save_meta(saved, &meta, status == "updated") {
        log::warn!("list '{}': cannot save its metadata: {e}", src.name);
    }
    let copy = saved.exists();
    Some(Refreshed {
        name: src.name.clone(),
        status: status.into(),
        entries: if copy { meta.entries } else { 0 },
        bytes: if copy { meta.bytes } else { 0 },
        error: meta.last_error.clone(),
    })
}

/// What a download brought.
enum Downloaded {
    /// 304: the saved copy is current.
    NotModified,
    /// 200 with the saved copy's very bytes: nothing written. Its size,
    /// counts and validators (perhaps new, or lost with the metadata).
    Same(u64, ParseStats, Validators),
    /// A new copy, saved: its size, counts and validators.
    New(u64, ParseStats, Validators),
}

/// A download on its way to `list_dir`, compared with the saved copy as it
/// arrives: while it matches byte for byte nothing is written, so a list
/// served unchanged without a 304 (no validators, a new ETag for the same
/// bytes) costs no flash at all. At the first difference the matching part
/// is copied from the saved file into the temporary one and the rest follows
/// the download. Reading the old copy costs no wear; writing it would.
struct Incoming<'a> {
    saved: &'a Path,
    tmp: PathBuf,
    /// The saved copy, read alongside while the download still matches it.
    old: Option<std::io::BufReader<std::fs::File>>,
    /// Bytes of the download that matched the saved copy so far.
    matched: u64,
    /// The temporary file, once the download differs.
    file: Option<std::fs::File>,
    /// Reused buffer for the saved copy's bytes.
    buf: Vec<u8>,
}

impl<'a> Incoming<'a> {
    fn new(saved: &'a Path) -> Incoming<'a> {
        let mut tmp = saved.as_os_str().to_owned();
        tmp.push(".tmp");
        let old = crate::sys::open_unlinked(saved).ok().map(|f| std::io::BufReader::with_capacity(64 * 1024, f));
        Incoming { saved, tmp: PathBuf::from(tmp), old, matched: 0, file: None, buf: Vec::new() }
    }

    fn feed(&mut self, piece: &[u8]) -> Result<(), String> {
        use std::io::{Read, Write};
        if let Some(old) = self.old.as_mut() {
            self.buf.resize(piece.len(), 0);
            if old.read_exact(&mut self.buf).is_ok() && self.buf == piece {
                self.matched += piece.len() as u64;
                return Ok(());
            }
            self.diverge()?;
        }
        let file = match self.file.as_mut() {
            Some(f) => f,
            None => self.diverge()?,
        };
        file.write_all(piece).map_err(|e| format!("writing {}: {e}", self.tmp.display()))
    }

    /// Starts the temporary file with the part of the saved copy that matched.
    fn diverge(&mut self) -> Result<&mut std::fs::File, String> {
        use std::io::Read;
        self.old = None;
        let mut file =
            crate::sys::create_fresh(&self.tmp).map_err(|e| format!("creating {}: {e}", self.tmp.display()))?;
        if self.matched > 0 {
            let old =
                crate::sys::open_unlinked(self.saved).map_err(|e| format!("reading {}: {e}", self.saved.display()))?;
            let copied = std::io::copy(&mut old.take(self.matched), &mut file)
                .map_err(|e| format!("writing {}: {e}", self.tmp.display()))?;
            if copied != self.matched {
                return Err(format!("{} changed while read", self.saved.display()));
            }
        }
        Ok(self.file.insert(file))
    }

    /// The download is complete: `true` when it equals the saved copy.
    fn same(&mut self) -> Result<bool, String> {
        use std::io::Read;
        if let Some(old) = self.old.as_mut() {
            let mut one = [0u8; 1];
            if matches!(old.read(&mut one), Ok(0)) {
                return Ok(true);
            }
            // The saved copy is longer: the download is its prefix, not it.
            self.diverge()?;
        }
        if self.file.is_none() {
            // An empty download with no saved copy; vetting refuses it anyway.
            self.diverge()?;
        }
        Ok(false)
    }

    /// fsync, rename over the saved copy, fsync the directory.
    fn save(mut self, dir: &Path) -> Result<(), String> {
        let file = self.file.take().ok_or("nothing to save")?;
        file.sync_all().map_err(|e| format!("fsync {}: {e}", self.tmp.display()))?;
        std::fs::rename(&self.tmp, self.saved).map_err(|e| format!("saving {}: {e}", self.saved.display()))?;
        FLASH_FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// Downloads `url`, checking it as it arrives; a download that passes and
/// differs from `saved` goes into a temporary file renamed over `saved`.
fn download_into(
    dl: &Downloader,
    url: &str,
    have: &Validators,
    saved: &Path,
    previous_entries: Option<u64>,
) -> Result<Downloaded, String> {
    let dir = saved.parent().ok_or("list_dir has no parent")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut incoming = Incoming::new(saved);
    let tmp = incoming.tmp.clone();
    let mut vetter =
        if saved.extension().is_some_and(|e| e == "json") { Vetter::services() } else { Vetter::default() };
    let mut sink = |piece: &[u8]| {
        vetter.feed(piece);
        if let Some(e) = vetter.refusal() {
            return Err(e);
        }
        incoming.feed(piece)
    };
    let outcome = dl.fetch(url, have, &mut sink).and_then(|fetched| match fetched {
        Fetched::NotModified => Ok(Downloaded::NotModified),
        Fetched::Body(validators) => {
            let bytes = vetter.bytes;
            let stats = std::mem::take(&mut vetter).finish(previous_entries)?;
            if incoming.same()? {
                return Ok(Downloaded::Same(bytes, stats, validators));
            }
            incoming.save(dir)?;
            Ok(Downloaded::New(bytes, stats, validators))
        }
    });
    if !matches!(outcome, Ok(Downloaded::New(..))) {
        let _ = std::fs::remove_file(&tmp);
    }
    outcome
}

/// Which downloaded sources a refresh fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Every one (`hydradns update`, SIGHUP).
    All,
    /// Those whose time has come (the schedule, with its retry backoff).
    Due,
    /// Those with no good copy or whose last try failed: the network just
    /// changed, so the reason they failed may be gone.
    Failed,
}

/// Refreshes the downloaded sources of `cfg` that `which` selects,
/// logging one line per source.
pub fn refresh_all(cfg: &Config, which: Which) -> Vec<Refreshed> {
    let chosen = |s: &&ListSource| match which {
        Which::All => true,
        Which::Due => is_due(cfg, s),
        Which::Failed => s.saved.as_deref().is_some_and(|p| failed(p, &load_meta(p))),
    };
    let all = downloaded(cfg);
    let sources: Vec<&ListSource> = all.iter().filter(chosen).collect();
    if sources.is_empty() {
        return Vec::new();
    }
    let dl = Downloader::new(&cfg.ca_file, cfg.max_list_size, cfg.download_timeout);
    let results: Vec<Refreshed> =
        sources.into_iter().filter_map(|src| refresh_source(dl.as_ref().map_err(String::as_str), src)).collect();
    for r in &results {
        match (r.status.as_str(), &r.error) {
            ("failed", Some(e)) if r.bytes > 0 => {
                log::warn!("list '{}': download failed ({e}); keeping the saved copy ({} entries)", r.name, r.entries)
            }
            ("failed", Some(e)) => log::warn!("list '{}': download failed ({e}); no copy yet", r.name),
            (status, _) => log::info!("list '{}': {status}, {} entries, {} KiB", r.name, r.entries, r.bytes / 1024),
        }
    }
    results
}

/// Name of the download of `option services_url`, in the log and `hydradns update`.
pub const SERVICES_SOURCE: &str = "services";

/// Every download of `cfg`: the lists with a `url`, then `services_url`'s
/// services.json (refreshed with them, kept the same way).
fn downloaded(cfg: &Config) -> Vec<ListSource> {
    let mut all: Vec<ListSource> = cfg.lists.iter().filter(|s| s.url.is_some()).cloned().collect();
    if let (Some(url), Some(saved)) = (&cfg.services_url, &cfg.services_saved) {
        all.push(ListSource {
            name: SERVICES_SOURCE.into(),
            kind: ListKind::Block,
            paths: Vec::new(),
            domains: Vec::new(),
            origin: cfg.source.clone(),
            url: Some(url.clone()),
            saved: Some(saved.clone()),
            groups: Vec::new(),
        });
    }
    all
}

/// Loads lists for `cfg` and logs how each source fared.
pub fn load_policy(cfg: &Config) -> Policy {
    let started = Instant::now();
    let policy = Policy::build(cfg);
    for w in &policy.warnings {
        log::warn!("{w}");
    }
    for line in policy.summary_lines() {
        log::info!("{line}");
    }
    for line in policy.warning_lines() {
        log::warn!("{line}");
    }
    log::info!("lists loaded in {} ms", started.elapsed().as_millis());
    policy
}

/// First retry after a failed download; doubles with each further failure
/// up to the refresh interval, so a dead list host is not hammered.
const RETRY_AFTER: u64 = 60;

/// A downloaded source with no good copy: never saved, or its last try failed.
fn failed(saved: &Path, meta: &Meta) -> bool {
    meta.last_error.is_some() || !saved.exists()
}

/// When a downloaded source is next due (Unix time): an interval after its
/// last success, give or take 10 % so routers do not all call at once; after
/// a failure, a backoff from the last attempt; right away if never tried.
fn due_unix(cfg: &Config, saved: &Path) -> Option<u64> {
    let meta = load_meta(saved);
    let interval = cfg.refresh_interval.as_secs();
    let cap = if interval == 0 { 6 * 3600 } else { interval };
    if failed(saved, &meta) {
        if !saved.exists() && meta.last_attempt_unix == 0 {
            return Some(0);
        }
        let backoff = RETRY_AFTER.saturating_mul(1 << meta.failures.min(20)).min(cap);
        return Some(meta.last_attempt_unix + backoff);
    }
    if interval == 0 {
        return None;
    }
    let mut b = [0u8; 8];
    let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    let jitter = u64::from_ne_bytes(b) % (interval / 5 + 1);
    Some((meta.last_success_unix + interval + jitter).saturating_sub(interval / 10))
}

fn is_due(cfg: &Config, src: &ListSource) -> bool {
    src.saved.as_deref().filter(|_| src.url.is_some()).and_then(|s| due_unix(cfg, s)).is_some_and(|d| d <= unix_now())
}

/// When the lists thread should next wake for a scheduled refresh.
pub fn next_refresh(cfg: &Config) -> Option<Instant> {
    let due = downloaded(cfg).iter().filter_map(|s| due_unix(cfg, s.saved.as_deref()?)).min()?;
    Some(Instant::now() + Duration::from_secs(due.saturating_sub(unix_now())))
}

/// Bytes the lists thread wrote to flash since start (its `write_bytes`:
/// it writes only `list_dir`), for `stats` and the metrics: the owner sees the wear.
pub static FLASH_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Files the lists thread wrote to `list_dir` since start: each saved copy
/// or metadata file replaced.
pub static FLASH_FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vetting_downloads() {
        assert!(vet(b"ads.example\n0.0.0.0 b.example\n", None).is_ok());
        assert_eq!(vet(b"", None).unwrap_err(), "empty download");
        assert_eq!(vet(b"ads.example\n\x00\x01\x02", None).unwrap_err(), "binary data, not a list");
        assert!(vet(b"# only comments\n! here\n", None).unwrap_err().starts_with("no entries"));
        let html = b"<html>\n<head><title>Not here</title></head>\n<body>moved</body>\n</html>\n";
        assert!(vet(html, None).is_err(), "an error page is not a list");
        let small: Vec<u8> = (0..50).flat_map(|i| format!("n{i}.example\n").into_bytes()).collect();
        assert!(vet(&small, Some(100_000)).unwrap_err().starts_with("shrank from 100000 to 50"));
        assert!(vet(&small, Some(400)).is_ok(), "small lists may shrink");
    }

    #[test]
    fn vetting_in_pieces_matches_vetting_whole() {
        let body: Vec<u8> = (0..3000).flat_map(|i| format!("0.0.0.0 host{i}.example\n# c\n").into_bytes()).collect();
        let whole = vet(&body, None).unwrap();
        for piece in [1, 7, 100, 4096] {
            let mut v = Vetter::default();
            body.chunks(piece).for_each(|c| v.feed(c));
            assert_eq!(v.finish(None).unwrap(), whole, "pieces of {piece}");
        }
        let mut v = Vetter::default();
        v.feed(b"no-newline-at-end.example");
        assert_eq!(v.finish(None).unwrap().blocks, 1);
    }

    /// A download equal to the saved copy, in pieces of any size, writes
    /// nothing; one that differs anywhere (middle, longer, shorter) is saved whole.
    #[test]
    fn an_unchanged_download_writes_nothing() {
        let dir = std::env::temp_dir().join(format!("hydradns-incoming-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let saved = dir.join("l.list");
        let body: Vec<u8> = (0..5000).flat_map(|i| format!("host{i}.example\n").into_bytes()).collect();
        let feed = |new: &[u8], piece: usize| {
            std::fs::write(&saved, &body).unwrap();
            let mut inc = Incoming::new(&saved);
            new.chunks(piece).for_each(|c| inc.feed(c).unwrap());
            let same = inc.same().unwrap();
            let tmp_made = inc.tmp.exists();
            if !same {
                inc.save(&dir).unwrap();
            }
            (same, tmp_made)
        };
        for piece in [1, 1000, 64 * 1024, 1 << 20] {
            assert_eq!(feed(&body, piece), (true, false), "pieces of {piece}");
        }
        let mut middle = body.clone();
        middle[30_000] = b'X';
        let longer = [body.as_slice(), b"more.example\n"].concat();
        let shorter = &body[..body.len() - 10];
        for (what, new) in [("middle", middle.as_slice()), ("longer", &longer), ("shorter", shorter)] {
            for piece in [7, 4096] {
                assert_eq!(feed(new, piece), (false, true), "{what} {piece}");
                assert_eq!(std::fs::read(&saved).unwrap(), new, "{what} {piece}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 58: a services.json was buffered up to `max_list_size` (64 MiB
    /// shipped) before it was parsed; now the download stops at the
    /// catalogue's own cap, and no more than that is ever held.
    #[test]
    fn a_catalogue_download_stops_at_its_cap() {
        let piece = vec![b' '; 64 * 1024];
        let mut v = Vetter::services();
        for _ in 0..services::MAX_BYTES / piece.len() as u64 {
            v.feed(&piece);
            assert_eq!(v.refusal(), None);
        }
        v.feed(b"x");
        assert_eq!(v.refusal().as_deref(), Some("larger than 4 MiB, the cap for a catalogue"));
        v.feed(&piece);
        assert_eq!(v.json.as_ref().map(Vec::len), Some(services::MAX_BYTES as usize));
        assert_eq!(v.finish(None).unwrap_err(), "larger than 4 MiB, the cap for a catalogue");
        // A list is bounded by max_list_size alone.
        let mut list = Vetter::default();
        (0..100).for_each(|_| list.feed(&piece));
        assert_eq!(list.refusal(), None);
    }

    #[test]
    fn a_list_dir_that_cannot_be_written_still_backs_off() {
        // A file where the directory should be: nothing can be written under it.
        let blocker = std::env::temp_dir().join(format!("hydradns-ro-{}", std::process::id()));
        std::fs::write(&blocker, b"not a directory").unwrap();
        let mut cfg = Config::builtin();
        let src = ListSource {
            name: "l".into(),
            kind: ListKind::Block,
            paths: Vec::new(),
            domains: Vec::new(),
            origin: "t:1".into(),
            url: Some("https://lists.example/l.txt".into()),
            saved: Some(blocker.join("l.list")),
            groups: Vec::new(),
        };
        cfg.lists.push(src.clone());
        assert!(is_due(&cfg, &src), "never tried: due at once");
        let r = refresh_source(Err("offline"), &src).unwrap();
        assert_eq!(r.status, "failed");
        assert!(!is_due(&cfg, &src), "after a failure it waits, though its metadata could not be written");
        assert_eq!(load_meta(src.saved.as_ref().unwrap()).failures, 1);
        std::fs::remove_file(&blocker).unwrap();
    }
}

#[cfg(test)]
mod meta_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A `.meta` cut short anywhere (one with a member this version does not
    /// know included) reads as nothing known: nanoserde alone panicked.
    #[test]
    fn a_meta_file_cut_short_reads_as_nothing_known() {
        let dir = std::env::temp_dir().join(format!("hydradns-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let saved = dir.join("l.txt");
        let m = Meta { url: "https://x.example/l.txt".into(), etag: Some("\"abc\"".into()), ..Meta::default() };
        let text = m.serialize_json().replacen('{', "{\"later\":{\"a\":[1,\"x\"]},", 1);
        for n in 0..text.len() {
            std::fs::write(meta_path(&saved), &text[..n]).unwrap();
            assert_eq!(load_meta(&saved), Meta::default(), "{}", &text[..n]);
        }
        std::fs::write(meta_path(&saved), &text).unwrap();
        assert_eq!(load_meta(&saved).etag.as_deref(), Some("\"abc\""));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
