//! Rules as `u32` filters: a pattern matched on the frame's bytes where
//! they are, as [`Pattern::matches`] does.
//!
//! `u32` reads 32-bit words at offsets from the network header and
//! matches none of a frame that lacks a word it reads, so a rule whose
//! keys reach the end of what the program's path read matches exactly
//! the frames the path took. Flower cannot do that for UDP: its
//! dissector reads the ports from the first 4 bytes of a UDP header cut
//! short, which the path never saw ([`crate::fields::absent_view`]);
//! such rules go to `u32` instead ([`needs_u32`]). The guards of
//! [`crate::guard`] are `u32` filters of the same kind.

use crate::pattern::Pattern;
use crate::rules::{PortRange, Rule, RuleAction};

/// A key: `(value, mask, offset)`, the value and mask as the 32-bit
/// word reads big-endian, the offset from the network header (the
/// Ethernet header at -14), a multiple of 4.
pub type Key = (u32, u32, i32);

/// The Ethernet header's length: byte 14 of the frame is offset 0.
const NET: i32 = 14;

/// The keys that match `p` as [`Pattern::matches`] does, for frames of
/// the EtherType the filter's protocol names (bytes 12..14 are not
/// keys): one per aligned word with a required bit, and a mask-0 key on
/// the last word the pattern's length needs when no other key reads it.
/// `None` when that length is not a whole number of words past the
/// Ethernet header, or is shorter than the bytes it tests.
pub fn keys(p: &Pattern) -> Option<Vec<Key>> {
    let len = p.min_len.max(p.bytes_used()).max(NET as usize + 4) as i32;
    if (len - NET) % 4 != 0 {
        return None;
    }
    let mut words: Vec<Key> = Vec::new();
    for (i, (&m, &v)) in p.mask.iter().zip(&p.value).enumerate() {
        if m == 0 || (12..14).contains(&i) {
            continue;
        }
        let rel = i as i32 - NET;
        let off = rel.div_euclid(4) * 4;
        let shift = 8 * (3 - (rel - off)) as u32;
        let (kv, km) = (u32::from(v & m) << shift, u32::from(m) << shift);
        match words.iter_mut().find(|k| k.2 == off) {
            Some(k) => {
                k.0 |= kv;
                k.1 |= km;
            }
            None => words.push((kv, km, off)),
        }
    }
    words.sort_by_key(|k| k.2);
    let last = len - NET - 4;
    if words.last().is_none_or(|k| k.2 < last) {
        words.push((0, 0, last));
    }
    if words.iter().any(|k| k.2 > last) {
        return None;
    }
    Some(words)
}

/// The pattern a `u32` filter with `keys` and protocol `ethertype`
/// matches (the inverse of [`keys`]).
pub fn pattern(keys: &[Key], ethertype: u16) -> Pattern {
    let mut p = Pattern::any();
    let [e0, e1] = ethertype.to_be_bytes();
    p.set_byte(12, e0, 0xff);
    p.set_byte(13, e1, 0xff);
    let mut len = 0i32;
    for &(v, m, off) in keys {
        len = len.max(NET + off + 4);
        for k in 0..4 {
            let at = NET + off + k;
            let shift = 8 * (3 - k) as u32;
            let (bv, bm) = ((v >> shift) as u8, (m >> shift) as u8);
            if at >= 0 {
                p.set_byte(at as usize, bv, bm);
            }
        }
    }
    p.min_len = len.max(0) as usize;
    p
}

/// `tc` commands for a rule with the total-length check at `prio`
/// (`head`: `tc filter add dev D ingress prio P protocol ip`, `skip`,
/// its keys' text and its action words), in order.
pub fn total_length_lines(
    head: &str,
    prio: u32,
    skip: &str,
    keys: &str,
    action: &str,
) -> Vec<String> {
    let ht = table_id(prio) >> 20;
    let skip = if skip.is_empty() {
        String::new()
    } else {
        format!(" {skip}")
    };
    let mut out = vec![format!("{head} handle {ht:x}: u32 divisor 1")];
    for (i, (k, nexthdr)) in total_length_nodes().iter().enumerate() {
        out.push(format!(
            "{head} handle {ht:x}:0:{} u32{skip} ht {ht:x}: {} match u32 0 0 at nexthdr+{nexthdr} action {action}",
            i + 1,
            tc_text(k)
        ));
    }
    out.push(format!(
        "{head} u32{skip} {keys} offset at 2 mask 0xffff shift 0 link {ht:x}:"
    ));
    out
}

/// `tc`'s words for the keys: `match u8 V M at N` for a key on one
/// byte, `match u16` for two aligned ones, else `match u32 V M at N`.
pub fn tc_text(keys: &[Key]) -> String {
    let mut out = Vec::new();
    for &(v, m, off) in keys {
        let bytes: Vec<usize> = (0..4)
            .filter(|k| (m >> (8 * (3 - k))) & 0xff != 0)
            .collect();
        match bytes.as_slice() {
            [k] => {
                let s = 8 * (3 - k);
                out.push(format!(
                    "match u8 {:#04x} {:#04x} at {}",
                    (v >> s) & 0xff,
                    (m >> s) & 0xff,
                    off + *k as i32
                ));
            }
            [0, 1] | [2, 3] => {
                let k = bytes[0];
                let s = 8 * (2 - k);
                out.push(format!(
                    "match u16 {:#06x} {:#06x} at {}",
                    (v >> s) & 0xffff,
                    (m >> s) & 0xffff,
                    off + k as i32
                ));
            }
            _ => out.push(format!("match u32 {v:#010x} {m:#010x} at {off}")),
        }
    }
    out.join(" ")
}

/// The hash table (its handle, `NNN:`) of the total-length check of the
/// rule at `prio`: one per priority, in 1..0x800 (the kernel numbers
/// the tables it makes for priorities from 0x800 up).
pub fn table_id(prio: u32) -> u32 {
    (1 + prio % 0x7ff) << 20
}

/// The nodes of the total-length check, one per `tot_len & 3 = r`: its
/// key on the total length's low bits, and the offset of a mask-0 key
/// after `nexthdr` that ends exactly at the total length. The root node
/// sets the variable offset to `(3 + tot_len) & ~3` (u32 rounds it to
/// a word), so the key sits at that minus 4 minus `(4 - r) % 4`; a
/// frame that does not hold the word matches nothing.
pub fn total_length_nodes() -> Vec<(Vec<Key>, i32)> {
    (0..4u32)
        .map(|r| (vec![(r, 3, 0)], -4 - ((4 - r as i32) % 4)))
        .collect()
}

/// Whether an untagged IPv4 frame holds its total length (what the
/// total-length check of a `csum tcp` rule tests).
pub fn holds_total_length(frame: &[u8]) -> bool {
    frame.len() >= 18 && frame.len() >= 14 + usize::from(u16::from_be_bytes([frame[16], frame[17]]))
}

/// Whether a rule must be a `u32` filter: it decides (a `pass` sends
/// its frames to the program, which is always right) UDP frames on
/// their ports, or its TCP checksum fix-up needs the total-length check.
pub fn needs_u32(
    pattern: &Pattern,
    ranges: &[PortRange],
    action: RuleAction,
    rewrite: Option<&crate::Rewrite>,
) -> bool {
    if action == RuleAction::Pass {
        return false;
    }
    if rewrite.is_some_and(|rw| rw.csum_tcp) {
        return true;
    }
    match crate::fields::l4_proto(pattern) {
        Some((l4, 17)) => !ranges.is_empty() || pattern.mask.iter().skip(l4).any(|&m| m != 0),
        _ => false,
    }
}

/// The prefixes (value, length) that cover `lo..=hi` of a 16-bit field
/// exactly, fewest first.
pub fn prefixes(lo: u16, hi: u16) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (u32::from(lo), u32::from(hi));
    while lo <= hi {
        let mut size = if lo == 0 {
            1 << 16
        } else {
            lo & lo.wrapping_neg()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, 16 - size.trailing_zeros()));
        lo += size;
    }
    out
}

/// `r` with its port ranges turned into required bits: one rule per
/// combination of the ranges' prefixes, in order, each a `u32` filter.
pub fn expand(r: &Rule) -> Vec<Rule> {
    let mut out = vec![Rule {
        ranges: Vec::new(),
        u32_filter: true,
        ..r.clone()
    }];
    for range in &r.ranges {
        let mut next = Vec::new();
        for base in &out {
            for (v, n) in prefixes(range.lo, range.hi) {
                let mut x = base.clone();
                for k in 0..n {
                    // Bit 15 - k of the big-endian field.
                    let j = 15 - k;
                    let byte = range.at + usize::from(j < 8);
                    x.pattern.set_bit(byte as u32 * 8 + j % 8, v >> j & 1 == 1);
                }
                next.push(x);
            }
        }
        out = next;
    }
    out
}

/// How many rules [`expand`] makes of a rule with these ranges.
pub fn expanded_len(ranges: &[PortRange]) -> usize {
    ranges
        .iter()
        .map(|r| prefixes(r.lo, r.hi).len())
        .product::<usize>()
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_cover_the_range_exactly() {
        for (lo, hi) in [(0u16, 65535u16), (1000, 1999), (52, 53), (7, 7), (1, 65534)] {
            let ps = prefixes(lo, hi);
            for x in [
                0u16, 1, 6, 7, 8, 51, 52, 53, 54, 999, 1000, 1999, 2000, 65534, 65535,
            ] {
                let hits = ps
                    .iter()
                    .filter(|(v, n)| {
                        let m = if *n == 0 { 0 } else { u16::MAX << (16 - n) };
                        x & m == *v & m
                    })
                    .count();
                assert_eq!(
                    hits,
                    usize::from((lo..=hi).contains(&x)),
                    "{lo}-{hi} at {x}"
                );
            }
        }
        assert_eq!(prefixes(0, 65535), vec![(0, 0)]);
        assert_eq!(prefixes(1000, 1999).len(), 7);
    }

    #[test]
    fn keys_round_trip_and_reach_the_length() {
        let mut p = Pattern::any();
        for (at, v) in [
            (12, 8),
            (13, 0),
            (14, 0x45),
            (23, 17),
            (36, 0),
            (37, 53),
            (0, 0x02),
        ] {
            p.set_byte(at, v, 0xff);
        }
        p.min_len = 42;
        let k = keys(&p).unwrap_or_else(|| panic!("keys"));
        // dst MAC byte 0 at -16, version/IHL at 0, protocol at 8, the
        // ports word at 20, the length key at 24.
        assert_eq!(
            k,
            vec![
                (0x0000_0200, 0x0000_ff00, -16),
                (0x4500_0000, 0xff00_0000, 0),
                (0x0011_0000, 0x00ff_0000, 8),
                (0x0000_0035, 0x0000_ffff, 20),
                (0, 0, 24),
            ]
        );
        let back = pattern(&k, 0x0800);
        assert_eq!(
            (back.mask.clone(), back.value.clone()),
            (p.mask.clone(), p.value.clone())
        );
        assert_eq!(back.min_len, 42);
        assert_eq!(
            tc_text(&k),
            "match u8 0x02 0xff at -14 match u8 0x45 0xff at 0 match u8 0x11 0xff at 9 match u16 0x0035 0xffff at 22 match u32 0x00000000 0x00000000 at 24"
        );
    }
}
