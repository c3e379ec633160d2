//! Command line: `run`, `check-config`, `check`, `--version`.
//!
//! Exit codes: 0 success, 1 runtime failure (e.g. cannot bind), 2 bad usage
//! or bad config (with `file:line` on stderr).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{Config, ConfigError, DEFAULT_CONFIG_PATH, ListKind};
use crate::logging::{self, Target};
use crate::policy::{self, Policy, Verdict, domainset::name_key, formats};
use crate::server;

const USAGE: &str = "\
usage:
  hydradns run [-c FILE] [--log syslog|stderr] [-v]   serve DNS in the foreground
  hydradns check-config -c FILE                       validate FILE; print FILE:LINE: problem
  hydradns check -c FILE NAME                         is NAME blocked, and by which list?
  hydradns --version

Without -c, run uses /etc/config/hydradns if it exists, else built-in
defaults (listen on 127.0.0.1:5353, forward to the resolvers in /etc/resolv.conf).";

/// Options shared by the subcommands.
#[derive(Debug, Default)]
struct Args {
    config: Option<PathBuf>,
    log: Option<Target>,
    verbose: bool,
    positional: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-c" | "--config" => {
                out.config = Some(it.next().ok_or("-c needs a file")?.into());
            }
            "--log" => {
                out.log = Some(match it.next().map(String::as_str) {
                    Some("syslog") => Target::Syslog,
                    Some("stderr") => Target::Stderr,
                    _ => return Err("--log takes syslog or stderr".into()),
                });
            }
            "-v" | "--verbose" => out.verbose = true,
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option {s}")),
            _ => out.positional.push(a.clone()),
        }
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
    if matches!(cmd.as_str(), "--version" | "-V" | "version") {
        println!("hydradns {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    if matches!(cmd.as_str(), "--help" | "-h" | "help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(rest) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hydradns: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match cmd.as_str() {
        "run" => run(args),
        "check-config" => check_config(args),
        "check" => check(args),
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
    if !args.positional.is_empty() {
        eprintln!("hydradns: run takes no arguments\n{USAGE}");
        return ExitCode::from(2);
    }
    logging::init(args.log.unwrap_or(Target::Syslog), args.verbose);
    let (cfg, path) = match run_config(&args) {
        Ok(c) => c,
        Err(e) => {
            log::error!("{e}");
            return config_error(&e);
        }
    };
    log::info!(
        "hydradns {} starting with {}",
        env!("CARGO_PKG_VERSION"),
        path.as_ref().map_or("built-in defaults".into(), |p| p.display().to_string())
    );
    match server::run(cfg, path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            eprintln!("hydradns: {e}");
            ExitCode::from(1)
        }
    }
}

fn required_config(args: &Args, cmd: &str) -> Result<Config, ExitCode> {
    let Some(path) = &args.config else {
        eprintln!("hydradns: {cmd} needs -c FILE\n{USAGE}");
        return Err(ExitCode::from(2));
    };
    Config::load(path).map_err(|e| config_error(&e))
}

fn check_config(args: Args) -> ExitCode {
    let cfg = match required_config(&args, "check-config") {
        Ok(c) => c,
        Err(code) => return code,
    };
    for w in &cfg.warnings {
        eprintln!("{w} (warning)");
    }
    let mut missing = false;
    for src in &cfg.lists {
        for p in &src.paths {
            if !p.exists() {
                eprintln!("{}: list file {} does not exist (warning)", src.origin, p.display());
                missing = true;
            }
        }
    }
    println!(
        "{}: ok ({} listen, {} upstreams, {} lists, {} forward rules{})",
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
    let cfg = match required_config(&args, "check") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let [name] = args.positional.as_slice() else {
        eprintln!("hydradns: check takes one NAME\n{USAGE}");
        return ExitCode::from(2);
    };
    let (Some(name), Some(key)) = (formats::normalize_name(name), name_key(name)) else {
        eprintln!("hydradns: '{name}' is not a domain name");
        return ExitCode::from(2);
    };
    let policy = Policy::load(&cfg.lists, cfg.block_mode, cfg.block_ttl);
    let (block, allow) = policy.entries(&key);
    match policy.check(&key) {
        Verdict::Blocked { source } => println!(
            "{name}: blocked by list '{}' (entry {})",
            policy.source_name(source),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Allowed { source } => println!(
            "{name}: allowed by list '{}' (entry {}), overriding a block (entry {})",
            policy.source_name(source),
            allow.as_ref().map_or(String::new(), |a| a.1.clone()),
            block.map_or(String::new(), |b| b.1)
        ),
        Verdict::Pass => println!("{name}: not blocked"),
    }
    for (list, kind, entry) in policy::explain(&cfg.lists, &key) {
        let what = match kind {
            ListKind::Block => "blocks",
            ListKind::Allow => "allows",
        };
        println!("  list '{list}' {what} it (entry {entry})");
    }
    ExitCode::SUCCESS
}
