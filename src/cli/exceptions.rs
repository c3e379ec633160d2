//! `allow`, `block` and `exceptions`: exceptions with an end, set in and
//! read from the running gateway over its control socket
//! (`crate::policy::exceptions` says what they do).

use super::*;

use crate::policy::exceptions::{Exception, MAX_SECS, Subject, Target};
use crate::query::exceptions::{read, to_json};

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
    // The words as read: an address, a MAC, a name written the one way.
    let who = match &e.subject {
        Subject::Group(w) | Subject::Client(w) => w,
    };
    let target = match &e.target {
        Target::Service(t) | Target::Name(t) => t,
    };
    let request = format!("{action} {secs} {kind} {who} {what} {target}");
    let answer = match control::request(&cfg.control_socket, &request, Duration::from_secs(10)) {
        Ok(json) => json,
        Err(err) => {
            eprintln!("hydradns: {err}");
            return ExitCode::from(1);
        }
    };
    let listed = match read(&answer) {
        Ok(l) if !l.error.is_empty() => {
            eprintln!("hydradns: {}", l.error);
            return ExitCode::from(1);
        }
        Ok(l) => l,
        Err(_) => {
            eprintln!("hydradns: unreadable answer from the gateway: {answer}");
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{}", to_json(&listed.exceptions));
        return ExitCode::SUCCESS;
    }
    let told = e.describe();
    match listed.changed.as_str() {
        "removed" => println!("removed: {told}"),
        "not set" => println!("{told} was not set: nothing to remove"),
        _ => {
            let ends = listed.exceptions.iter().find(|x| x.same(&e)).map_or(0, |x| x.ends);
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
    let set = match control::request(&cfg.control_socket, "exceptions", Duration::from_secs(5)) {
        Ok(json) => match read(&json) {
            Ok(l) => l.exceptions,
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
        println!("{}", to_json(&set));
        return ExitCode::SUCCESS;
    }
    if set.is_empty() {
        println!("no exceptions");
    }
    print!("{}", lines(&set, crate::sys::unix_now()));
    ExitCode::SUCCESS
}

/// One line per exception, with its end and the time left at `now`: for
/// `exceptions`, `status` and `stats`.
pub(super) fn lines(set: &[Exception], now: u64) -> String {
    let mut o = String::new();
    for e in set {
        o.push_str(&format!(
            "exception    {} until {} ({} left)\n",
            e.describe(),
            crate::timetext::iso8601(e.ends.saturating_mul(1000)),
            duration_text(e.ends.saturating_sub(now))
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
    read(&json).map(|l| l.exceptions).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn each_exception_is_a_line_with_its_end() {
        let e = Exception::from_words("allow", "group", "kids", "service", "youtube", 1_800_003_600).unwrap();
        assert_eq!(
            lines(&[e], 1_800_000_000),
            "exception    allow service 'youtube' for group 'kids' until 2027-01-15T09:00:00.000Z (1h 0m left)\n"
        );
    }
}
