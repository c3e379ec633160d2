//! Giving up root. procd starts the gateway as root so that it can bind port
//! 53 on any OpenWrt image (procd hands out capabilities only through ujail,
//! which not every image has); the gateway binds its sockets, prepares the
//! directories it writes to, then becomes an unprivileged user with no
//! capabilities before any thread of its own exists, as dnsmasq and Unbound
//! do. Everything that parses input from the network runs after that.
//!
//! The user: `run --user`, else `option user`, else the package's user
//! `hydradns`, else `nobody`. `root` keeps root, for setups that want it.

use std::path::Path;

use crate::config::Config;

/// The package's own user, created by the package's install script.
pub const PACKAGE_USER: &str = "hydradns";
/// Used when the package's user does not exist (a binary installed by hand).
pub const FALLBACK_USER: &str = "nobody";

const PASSWD: &str = "/etc/passwd";

/// A user to run as: the name, for the log, and the ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id: the only group kept.
    pub gid: u32,
}

/// `name`'s entry in a passwd file's text (`name:x:uid:gid:...`).
fn find(passwd: &str, name: &str) -> Option<Account> {
    passwd.lines().find_map(|line| {
        let mut f = line.split(':');
        if f.next()? != name {
            return None;
        }
        let (_, uid, gid) = (f.next()?, f.next()?.parse().ok()?, f.next()?.parse().ok()?);
        Some(Account { name: name.to_string(), uid, gid })
    })
}

/// Resolves the user to run as from `passwd`: `wanted` if given (it must
/// exist), else the package's user, else `nobody`.
fn choose_in(passwd: &str, wanted: Option<&str>) -> Result<Account, String> {
    match wanted {
        Some(name) => find(passwd, name).ok_or_else(|| format!("user '{name}' does not exist in {PASSWD}")),
        None => find(passwd, PACKAGE_USER).or_else(|| find(passwd, FALLBACK_USER)).ok_or_else(|| {
            format!("neither '{PACKAGE_USER}' nor '{FALLBACK_USER}' exists in {PASSWD}: set option user")
        }),
    }
}

/// The user to run as, read from /etc/passwd (see [`choose_in`]).
pub fn choose(wanted: Option<&str>) -> Result<Account, String> {
    let passwd = std::fs::read_to_string(PASSWD).map_err(|e| format!("cannot read {PASSWD}: {e}"))?;
    choose_in(&passwd, wanted)
}

/// Creates the missing directories on the way to `dir` with `mode` and
/// gives the ones it created to `account`, so the gateway can write there
/// once it is that user. Directories that already exist are left as they
/// are: they may be shared (`/tmp`), and the package's own are the init
/// script's to own.
pub fn prepare_dir(dir: &Path, account: &Account, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err()) {
        missing.push(d);
        at = d.parent();
    }
    for d in missing.into_iter().rev() {
        std::fs::DirBuilder::new().mode(mode).create(d)?;
        // The umask may have taken bits away; none is added beyond `mode`.
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode))?;
        std::os::unix::fs::lchown(d, Some(account.uid), Some(account.gid))?;
    }
    Ok(())
}

/// Whether `account` (without supplementary groups, as [`drop_to`] leaves
/// it) may create files in the directory `meta` describes.
fn writable_by(meta: &std::fs::Metadata, account: &Account) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode();
    let bits = if meta.uid() == account.uid {
        mode >> 6
    } else if meta.gid() == account.gid {
        mode >> 3
    } else {
        mode
    };
    bits & 0o3 == 0o3
}

/// Becomes `account` for good: no supplementary groups, its primary group,
/// its user id as real, effective and saved id, and so no capabilities.
/// Uses the C library's calls, which apply to every thread of the process
/// (the kernel's apply to one), then checks that root cannot come back.
pub fn drop_to(account: &Account) -> Result<(), String> {
    // The kernel clears a parent-death signal when the ids change: a
    // command that is to end with its caller (sys::die_with_parent) must
    // still, as the user it becomes.
    let death = rustix::process::parent_process_death_signal().ok().flatten();
    let parent = rustix::process::getppid();
    // SAFETY: setgroups with a count of 0 reads no memory; setgid and setuid
    // take plain integers. All three only change the process's credentials.
    #[allow(unsafe_code)]
    let failed = unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            Some("setgroups")
        } else if libc::setgid(account.gid) != 0 {
            Some("setgid")
        } else if libc::setuid(account.uid) != 0 {
            Some("setuid")
        } else {
            None
        }
    };
    if let Some(call) = failed {
        return Err(format!("cannot become user '{}' ({call}: {})", account.name, std::io::Error::last_os_error()));
    }
    let ids = (rustix::process::getuid().as_raw(), rustix::process::geteuid().as_raw());
    let gids = (rustix::process::getgid().as_raw(), rustix::process::getegid().as_raw());
    if ids != (account.uid, account.uid) || gids != (account.gid, account.gid) {
        return Err(format!("still uid {ids:?} gid {gids:?} after becoming '{}'", account.name));
    }
    if account.uid != 0 {
        // SAFETY: as above; this call must fail, and changes nothing if it does.
        #[allow(unsafe_code)]
        let regained = unsafe { libc::setuid(0) } == 0;
        if regained {
            return Err("root could be regained after dropping it".into());
        }
    }
    // No exec is planned, but should one ever happen it gains nothing.
    let _ = rustix::thread::set_no_new_privs(true);
    if death.is_some() {
        let _ = rustix::process::set_parent_process_death_signal(death);
        if rustix::process::getppid() != parent {
            std::process::exit(137);
        }
    }
    Ok(())
}

/// Run as root on the files in `dir` when another user owns it (the
/// gateway's directories: its query log, its lists), becomes that user
/// first, for good: whatever that user put there (a link to a file of
/// root's, a FIFO) is then read with no more rights than it has already.
/// Nothing is done when not root, when root owns `dir`, or when there is
/// nothing at `dir`.
pub fn become_owner_of(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return Ok(()) };
    if meta.uid() == 0 {
        return Ok(());
    }
    drop_to(&Account { name: format!("uid {}", meta.uid()), uid: meta.uid(), gid: meta.gid() })
        .map_err(|e| format!("{e}: not reading {} as root", dir.display()))
}

/// Who besides root may act (pause, update, commit) through the control
/// socket of a gateway running as `account`: that user, unless it is the
/// `nobody` the gateway fell back to without being asked, which other
/// services share: then root alone.
pub fn acting_uid(account: &Account, asked: bool) -> Option<u32> {
    (asked || account.name != FALLBACK_USER).then_some(account.uid)
}

/// Run by the gateway once its sockets are bound: started as root, it
/// becomes the user `wanted` names (see the module doc) after creating the
/// directories it writes to; started as anyone else, it stays who it is.
/// Returns the uid besides root that may act through the control socket
/// ([`acting_uid`]).
pub fn settle(cfg: &Config, wanted: Option<&str>) -> Result<Option<u32>, String> {
    let me = rustix::process::geteuid().as_raw();
    if me != 0 {
        if let Some(name) = wanted.filter(|&n| choose(Some(n)).map_or(true, |a| a.uid != me)) {
            log::warn!("not started as root: running as uid {me}, not as user '{name}'");
        }
        return Ok(Some(me));
    }
    let account = choose(wanted)?;
    if account.uid == 0 {
        log::warn!("running as root, as option user says");
        return Ok(Some(0));
    }
    let acting = acting_uid(&account, wanted.is_some());
    if acting.is_none() {
        log::warn!(
            "no user '{PACKAGE_USER}': running as '{FALLBACK_USER}', which other services share, so only root may \
             pause, update or commit through the control socket (set option user to choose)"
        );
    }
    // The query log's directories hold every device's DNS history, which
    // no other local account may list (issue 49; again in issue 58, after
    // these were made 0755 here, before the drop).
    let dirs = [
        (
            "the control socket",
            cfg.control_socket.parent().filter(|_| !cfg.control_socket.as_os_str().is_empty()),
            0o755,
        ),
        ("downloaded lists", Some(cfg.list_dir.as_path()).filter(|_| cfg.lists.iter().any(|l| l.url.is_some())), 0o755),
        ("the query log", cfg.querylog.path.parent().filter(|_| cfg.querylog.enabled), 0o700),
        ("the query log's flash copy", cfg.querylog.flash_path.parent().filter(|_| cfg.querylog.enabled), 0o700),
    ];
    for (what, dir, mode) in dirs.into_iter().filter_map(|(w, d, m)| Some((w, d?, m))) {
        if let Err(e) = prepare_dir(dir, &account, mode) {
            log::warn!("cannot create {} for user '{}': {e}", dir.display(), account.name);
        } else if let Ok(meta) = std::fs::metadata(dir)
            && !writable_by(&meta, &account)
        {
            // Typically left by an earlier run as root, or made by hand.
            log::warn!(
                "{dir} (for {what}) belongs to uid {owner} (mode {mode:o}): user '{name}', which the gateway \
                 becomes once its sockets are bound, cannot write there; `chown -R {name} {dir}` (or remove it, \
                 to have it made anew), or choose another directory",
                dir = dir.display(),
                owner = std::os::unix::fs::MetadataExt::uid(&meta),
                mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777,
                name = account.name,
            );
        }
    }
    drop_to(&account)?;
    log::info!("running as user '{}' (uid {}, gid {}), without privileges", account.name, account.uid, account.gid);
    Ok(acting)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD_TEXT: &str = "root:x:0:0:root:/root:/bin/ash\n\
        dnsmasq:x:453:453:dnsmasq:/var/run/dnsmasq:/bin/false\n\
        nobody:*:65534:65534:nobody:/var:/bin/false\n\
        broken:x:notanumber:1::/:/bin/false\n";

    #[test]
    fn the_package_user_then_nobody() {
        let with = format!("{PASSWD_TEXT}hydradns:x:32768:32768:hydradns:/var/run/hydradns:/bin/false\n");
        assert_eq!(choose_in(&with, None).unwrap(), Account { name: "hydradns".into(), uid: 32768, gid: 32768 });
        assert_eq!(choose_in(PASSWD_TEXT, None).unwrap(), Account { name: "nobody".into(), uid: 65534, gid: 65534 });
        assert!(choose_in("root:x:0:0::/:/bin/sh\n", None).unwrap_err().contains("set option user"));
    }

    /// Every `nobody` service could pause the gateway when it fell back to
    /// that user; asked for by name, or its own user, it is trusted.
    #[test]
    fn a_nobody_fallen_back_to_may_not_act() {
        let nobody = choose_in(PASSWD_TEXT, None).unwrap();
        assert_eq!(acting_uid(&nobody, false), None);
        assert_eq!(acting_uid(&nobody, true), Some(65534));
        let own = Account { name: PACKAGE_USER.into(), uid: 32768, gid: 32768 };
        assert_eq!(acting_uid(&own, false), Some(32768));
    }

    #[test]
    fn a_named_user_must_exist() {
        assert_eq!(choose_in(PASSWD_TEXT, Some("dnsmasq")).unwrap().uid, 453);
        assert_eq!(choose_in(PASSWD_TEXT, Some("root")).unwrap().uid, 0);
        assert!(choose_in(PASSWD_TEXT, Some("hydradns")).unwrap_err().contains("does not exist"));
        assert!(choose_in(PASSWD_TEXT, Some("broken")).is_err(), "an entry with a bad id is no user");
        assert!(choose_in(PASSWD_TEXT, Some("dnsmas")).is_err(), "names match whole");
    }

    #[test]
    fn prepare_creates_only_what_is_missing() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("hydradns-prepare-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let me = Account {
            name: "me".into(),
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
        };
        prepare_dir(&base.join("a/b/c"), &me, 0o700).unwrap();
        assert!(base.join("a/b/c").is_dir());
        let mode = |p: &str| std::fs::metadata(base.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!((mode("a"), mode("a/b"), mode("a/b/c")), (0o700, 0o700, 0o700), "made 0700");
        std::fs::set_permissions(base.join("a/b"), std::fs::Permissions::from_mode(0o751)).unwrap();
        prepare_dir(&base.join("a/b/c/d"), &me, 0o700).unwrap();
        assert_eq!((mode("a/b"), mode("a/b/c/d")), (0o751, 0o700), "one that exists keeps its mode");
        let _ = std::fs::remove_dir_all(&base);
    }
}
