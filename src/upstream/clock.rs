//! Whether the clock can be trusted with certificates' dates.
//!
//! A router without a battery boots with the clock of its last config
//! change, and a certificate is then "not valid yet" or "expired" until NTP
//! sets the time — but NTP needs DNS to find its servers. Until the clock
//! is known good (`time_synced_file` exists, which OpenWrt's ntpd hotplug
//! writes, or `time_check '0'`), names under `plain_domain` (the init
//! script passes `system.ntp.server`) are resolved in plain by the
//! bootstrap resolvers, so NTP can sync. Nothing else changes: encrypted
//! upstreams still verify everything, and what fails goes to `fallback`
//! (if any) as any failure does.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Whether the clock is known good; once it is, it stays so.
#[derive(Debug)]
pub struct ClockGate {
    /// The marker (empty: the clock is trusted).
    marker: PathBuf,
    synced: AtomicBool,
    /// Unix second of the last look at the marker: one `stat` a second at most.
    checked: AtomicU64,
}

impl ClockGate {
    /// A gate waiting for `marker` (none if empty).
    pub fn new(marker: &Path) -> ClockGate {
        let synced = marker.as_os_str().is_empty() || marker.exists();
        ClockGate { marker: marker.to_path_buf(), synced: AtomicBool::new(synced), checked: AtomicU64::new(0) }
    }

    /// The marker this gate waits for.
    pub fn marker(&self) -> &Path {
        &self.marker
    }

    /// Whether the clock is known good now.
    pub fn synced(&self) -> bool {
        if self.synced.load(Relaxed) {
            return true;
        }
        let now = crate::sys::unix_now();
        let last = self.checked.load(Relaxed);
        if now != last && self.checked.compare_exchange(last, now, Relaxed, Relaxed).is_ok() && self.marker.exists() {
            self.synced.store(true, Relaxed);
            log::info!(
                "the clock is synchronised ({} exists): every name now goes to the upstreams",
                self.marker.display()
            );
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_marker_then_stays_synced() {
        let dir = std::env::temp_dir().join(format!("hydradns-clock-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let marker = dir.join("ntpd-synced");
        let _ = std::fs::remove_file(&marker);
        let gate = ClockGate::new(&marker);
        assert!(!gate.synced());
        std::fs::write(&marker, b"").unwrap();
        gate.checked.store(0, Relaxed);
        assert!(gate.synced());
        std::fs::remove_file(&marker).unwrap();
        assert!(gate.synced(), "once known good, it stays so");
        assert!(ClockGate::new(Path::new("")).synced(), "no marker: trusted");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
