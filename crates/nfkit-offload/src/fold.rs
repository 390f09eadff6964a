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

#[cfg(test)]
mod tests {
    use super::*;

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
