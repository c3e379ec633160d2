//! Where the plain upstreams come from when the config names none: the
//! `nameserver` lines of `resolv_file`. On OpenWrt that is the WAN's
//! resolvers, which netifd writes to /tmp/resolv.conf.d/resolv.conf.auto
//! once the WAN is up (empty at boot, when the gateway starts) and rewrites
//! on every change. Like dnsmasq, the gateway follows the file by itself:
//! an inotify watch on its directory wakes the main thread only when the
//! file is written or replaced, never on a timer, so an idle router stays
//! idle.

use std::ffi::OsString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use smol::Async;

use crate::config::Config;

/// When the upstreams come from resolv_file, reads it again: the config
/// with the servers it names now, to swap in (the lists and the cache
/// stay), or `None` when nothing changed. Cheap (a small file), so the main
/// thread does it at once rather than queue it behind a download on the
/// lists thread.
pub fn follow(old: &Config) -> Option<Config> {
    let bootstrap_follows = old.bootstrap_auto && old.has_encrypted();
    if !old.upstreams_auto && !bootstrap_follows {
        return None;
    }
    let mut cfg = old.clone();
    if cfg.upstreams_auto {
        cfg.upstreams_from_resolv();
    } else {
        cfg.bootstrap_from_resolv();
    }
    (cfg.upstreams != old.upstreams || cfg.bootstrap != old.bootstrap).then_some(cfg)
}

/// Says which servers a [`follow`] installed, once they are in force.
pub fn announce(cfg: &Config) {
    if cfg.upstreams_auto {
        log::info!(
            "upstreams now {} (from {})",
            cfg.upstreams.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(", "),
            cfg.upstreams_from
        );
    } else {
        log::info!(
            "bootstrap resolvers now {}",
            cfg.bootstrap.iter().map(|u| u.to_string()).collect::<Vec<_>>().join(", ")
        );
    }
}

/// Room for a few events at once; a name is at most 255 bytes, and a burst
/// that does not fit is read on the next wake-up.
const EVENT_BUFFER: usize = 4096;

/// A watch on one file, through its directory: the file is usually replaced
/// by a rename, which a watch on the file itself would not follow.
pub struct Watch {
    /// The inotify descriptor, non-blocking, in the reactor.
    fd: Async<OwnedFd>,
    /// The file's name in the watched directory.
    name: OsString,
    /// The directory watched, for the log.
    dir: PathBuf,
}

impl Watch {
    /// Watches `path`, following symlinks to the file that really changes
    /// (/etc/resolv.conf → /tmp/resolv.conf → /tmp/resolv.conf.d/resolv.conf.auto).
    pub fn new(path: &Path) -> io::Result<Watch> {
        let real = std::fs::canonicalize(path).or_else(|_| {
            // Not there yet: its directory must be.
            let dir = path.parent().ok_or_else(|| io::Error::other("no directory"))?;
            let name = path.file_name().ok_or_else(|| io::Error::other("no file name"))?;
            Ok::<_, io::Error>(std::fs::canonicalize(dir)?.join(name))
        })?;
        let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
            return Err(io::Error::other("no directory"));
        };
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let events = WatchFlags::CLOSE_WRITE | WatchFlags::MOVED_TO | WatchFlags::DELETE | WatchFlags::CREATE;
        inotify::add_watch(&fd, dir, events)?;
        Ok(Watch { fd: Async::new(fd)?, name: name.to_owned(), dir: dir.to_path_buf() })
    }

    /// The directory watched.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Returns once the file has been written, replaced, created or removed.
    /// Events for the directory's other files are read and passed over.
    pub async fn changed(&self) -> io::Result<()> {
        let mut buf = [MaybeUninit::<u8>::uninit(); EVENT_BUFFER];
        loop {
            self.fd.readable().await?;
            let mut reader = inotify::Reader::new(self.fd.get_ref(), &mut buf);
            let mut ours = false;
            loop {
                match reader.next() {
                    Ok(event) => {
                        ours |= event.file_name().is_some_and(|n| n.to_bytes() == self.name.as_bytes());
                    }
                    Err(rustix::io::Errno::AGAIN) => break,
                    Err(e) => return Err(e.into()),
                }
            }
            if ours {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn changed_within(w: &Watch, limit: Duration) -> bool {
        use smol::future::FutureExt;
        smol::block_on(async { w.changed().await.is_ok() }.or(async {
            smol::Timer::after(limit).await;
            false
        }))
    }

    #[test]
    fn a_rename_over_the_file_wakes_the_watch_and_a_neighbour_does_not() {
        let dir = std::env::temp_dir().join(format!("hydradns-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("resolv.conf.auto");
        let link = dir.join("resolv.conf");
        std::fs::write(&file, "").unwrap();
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let w = Watch::new(&link).unwrap();
        std::fs::write(dir.join("other"), "x").unwrap();
        assert!(!changed_within(&w, Duration::from_millis(200)), "another file in the directory");
        // As netifd does: a temporary file renamed over the real one.
        std::fs::write(dir.join("resolv.conf.auto.tmp"), "nameserver 192.0.2.1\n").unwrap();
        std::fs::rename(dir.join("resolv.conf.auto.tmp"), &file).unwrap();
        assert!(changed_within(&w, Duration::from_secs(5)), "the rename");
        std::fs::write(&file, "nameserver 192.0.2.2\n").unwrap();
        assert!(changed_within(&w, Duration::from_secs(5)), "a write in place");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
