//! Command line: parsing, `--help`, and `run`; the other commands live in
//! `check` (check-config, check, services), `report` (status, stats,
//! metrics, lists), `queries` (log, top), `devices`, `act` (update,
//! pause, resume) and `exceptions` (allow, block, exceptions).
//!
//! Exit codes: 0 success, 1 runtime failure (e.g. cannot bind), 2 bad usage
//! or bad config (with `file:line` on stderr).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{Config, ConfigError, DEFAULT_CONFIG_PATH, DnsmasqMode, parse_duration};
use crate::control;
use crate::lists;
use crate::logging::{self, Target};
use crate::policy::{self, Policy};
use crate::query::why::router_book;
use crate::querylog::read;
use crate::server;
use crate::stats::Report;
use crate::timetext::duration_text;
use nanoserde::{DeJson, SerJson};

mod act;
mod check;
pub mod devices;
mod exceptions;
mod queries;
mod report;

use act::{pause, update};
use check::{check, check_config, services_cmd};
use devices::devices_cmd;
use exceptions::{except, exceptions_cmd};
use queries::{open_log, show_log, top};
use report::{lists_cmd, metrics, mode_name, stats, status};

const USAGE: &str = "\
usage:
  hydradns run [-c FILE] [--log syslog|stderr] [-v] [--user NAME]
                                                      serve DNS in the foreground
  hydradns check-config -c FILE [--shell]             validate FILE; print FILE:LINE: problem
  hydradns check [-c FILE] [--client IP|MAC|NAME] [--live|--one-at-a-time] NAME
                                                      is NAME blocked (for that client), and by which list?
  hydradns status [-c FILE] [--json] [--live]         running? its config, listen addresses, upstreams, lists, pause
  hydradns stats [-c FILE] [--json]                   live counters of the running gateway
  hydradns stats [-c FILE] --history [--json]         queries per 10 minutes over the last 24 h, from the query log
  hydradns metrics [-c FILE]                          the same in Prometheus's text format
  hydradns log [-c FILE] [--limit N] [--blocked] [--client IP|MAC|NAME] [--domain PATTERN] [--since 1h] [--json]
               [--outcome OUTCOME] [--list NAME] [--group NAME] [--before ID]
  hydradns top [-c FILE] [--blocked|--clients|--domains] [--since 24h] [--limit N] [--json]
  hydradns devices [-c FILE] [--json]                 the devices seen: leases, neighbours, the log since midnight
  hydradns update [-c FILE] [--json]                  download the lists now (through the gateway if running)
  hydradns lists [-c FILE] [--json]                   each list source: entries, last download, errors
  hydradns services [-c FILE] [--json]                the services a group can block (list service ID)
  hydradns pause [-c FILE] [--group NAME] [DURATION]  blocking off for DURATION (default 5m; 0 ends it),
                                                      for one group's lists with --group
  hydradns resume [-c FILE] [--group NAME]            blocking back on
  hydradns allow [-c FILE] (--group NAME | --client IP|MAC|NAME) (--service ID | NAME) --for DURATION [--json]
                                                      an exception with an end: the names answer for them
  hydradns block [-c FILE] (--group NAME | --client IP|MAC|NAME) (--service ID | NAME) --for DURATION [--json]
                                                      an exception with an end: the names are blocked for them
  hydradns exceptions [-c FILE] [--json]              the exceptions set in the running gateway, with their ends
  hydradns watchdog -c FILE [--log syslog|stderr] [--interval 5s] [--hook FILE] [--state FILE]
                                                      fail DNS open while the daemon does not answer (procd runs it)
  hydradns --version

Without -c, run (and every command but check-config and watchdog) uses
/etc/config/hydradns if it exists, else built-in defaults (listen on 127.0.0.1:5353, forward to the resolvers in /etc/resolv.conf).
Started as root, run binds its sockets and then becomes --user (else option
user, else hydradns, else nobody) with no privileges; --user root keeps root.

An exception (allow, block) beats the lists, blocked services and safe search
of the client's groups until its end; a block beats an allow, timed or
permanent (an allowlist). Local names (config record) are answered first.";

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
    service: Option<String>,
    /// `--for`'s text, read by the command (its own error words).
    for_: Option<String>,
    domain: Option<String>,
    before: Option<i64>,
    outcome: Option<String>,
    list: Option<String>,
    since: Option<Duration>,
    interval: Option<Duration>,
    hook: Option<PathBuf>,
    state: Option<PathBuf>,
    live: bool,
    one_at_a_time: bool,
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
            "--service" => {
                out.service = Some(value("a service id")?);
                "--service"
            }
            "--for" => {
                out.for_ = Some(value("a duration")?);
                "--for"
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
            "--live" => {
                out.live = true;
                "--live"
            }
            "--one-at-a-time" => {
                out.one_at_a_time = true;
                "--one-at-a-time"
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
    if matches!(cmd.as_str(), "check" | "status" | "check-config" | "stats" | "devices" | "exceptions") {
        // rpcd's plugins (LuCI's, the API's) run these as root for any
        // logged-in reader, and end a call past its time limit by killing
        // the plugin's shell: they go with it rather than read every list
        // or the day's log on for nobody.
        crate::sys::die_with_parent();
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
        "devices" => devices_cmd(args),
        "update" => update(args),
        "lists" => lists_cmd(args),
        "services" => services_cmd(args),
        "status" => status(args),
        "pause" => pause(args, None),
        "resume" => pause(args, Some(Duration::ZERO)),
        "allow" => except(args, "allow"),
        "block" => except(args, "block"),
        "exceptions" => exceptions_cmd(args),
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
        control: Some(cfg.control_socket.clone()).filter(|p| !p.as_os_str().is_empty()),
    })
}

fn required_config(args: &Args, cmd: &str) -> Result<Config, ExitCode> {
    let Some(path) = &args.config else {
        return Err(usage_error(cmd, format!("{cmd} needs -c FILE")));
    };
    Config::load(path).map_err(|e| config_error(&e))
}

/// The config the other commands read: like `run`'s, so `-c` is optional.
fn any_config(args: &Args) -> Result<Config, ExitCode> {
    run_config(args).map(|(c, _)| c).map_err(|e| config_error(&e))
}

/// A command's start: a usage error for an option `cmd` does not take
/// (`allowed`), else the config as [`any_config`] reads it.
fn command_config(args: &Args, cmd: &str, allowed: &[&str]) -> Result<Config, ExitCode> {
    args.only(cmd, allowed).map_err(|e| usage_error(cmd, e))?;
    any_config(args)
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
    ("log", "--group NAME", "only the queries of that group's devices, as the client rules have them now"),
    ("log", "--before ID", "the page before the row ID (a row's id in --json), for paging back"),
    ("stats", "--history", "queries per 10 minutes over the last 24 h, from the query log (oldest first)"),
    ("pause resume", "--group NAME", "only that group's lists and services"),
    ("allow block", "--group NAME", "for the clients of that group, while the group is in force"),
    ("allow block", "--client IP|MAC|NAME", "for that device, whatever its groups (as check --client takes it)"),
    ("allow block", "--service ID", "the names of that service (hydradns services lists them)"),
    ("allow block", "NAME", "that domain name and every name under it"),
    ("allow block", "--for DURATION", "until when, from now (90s, 30m, 1h, 2d; 0 removes the exception now)"),
    ("pause", "DURATION", "how long (default 5m; 0 ends the pause now)"),
    ("check", "NAME", "the domain name to look up"),
    ("check", "--live", "ask the running gateway, with its lists as loaded; exit 4 when it does not answer"),
    ("check", "--one-at-a-time", "read the lists only if no other such check does now; exit 5 (busy) if one does"),
    ("status", "--live", "read no list file: what the running gateway reports, or nothing of its lists"),
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
        let used = usage.split(|c: char| c.is_whitespace() || "[]|()".contains(c)).any(|w| w == word);
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
        assert!(
            usage_of("check").contains("hydradns check [-c FILE] [--client IP|MAC|NAME] [--live|--one-at-a-time] NAME")
        );
        assert!(!usage_of("check").contains("check-config"));
        assert_eq!(usage_of("nonsense"), USAGE);
    }

    /// Each option a command's usage names is explained in its --help, and
    /// each explanation belongs to an option some command has.
    #[test]
    fn help_says_what_each_option_does() {
        for cmd in ["run", "check-config", "check", "status", "stats", "metrics", "log", "top", "update", "lists"]
            .into_iter()
            .chain(["services", "pause", "resume", "watchdog", "devices", "allow", "block", "exceptions"])
        {
            let help = help_of(cmd);
            let usage = usage_of(cmd);
            for word in usage.split(|c: char| c.is_whitespace() || "[]|()".contains(c)).filter(|w| w.starts_with('-')) {
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
