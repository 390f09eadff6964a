//! Per-chain, per-verdict counters of a deployment (docs/abi.md 8):
//! the pinned per-CPU `nfkit_stats` map, index `(chain_id + 1) * 16 + k`,
//! summed over CPUs, with the chain names the deploying command recorded
//! (`Deployment::chains`, from the deploy request). The same shape as the `chains` of
//! `nfkit run --json`, so the kernel and the VM compare directly.

use crate::deploy::{open_pinned_map, Deployment};
use crate::error::KernelError;
use serde::Serialize;
use std::collections::BTreeMap;

use nfkit_abi::stats::{self as abi_stats, CHAIN_SLOTS};

/// One chain's counters (only the columns that are not 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainCounters {
    /// The chain (`(unclaimed)` for packets no chain claimed, `chain N`
    /// when the name was not recorded).
    pub chain: String,
    pub counts: BTreeMap<String, u64>,
}

/// The counters of deployment `d` (chains with any count); empty when it
/// has no `nfkit_stats` map.
pub fn verdict_counters(d: &Deployment) -> Result<Vec<ChainCounters>, KernelError> {
    let Some(rec) = d.maps.iter().find(|m| m.name == nfkit_abi::maps::STATS_MAP) else {
        return Ok(Vec::new());
    };
    let m = open_pinned_map(&rec.name, &rec.pin)?;
    let slots = if d.chains.is_empty() {
        CHAIN_SLOTS
    } else {
        (d.chains.len() as u32 + 1).min(CHAIN_SLOTS)
    };
    let mut out = Vec::new();
    for slot in 0..slots {
        let mut counts = BTreeMap::new();
        for (k, name) in abi_stats::NAMES.iter().enumerate() {
            let key = abi_stats::index(slot, k as u32);
            let Some(per_cpu) = m.lookup_percpu(&key.to_le_bytes())? else {
                continue;
            };
            let n = per_cpu.iter().map(|v| le(v)).fold(0u64, u64::wrapping_add);
            if n != 0 {
                counts.insert(name.to_string(), n);
            }
        }
        if counts.is_empty() {
            continue;
        }
        let chain = match slot {
            0 => abi_stats::UNCLAIMED.to_string(),
            s => d
                .chains
                .get(s as usize - 1)
                .cloned()
                .unwrap_or_else(|| format!("chain {}", s - 1)),
        };
        out.push(ChainCounters { chain, counts });
    }
    Ok(out)
}

fn le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(a)
}
