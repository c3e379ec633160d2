//! Blocking paused for a while (`hydradns pause 5m`): "this shop won't
//! load" without editing lists. Pi-hole's `pihole disable 5m` and
//! AdGuard's "disable protection for…" do the same.
//!
//! While paused, a name a list would block is answered as if no list had
//! it: forwarded or from the cache, logged with the outcome `paused` and the
//! list that would have blocked it, counted as `paused`. Local names and
//! rebind protection stay: they are not blocking. An answer cached while
//! paused is marked as passed by no list, so once the pause ends the next
//! hit looks at the lists again and the name is blocked at once.
//!
//! `--group NAME` pauses one group's lists only: its clients' other groups
//! keep blocking. A group's pause is kept by name, so a reload that
//! renumbers the groups keeps it on the right one.
//!
//! The end is kept on the monotonic clock (a wall clock set at boot by NTP
//! would stretch or cut it), in the engine, so a reload keeps it and a
//! restart ends it. Only a blocked name reads it: one atomic load, and a
//! clock read while a pause is set.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::groups::GroupTable;
use crate::config::groups::MAX_GROUPS;

/// When blocking resumes.
#[derive(Debug)]
pub struct Pause {
    base: Instant,
    /// Milliseconds after `base` at which the pause ends; 0 when none is set.
    until_ms: AtomicU64,
    /// The same per group, by its bit in the current config.
    group_until: [AtomicU64; MAX_GROUPS],
    /// Groups with a pause set (perhaps over already): a query reads
    /// `group_until` only for these, and none at all while this is 0.
    groups_set: AtomicU64,
    /// Group pauses by name: (name, end as in `until_ms`). The control
    /// socket and reloads take it; queries never do.
    named: Mutex<Vec<(String, u64)>>,
}

impl Default for Pause {
    fn default() -> Pause {
        Pause {
            base: Instant::now(),
            until_ms: AtomicU64::new(0),
            group_until: std::array::from_fn(|_| AtomicU64::new(0)),
            groups_set: AtomicU64::new(0),
            named: Mutex::new(Vec::new()),
        }
    }
}

impl Pause {
    /// The end of a pause of `d` from now; one past any clock (a pause
    /// without end) when that does not fit: the control socket takes any
    /// number of seconds, and `u64::MAX` of them overflowed the sum.
    fn end_after(&self, d: Duration) -> u64 {
        if d.is_zero() {
            return 0;
        }
        let end = self.base.elapsed().saturating_add(d).as_millis();
        u64::try_from(end).unwrap_or(u64::MAX).max(1)
    }

    /// Pauses blocking for `d` from now; zero resumes it (and every group's pause).
    pub fn set(&self, d: Duration) {
        self.until_ms.store(self.end_after(d), Relaxed);
        if d.is_zero() {
            self.lock().clear();
            self.groups_set.store(0, Relaxed);
            self.group_until.iter().for_each(|g| g.store(0, Relaxed));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, u64)>> {
        self.named.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Pauses group `name`'s lists for `d`; zero resumes them. An error
    /// names the groups there are.
    pub fn set_group(&self, groups: &GroupTable, name: &str, d: Duration) -> Result<(), String> {
        if groups.bit(name).is_none() {
            let known: Vec<&str> = groups.names.iter().map(|n| &**n).collect();
            return Err(format!("no group '{name}' (groups: {})", known.join(", ")));
        }
        let end = self.end_after(d);
        let mut named = self.lock();
        named.retain(|(n, _)| n != name);
        if end != 0 {
            named.push((name.to_string(), end));
        }
        self.apply(&named, groups);
        Ok(())
    }

    /// Puts the named group pauses on `groups`' bits: after a reload, whose
    /// config may number the groups differently.
    pub fn renumber(&self, groups: &GroupTable) {
        let named = self.lock();
        self.apply(&named, groups);
    }

    fn apply(&self, named: &[(String, u64)], groups: &GroupTable) {
        let mut set = 0u64;
        for (bit, slot) in self.group_until.iter().enumerate() {
            let end = groups.names.get(bit).and_then(|n| named.iter().find(|(m, _)| **m == **n)).map_or(0, |p| p.1);
            slot.store(end, Relaxed);
            set |= u64::from(end != 0) << bit;
        }
        self.groups_set.store(set, Relaxed);
    }

    /// The groups whose lists are paused now: all of them while blocking is.
    #[inline]
    pub fn paused_groups(&self) -> u64 {
        let set = self.groups_set.load(Relaxed);
        let until = self.until_ms.load(Relaxed);
        if set == 0 && until == 0 {
            return 0;
        }
        let now = self.base.elapsed().as_millis() as u64;
        if until != 0 {
            if now < until {
                return u64::MAX;
            }
            // Over: cleared, so the queries after a pause read no clock for
            // it (unless a new pause replaced this one meanwhile).
            let _ = self.until_ms.compare_exchange(until, 0, Relaxed, Relaxed);
        }
        let mut paused = 0;
        let mut bits = set;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            paused |= u64::from(self.group_until[b].load(Relaxed) > now) << b;
            bits &= bits - 1;
        }
        paused
    }

    /// Each paused group and when its pause ends, in Unix seconds.
    pub fn groups_until_unix(&self) -> Vec<(String, u64)> {
        self.lock().iter().map(|(n, end)| (n.clone(), self.unix(*end))).filter(|(_, t)| *t != 0).collect()
    }

    /// Whether blocking is paused now.
    #[inline]
    pub fn active(&self) -> bool {
        let until = self.until_ms.load(Relaxed);
        until != 0 && (self.base.elapsed().as_millis() as u64) < until
    }

    /// When the pause ends, in Unix seconds; 0 when blocking is on.
    pub fn until_unix(&self) -> u64 {
        self.unix(self.until_ms.load(Relaxed))
    }

    /// An end as in `until_ms`, in Unix seconds; 0 if it has passed.
    fn unix(&self, until: u64) -> u64 {
        let left = Duration::from_millis(until).checked_sub(self.base.elapsed()).filter(|_| until != 0);
        match (left, SystemTime::now().duration_since(UNIX_EPOCH)) {
            (Some(left), Ok(now)) if !left.is_zero() => (now + left).as_secs(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_longer_than_any_clock_has_no_end() {
        let p = Pause::default();
        std::thread::sleep(Duration::from_millis(1010));
        p.set(Duration::from_secs(u64::MAX));
        assert!(p.active());
        assert!(p.until_unix() > 0);
        p.set(Duration::ZERO);
        assert!(!p.active());
    }

    #[test]
    fn a_pause_ends_on_time_or_when_resumed() {
        let p = Pause::default();
        assert!(!p.active());
        assert_eq!(p.until_unix(), 0);
        // 2 s: checked as active well within it, on a busy machine too.
        let unix = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let before = unix();
        p.set(Duration::from_secs(2));
        assert!(p.active());
        let after = unix();
        assert!((before + 2..=after + 3).contains(&p.until_unix()), "{} set in {before}..={after}", p.until_unix());
        ended_on_its_own(|| !p.active());
        assert_eq!(p.until_unix(), 0);
        p.set(Duration::from_secs(300));
        assert!(p.active());
        p.set(Duration::ZERO);
        assert!(!p.active(), "resumed");
    }

    #[test]
    fn a_group_pause_follows_its_name_across_renumbering() {
        let t = |names: &[&str]| GroupTable {
            names: names.iter().map(|n| std::sync::Arc::from(*n)).collect(),
            modes: vec![None; names.len()],
            schedules: vec![None; names.len()],
            logs: vec![Default::default(); names.len()],
        };
        let p = Pause::default();
        assert_eq!(p.paused_groups(), 0);
        let first = t(&["default", "kids", "guests"]);
        p.set_group(&first, "kids", Duration::from_secs(60)).unwrap();
        assert_eq!(p.paused_groups(), 0b010);
        assert!(p.set_group(&first, "nope", Duration::from_secs(60)).unwrap_err().contains("default, kids, guests"));
        p.renumber(&t(&["default", "guests", "kids"]));
        assert_eq!(p.paused_groups(), 0b100, "renumbered by name");
        assert_eq!(p.groups_until_unix().len(), 1);
        p.set(Duration::from_secs(1));
        assert_eq!(p.paused_groups(), u64::MAX, "a global pause pauses every group");
        p.set(Duration::ZERO);
        assert_eq!(p.paused_groups(), 0, "resume ends the group pauses too");
        p.set_group(&first, "guests", Duration::from_secs(2)).unwrap();
        assert_eq!(p.paused_groups(), 0b100);
        ended_on_its_own(|| p.paused_groups() == 0);
    }

    /// Waits (polling, 10 s at most) for a pause of 2 s to be over.
    fn ended_on_its_own(over: impl Fn() -> bool) {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !over() {
            assert!(std::time::Instant::now() < end, "did not end on its own");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
