//! Per-chain, per-verdict counters (docs/abi.md 8): `nfkit_stats` is a
//! per-CPU array of `u64`; index `(chain_id + 1) * 16 + k` where chain
//! slot 0 counts packets no chain claimed and `k` is the verdict action
//! 0..7, [`VALUE`] for a plain value, [`FAULT`] for a fault.

use crate::verdict::{Action, NfResult};

/// Counters per chain slot (`k` ranges over `0..PER_CHAIN`).
pub const PER_CHAIN: u32 = 16;
/// `k` of a chain that returned a plain value (`NF_STAT_VALUE`).
pub const VALUE: u32 = 8;
/// `k` of a fault (`NF_STAT_FAULT`).
pub const FAULT: u32 = 9;
/// The columns in use: actions 0..7, value, fault.
pub const COLUMNS: usize = 10;
/// Chain slots: the unclaimed row plus chain ids `0..MAX_CHAINS`.
pub const CHAIN_SLOTS: u32 = crate::maps::MAX_CHAINS + 1;
/// Name of the row of packets no chain claimed.
pub const UNCLAIMED: &str = "(unclaimed)";

/// Names of the columns `k`.
pub const NAMES: [&str; COLUMNS] = [
    "ABORTED",
    "DROP",
    "PASS",
    "TX",
    "REDIRECT",
    "FLOOD",
    "CONTROLLER",
    "HOST",
    "VALUE",
    "FAULT",
];

/// The column a result is counted in (what `nf_finish` does).
pub fn column(r: u64) -> u32 {
    match NfResult::of(r) {
        NfResult::Verdict { action, .. } => u32::from(action.code()),
        NfResult::Value(_) => VALUE,
        NfResult::Fault(_) => FAULT,
    }
}

/// The name of column `k` (`?` beyond the columns in use).
pub fn name(k: u32) -> &'static str {
    NAMES.get(k as usize).copied().unwrap_or("?")
}

/// The `nfkit_stats` index of chain slot `slot` (0 = unclaimed, chain
/// id + 1 otherwise) and column `k`.
pub fn index(slot: u32, k: u32) -> u32 {
    slot * PER_CHAIN + k
}

/// `(chain slot, k)` of an `nfkit_stats` index.
pub fn split(index: u32) -> (u32, u32) {
    (index / PER_CHAIN, index % PER_CHAIN)
}

/// The chain slot of chain id `id` (`None`: unclaimed).
pub fn slot_of(id: Option<u32>) -> u32 {
    id.map_or(0, |c| c + 1)
}

const _: () = assert!(VALUE as usize == Action::ALL.len());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_indices() {
        for a in Action::ALL {
            assert_eq!(name(column(a.verdict(1))), a.name());
        }
        assert_eq!(name(column(3)), "VALUE");
        assert_eq!(name(column(u64::MAX)), "FAULT");
        assert_eq!(index(slot_of(Some(2)), FAULT), 3 * 16 + 9);
        assert_eq!(split(3 * 16 + 9), (3, 9));
        assert!(index(CHAIN_SLOTS - 1, PER_CHAIN - 1) < crate::maps::STATS);
    }
}
