//! A control socket request line, as the gateway reads one (at most
//! `MAX_REQUEST` bytes, up to the first newline, trimmed), read and, for
//! `pause`, `allow` and `block`, carried out on a real pause state and a
//! real table of exceptions (compiled without a config, as names only):
//! never a panic (`pause 18446744073709551615` once overflowed the pause's
//! end and took the gateway down).
#![no_main]

use std::time::Duration;

use hydradns::config::groups::GroupTable;
use hydradns::control::{MAX_REQUEST, Request, parse};
use hydradns::policy::domainset::name_key;
use hydradns::policy::exceptions::{Asker, Compiled, Exception, Exceptions, MAX_SECS, Target, Who, end_after, unix_ms};
use hydradns::policy::pause::Pause;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(MAX_REQUEST)];
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else { return };
    match parse(line.trim()) {
        Request::Pause { secs, group } => {
            let p = Pause::default();
            let d = Duration::from_secs(secs);
            match group {
                Some(g) => {
                    let _ = p.set_group(&GroupTable::default(), g, d);
                }
                None => p.set(d),
            }
            let _ = (p.active(), p.paused_groups(), p.until_unix(), p.groups_until_unix());
        }
        Request::Except { action, secs, kind, who, what, target } => {
            // As the control socket does: the cap on seconds first.
            if secs > MAX_SECS {
                return;
            }
            let now = unix_ms();
            let ends = if secs == 0 { 0 } else { end_after(now, Duration::from_secs(secs)) };
            let Ok(e) = Exception::from_words(action, kind, who, what, target, ends) else { return };
            let _ = e.describe();
            let compile = |set: &[Exception]| {
                Compiled::build(
                    set,
                    |_| Who::Groups(u64::MAX),
                    |target| match target {
                        Target::Name(n) => name_key(n).into_iter().map(Vec::into_boxed_slice).collect(),
                        Target::Service(_) => Vec::new(),
                    },
                )
            };
            let t = Exceptions::new();
            let _ = t.change(e.clone(), now, |_| Ok(()), compile);
            if let Target::Name(n) = &e.target {
                let key = name_key(n).unwrap_or_default();
                let asker = Asker { ip: [192, 0, 2, 1].into(), mac: None, rule: None, groups: 1 };
                let decided = t.compiled().decide(&key, &asker, now).map(|r| r.action);
                assert!(ends == 0 || decided == Some(e.action), "set, yet not in force");
            }
            let _ = (t.until(), t.current(now));
        }
        _ => {}
    }
});
