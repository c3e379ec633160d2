//! `allow`, `block` and `exceptions`: exceptions with an end, set in and
//! read from the running gateway over its control socket
//! (`crate::policy::exceptions` says what they do).

use super::*;

use crate::policy::exceptions::{Exception, MAX_SECS};
use crate::stats::{ExceptionReport, ExceptionsReport};

/// The gateway's answer to `allow` or `block`: what changed and the
/// exceptions after it, or why nothing did.
#[derive(DeJson)]
struct Changed {
    #[nserde(default)]
    changed: String,
    #[nserde(default)]
    error: String,
    #[nserde(default)]
    exceptions: Vec<ExceptionReport>,
}

/// `hydradns allow` and `hydradns block` (`action`).
pub(super) fn except(args: Args, action: &str) -> ExitCode {
    let allowed = ["-c", "--group", "--client", "--service", "--for", "--json"];
    if let Err(e) = args.only(action, &allowed) {
        return usage_error(action, e);
    }
    let (kind, who) = match (&args.group, &args.client) {
        (Some(g), None) => ("group", g),
        (None, Some(c)) => ("client", c),
        _ => return usage_error(action, format!("{action} takes --group NAME or --client IP|MAC|NAME, one of them")),
    };
    let (what, target) = match (&args.service, args.positional.as_slice()) {
        (Some(s), []) => ("service", s),
        (None, [name]) => ("name", name),
        _ => return usage_error(action, format!("{action} takes --service ID or a NAME, one of them")),
    };
    let Some(text) = &args.for_ else {
        return usage_error(action, format!("{action} needs --for DURATION (0 removes the exception)"));
    };
    let Some(d) = parse_duration(text) else {
        return usage_error(action, format!("--for: '{text}' is not a duration (e.g. 90s, 30m, 1h, 2d)"));
    };
    // Whole seconds, rounded up: `--for 500ms` still lasts.
    let secs = d.as_millis().div_ceil(1000);
    if secs > u128::from(MAX_SECS) {
        return usage_error(
            action,
            format!("--for: longer than {} days; what should last longer is a list entry", MAX_SECS / 86_400),
        );
    }
    // The words' shape here, for a usage error; whether the group, the
    // service and the device exist is the running gateway's to say.
    let e = match Exception::from_words(action, kind, who, what, target, 1) {
        Ok(e) => e,
        Err(m) => return usage_error(action, m),
    };
    let cfg = match any_config(&args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let request = {
        let row = crate::query::exceptions::row(&e);
        let who = row.group.or(row.client).unwrap_or_default();
        let target = row.service.or(row.name).unwrap_or_default();
        format!("{action} {secs} {kind} {who} {what} {target}")
    };
    let answer = match control::request(&cfg.control_socket, &request, Duration::from_secs(10)) {
        Ok(json) => json,
        Err(err) => {
            eprintln!("hydradns: {err}");
            return ExitCode::from(1);
        }
    };
    let changed = match Changed::deserialize_json(&answer) {
        Ok(c) if !c.error.is_empty() => {
            eprintln!("hydradns: {}", c.error);
            return ExitCode::from(1);
        }
        Ok(c) => c,
        Err(_) => {
            eprintln!("hydradns: unreadable answer from the gateway: {answer}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        let report = ExceptionsReport { schema: crate::stats::SCHEMA, exceptions: changed.exceptions };
        println!("{}", report.serialize_json());
        return ExitCode::SUCCESS;
    }
    let told = e.describe();
    match changed.changed.as_str() {
        "removed" => println!("removed: {told}"),
        "not set" => println!("{told} was not set: nothing to remove"),
        _ => {
            let mut set = changed.exceptions.iter().filter_map(|r| crate::query::exceptions::from_row(r).ok());
            let ends = set.find(|x| x.same(&e)).map_or(0, |x| x.ends);
            println!("{told} until {}", crate::timetext::iso8601(ends * 1000));
        }
    }
    ExitCode::SUCCESS
}

/// `hydradns exceptions`: those set in the running gateway, not ended.
pub(super) fn exceptions_cmd(args: Args) -> ExitCode {
    let cfg = match command_config(&args, "exceptions", &["-c", "--json"]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if !args.positional.is_empty() {
        return usage_error("exceptions", "exceptions takes no arguments".into());
    }
    let rows = match control::request(&cfg.control_socket, "exceptions", Duration::from_secs(5)) {
        Ok(json) => match crate::query::exceptions::read(&json) {
            Ok(rows) => rows,
            Err(e) => {
                eprintln!("hydradns: unreadable answer from the gateway ({e}): {json}");
                return ExitCode::from(1);
            }
        },
        Err(e) => {
            eprintln!("hydradns: {e}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", ExceptionsReport { schema: crate::stats::SCHEMA, exceptions: rows }.serialize_json());
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        println!("no exceptions");
    }
    print!("{}", lines(&rows, crate::sys::unix_now()));
    ExitCode::SUCCESS
}

/// One line per exception, with its end and the time left at `now`: for
/// `exceptions`, `status` and `stats`.
pub(super) fn lines(rows: &[ExceptionReport], now: u64) -> String {
    let mut o = String::new();
    for r in rows {
        let told = crate::query::exceptions::from_row(r).map_or_else(|e| e, |e| e.describe());
        let left = duration_text(r.ends.saturating_sub(now));
        o.push_str(&format!(
            "exception    {told} until {} ({left} left)\n",
            crate::timetext::iso8601(r.ends.saturating_mul(1000))
        ));
    }
    o
}

/// The running gateway's exceptions for a `check` made here: none when it
/// does not answer (then none is in force).
pub(super) fn running(cfg: &Config) -> Vec<Exception> {
    let Ok(json) = control::request(&cfg.control_socket, "exceptions", Duration::from_secs(2)) else {
        return Vec::new();
    };
    let rows = crate::query::exceptions::read(&json).unwrap_or_default();
    rows.iter().filter_map(|r| crate::query::exceptions::from_row(r).ok()).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn each_exception_is_a_line_with_its_end() {
        let row = ExceptionReport {
            action: "allow".into(),
            group: Some("kids".into()),
            service: Some("youtube".into()),
            ends: 1_800_003_600,
            ..ExceptionReport::default()
        };
        assert_eq!(
            lines(&[row], 1_800_000_000),
            "exception    allow service 'youtube' for group 'kids' until 2027-01-15T09:00:00.000Z (1h 0m left)\n"
        );
    }
}
