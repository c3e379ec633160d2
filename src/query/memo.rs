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

/// Entries: direct-mapped by the address's last bits.
const SLOTS: usize = 16;

/// What is known of a client: its rule, that rule's groups, and its
/// upstream set while the scheduled groups outside their window are those
/// it was worked out with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Known {
    pub rule: Option<usize>,
    pub member: u64,
    pub set: u8,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    /// The address as [`who`] packs it, with the MAC: two integer compares
    /// where `IpAddr` and `Option<[u8; 6]>` took a `memcmp` each.
    client: (u128, u64),
    /// [`super::Snapshot::generation`] it was found under; 0: empty.
    generation: u64,
    /// [`super::Engine`]'s learned table version it was found with.
    learned: u64,
    /// The scheduled groups outside their window when its set was worked out.
    off: u64,
    rule: Option<u16>,
    member: u64,
    set: u8,
}

/// `client` and `mac` as two integers: the address (IPv4 marked by a bit
/// no IPv6 address in use has), the MAC behind a bit that says there is one.
#[inline(always)]
fn who(client: IpAddr, mac: Option<[u8; 6]>) -> (u128, u64) {
    let ip = match client {
        IpAddr::V4(a) => 1 << 127 | u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let mac = mac.map_or(0, |m| 1 << 48 | u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]));
    (ip, mac)
}

/// A receive thread's recent clients and their rules.
#[derive(Debug)]
pub(super) struct RuleMemo {
    slots: [Seen; SLOTS],
}

impl Default for RuleMemo {
    fn default() -> RuleMemo {
        let empty = Seen { client: (0, 0), generation: 0, learned: 0, off: 0, rule: None, member: 0, set: 0 };
        RuleMemo { slots: [empty; SLOTS] }
    }
}

impl RuleMemo {
    /// What is remembered of `client` (with `mac`) under snapshot
    /// `generation`, learned table `learned` and the schedules' `off`.
    #[inline(always)]
    pub(super) fn get(
        &self,
        (client, mac): (IpAddr, Option<[u8; 6]>),
        generation: u64,
        learned: u64,
        off: u64,
    ) -> Option<Known> {
        let key = who(client, mac);
        let slot = &self.slots[key.0 as usize % SLOTS];
        (slot.client == key && slot.generation == generation && slot.learned == learned && slot.off == off)
            .then_some(Known { rule: slot.rule.map(usize::from), member: slot.member, set: slot.set })
    }

    /// What is known of `client` (with `mac`) under snapshot `generation`,
    /// learned table `learned` and the schedules' `off`: remembered, or
    /// `work_out`'s, then remembered.
    #[inline(always)]
    pub(super) fn known(
        &mut self,
        (client, mac): (IpAddr, Option<[u8; 6]>),
        generation: u64,
        learned: u64,
        off: u64,
        work_out: impl FnOnce() -> Known,
    ) -> Known {
        if let Some(known) = self.get((client, mac), generation, learned, off) {
            return known;
        }
        let known = work_out();
        self.remember((client, mac), generation, learned, off, known);
        known
    }

    /// Keeps `known` for `client` (with `mac`) under what it was found with,
    /// in place of whatever shared its slot.
    pub(super) fn remember(
        &mut self,
        (client, mac): (IpAddr, Option<[u8; 6]>),
        generation: u64,
        learned: u64,
        off: u64,
        known: Known,
    ) {
        let key = who(client, mac);
        // Rules are numbered in u16 (see `ClientRules`): one that is not is never remembered.
        if let Ok(rule) = known.rule.map(u16::try_from).transpose() {
            self.slots[key.0 as usize % SLOTS] =
                Seen { client: key, generation, learned, off, rule, member: known.member, set: known.set };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_known_holds_for_its_snapshot_learned_table_and_schedules_only() {
        let mut memo = RuleMemo::default();
        let a: IpAddr = "192.168.1.20".parse().unwrap();
        let mut works = 0;
        let mut work = |rule| {
            works += 1;
            Known { rule, member: 3, set: 1 }
        };
        let k = |r| Known { rule: r, member: 3, set: 1 };
        assert_eq!(memo.known((a, None), 7, 1, 0, || work(Some(3))), k(Some(3)));
        assert_eq!(memo.known((a, None), 7, 1, 0, || work(Some(9))), k(Some(3)), "remembered");
        assert_eq!(memo.known((a, None), 8, 1, 0, || work(Some(4))), k(Some(4)), "a new snapshot");
        assert_eq!(memo.known((a, None), 8, 2, 0, || work(None)), k(None), "a new learned table");
        assert_eq!(memo.known((a, None), 8, 2, 2, || work(Some(7))), k(Some(7)), "a schedule changed");
        assert_eq!(memo.known((a, Some([1; 6])), 8, 2, 2, || work(Some(5))), k(Some(5)), "another MAC");
        // 192.168.2.20 shares the slot: it replaces the entry, never reads it.
        let b: IpAddr = "192.168.2.20".parse().unwrap();
        assert_eq!(memo.known((b, None), 8, 2, 2, || work(Some(6))), k(Some(6)));
        assert_eq!(memo.known((a, Some([1; 6])), 8, 2, 2, || work(Some(5))), k(Some(5)));
        // The same address in its IPv6-mapped form is another key, found anew.
        let mapped: IpAddr = "::ffff:192.168.1.20".parse().unwrap();
        assert_eq!(memo.known((mapped, None), 8, 2, 2, || work(Some(8))), k(Some(8)));
        assert_eq!(works, 8);
    }
}
