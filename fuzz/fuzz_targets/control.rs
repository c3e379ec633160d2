//! A control socket request line, as the gateway reads one (at most 256
//! bytes, up to the first newline, trimmed), read and, for `pause`, carried
//! out on a real pause state: never a panic (`pause 18446744073709551615`
//! once overflowed the pause's end and took the gateway down).
#![no_main]

use std::time::Duration;

use hydradns::config::groups::GroupTable;
use hydradns::control::{Request, parse};
use hydradns::policy::pause::Pause;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(256)];
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else { return };
    if let Request::Pause { secs, group } = parse(line.trim()) {
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
});
