//! `check-config`, `check` and `services`: what the config says and what
//! it does to a name, without a running gateway.

use super::*;

pub(super) fn check_config(args: Args) -> ExitCode {
    if let Err(e) = args.only("check-config", &["-c", "--shell"]) {
        return usage_error("check-config", e);
    }
    let cfg = match required_config(&args, "check-config") {
        Ok(c) => c,
        Err(code) => return code,
    };
    for w in &cfg.warnings {
        eprintln!("{w} (warning)");
    }
    if !args.shell {
        for w in policy::services::with_services(&cfg).1 {
            eprintln!("{w} (warning)");
        }
    }
    if args.shell {
        // For the init script to eval: everything it needs, read by the same
        // parser as the daemon's, in values that need no quoting.
        let mode = mode_name(cfg.dnsmasq_mode);
        let server = cfg.dnsmasq_server().map(|s| format!("{}#{}", s.ip(), s.port())).unwrap_or_default();
        println!("hydradns_enabled={}", u8::from(cfg.enabled));
        println!("hydradns_dnsmasq_mode={mode}");
        println!("hydradns_dnsmasq_server={server}");
        println!("hydradns_dnsmasq_port={}", cfg.dnsmasq_port);
        println!("hydradns_restart_key={}", cfg.restart_key());
        print!("{}", cfg.router.shell());
        // Who the daemon will run as, so the script gives it its directories.
        let user = crate::privileges::choose(cfg.user.as_deref()).map(|a| a.name).unwrap_or_default();
        println!("hydradns_user={user}");
        // The textfile's directory, which the user must be able to write
        // (a file is renamed into it); none when the path would need quoting.
        let dir = cfg.metrics_textfile.as_deref().and_then(Path::parent).and_then(Path::to_str).unwrap_or_default();
        if dir.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)) {
            println!("hydradns_metrics_dir={dir}");
        }
        println!("hydradns_rebind_ok='{}'", rebind_ok(&cfg).join(" "));
        return ExitCode::SUCCESS;
    }
    let mut missing = false;
    for src in &cfg.lists {
        for p in &src.paths {
            // Opened as the daemon reads it: a FIFO or a device is refused
            // here too, without blocking or reading it.
            if let Err(e) = crate::sys::open_regular(p) {
                eprintln!("{}: list file {}: {e} (warning)", src.origin, p.display());
                missing = true;
            }
        }
        for w in policy::scan_warnings(src) {
            eprintln!("{}: list '{}': {w} (warning)", src.origin, src.name);
        }
    }
    // "ok" alone would hide the warnings above it (a misspelt option is one).
    let warnings = match cfg.warnings.len() {
        0 => String::new(),
        1 => ", 1 warning".into(),
        n => format!(", {n} warnings"),
    };
    println!(
        "{}: ok ({} listen, {} upstreams, {} lists, {} forward rules{}{warnings})",
        cfg.source,
        cfg.listen.len(),
        cfg.upstreams.len(),
        cfg.lists.len(),
        cfg.forwards.len(),
        if missing { ", missing list files" } else { "" }
    );
    ExitCode::SUCCESS
}

/// The domains whose answers may hold private addresses by the config's own
/// word: local names (`config record`; a wildcard by the domain it is
/// under), `rebind_allow` and `config forward` domains. dnsmasq in front of
/// the gateway (upstream mode) must not drop those answers as rebinding;
/// every other answer the gateway passes it has been through the gateway's
/// own rebind protection. Each domain once, none under another of them.
fn rebind_ok(cfg: &Config) -> Vec<&str> {
    let mut names: Vec<&str> = cfg.records.iter().map(|r| r.name.as_str()).collect();
    names.extend(cfg.rebind_allow.iter().map(String::as_str));
    names.extend(cfg.forwards.iter().flat_map(|f| f.domains.iter().map(String::as_str)));
    let under = |name: &str, domain: &str| name.strip_suffix(domain).is_some_and(|head| head.ends_with('.'));
    // A quadratic walk over a few names, not a sort: the sort took 7 KiB of
    // the x86_64 binary.
    let kept = |(i, name): &(usize, &&str)| {
        !names.iter().enumerate().any(|(j, other)| under(name, other) || (j < *i && *name == other))
    };
    names.iter().enumerate().filter(kept).map(|(_, name)| *name).collect()
}

/// The gateway's answer to `check`: `{"lines":[…]}`, or `{"error":…}`
/// for why not. Read with the reader the catalogue uses (a derive of its
/// own cost 2.3 KB).
fn checked(json: &str) -> Result<Vec<String>, String> {
    let (mut lines, mut error) = (Vec::new(), None);
    let mut j = crate::json::Json::new(json);
    j.object(&mut |j, key| match key.as_str() {
        "lines" => j.array(&mut |j| j.string().map(|l| lines.push(l))),
        "error" => j.string().map(|e| error = Some(e)),
        _ => j.skip(0),
    })
    .ok_or("unreadable answer from the gateway")?;
    error.map_or(Ok(lines), Err)
}

/// Exit code of `check --live` when no gateway answers.
const NOT_LIVE: u8 = 4;
/// Exit code of `check` when another one is reading every list.
const BUSY: u8 = 5;
/// Held while a `check --one-at-a-time` builds the policy itself: without
/// a gateway, LuCI (rpcd, as root, for any logged-in reader) falls back to
/// that, and one such build at a time is enough. In /var/lock, which only
/// root writes on OpenWrt; the kernel lets go of it when its holder is
/// killed, so none outlives rpcd's timeout.
const CHECK_LOCK: &str = "/var/lock/hydradns-check.lock";

pub(super) fn check(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "check", &["-c", "--client", "--live", "--one-at-a-time"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let [name] = args.positional.as_slice() else {
        return usage_error("check", "check takes one NAME".into());
    };
    let lines = if args.live {
        // One word each way on the socket's line; `why` says what a bad
        // name or client is, as the local path does.
        if name.contains(char::is_whitespace) || args.client.as_ref().is_some_and(|c| c.contains(char::is_whitespace)) {
            eprintln!("hydradns: '{name}' is not a domain name");
            return ExitCode::from(2);
        }
        let request = format!("check {name}{}", args.client.as_ref().map(|c| format!(" {c}")).unwrap_or_default());
        match control::request(&cfg.control_socket, &request, control::CHECK_TIMEOUT) {
            Ok(json) => checked(&json),
            Err(e) => {
                eprintln!("hydradns: {e}");
                return ExitCode::from(NOT_LIVE);
            }
        }
    } else {
        // Taken before the user switch below (the lock is root's).
        let _one = match args.one_at_a_time.then(|| crate::sys::try_lock(Path::new(CHECK_LOCK))) {
            Some(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                eprintln!("hydradns: busy: another check is reading every list; ask again in a moment");
                return ExitCode::from(BUSY);
            }
            Some(Err(e)) => {
                eprintln!("hydradns: {CHECK_LOCK}: {e}");
                return ExitCode::from(1);
            }
            lock => lock,
        };
        // Those the running gateway holds: its exceptions decide before its lists.
        let exceptions = super::exceptions::running(&cfg);
        // The lists in list_dir are the gateway's user's: read as that user.
        if let Err(e) = crate::privileges::become_owner_of(&cfg.list_dir) {
            eprintln!("hydradns: {e}");
            return ExitCode::from(1);
        }
        crate::query::why::why(&cfg, &Policy::build(&cfg), name, args.client.as_deref(), &exceptions).map(
            |(mut lines, dnssec)| {
                // Validating takes the gateway's upstreams, key cache and
                // clock; a guess from here would be no verdict.
                if let crate::query::why::Dnssec::Validate(_) = dnssec {
                    lines.push("dnssec: not validated here (the running gateway validates: check --live)".into());
                }
                lines
            },
        )
    };
    match lines {
        Ok(lines) => {
            lines.iter().for_each(|l| println!("{l}"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hydradns: {e}");
            ExitCode::from(2)
        }
    }
}

/// `hydradns services`: the catalogue in use, id, category and name a line.
pub(super) fn services_cmd(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "services", &["-c", "--json"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (cat, notes) = policy::services::in_use(&cfg);
    for n in notes {
        eprintln!("hydradns: {n}");
    }
    if args.json {
        println!("{}", cat.to_json());
        return ExitCode::SUCCESS;
    }
    for s in &cat.services {
        println!("{:<16} {:<10} {}  ({})", s.id, s.category, s.name, s.domains.join(", "));
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rebind_ok_lists_local_allowed_and_forwarded_domains_once_each() {
        let cfg = Config::parse(
            "f",
            "config hydradns 'main'\n\tlist rebind_allow 'plex.direct'\n\tlist rebind_allow 'x.plex.direct'\n\
             \tlist rebind_allow 'Lab.Home.'\n\
             config record\n\toption name 'nas.home'\n\tlist ip '192.168.1.10'\n\
             config record\n\toption name '*.lab.home'\n\tlist ip '192.168.1.11'\n\
             config record\n\toption name 'printer.lab.home'\n\tlist ip '192.168.1.12'\n\
             config record\n\toption name 'ahome'\n\tlist ip '192.168.1.13'\n\
             config forward\n\tlist domain 'corp.example'\n\toption server '10.0.0.1'\n",
        )
        .unwrap();
        // In the config's order, records first: lab.home covers printer.lab.home
        // and comes once, plex.direct covers x.plex.direct; ahome is not under home.
        assert_eq!(rebind_ok(&cfg), ["nas.home", "lab.home", "ahome", "plex.direct", "corp.example"]);
        let none = Config::parse("f", "config hydradns 'main'\n").unwrap();
        assert!(rebind_ok(&none).is_empty());
    }
}
