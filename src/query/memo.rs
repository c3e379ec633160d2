//! Which `config client` rule a recent client matched, remembered per
//! receive thread. Finding the rule ([`ClientRules::find`]) loads the
//! learned MACs and hostnames and searches the rules: about 300
//! instructions of a cache hit that has to know the client's upstream set
//! before it can look in the cache (`bench/instructions.py --lockstep
//! --extra-conf bench/groups.conf --extra-conf bench/sets.conf`, issue 60).
//! A household has a few dozen devices, and each asks in bursts (A, AAAA,
//! HTTPS for one page), so a small table keyed by address answers most
//! queries from what the last one found.
//!
//! An entry holds for one snapshot (its rules) and one learned table (the
//! MACs and names they were matched with): a reload or a new look at the
//! leases makes every entry stale, and the next query finds its rule anew.

use std::net::IpAddr;

/// Entries: direct-mapped by the address's last byte.
const SLOTS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Seen {
    client: IpAddr,
    mac: Option<[u8; 6]>,
    /// [`super::Snapshot::generation`] it was found under; 0: empty.
    generation: u64,
    /// [`super::Engine`]'s learned table version it was found with.
    learned: u64,
    rule: Option<u16>,
}

/// A receive thread's recent clients and their rules.
#[derive(Debug)]
pub(super) struct RuleMemo {
    slots: [Seen; SLOTS],
}

impl Default for RuleMemo {
    fn default() -> RuleMemo {
        let empty = Seen { client: IpAddr::from([0u8; 4]), mac: None, generation: 0, learned: 0, rule: None };
        RuleMemo { slots: [empty; SLOTS] }
    }
}

impl RuleMemo {
    /// The rule of `client` (with `mac`) under snapshot `generation` and
    /// learned table `learned`: remembered, or `find`'s, then remembered.
    #[inline]
    pub(super) fn rule(
        &mut self,
        client: IpAddr,
        mac: Option<[u8; 6]>,
        generation: u64,
        learned: u64,
        find: impl FnOnce() -> Option<usize>,
    ) -> Option<usize> {
        let last = match client {
            IpAddr::V4(a) => a.octets()[3],
            IpAddr::V6(a) => a.octets()[15],
        };
        let slot = &mut self.slots[usize::from(last) % SLOTS];
        if slot.generation == generation && slot.learned == learned && slot.client == client && slot.mac == mac {
            return slot.rule.map(usize::from);
        }
        let rule = find();
        // Rules are numbered in u16 (see `ClientRules`): one that is not is never remembered.
        if let Ok(r) = rule.map(u16::try_from).transpose() {
            *slot = Seen { client, mac, generation, learned, rule: r };
        }
        rule
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_remembered_for_its_snapshot_and_learned_table_only() {
        let mut memo = RuleMemo::default();
        let a: IpAddr = "192.168.1.20".parse().unwrap();
        let mut finds = 0;
        let mut find = |r| {
            finds += 1;
            r
        };
        assert_eq!(memo.rule(a, None, 7, 1, || find(Some(3))), Some(3));
        assert_eq!(memo.rule(a, None, 7, 1, || find(Some(9))), Some(3), "remembered");
        assert_eq!(memo.rule(a, None, 8, 1, || find(Some(4))), Some(4), "a new snapshot");
        assert_eq!(memo.rule(a, None, 8, 2, || find(None)), None, "a new learned table");
        assert_eq!(memo.rule(a, Some([1; 6]), 8, 2, || find(Some(5))), Some(5), "another MAC");
        // 192.168.2.20 shares the slot: it replaces the entry, never reads it.
        let b: IpAddr = "192.168.2.20".parse().unwrap();
        assert_eq!(memo.rule(b, None, 8, 2, || find(Some(6))), Some(6));
        assert_eq!(memo.rule(a, Some([1; 6]), 8, 2, || find(Some(5))), Some(5));
        assert_eq!(finds, 6);
    }
}
