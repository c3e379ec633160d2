//! When scheduled groups' lists apply: `config schedule` windows in the
//! router's local time.
//!
//! Local time is the `TZ` environment variable when set, else OpenWrt's
//! `/etc/TZ`: a POSIX TZ string (`CET-1CEST,M3.5.0,M10.5.0/3`), daylight
//! saving included, which is what OpenWrt's `system.@system[0].timezone`
//! holds. A zone name (`Europe/Berlin`, as on a desktop) is looked up in
//! `/usr/share/zoneinfo`, whose files end with the same POSIX string.
//! Neither: UTC, said once in the log.
//!
//! A router without a battery boots with a wrong clock. Until
//! `time_synced_file` exists (OpenWrt's ntpd hotplug writes
//! `/var/state/ntpd-synced`), a scheduled group is taken to be inside its
//! window: its lists apply, so a wrong clock can only block more, never
//! unblock the kids' tablet at 3 am.
//!
//! The state is worked out at most once a minute, by the query that finds
//! it out of date (windows are whole minutes), and read with two atomic
//! loads and a clock read: no timer, no thread.
//!
//! `HYDRADNS_TEST_NOW` (Unix seconds), a test hook, sets the wall clock
//! this module sees at start; it then advances normally. A clock a test
//! sets is known good, unless the config names its own `time_synced_file`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use crate::config::groups::GroupTable;
use crate::config::groups::ScheduleConfig;

/// How often the clock file is looked at while it is missing.
const SYNC_CHECK: i64 = 10;

/// The scheduled groups of one config, and which are outside their window now.
#[derive(Debug)]
pub struct Schedules {
    /// (group bit, window) of each scheduled group.
    windows: Vec<(u32, ScheduleConfig)>,
    tz: Tz,
    synced_file: PathBuf,
    /// Scheduled groups outside their window.
    off: AtomicU64,
    /// Unix second until which `off` holds.
    valid_until: AtomicI64,
}

impl Schedules {
    /// The schedules of `groups`, in the zone the environment names.
    pub fn new(groups: &GroupTable, synced_file: &Path) -> Schedules {
        let windows: Vec<(u32, ScheduleConfig)> =
            groups.schedules.iter().enumerate().filter_map(|(bit, s)| Some((bit as u32, s.clone()?))).collect();
        let tz = if windows.is_empty() { Tz::utc() } else { local_zone() };
        let test_clock =
            std::env::var_os("HYDRADNS_TEST_NOW").is_some() && synced_file == Path::new(crate::config::SYNCED_FILE);
        Schedules {
            windows,
            tz,
            // Empty: no marker to wait for.
            synced_file: if test_clock { PathBuf::new() } else { synced_file.to_path_buf() },
            off: AtomicU64::new(0),
            valid_until: AtomicI64::new(i64::MIN),
        }
    }

    /// The scheduled groups outside their window now.
    #[inline]
    pub fn off(&self) -> u64 {
        if self.windows.is_empty() {
            return 0;
        }
        let now = now_unix();
        if now < self.valid_until.load(Relaxed) {
            return self.off.load(Relaxed);
        }
        let (off, until) = self.work_out(now);
        self.off.store(off, Relaxed);
        self.valid_until.store(until, Relaxed);
        off
    }

    /// The state at `now` and until when it holds.
    fn work_out(&self, now: i64) -> (u64, i64) {
        if !self.clock_synced() {
            return (0, now + SYNC_CHECK);
        }
        (self.off_at(now), now - now.rem_euclid(60) + 60)
    }

    /// The scheduled groups outside their window at Unix time `t` (clock synced).
    pub fn off_at(&self, t: i64) -> u64 {
        let (day, minute) = self.tz.weekday_minute(t);
        self.windows.iter().filter(|(_, w)| !inside(w, day, minute)).fold(0, |m, (bit, _)| m | 1 << bit)
    }

    /// Whether the clock is known good (the marker exists, or no marker is configured).
    pub fn clock_synced(&self) -> bool {
        self.synced_file.as_os_str().is_empty() || self.synced_file.exists()
    }

    /// The zone in use, for messages.
    pub fn zone(&self) -> &str {
        &self.tz.text
    }
}

/// Is (`day`, 0 = Sunday; `minute` of the day) inside window `w`? A window
/// whose end is at or before its start runs past midnight into the next day.
pub fn inside(w: &ScheduleConfig, day: u32, minute: u32) -> bool {
    let on = |d: u32| w.days >> (d % 7) & 1 != 0;
    let (start, end) = (u32::from(w.start), u32::from(w.end));
    if end > start {
        on(day) && (start..end).contains(&minute)
    } else {
        (on(day) && minute >= start) || (on(day + 6) && minute < end)
    }
}

/// Unix seconds now, as the schedules see it (see `HYDRADNS_TEST_NOW`).
pub fn now_unix() -> i64 {
    static SHIFT: OnceLock<i64> = OnceLock::new();
    let real = crate::sys::unix_now() as i64;
    let shift = *SHIFT.get_or_init(|| {
        std::env::var("HYDRADNS_TEST_NOW").ok().and_then(|v| v.trim().parse::<i64>().ok()).map_or(0, |t| t - real)
    });
    real + shift
}

/// Largest time zone file read: TZif files are a few KiB.
const MAX_TZ_BYTES: u64 = 64 << 10;

/// The zone from `TZ`, else `/etc/TZ`; UTC if neither gives one.
pub fn local_zone() -> Tz {
    let text = std::env::var("TZ")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .or_else(|| {
            crate::sys::read_regular_text(Path::new("/etc/TZ"), MAX_TZ_BYTES).ok().map(|t| t.trim().to_string())
        })
        .unwrap_or_default();
    if let Some(tz) = Tz::parse(&text) {
        return tz;
    }
    if let Some(tz) = zoneinfo_footer(&text).and_then(|posix| Tz::parse(&posix)) {
        return Tz { text: format!("{} ({})", text.trim_start_matches(':'), tz.text), ..tz };
    }
    if text.is_empty() {
        log::warn!("schedules: no TZ and no /etc/TZ; using UTC");
    } else {
        log::warn!("schedules: cannot read the time zone '{text}'; using UTC");
    }
    Tz::utc()
}

/// The POSIX TZ string at the end of a TZif file (RFC 8536 §3.3) for zone `name`.
fn zoneinfo_footer(name: &str) -> Option<String> {
    let name = name.trim().trim_start_matches(':');
    if name.is_empty() || name.contains("..") {
        return None;
    }
    let path = if name.starts_with('/') { PathBuf::from(name) } else { Path::new("/usr/share/zoneinfo").join(name) };
    // TZ may name any file (`TZ=/dev/zero`): a regular one, of a zone's size.
    let bytes = crate::sys::read_regular(&path, MAX_TZ_BYTES).ok()?;
    if !bytes.starts_with(b"TZif") {
        return None;
    }
    let text = bytes.strip_suffix(b"\n")?;
    let start = text.iter().rposition(|&b| b == b'\n')? + 1;
    String::from_utf8(text[start..].to_vec()).ok()
}

/// A POSIX TZ rule: standard offset, and daylight saving with its dates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tz {
    /// As given, for messages.
    text: String,
    /// Seconds to add to UTC for standard time (east positive).
    std: i64,
    /// Daylight saving: its offset as `std`, and when it starts and ends.
    dst: Option<(i64, Rule, Rule)>,
}

/// When a daylight-saving change happens: a day of the year and a local time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Date {
    /// `Jn`: day 1–365, February 29 never counted.
    Julian(u32),
    /// `n`: day 0–365, February 29 counted.
    Zero(u32),
    /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
    Month(u32, u32, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rule {
    date: Date,
    /// Seconds after local midnight (may be negative or past 24 h, RFC 8536).
    time: i64,
}

impl Tz {
    fn utc() -> Tz {
        Tz { text: "UTC".into(), std: 0, dst: None }
    }

    /// Parses a POSIX TZ string; `None` if it is not one.
    pub fn parse(text: &str) -> Option<Tz> {
        let t = text.trim();
        let mut p = Parser { s: t.as_bytes(), at: 0 };
        p.name()?;
        let std = -p.offset()?;
        let dst = if p.at < p.s.len() {
            p.name()?;
            let off = if p.peek().is_some_and(|c| c == b'+' || c == b'-' || c.is_ascii_digit()) {
                -p.offset()?
            } else {
                std + 3600
            };
            // No rule: the US rule, as glibc and musl assume.
            let (start, end) = if p.eat(b',') {
                let start = p.rule()?;
                if !p.eat(b',') {
                    return None;
                }
                (start, p.rule()?)
            } else {
                (Rule { date: Date::Month(3, 2, 0), time: 7200 }, Rule { date: Date::Month(11, 1, 0), time: 7200 })
            };
            Some((off, start, end))
        } else {
            None
        };
        (p.at == p.s.len()).then(|| Tz { text: t.to_string(), std, dst })
    }

    /// Seconds to add to UTC at Unix time `t`.
    pub fn offset_at(&self, t: i64) -> i64 {
        let Some((dst, start, end)) = self.dst else { return self.std };
        let year = civil(days_of(t + self.std)).0;
        // The changes in UTC: the start is given in standard time, the end in daylight time.
        let on = start.at(year) - self.std;
        let off = end.at(year) - dst;
        let summer = if on < off { (on..off).contains(&t) } else { !(off..on).contains(&t) };
        if summer { dst } else { self.std }
    }

    /// Local weekday (0 Sunday) and minute of the day at Unix time `t`.
    pub fn weekday_minute(&self, t: i64) -> (u32, u32) {
        let local = t + self.offset_at(t);
        let days = days_of(local);
        (((days + 4).rem_euclid(7)) as u32, (local.rem_euclid(86_400) / 60) as u32)
    }
}

impl Rule {
    /// Local seconds since the epoch at which this rule fires in `year`.
    fn at(&self, year: i64) -> i64 {
        let jan1 = days_from_civil(year, 1, 1);
        let leap = is_leap(year);
        let day = match self.date {
            Date::Julian(n) => jan1 + i64::from(n) - 1 + i64::from(leap && n >= 60),
            Date::Zero(n) => jan1 + i64::from(n),
            Date::Month(m, w, d) => {
                let first = days_from_civil(year, m, 1);
                let wday = (first + 4).rem_euclid(7);
                let mut day = first + (i64::from(d) - wday).rem_euclid(7) + 7 * (i64::from(w) - 1);
                let len = days_in_month(year, m);
                while day >= first + len {
                    day -= 7;
                }
                day
            }
        };
        day * 86_400 + self.time
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.at += usize::from(hit);
        hit
    }

    /// A zone abbreviation: three or more letters, or `<...>`.
    fn name(&mut self) -> Option<()> {
        let start = self.at;
        if self.eat(b'<') {
            while self.peek()? != b'>' {
                self.at += 1;
            }
            self.at += 1;
            return (self.at - start >= 5).then_some(());
        }
        while self.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
            self.at += 1;
        }
        (self.at - start >= 3).then_some(())
    }

    fn number(&mut self) -> Option<i64> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at]).ok()?.parse().ok()
    }

    /// `[+-]hh[:mm[:ss]]` in seconds.
    fn clock(&mut self) -> Option<i64> {
        let sign = if self.eat(b'-') {
            -1
        } else {
            self.eat(b'+');
            1
        };
        let h = self.number()?;
        let m = if self.eat(b':') { self.number()? } else { 0 };
        let s = if self.eat(b':') { self.number()? } else { 0 };
        // Checked before the arithmetic: a long digit run must not overflow it.
        (h <= 167 && m < 60 && s < 60).then(|| sign * (h * 3600 + m * 60 + s))
    }

    /// A UTC offset as written (west positive).
    fn offset(&mut self) -> Option<i64> {
        self.clock().filter(|o| o.abs() <= 24 * 3600)
    }

    fn rule(&mut self) -> Option<Rule> {
        let date = if self.eat(b'M') {
            let m = self.number()?;
            self.eat(b'.').then_some(())?;
            let w = self.number()?;
            self.eat(b'.').then_some(())?;
            let d = self.number()?;
            ((1..=12).contains(&m) && (1..=5).contains(&w) && d <= 6)
                .then_some(Date::Month(m as u32, w as u32, d as u32))?
        } else if self.eat(b'J') {
            let n = self.number()?;
            (1..=365).contains(&n).then_some(Date::Julian(n as u32))?
        } else {
            let n = self.number()?;
            (n <= 365).then_some(Date::Zero(n as u32))?
        };
        let time = if self.eat(b'/') { self.clock()? } else { 7200 };
        Some(Rule { date, time })
    }
}

fn days_of(t: i64) -> i64 {
    t.div_euclid(86_400)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: u32) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (year, month, day) of a day count since 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Unix seconds of a UTC date and time.
    fn utc(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
        days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in [-1, 0, 59, 365, 10_957, 20_454, 100_000] {
            let (y, m, d) = civil(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2026, 12, 3), 20_790);
    }

    #[test]
    fn central_europe_changes_on_the_last_sundays() {
        // OpenWrt's string for Europe/Berlin.
        let tz = Tz::parse("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        // 2026: summer time from 29 March 01:00 UTC to 25 October 01:00 UTC.
        assert_eq!(tz.offset_at(utc(2026, 3, 29, 0, 59)), 3600);
        assert_eq!(tz.offset_at(utc(2026, 3, 29, 1, 0)), 7200);
        assert_eq!(tz.offset_at(utc(2026, 10, 25, 0, 59)), 7200);
        assert_eq!(tz.offset_at(utc(2026, 10, 25, 1, 0)), 3600);
        // Thursday 3 December 2026, 20:30 UTC is 21:30 in Berlin.
        assert_eq!(tz.weekday_minute(utc(2026, 12, 3, 20, 30)), (4, 21 * 60 + 30));
    }

    #[test]
    fn us_and_southern_and_odd_zones() {
        let ny = Tz::parse("EST5EDT,M3.2.0,M11.1.0").unwrap();
        // 2026: 8 March 07:00 UTC to 1 November 06:00 UTC.
        assert_eq!(ny.offset_at(utc(2026, 3, 8, 6, 59)), -5 * 3600);
        assert_eq!(ny.offset_at(utc(2026, 3, 8, 7, 0)), -4 * 3600);
        assert_eq!(ny.offset_at(utc(2026, 11, 1, 6, 0)), -5 * 3600);
        assert_eq!(Tz::parse("EST5EDT").unwrap().offset_at(utc(2026, 7, 1, 0, 0)), -4 * 3600, "the default rule");
        // Sydney: summer across the new year.
        let syd = Tz::parse("AEST-10AEDT,M10.1.0,M4.1.0/3").unwrap();
        assert_eq!(syd.offset_at(utc(2026, 1, 15, 0, 0)), 11 * 3600);
        assert_eq!(syd.offset_at(utc(2026, 6, 15, 0, 0)), 10 * 3600);
        assert_eq!(syd.offset_at(utc(2026, 12, 15, 0, 0)), 11 * 3600);
        let kathmandu = Tz::parse("<+0545>-5:45").unwrap();
        assert_eq!(kathmandu.offset_at(0), 5 * 3600 + 45 * 60);
        assert_eq!(Tz::parse("UTC0").unwrap().offset_at(0), 0);
        assert_eq!(Tz::parse("GMT0BST,M3.5.0/1,M10.5.0").unwrap().offset_at(utc(2026, 7, 1, 0, 0)), 3600);
        for bad in
            ["", "Europe/Berlin", "CET", "CET-1CEST,M3.5.0", "CET-1CEST,M13.5.0,M10.5.0", "X1", "GMT333333333333333333"]
        {
            assert_eq!(Tz::parse(bad), None, "{bad}");
        }
    }

    fn window(days: &[u32], start: u16, end: u16) -> ScheduleConfig {
        ScheduleConfig {
            name: "w".into(),
            days: days.iter().fold(0, |m, d| m | 1 << d),
            start,
            end,
            origin: "t".into(),
        }
    }

    #[test]
    fn windows_and_overnight() {
        // Sunday to Thursday nights, 21:00 to 07:00.
        let w = window(&[0, 1, 2, 3, 4], 21 * 60, 7 * 60);
        assert!(inside(&w, 0, 21 * 60), "Sunday 21:00");
        assert!(inside(&w, 1, 6 * 60 + 59), "Monday 06:59, the night from Sunday");
        assert!(!inside(&w, 1, 7 * 60), "Monday 07:00");
        assert!(inside(&w, 5, 3 * 60), "Friday 03:00, the night from Thursday");
        assert!(!inside(&w, 5, 22 * 60), "Friday 22:00: Friday is not listed");
        assert!(!inside(&w, 0, 3 * 60), "Sunday 03:00: Saturday is not listed");
        let day = window(&[1], 9 * 60, 17 * 60);
        assert!(inside(&day, 1, 9 * 60) && !inside(&day, 1, 17 * 60) && !inside(&day, 2, 10 * 60));
        let all_day = window(&[6], 0, 0);
        assert!(inside(&all_day, 6, 0) && inside(&all_day, 6, 1439) && !inside(&all_day, 0, 0));
    }

    #[test]
    fn an_unsynced_clock_keeps_every_scheduled_group_on() {
        let dir = std::env::temp_dir().join(format!("hydradns-sched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("ntpd-synced");
        let mut t = GroupTable::default();
        t.names.push("kids".into());
        t.modes.push(None);
        t.schedules.push(Some(window(&[1], 9 * 60, 10 * 60)));
        let s = Schedules::new(&t, &marker);
        let monday_noon = utc(2026, 11, 30, 12, 0);
        assert_eq!(s.work_out(monday_noon).0, 0, "no marker: inside");
        std::fs::write(&marker, "").unwrap();
        let tz_free = Schedules { tz: Tz::utc(), ..Schedules::new(&t, &marker) };
        assert_eq!(tz_free.work_out(monday_noon), (0b10, monday_noon + 60));
        assert_eq!(tz_free.off_at(utc(2026, 11, 30, 9, 30)), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
