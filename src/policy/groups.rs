//! Groups of devices, each with its own lists: `config group`, and the
//! `list group` of lists and clients.
//!
//! A group is a bit in a 64-bit mask: bit 0 is `default`, then the
//! `config group` sections, then groups only a list names, in file order
//! ([`crate::config::groups::group_names`]). A client's groups are a mask;
//! the lists that apply to it are those whose mask meets the client's
//! active groups (its groups minus those outside their schedule or paused).

use std::sync::Arc;

use crate::config::groups::{GroupLog, ScheduleConfig, group_names};
use crate::config::{BlockMode, Config};

/// The `default` group's bit.
pub const DEFAULT: u64 = 1;

/// The groups of one config: names, block answer overrides, schedules.
#[derive(Debug, Clone)]
pub struct GroupTable {
    /// By bit.
    pub names: Vec<Arc<str>>,
    /// `option block_mode` of each group, by bit.
    pub modes: Vec<Option<BlockMode>>,
    /// The schedule of each group, by bit.
    pub schedules: Vec<Option<ScheduleConfig>>,
    /// What the query log keeps of each group's clients, by bit.
    pub logs: Vec<GroupLog>,
}

impl Default for GroupTable {
    /// Only `default`, unscheduled.
    fn default() -> GroupTable {
        GroupTable {
            names: vec![Arc::from("default")],
            modes: vec![None],
            schedules: vec![None],
            logs: vec![GroupLog::Full],
        }
    }
}

impl GroupTable {
    /// The groups `cfg` defines or names.
    pub fn new(cfg: &Config) -> GroupTable {
        let names: Vec<Arc<str>> = group_names(cfg).into_iter().map(Arc::from).collect();
        let section = |n: &str| cfg.groups.iter().find(|g| g.name == n);
        let modes = names.iter().map(|n| section(n).and_then(|g| g.block_mode)).collect();
        let schedules = names
            .iter()
            .map(|n| {
                let s = section(n)?.schedule.as_ref()?;
                cfg.schedules.iter().find(|c| &c.name == s).cloned()
            })
            .collect();
        let logs = names.iter().map(|n| section(n).map_or(GroupLog::Full, |g| g.querylog)).collect();
        GroupTable { names, modes, schedules, logs }
    }

    /// Some group's clients are logged other than in full.
    pub fn logs_vary(&self) -> bool {
        self.logs.iter().any(|l| *l != GroupLog::Full)
    }

    /// What the log keeps of a client in groups `mask`: the most private of theirs.
    pub fn log_of(&self, mask: u64) -> GroupLog {
        self.logs.iter().enumerate().filter(|(i, _)| mask >> i & 1 != 0).map(|(_, l)| *l).max().unwrap_or_default()
    }

    /// The mask of groups named in `names`; an empty list is `default`.
    /// Names not in the table are left out (the config checks them).
    pub fn mask_of(&self, names: &[String]) -> u64 {
        if names.is_empty() {
            return DEFAULT;
        }
        names.iter().filter_map(|n| self.bit(n)).fold(0, |m, b| m | 1 << b)
    }

    /// The bit of group `name`.
    pub fn bit(&self, name: &str) -> Option<u32> {
        self.names.iter().position(|n| &**n == name).map(|i| i as u32)
    }

    /// The names of the groups in `mask`, comma-separated.
    pub fn names_of(&self, mask: u64) -> String {
        self.names
            .iter()
            .enumerate()
            .filter(|(i, _)| mask >> i & 1 != 0)
            .map(|(_, n)| &**n)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The lowest group in `mask`, if any.
    pub fn first(mask: u64) -> Option<usize> {
        (mask != 0).then(|| mask.trailing_zeros() as usize)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bits_follow_the_config() {
        let cfg = Config::parse(
            "t",
            "config group 'kids'\n\toption block_mode 'nxdomain'\nconfig blocklist\n\toption path '/x'\n\tlist group 'guests'\n",
        )
        .unwrap();
        let t = GroupTable::new(&cfg);
        assert_eq!(t.names.iter().map(|n| &**n).collect::<Vec<_>>(), ["default", "kids", "guests"]);
        assert_eq!(t.modes[1], Some(BlockMode::NxDomain));
        assert_eq!(t.mask_of(&[]), DEFAULT);
        assert_eq!(t.mask_of(&["guests".into(), "default".into()]), 0b101);
        assert_eq!(t.names_of(0b110), "kids,guests");
        assert!(t.schedules.iter().all(Option::is_none));
    }
}
