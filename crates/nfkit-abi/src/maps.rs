//! The maps every NF object shares by name (docs/abi.md 4-8), their
//! sizes, and how the slots of `nfkit_progs` are divided.

/// Per-CPU array of [`PktInfo`](crate::PktInfo), [`SLOTS`] entries.
pub const PKTINFO: &str = "nfkit_pktinfo";
/// Per-CPU array of `u32`: nesting depth per hook.
pub const NEST: &str = "nfkit_nest";
/// Array of one [`NfConfig`](crate::NfConfig).
pub const CONFIG: &str = "nfkit_config";
/// Per-CPU array of one `u64`: faults.
pub const FAULTS: &str = "nfkit_faults";
/// Per-CPU array of `u64`: per-chain, per-verdict counters ([`crate::stats`]).
pub const STATS_MAP: &str = "nfkit_stats";
/// Per-CPU array of [`NfFrame`](crate::NfFrame), [`SLOTS`] entries.
pub const FRAME: &str = "nfkit_frame";
/// Prog array of dynamic mode, [`PROGS`] slots.
pub const PROGS_MAP: &str = "nfkit_progs";
/// Devmap of the ports a FLOOD verdict sends to.
pub const FLOOD: &str = "nfkit_flood";
/// Classifier tables.
pub const CLS_IP4: &str = "nfkit_cls_ip4";
pub const CLS_IP6: &str = "nfkit_cls_ip6";
pub const CLS_PORT: &str = "nfkit_cls_port";
pub const CLS_DSCP: &str = "nfkit_cls_dscp";

/// The maps every NF object defines.
pub const SHARED: [&str; 8] = [
    PKTINFO, NEST, CONFIG, FAULTS, STATS_MAP, FRAME, PROGS_MAP, FLOOD,
];
/// The classifier's tables.
pub const CLASSIFIER: [&str; 4] = [CLS_IP4, CLS_IP6, CLS_PORT, CLS_DSCP];

/// Whether `name` is one of nfkit's own maps (not an NF's or a script's).
pub fn is_nfkit_map(name: &str) -> bool {
    name.starts_with("nfkit_")
}

/// Entries of `nfkit_pktinfo` and `nfkit_frame`: `hook id * 4 + depth`
/// (`NF_SLOTS`).
pub const SLOTS: u32 = 16;
/// Nesting depths per hook in those maps.
pub const DEPTHS: u32 = 4;
/// The slot of hook id `hook` at nesting depth `depth` (depth capped).
pub fn slot(hook: u32, depth: u32) -> u32 {
    hook * DEPTHS + depth.min(DEPTHS - 1)
}

/// Slots of `nfkit_progs` (`NF_PROGS`).
pub const PROGS: u32 = 1024;
/// Chain ids `0..MAX_CHAINS` (`NF_MAX_CHAINS`); chain `c`'s entry is
/// `nfkit_progs[c]`.
pub const MAX_CHAINS: u32 = 63;
/// Entries of `nfkit_flood` (`NF_FLOOD_PORTS`).
pub const FLOOD_PORTS: u32 = 64;
/// Entries of `nfkit_stats` (`NF_STATS`).
pub const STATS: u32 = 1024;
/// Entries of `nfkit_cls_dscp`.
pub const CLS_DSCP_ENTRIES: u32 = 64;
/// Entries of the other classifier tables.
pub const CLS_ENTRIES: u32 = 4096;
/// The CONTROLLER verdict's tag (`NF_CONTROLLER_TAG | reason`).
pub const CONTROLLER_TAG: u32 = 0x6e66_0000;

/// A range of `nfkit_progs` slots, `first..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub first: u32,
    pub end: u32,
}

impl SlotRange {
    /// Slots in the range.
    pub fn len(self) -> u32 {
        self.end - self.first
    }
    /// Whether the range is empty.
    pub fn is_empty(self) -> bool {
        self.end <= self.first
    }
    /// Whether `slot` is in the range.
    pub fn contains(self, slot: u32) -> bool {
        (self.first..self.end).contains(&slot)
    }
}

/// Chain entries (slot = chain id).
pub const CHAIN_ENTRIES: SlotRange = SlotRange {
    first: 0,
    end: MAX_CHAINS,
};
/// NF dynamic entries, allocated when an NF is first deployed.
pub const NF_ENTRIES: SlotRange = SlotRange {
    first: 64,
    end: 256,
};
/// The two banks of chain segments: a new version goes to the bank the
/// running one does not use.
pub const BANKS: [SlotRange; 2] = [
    SlotRange {
        first: 256,
        end: 640,
    },
    SlotRange {
        first: 640,
        end: PROGS,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_disjoint_and_fit() {
        const {
            assert!(CHAIN_ENTRIES.end <= NF_ENTRIES.first);
            assert!(NF_ENTRIES.end <= BANKS[0].first);
            assert!(BANKS[0].end == BANKS[1].first);
            assert!(BANKS[1].end == PROGS);
        }
        assert_eq!(slot(1, 9), 7);
        assert!(slot(3, 3) < SLOTS);
    }
}
