//! A time zone as /etc/TZ or the TZ variable may hold it, or anything else:
//! a POSIX TZ string that parses gives offsets within a day and a weekday
//! and minute in range at any time of this or the next century; never a panic.
#![no_main]

use hydradns::policy::schedule::Tz;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Some(tz) = Tz::parse(&text) else { return };
    for t in [-86_400, 0, 951_782_400, 1_796_263_254, 1_806_000_000, 4_102_444_800] {
        let offset = tz.offset_at(t);
        assert!(offset.abs() <= 2 * 86_400, "{text}: offset {offset} at {t}");
        let (day, minute) = tz.weekday_minute(t);
        assert!(day < 7 && minute < 1440, "{text}: day {day} minute {minute} at {t}");
    }
});
