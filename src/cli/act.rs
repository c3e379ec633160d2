//! `update`, `pause` and `resume`: commands that change what the running
//! gateway does, through its control socket.

use super::*;

pub(super) fn update(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "update", &["-c", "--json"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let results = match control::request(&cfg.control_socket, "update", control::UPDATE_TIMEOUT) {
        Ok(json) => match Vec::<lists::Refreshed>::deserialize_json(&json) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("hydradns: unreadable answer from the gateway ({e}): {json}");
                return ExitCode::from(1);
            }
        },
        // Not running: download into list_dir ourselves, as the gateway's
        // user; the next start uses the copies.
        Err(control::RequestError::NotRunning(why)) => match as_the_gateways_user(&cfg) {
            Ok(()) => lists::refresh_all(&cfg, lists::Which::All),
            Err(e) => {
                eprintln!("hydradns: {why}; {e}");
                return ExitCode::from(1);
            }
        },
        Err(e) => {
            eprintln!("hydradns: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", results.serialize_json());
    } else if results.is_empty() {
        println!("no list has a url to download");
    } else {
        for r in &results {
            match &r.error {
                Some(e) => println!("{}: {} ({e}); in use: {} entries", r.name, r.status, r.entries),
                None => println!("{}: {}, {} entries, {} KiB", r.name, r.status, r.entries, r.bytes / 1024),
            }
        }
    }
    if results.iter().any(|r| r.status == "failed") { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// Root downloading by itself into `list_dir`, the daemon's directory,
/// would write through whatever the daemon's user planted there, and parse
/// a server's bytes as root (issue 58): run as root, `update` becomes the
/// user the gateway runs as first, for good. Anyone else stays who they are.
fn as_the_gateways_user(cfg: &Config) -> Result<(), String> {
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let account = crate::privileges::choose(cfg.user.as_deref())?;
    if account.uid == 0 {
        return Err("the gateway's user is root, and root does not download lists by itself: start the gateway \
                    and update through it"
            .into());
    }
    // As the gateway would at its start: a list_dir not there yet is made
    // for its user (one that is there is left as it is).
    if let Err(e) = crate::privileges::prepare_dir(&cfg.list_dir, &account, 0o755) {
        return Err(format!("cannot create {} for user '{}': {e}", cfg.list_dir.display(), account.name));
    }
    crate::privileges::drop_to(&account).map_err(|e| format!("{e}: not downloading as root"))
}

/// The gateway's answer to `pause SECONDS`, or its refusal (`error`).
#[derive(DeJson)]
struct Paused {
    #[nserde(default)]
    paused_until: u64,
    #[nserde(default)]
    error: String,
}

/// `hydradns pause [DURATION]` and `hydradns resume` (`fixed`: zero).
pub(super) fn pause(args: Args, fixed: Option<Duration>) -> ExitCode {
    let cmd = if fixed.is_some() { "resume" } else { "pause" };
    if let Err(e) = args.only(cmd, &["-c", "--group"]) {
        return usage_error(cmd, e);
    }
    let d = match (fixed, args.positional.as_slice()) {
        (Some(d), []) => d,
        (None, []) => Duration::from_secs(300),
        (None, [d]) => match crate::config::parse_duration(d) {
            Some(d) => d,
            None => return usage_error(cmd, format!("'{d}' is not a duration (e.g. 30s, 5m, 1h)")),
        },
        _ => return usage_error(cmd, format!("{cmd} takes at most a DURATION")),
    };
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Whole seconds, rounded up: `pause 500ms` still pauses.
    let secs = d.as_millis().div_ceil(1000) as u64;
    let (request, what) = match &args.group {
        Some(g) if g.split_ascii_whitespace().count() == 1 => (format!("pause {secs} {g}"), format!("group '{g}'")),
        Some(g) => return usage_error(cmd, format!("'{g}' is not a group name")),
        None => (format!("pause {secs}"), "blocking".into()),
    };
    match control::request(&cfg.control_socket, &request, Duration::from_secs(5)) {
        Ok(json) => match Paused::deserialize_json(&json) {
            Ok(Paused { error, .. }) if !error.is_empty() => {
                eprintln!("hydradns: {error}");
                ExitCode::from(1)
            }
            Ok(Paused { paused_until: 0, .. }) => {
                println!("{what} on");
                ExitCode::SUCCESS
            }
            Ok(Paused { paused_until, .. }) => {
                println!("{what} paused until {}", crate::timetext::iso8601(paused_until * 1000));
                ExitCode::SUCCESS
            }
            Err(_) => {
                eprintln!("hydradns: {json}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("hydradns: {e}");
            ExitCode::from(1)
        }
    }
}
