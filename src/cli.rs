//! Command line: `run`, `check-config`, `check`, `--version`.
//!
//! Exit codes: 0 success, 1 runtime failure (e.g. cannot bind), 2 bad usage
//! or bad config (with `file:line` on stderr).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{Config, ConfigError, DEFAULT_CONFIG_PATH, DnsmasqMode, parse_duration};
use crate::control;
use crate::lists;
use crate::logging::{self, Target};
use crate::policy::{self, Policy, Verdict, domainset::name_key, formats};
use crate::querylog::read;
use crate::server;
use crate::stats::Report;
use nanoserde::{DeJson, SerJson};

const USAGE: &str = "\
usage:
  hydradns run [-c FILE] [--log syslog|stderr] [-v] [--user NAME]
                                                      serve DNS in the foreground
  hydradns check-config -c FILE [--shell]             validate FILE; print FILE:LINE: problem
  hydradns check [-c FILE] [--client IP|MAC|NAME] NAME
                                                      is NAME blocked (for that client), and by which list?
  hydradns status [-c FILE] [--json]                  running? its config, listen addresses, upstreams, lists, pause
  hydradns stats [-c FILE] [--json]                   live counters of the running gateway
  hydradns stats [-c FILE] --history [--json]         queries per 10 minutes over the last 24 h, from the query log
  hydradns metrics [-c FILE]                          the same in Prometheus's text format
  hydradns log [-c FILE] [--limit N] [--blocked] [--client IP|MAC|NAME] [--domain PATTERN] [--since 1h] [--json]
               [--outcome OUTCOME] [--list NAME] [--before ID]
  hydradns top [-c FILE] [--blocked|--clients|--domains] [--since 24h] [--limit N] [--json]
  hydradns update [-c FILE] [--json]                  download the lists now (through the gateway if running)
  hydradns lists [-c FILE] [--json]                   each list source: entries, last download, errors
  hydradns services [-c FILE] [--json]                the services a group can block (list service ID)
  hydradns pause [-c FILE] [--group NAME] [DURATION]  blocking off for DURATION (default 5m; 0 ends it),
                                                      for one group's lists with --group
  hydradns resume [-c FILE] [--group NAME]            blocking back on
  hydradns watchdog -c FILE [--log syslog|stderr] [--interval 5s] [--hook FILE] [--state FILE]
                                                      fail DNS open while the daemon does not answer (procd runs it)
  hydradns --version

Without -c, run (and every command but check-config and watchdog) uses
/etc/config/hydradns if it exists, else built-in defaults (listen on 127.0.0.1:5353, forward to the resolvers in /etc/resolv.conf).
Started as root, run binds its sockets and then becomes --user (else option
user, else hydradns, else nobody) with no privileges; --user root keeps root.";

/// Options of all subcommands; each command checks it got only its own.
#[derive(Debug, Default)]
struct Args {
    config: Option<PathBuf>,
    log: Option<Target>,
    verbose: bool,
    user: Option<String>,
    json: bool,
    shell: bool,
    limit: Option<usize>,
    blocked: bool,
    history: bool,
    clients: bool,
    domains: bool,
    client: Option<String>,
    group: Option<String>,
    domain: Option<String>,
    before: Option<i64>,
    outcome: Option<String>,
    list: Option<String>,
    since: Option<Duration>,
    interval: Option<Duration>,
    hook: Option<PathBuf>,
    state: Option<PathBuf>,
    positional: Vec<String>,
    /// Flags given, for the per-command check.
    given: Vec<&'static str>,
}

impl Args {
    /// Errors if a flag outside `allowed` was given.
    fn only(&self, cmd: &str, allowed: &[&str]) -> Result<(), String> {
        match self.given.iter().find(|f| !allowed.contains(f)) {
            Some(f) => Err(format!("{f} does not apply to '{cmd}'")),
            None => Ok(()),
        }
    }
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().cloned().ok_or(format!("{a} needs {what}"));
        let flag: &'static str = match a.as_str() {
            "-c" | "--config" => {
                out.config = Some(value("a file")?.into());
                "-c"
            }
            "--log" => {
                out.log = Some(match value("syslog or stderr")?.as_str() {
                    "syslog" => Target::Syslog,
                    "stderr" => Target::Stderr,
                    _ => return Err("--log takes syslog or stderr".into()),
                });
                "--log"
            }
            "-v" | "--verbose" => {
                out.verbose = true;
                "-v"
            }
            "--user" => {
                out.user = Some(value("a user name")?);
                "--user"
            }
            "--json" => {
                out.json = true;
                "--json"
            }
            "--shell" => {
                out.shell = true;
                "--shell"
            }
            "--limit" | "-n" => {
                let v = value("a number")?;
                out.limit = Some(v.parse().map_err(|_| format!("--limit: '{v}' is not a number"))?);
                "--limit"
            }
            "--blocked" => {
                out.blocked = true;
                "--blocked"
            }
            "--history" => {
                out.history = true;
                "--history"
            }
            "--clients" => {
                out.clients = true;
                "--clients"
            }
            "--domains" => {
                out.domains = true;
                "--domains"
            }
            "--client" => {
                out.client = Some(value("an address")?);
                "--client"
            }
            "--group" => {
                out.group = Some(value("a group name")?);
                "--group"
            }
            "--domain" => {
                out.domain = Some(value("a pattern")?);
                "--domain"
            }
            "--before" => {
                let v = value("a row id")?;
                out.before = Some(v.parse().map_err(|_| format!("--before: '{v}' is not a row id"))?);
                "--before"
            }
            "--outcome" => {
                out.outcome = Some(value("an outcome")?);
                "--outcome"
            }
            "--list" => {
                out.list = Some(value("a list name")?);
                "--list"
            }
            "--since" => {
                let v = value("a duration")?;
                out.since =
                    Some(parse_duration(&v).ok_or(format!("--since: '{v}' is not a duration like 30m, 1h, 7d"))?);
                "--since"
            }
            "--interval" => {
                let v = value("a duration")?;
                out.interval = Some(
                    parse_duration(&v)
                        .filter(|d| !d.is_zero())
                        .ok_or(format!("--interval: '{v}' is not a duration like 5s"))?,
                );
                "--interval"
            }
            "--hook" => {
                out.hook = Some(value("a file")?.into());
                "--hook"
            }
            "--state" => {
                out.state = Some(value("a file")?.into());
                "--state"
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option {s}")),
            _ => {
                out.positional.push(a.clone());
                continue;
            }
        };
        out.given.push(flag);
    }
    Ok(out)
}

/// Entry point for the `hydradns` binary.
pub fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = argv.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if !matches!(cmd.as_str(), "run" | "watchdog") {
        // Output into a closed pipe (`| head -1`) ends the command quietly.
        crate::sys::die_on_broken_pipe();
    }
    if matches!(cmd.as_str(), "--version" | "-V" | "version") {
        println!("hydradns {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if matches!(cmd.as_str(), "--help" | "-h" | "help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        println!("{}", help_of(cmd));
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(rest) {
        Ok(a) => a,
        Err(e) => return usage_error(cmd, e),
    };
    match cmd.as_str() {
        "run" => run(args),
        "check-config" => check_config(args),
        "check" => check(args),
        "stats" => stats(args),
        "metrics" => metrics(args),
        "log" => show_log(args),
        "top" => top(args),
        "update" => update(args),
        "lists" => lists_cmd(args),
        "services" => services_cmd(args),
        "status" => status(args),
        "pause" => pause(args, None),
        "resume" => pause(args, Some(Duration::ZERO)),
        "watchdog" => watchdog(args),
        other => {
            eprintln!("hydradns: unknown command '{other}'\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn config_error(e: &ConfigError) -> ExitCode {
    eprintln!("{e}");
    ExitCode::from(2)
}

/// The config for `run`: `-c FILE`, else the system file if present, else defaults.
fn run_config(args: &Args) -> Result<(Config, Option<PathBuf>), ConfigError> {
    match &args.config {
        Some(p) => Ok((Config::load(p)?, Some(p.clone()))),
        None if Path::new(DEFAULT_CONFIG_PATH).exists() => {
            let p = PathBuf::from(DEFAULT_CONFIG_PATH);
            Ok((Config::load(&p)?, Some(p)))
        }
        None => Ok((Config::builtin(), None)),
    }
}

fn run(args: Args) -> ExitCode {
    if let Err(e) = args.only("run", &["-c", "--log", "-v", "--user"]) {
        return usage_error("run", e);
    }
    if !args.positional.is_empty() {
        return usage_error("run", "run takes no arguments".into());
    }
    logging::init(args.log.unwrap_or(Target::Syslog), args.verbose);
    let (cfg, path) = match run_config(&args) {
        Ok(c) => c,
        Err(e) => {
            logging::fatal(&e.to_string());
            return ExitCode::from(2);
        }
    };
    log::info!(
        "hydradns {} starting with {}",
        env!("CARGO_PKG_VERSION"),
        path.as_ref().map_or("built-in defaults".into(), |p| p.display().to_string())
    );
    // A parser bug exploited by a LAN client should not own the router: see privileges.rs.
    let user = args.user.clone().or_else(|| cfg.user.clone());
    match server::run(cfg, path, user.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            logging::fatal(&e);
            ExitCode::from(1)
        }
    }
}

/// `hydradns watchdog`: runs until killed (see [`crate::watchdog`]).
fn watchdog(args: Args) -> ExitCode {
    if let Err(e) = args.only("watchdog", &["-c", "--log", "--interval", "--hook", "--state"]) {
        return usage_error("watchdog", e);
    }
    logging::init(args.log.unwrap_or(Target::Syslog), false);
    let cfg = match required_config(&args, "watchdog") {
        Ok(c) => c,
        Err(code) => return code,
    };
    crate::watchdog::run(&crate::watchdog::Settings {
        probe: cfg.probe_addr(),
        tick: args.interval.unwrap_or(crate::watchdog::TICK),
        hook: args.hook.unwrap_or_else(|| crate::watchdog::HOOK.into()),
        state: args.state.unwrap_or_else(|| crate::watchdog::STATE_FILE.into()),
        fail_open: cfg.router.fail_open,
        ours: cfg.sockets_file(),
    })
}

fn required_config(args: &Args, cmd: &str) -> Result<Config, ExitCode> {
    let Some(path) = &args.config else {
        return Err(usage_error(cmd, format!("{cmd} needs -c FILE")));
    };
    Config::load(path).map_err(|e| config_error(&e))
}

fn check_config(args: Args) -> ExitCode {
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

fn check(args: Args) -> ExitCode {
    if let Err(e) = args.only("check", &["-c", "--client"]) {
        return usage_error("check", e);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let [name] = args.positional.as_slice() else {
        return usage_error("check", "check takes one NAME".into());
    };
    let (Some(name), Some(key)) = (formats::normalize_name(name), name_key(name)) else {
        eprintln!("hydradns: '{name}' is not a domain name");
        return ExitCode::from(2);
    };
    if let Some(r) = policy::records::explain(&cfg.records, &name) {
        let star = if r.wildcard { "*." } else { "" };
        println!("{name}: answered by local record '{star}{}' ({}), before any list", r.name, r.origin);
    }
    if cfg.block_bypass && policy::BYPASS_DOTTED.contains(&name.as_str()) {
        println!(
            "{name}: NXDOMAIN by block_bypass, before any list (it tells browsers and phones to keep to this resolver)"
        );
    }
    let policy = Policy::build(&cfg);
    let active = match &args.client {
        Some(id) => match crate::client::rules::explain(&cfg, &policy.groups, id) {
            Ok((lines, active)) => {
                lines.iter().for_each(|l| println!("{l}"));
                active
            }
            Err(e) => {
                eprintln!("hydradns: {e}");
                return ExitCode::from(2);
            }
        },
        None => policy::groups::DEFAULT,
    };
    let (block, allow) = policy.entries(&key, active);
    let whose = |source: u16| match policy.group_of(source, active) {
        Some(g) if policy.groups.names.len() > 1 => format!(" of group '{}'", policy.groups.names[g]),
        _ => String::new(),
    };
    let service = |source: u16| policy.source_name(source).strip_prefix(policy::services::PREFIX).map(str::to_string);
    match policy.check(&key, active).verdict {
        Verdict::Blocked { source } if service(source).is_some() => println!(
            "{name}: blocked by service '{}'{} (domain {})",
            service(source).unwrap_or_default(),
            whose(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Blocked { source } => println!(
            "{name}: blocked by list '{}'{} (entry {})",
            policy.source_name(source),
            whose(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Allowed { source } => println!(
            "{name}: allowed by list '{}'{} (entry {}), overriding a block (entry {})",
            policy.source_name(source),
            whose(source),
            allow.as_ref().map_or(String::new(), |a| a.1.clone()),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::SafeSearch { target } => println!(
            "{name}: safe search: answered with '{}' (its CNAME and addresses; HTTPS and SVCB get no data)",
            policy::safesearch::TARGETS.get(target as usize).copied().unwrap_or("?")
        ),
        Verdict::Pass => println!("{name}: not blocked"),
    }
    for e in policy::explain(&policy::services::with_services(&cfg).0, &key) {
        println!("  list '{}' {} it: {}  {}", e.list, e.effect, e.location, e.rule);
    }
    ExitCode::SUCCESS
}

/// `hydradns services`: the catalogue in use, id, category and name a line.
fn services_cmd(args: Args) -> ExitCode {
    if let Err(e) = args.only("services", &["-c", "--json"]) {
        return usage_error("services", e);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (cat, note) = policy::services::in_use(&cfg);
    if let Some(n) = note {
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

/// The config the other commands read: like `run`'s, so `-c` is optional.
fn any_config(args: &Args) -> Result<Config, ExitCode> {
    run_config(args).map(|(c, _)| c).map_err(|e| config_error(&e))
}

/// The usage lines of subcommand `cmd` (with their continuation lines),
/// or all of them for a command there is none of.
fn usage_of(cmd: &str) -> String {
    let mut out = String::from("usage:\n");
    let mut mine = false;
    for line in USAGE.lines().skip(1) {
        if let Some(rest) = line.strip_prefix("  hydradns ") {
            mine = rest.split_whitespace().next() == Some(cmd);
        } else if !line.starts_with("    ") {
            mine = false;
        }
        if mine {
            out.push_str(line);
            out.push('\n');
        }
    }
    if out.len() == "usage:\n".len() { USAGE.to_string() } else { out.trim_end().to_string() }
}

/// What each option and argument does, for `hydradns CMD --help`: the
/// commands an entry is for (space-separated; empty: all), the option as
/// the usage lines write it, and what it does. The first entry that fits wins.
const OPTIONS: &[(&str, &str, &str)] = &[
    ("check-config watchdog", "-c FILE", "the config file to read (UCI, as /etc/config/hydradns)"),
    ("", "-c FILE", "the config file (default: /etc/config/hydradns if it exists, else built-in defaults)"),
    ("run watchdog", "--log syslog|stderr", "where messages go (default: syslog)"),
    ("run", "-v", "debug messages too"),
    ("run", "--user NAME", "the user to become once the sockets are bound (root keeps root)"),
    ("check-config", "--shell", "print, as name=value lines, the settings the init script needs"),
    ("check", "--client IP|MAC|NAME", "as that client is answered: its groups, their lists and schedules"),
    ("log", "--client IP|MAC|NAME", "only that client's queries"),
    ("", "--json", "machine-readable: one JSON object (log: one per line)"),
    ("log", "--limit N", "at most N queries, newest first (default 50)"),
    ("top", "--limit N", "at most N rows (default 10)"),
    ("log", "--blocked", "only the blocked queries"),
    ("top", "--blocked", "the names blocked most often"),
    ("top", "--clients", "the clients that asked most"),
    ("top", "--domains", "the names asked most"),
    ("log", "--domain PATTERN", "only that name and the names under it; with * a pattern (*.example.com)"),
    ("log", "--since 1h", "only the queries of the last DURATION (30m, 1h, 7d)"),
    ("top", "--since 24h", "count the last DURATION (default 24h)"),
    ("log", "--outcome OUTCOME", "only queries answered so (blocked, cached, forwarded, safe_search, …)"),
    ("log", "--list NAME", "only the queries that list (or service:ID) blocked or allowed"),
    ("log", "--before ID", "the page before the row ID (a row's id in --json), for paging back"),
    ("stats", "--history", "queries per 10 minutes over the last 24 h, from the query log (oldest first)"),
    ("pause resume", "--group NAME", "only that group's lists and services"),
    ("pause", "DURATION", "how long (default 5m; 0 ends the pause now)"),
    ("check", "NAME", "the domain name to look up"),
    ("watchdog", "--interval 5s", "how often the daemon is asked (default 5s)"),
    ("watchdog", "--hook FILE", "run with fail-open or restore to switch dnsmasq (default /etc/init.d/hydradns)"),
    ("watchdog", "--state FILE", "where the fail-open state is kept (default /var/run/hydradns.unfiltered)"),
];

/// `hydradns CMD --help`: the command's usage lines, then each of its
/// options and arguments with what it does.
fn help_of(cmd: &str) -> String {
    let usage = usage_of(cmd);
    if usage == USAGE {
        return usage;
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut lines = Vec::new();
    for &(cmds, opt, what) in OPTIONS {
        let word = opt.split_whitespace().next().unwrap_or(opt);
        let applies = cmds.is_empty() || cmds.split_whitespace().any(|c| c == cmd);
        // A word of the usage, not part of one: "-c" is not in "--client".
        let used = usage.split(|c: char| c.is_whitespace() || "[]|".contains(c)).any(|w| w == word);
        if applies && used && !seen.contains(&word) {
            seen.push(word);
            lines.push(format!("  {opt:<22} {what}"));
        }
    }
    if lines.is_empty() { usage } else { format!("{usage}\n\noptions:\n{}", lines.join("\n")) }
}

fn usage_error(cmd: &str, e: String) -> ExitCode {
    eprintln!("hydradns: {e}\n{}", usage_of(cmd));
    ExitCode::from(2)
}

/// `hydradns metrics`: the running gateway's Prometheus text.
fn metrics(args: Args) -> ExitCode {
    if let Err(e) = args.only("metrics", &["-c"]) {
        return usage_error("metrics", e);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match control::request(&cfg.control_socket, "metrics", Duration::from_secs(5)).map(|j| String::deserialize_json(&j))
    {
        Ok(Ok(text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("hydradns: unreadable answer from the gateway: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("hydradns: {e}");
            ExitCode::from(1)
        }
    }
}

fn stats(args: Args) -> ExitCode {
    if let Err(e) = args.only("stats", &["-c", "--json", "--history"]) {
        return usage_error("stats", e);
    }
    if args.history {
        return stats_history(args);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let json = match control::request(&cfg.control_socket, "stats", Duration::from_secs(5)) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("hydradns: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{json}");
        return ExitCode::SUCCESS;
    }
    match Report::deserialize_json(&json) {
        Ok(r) => {
            print!("{}", stats_text(&r));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hydradns: unreadable answer from the gateway ({e}): {json}");
            ExitCode::from(1)
        }
    }
}

/// `hydradns stats --history`: from the query log, which outlives restarts
/// (the live counters do not).
fn stats_history(args: Args) -> ExitCode {
    let conn = match open_log(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let h = match crate::querylog::history::history(&conn, crate::sys::unix_now()) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", h.serialize_json());
        return ExitCode::SUCCESS;
    }
    println!("{:<17} {:>9} {:>9}", "from (UTC)", "allowed", "blocked");
    for b in h.buckets.iter().filter(|b| b.allowed + b.blocked > 0) {
        println!("{:<17} {:>9} {:>9}", &read::iso8601(b.start * 1000)[..16].replace('T', " "), b.allowed, b.blocked);
    }
    let (a, b) = h.buckets.iter().fold((0, 0), |(a, b), x| (a + x.allowed, b + x.blocked));
    println!("{:<17} {a:>9} {b:>9}", "last 24 h");
    ExitCode::SUCCESS
}

/// One line per group, for `stats` and `status`: none for the common case
/// of one group, which has nothing to say.
fn group_lines(r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    for g in r.groups.iter().filter(|_| r.groups.len() > 1) {
        let _ = write!(o, "group        {}: {} blocked", g.name, g.blocked);
        if !g.schedule.is_empty() {
            let when = if g.active { "inside" } else { "outside: lists off" };
            let _ = write!(o, ", schedule '{}' ({when})", g.schedule);
        }
        if g.paused_until > 0 {
            let _ = write!(o, ", paused until {}", read::iso8601(g.paused_until * 1000));
        }
        o.push('\n');
    }
    o
}

/// `hydradns stats` as text.
fn stats_text(r: &Report) -> String {
    use std::fmt::Write;
    let c = &r.counters;
    let mut o = String::new();
    let pct = |n: u64| if r.queries == 0 { 0.0 } else { 100.0 * n as f64 / r.queries as f64 };
    let _ = writeln!(o, "hydradns {}, up {}", r.version, duration_text(r.uptime_s));
    if r.paused_until > 0 {
        let _ = writeln!(o, "blocking     paused until {}", read::iso8601(r.paused_until * 1000));
    }
    let _ = writeln!(o, "queries      {} ({} udp, {} tcp)", r.queries, c.udp_queries, c.tcp_queries);
    let _ = writeln!(o, "  blocked    {} ({:.1}%)", c.blocked, pct(c.blocked));
    let _ = writeln!(o, "  cached     {} ({:.1}%)", c.cached, pct(c.cached));
    let _ = writeln!(
        o,
        "  forwarded  {} ({:.1}%, {} joined a query in flight)",
        c.forwarded + c.coalesced,
        pct(c.forwarded + c.coalesced),
        c.coalesced
    );
    let _ = writeln!(
        o,
        "  failed     {} ({} no upstream answer, {} overloaded)",
        c.failed + c.overloaded,
        c.failed,
        c.overloaded
    );
    let _ = writeln!(
        o,
        "  errors     {} formerr, {} notimp, {} badvers, {} dropped",
        c.formerr, c.notimp, c.badvers, c.dropped
    );
    let _ = writeln!(o, "  lost       {} in the kernel (receive buffers full)", r.udp_receive_drops);
    let _ = writeln!(
        o,
        "latency      p50 {} us, p90 {} us, p99 {} us ({} answers)",
        r.latency.p50_us, r.latency.p90_us, r.latency.p99_us, r.latency.samples
    );
    let _ = writeln!(
        o,
        "cache        {}/{} entries, hit ratio {:.1}%",
        r.cache_entries,
        r.cache_capacity,
        100.0 * r.cache_hit_ratio
    );
    let _ = writeln!(o, "lists        {} blocked, {} allowed names", r.blocklist_names, r.allowlist_names);
    for l in &r.lists {
        // An allowlist's plain entries allow: none of them blocks.
        let entries = match l.kind.as_str() {
            "allowlist" => format!("{} allows", l.blocks + l.allows),
            _ => format!("{} blocks, {} allows", l.blocks, l.allows),
        };
        let _ =
            writeln!(o, "  {} ({}): {entries}, {} unsupported, {} invalid", l.name, l.kind, l.unsupported, l.invalid);
    }
    o.push_str(&group_lines(r));
    for u in &r.upstreams {
        let _ = writeln!(
            o,
            "upstream     {}: {}{}{} answers, {} timeouts, {} errors, {} ignored replies, avg {} us",
            u.addr,
            if u.down { "DOWN (probed every 30 s), " } else { "" },
            if u.transport != "udp" { format!("{}, {} handshakes, ", u.state, u.handshakes) } else { String::new() },
            u.answers,
            u.timeouts,
            u.errors,
            u.mismatched,
            u.avg_latency_us
        );
    }
    let q = &r.querylog;
    if q.enabled {
        let _ = writeln!(
            o,
            "query log    {} written, {} dropped (queue full), {} lost (database), {}/{} queued",
            q.written, q.dropped, q.lost, q.queued, q.queue_size
        );
        let last =
            if q.last_flush_unix == 0 { "none yet".to_string() } else { read::iso8601(q.last_flush_unix * 1000) };
        let _ = writeln!(o, "flash copy   {} written, {} failed, last {}", q.flushes, q.flush_errors, last);
    } else {
        let _ = writeln!(o, "query log    off");
    }
    // The owner's view of the wear (issue 46): what reached flash, by whom.
    let _ = writeln!(
        o,
        "flash        {} KiB in {} files written since start ({} KiB in {} query log, {} KiB in {} lists)",
        (q.flash_bytes_written + r.lists_flash_bytes_written) / 1024,
        q.flash_files_written + r.lists_flash_files_written,
        q.flash_bytes_written / 1024,
        q.flash_files_written,
        r.lists_flash_bytes_written / 1024,
        r.lists_flash_files_written
    );
    o
}

pub(crate) fn duration_text(secs: u64) -> String {
    match secs {
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
        s if s >= 3600 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m {}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

fn open_log(args: &Args) -> Result<rusqlite::Connection, ExitCode> {
    let cfg = any_config(args)?;
    // A running gateway first commits the queries still waiting for their
    // batch; a stopped one has committed everything. Either way the read goes on.
    let _ = control::request(&cfg.control_socket, "commit", Duration::from_secs(3));
    read::open(&cfg.querylog.path).map_err(|e| {
        eprintln!("hydradns: {e}");
        ExitCode::from(1)
    })
}

fn show_log(args: Args) -> ExitCode {
    let flags =
        ["-c", "--json", "--limit", "--blocked", "--client", "--domain", "--since", "--before", "--outcome", "--list"];
    if let Err(e) = args.only("log", &flags) {
        return usage_error("log", e);
    }
    let conn = match open_log(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let filter = read::LogFilter {
        limit: args.limit.unwrap_or(50),
        blocked: args.blocked,
        client: args.client.clone(),
        domain: args.domain.clone(),
        since: args.since,
        before: args.before,
        outcome: args.outcome.clone(),
        list: args.list.clone(),
    };
    let rows = match read::recent(&conn, &filter) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", page(rows.serialize_json()));
    } else {
        for r in &rows {
            let via = match (&r.list, &r.upstream) {
                (Some(l), _) => format!("list {l}"),
                (None, Some(u)) => format!("via {u}"),
                _ => String::new(),
            };
            let client = match (&r.client_name, &r.mac) {
                (Some(n), Some(m)) => format!("{n} ({} {m})", r.client),
                (Some(n), None) => format!("{n} ({})", r.client),
                (None, Some(m)) => format!("{} ({m})", r.client),
                (None, None) => r.client.clone(),
            };
            println!(
                "{} {:<15} {:<6} {} {} {} {}us {}",
                r.time, client, r.qtype, r.name, r.outcome, r.rcode, r.latency_us, via
            );
        }
    }
    ExitCode::SUCCESS
}

/// `log` and `top` JSON: `{"schema":1,"entries":[…]}`, the array inside an
/// object that says its layout's version, as `stats` and `status` do.
fn page(entries: String) -> String {
    format!("{{\"schema\":{},\"entries\":{entries}}}", crate::stats::SCHEMA)
}

fn top(args: Args) -> ExitCode {
    if let Err(e) = args.only("top", &["-c", "--json", "--limit", "--blocked", "--clients", "--domains", "--since"]) {
        return usage_error("top", e);
    }
    let kind = match (args.blocked, args.clients, args.domains) {
        (false, false, _) => read::TopKind::Domains,
        (true, false, false) => read::TopKind::Blocked,
        (false, true, false) => read::TopKind::Clients,
        _ => return usage_error("top", "choose one of --blocked, --clients, --domains".into()),
    };
    let conn = match open_log(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let since = args.since.unwrap_or(Duration::from_secs(86_400));
    match read::top(&conn, kind, since, args.limit.unwrap_or(10)) {
        Ok(rows) if args.json => println!("{}", page(rows.serialize_json())),
        Ok(rows) => {
            for r in rows {
                println!("{:>8}  {}", r.count, r.key);
            }
        }
        Err(e) => {
            eprintln!("hydradns: reading the query log: {e}");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

fn update(args: Args) -> ExitCode {
    if let Err(e) = args.only("update", &["-c", "--json"]) {
        return usage_error("update", e);
    }
    let cfg = match any_config(&args) {
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
        // Not running: download into list_dir ourselves; the next start uses the copies.
        Err(control::RequestError::NotRunning(_)) => lists::refresh_all(&cfg, lists::Which::All),
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

/// The gateway's answer to `pause SECONDS`, or its refusal (`error`).
#[derive(DeJson)]
struct Paused {
    #[nserde(default)]
    paused_until: u64,
    #[nserde(default)]
    error: String,
}

/// `hydradns pause [DURATION]` and `hydradns resume` (`fixed`: zero).
fn pause(args: Args, fixed: Option<Duration>) -> ExitCode {
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
                println!("{what} paused until {}", read::iso8601(paused_until * 1000));
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

/// The name `option dnsmasq_mode` gives `m`.
fn mode_name(m: DnsmasqMode) -> &'static str {
    match m {
        DnsmasqMode::Off => "off",
        DnsmasqMode::Upstream => "upstream",
        DnsmasqMode::Replace => "replace",
    }
}

/// What `hydradns status --json` prints: the first look after install.
#[derive(SerJson)]
struct Status {
    /// [`crate::stats::SCHEMA`].
    schema: u64,
    /// A gateway answered on the control socket.
    running: bool,
    /// The router's clock, Unix seconds: what `paused_until` is counted
    /// against (a browser's clock may be off).
    now: u64,
    /// Why none did, when none did.
    error: String,
    /// The config file read (`<built-in>` without one).
    config: String,
    listen: Vec<String>,
    dnsmasq_mode: String,
    /// Configured upstreams (or those from `resolv_file`) when not running.
    upstreams: Vec<String>,
    /// The running gateway's counters, upstream states, groups and pause.
    stats: Option<Report>,
    /// Each list from disk: download state (entries from the running gateway).
    lists: Vec<lists::ListInfo>,
    /// Since when (Unix seconds) dnsmasq answers on its own because the
    /// daemon did not (the watchdog failed DNS open); 0 while filtered.
    unfiltered_since: u64,
    /// Why the watchdog failed open; empty while filtered.
    unfiltered_reason: String,
}

/// `hydradns status`: is it running, and with what. Exit 0 when it runs,
/// 3 when it does not (as an init script's `status`).
fn status(args: Args) -> ExitCode {
    if let Err(e) = args.only("status", &["-c", "--json"]) {
        return usage_error("status", e);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let answer = control::request(&cfg.control_socket, "stats", Duration::from_secs(5));
    let (stats, error) = match answer.map(|j| Report::deserialize_json(&j)) {
        Ok(Ok(r)) => (Some(r), String::new()),
        Ok(Err(e)) => (None, format!("unreadable answer from the gateway: {e}")),
        Err(e) => (None, e.to_string()),
    };
    // Counting entries reads every list; the running gateway knows them already.
    let mut lists = lists::describe_with(&cfg, stats.is_none());
    for l in lists.iter_mut() {
        if let Some(live) = stats.iter().flat_map(|r| &r.lists).find(|r| r.name == l.name && r.kind == l.kind) {
            (l.entries, l.skipped) = (live.blocks + live.allows, live.unsupported + live.invalid);
            // The gateway reads as its own user: what it could not read is
            // what counts, though this command (as root) could.
            if let Some(e) = live.errors.first() {
                l.last_error = Some(e.clone());
            }
            l.warnings.clone_from(&live.warnings);
        }
    }
    let unfiltered = crate::watchdog::unfiltered(Path::new(crate::watchdog::STATE_FILE));
    let st = Status {
        schema: crate::stats::SCHEMA,
        running: stats.is_some(),
        now: crate::sys::unix_now(),
        error,
        config: cfg.source.clone(),
        listen: cfg.listen.iter().map(|a| a.to_string()).collect(),
        dnsmasq_mode: mode_name(cfg.dnsmasq_mode).into(),
        upstreams: cfg.upstreams.iter().map(|a| a.to_string()).collect(),
        stats,
        lists,
        unfiltered_since: unfiltered.as_ref().map_or(0, |u| u.0),
        unfiltered_reason: unfiltered.map(|u| u.1).unwrap_or_default(),
    };
    let code = if st.running { ExitCode::SUCCESS } else { ExitCode::from(3) };
    if args.json {
        println!("{}", st.serialize_json());
        return code;
    }
    match &st.stats {
        Some(r) => println!("hydradns     running, version {}, up {}", r.version, duration_text(r.uptime_s)),
        None => println!("hydradns     not running ({})", st.error),
    }
    if st.unfiltered_since > 0 {
        println!(
            "DNS          UNFILTERED since {}: the gateway did not answer ({}); dnsmasq answers on its own",
            read::iso8601(st.unfiltered_since * 1000),
            st.unfiltered_reason
        );
    }
    println!("config       {}", st.config);
    println!("listen       {} (dnsmasq_mode {})", st.listen.join(", "), st.dnsmasq_mode);
    match &st.stats {
        Some(r) => {
            for u in &r.upstreams {
                let state = if u.down { "DOWN".to_string() } else { format!("up, avg {} us", u.avg_latency_us) };
                println!("upstream     {} ({state}, {} answers)", u.addr, u.answers);
            }
            let blocking = match r.paused_until {
                0 => "on".to_string(),
                t => format!("paused until {}", read::iso8601(t * 1000)),
            };
            println!("blocking     {blocking}, {} names blocked so far", r.counters.blocked);
            print!("{}", group_lines(r));
        }
        None => println!("upstream     {} (configured)", st.upstreams.join(", ")),
    }
    for l in &st.lists {
        let when = match (&l.url, &l.last_success) {
            (None, _) => String::new(),
            (Some(_), Some(t)) => format!(", updated {t}"),
            (Some(_), None) => ", never downloaded".to_string(),
        };
        let error = l.last_error.as_ref().map(|e| format!(", last error: {e}")).unwrap_or_default();
        println!("list         {} ({}): {} entries{when}{error}", l.name, l.kind, l.entries);
        for w in &l.warnings {
            println!("             warning: {w}");
        }
    }
    code
}

fn lists_cmd(args: Args) -> ExitCode {
    if let Err(e) = args.only("lists", &["-c", "--json"]) {
        return usage_error("lists", e);
    }
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let infos = lists::describe(&cfg);
    if args.json {
        println!("{}", infos.serialize_json());
        return ExitCode::SUCCESS;
    }
    for l in &infos {
        println!("{} ({}): {} entries, {} skipped lines, {} KiB", l.name, l.kind, l.entries, l.skipped, l.bytes / 1024);
        if let Some(url) = &l.url {
            println!("  url           {url}");
            println!("  last success  {}", l.last_success.as_deref().unwrap_or("never"));
            if let Some(etag) = &l.etag {
                println!("  etag          {etag}");
            }
        }
        for f in &l.files {
            println!("  file          {f}");
        }
        if let Some(e) = &l.last_error {
            println!("  last error    {e}");
        }
        for w in &l.warnings {
            println!("  warning       {w}");
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::{OPTIONS, USAGE, help_of, usage_of};

    #[test]
    fn each_command_has_its_own_usage() {
        let log = usage_of("log");
        assert!(log.starts_with("usage:\n  hydradns log [-c FILE]"), "{log}");
        assert_eq!(log.lines().count(), 3, "its continuation line too: {log}");
        assert!(log.contains("--before ID"), "{log}");
        let run = usage_of("run");
        assert!(run.contains("hydradns run [-c FILE]") && run.contains("serve DNS in the foreground"), "{run}");
        assert!(!run.contains("check-config"));
        assert!(usage_of("check").contains("hydradns check [-c FILE] [--client IP|MAC|NAME] NAME"));
        assert!(!usage_of("check").contains("check-config"));
        assert_eq!(usage_of("nonsense"), USAGE);
    }

    /// Each option a command's usage names is explained in its --help, and
    /// each explanation belongs to an option some command has.
    #[test]
    fn help_says_what_each_option_does() {
        for cmd in ["run", "check-config", "check", "status", "stats", "metrics", "log", "top", "update", "lists"]
            .into_iter()
            .chain(["services", "pause", "resume", "watchdog"])
        {
            let help = help_of(cmd);
            let usage = usage_of(cmd);
            for word in usage.split(|c: char| c.is_whitespace() || "[]|".contains(c)).filter(|w| w.starts_with('-')) {
                let line = format!("\n  {word}");
                assert!(help.contains(&line), "{cmd} --help does not explain {word}:\n{help}");
            }
        }
        let log = help_of("log");
        assert!(log.contains("  --limit N              at most N queries, newest first (default 50)"), "{log}");
        assert!(help_of("top").contains("  --limit N              at most N rows (default 10)"));
        assert!(help_of("check").contains("  NAME                   the domain name to look up"));
        assert!(!help_of("check").contains("--json"), "only the command's own options");
        for (cmds, opt, _) in OPTIONS {
            let word = opt.split_whitespace().next().unwrap_or(opt);
            assert!(USAGE.contains(word), "{opt} ({cmds}) is in no usage line");
        }
    }
}
