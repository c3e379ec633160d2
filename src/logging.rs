//! Where log lines go: syslog (facility daemon, ident `hydradns`, read with
//! `logread -e hydradns` on OpenWrt) or stderr. Nothing on the query path
//! logs per query; log lines are for events (start, reload, errors, stats).

use std::io::{IsTerminal, Write};

use log::{LevelFilter, Log, Metadata, Record};

/// Log destination chosen with `--log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The local syslog socket (`/dev/log`).
    Syslog,
    /// Standard error, one line per message.
    Stderr,
}

struct StderrLogger;

/// Whether log lines go to stderr already (`--log stderr`, or no syslog).
static TO_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            let level = record.level().as_str().to_ascii_lowercase();
            // One write per line keeps lines from worker threads whole.
            let line = format!("hydradns: {level}: {}\n", record.args());
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger. Falls back to stderr (and says so) when there is no syslog socket.
pub fn init(target: Target, verbose: bool) {
    let level = if verbose { LevelFilter::Debug } else { LevelFilter::Info };
    if target == Target::Syslog {
        match syslog::init_unix(syslog::Facility::LOG_DAEMON, level) {
            Ok(()) => return,
            Err(e) => eprintln!("hydradns: no syslog ({e}); logging to stderr"),
        }
    }
    if log::set_logger(&StderrLogger).is_ok() {
        log::set_max_level(level);
        TO_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Logs why the process is about to exit, once: to the log, and to a
/// terminal if one is watching. Under procd, stderr is a pipe into syslog,
/// so writing it there as well put every fatal error in the log twice.
pub fn fatal(why: &str) {
    log::error!("{why}");
    if !TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) && std::io::stderr().is_terminal() {
        eprintln!("hydradns: {why}");
    }
}
