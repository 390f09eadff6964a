//! Rule hit counts folded into the program's counters.
//!
//! An offloaded path's only write is a verdict counter no decision
//! reads ([`Count`]); flower decides its packets, so the program never
//! counts them. The program's counter as it would be without the rules
//! is its own value plus, for every rule carrying that count, the rule's
//! packets times the addend.

use crate::symbolic::Count;
use serde::Serialize;
use std::collections::BTreeMap;

/// One counter of the program: map, key and byte offset in the value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Counter {
    pub map: String,
    pub key: Vec<u8>,
    pub off: usize,
    pub size: usize,
}

/// What the rules add to each counter: the sum over `rules` (each its
/// counts and its packet count) of packets times addend, wrapping at the
/// counter's width as the program's atomic adds do.
pub fn fold<'a>(rules: impl IntoIterator<Item = (&'a [Count], u64)>) -> BTreeMap<Counter, u64> {
    let mut out: BTreeMap<Counter, u64> = BTreeMap::new();
    for (counts, packets) in rules {
        for c in counts {
            let k = Counter {
                map: c.map.clone(),
                key: c.key.clone(),
                off: c.off,
                size: c.size,
            };
            let e = out.entry(k).or_default();
            *e = e.wrapping_add(packets.wrapping_mul(c.add));
            if c.size < 8 {
                *e &= (1u64 << (8 * c.size)) - 1;
            }
        }
    }
    out
}

/// What offloaded rules add to one of nfkit's verdict counters
/// (`nfkit_stats`: chain slot `slot`, column `column`, e.g. `DROP`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerdictAddition {
    pub slot: u32,
    pub column: String,
    pub packets: u64,
}

/// The folded counts of `install`'s rules that land in nfkit's verdict
/// counters (`nfkit_stats`, keyed by the stats index, the count at
/// offset 0), given each rule's packets by priority. Other counters
/// (an NF's own) are left out: `nfkit offload status` shows those.
pub fn verdict_additions(
    install: &crate::record::Installed,
    packets: &dyn Fn(u32) -> u64,
) -> Vec<VerdictAddition> {
    let folded = fold(
        install
            .prios
            .iter()
            .zip(&install.counts)
            .map(|(&p, c)| (&c[..], packets(p))),
    );
    folded
        .into_iter()
        .filter(|(c, n)| {
            c.map == nfkit_abi::maps::STATS_MAP && c.off == 0 && c.key.len() == 4 && *n != 0
        })
        .filter_map(|(c, n)| {
            let idx = u32::from_le_bytes([c.key[0], c.key[1], c.key[2], c.key[3]]);
            let (slot, k) = nfkit_abi::stats::split(idx);
            let column = nfkit_abi::stats::NAMES.get(k as usize)?;
            Some(VerdictAddition {
                slot,
                column: column.to_string(),
                packets: n,
            })
        })
        .collect()
}

/// `add` by chain name, as nfkit's status names the counter slots (0:
/// unclaimed packets, `s`: chain `s - 1` of `chains`): `(chain, column,
/// packets)`.
pub fn by_chain(add: &[VerdictAddition], chains: &[String]) -> Vec<(String, String, u64)> {
    add.iter()
        .map(|a| {
            let chain = match a.slot {
                0 => nfkit_abi::stats::UNCLAIMED.to_string(),
                s => chains
                    .get(s as usize - 1)
                    .cloned()
                    .unwrap_or_else(|| format!("chain {}", s - 1)),
            };
            (chain, a.column.clone(), a.packets)
        })
        .collect()
}

/// [`verdict_additions`] for the offload of `dev` (in `netns`) recorded
/// in the offload state file `state_file`, with the rules' packet
/// counts read from the kernel (the caller is in that namespace); empty
/// when nothing is offloaded there.
pub fn installed_verdict_additions(
    state_file: &std::path::Path,
    dev: &str,
    netns: Option<&str>,
) -> Result<Vec<VerdictAddition>, String> {
    let state = crate::record::OffloadState::load(state_file).map_err(|e| e.to_string())?;
    let Some(i) = state.find(dev, netns).and_then(|p| state.installs.get(p)) else {
        return Ok(Vec::new());
    };
    if i.counts.iter().all(Vec::is_empty) {
        return Ok(Vec::new());
    }
    let mut tc = crate::netlink::Tc::open().map_err(|e| e.to_string())?;
    let filters = tc.filters(i.ifindex).map_err(|e| e.to_string())?;
    let packets: BTreeMap<u32, u64> = filters
        .iter()
        .filter(|f| i.prios.contains(&f.prio))
        .filter_map(|f| {
            let d = crate::flower::decode(f.protocol, &f.options, i.ifindex).ok()?;
            Some((f.prio, d.packets?))
        })
        .collect();
    Ok(verdict_additions(i, &|p| {
        packets.get(&p).copied().unwrap_or(0)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_counters_from_rule_packets() {
        let stats = |slot: u32, k: u32, add: u64| Count {
            map: nfkit_abi::maps::STATS_MAP.into(),
            key: nfkit_abi::stats::index(slot, k).to_le_bytes().to_vec(),
            off: 0,
            size: 8,
            add,
        };
        let i = crate::record::Installed {
            dev: "eth0".into(),
            netns: None,
            ifindex: 2,
            source: "x".into(),
            entry: "e".into(),
            skip: String::new(),
            prios: vec![1, 2, 3],
            qdisc_created: false,
            installed_at: 0,
            paths: 3,
            offloaded: 3,
            fallbacks: 0,
            maps_from: String::new(),
            tc_lines: Vec::new(),
            counts: vec![
                vec![stats(1, 1, 1)],
                vec![stats(1, 1, 1), count(9, 1, 8)],
                vec![stats(0, 2, 1)],
            ],
        };
        let add = verdict_additions(&i, &|p| [0, 10, 5, 0][p as usize]);
        // Chain slot 1's DROP gets both rules' packets; the NF's own
        // counter (not nfkit_stats) is left out; a rule without packets
        // adds nothing.
        assert_eq!(
            add,
            vec![VerdictAddition {
                slot: 1,
                column: "DROP".into(),
                packets: 15
            }]
        );
    }

    fn count(key: u32, add: u64, size: usize) -> Count {
        Count {
            map: "counters".into(),
            key: key.to_le_bytes().to_vec(),
            off: 0,
            size,
            add,
        }
    }

    #[test]
    fn sums_packets_times_addends_per_counter() {
        let drop = [count(1, 1, 8)];
        let drop_and_bytes = [count(1, 1, 8), count(2, 64, 8)];
        let small = [count(3, 3, 1)];
        let f = fold([
            (&drop[..], 10),
            (&drop_and_bytes[..], 5),
            (&[][..], 99),
            (&small[..], 100),
        ]);
        let at = |k: u32, size: usize| {
            f.get(&Counter {
                map: "counters".into(),
                key: k.to_le_bytes().to_vec(),
                off: 0,
                size,
            })
            .copied()
        };
        assert_eq!(at(1, 8), Some(15));
        assert_eq!(at(2, 8), Some(320));
        // 300 in a one-byte counter wraps as the program's adds would.
        assert_eq!(at(3, 1), Some(300 % 256));
        assert_eq!(f.len(), 3);
    }
}
