//! `u32` guard rules: frames outside the field model's assumptions kept
//! from the flower rules.
//!
//! Flower has no key for the IP version nor the IPv4 header length: it
//! takes an IPv4 EtherType's header as IPv4 whatever its version says,
//! and finds the ports after any IP options, while the program's paths
//! (and so the rules) were written for version 4 (6) and IHL 5. A `u32`
//! filter matches bytes where they are, so rules placed before all
//! flower rules pass such frames on to the eBPF program: for IPv4,
//! version ≠ 4 and IHL ≠ 5 (each "≠" the 4 ternary patterns covering
//! the other 15 values of the nibble), for IPv6 version ≠ 6. They are
//! added only in front of rule sets that decide IPv4 (IPv6) frames on
//! more than their EtherType.

use crate::pattern::Pattern;
use crate::rules::{Rule, RuleAction};

/// Byte 14 (value, mask) pairs: the nibble values other than `v`.
fn other_than(v: u8, high: bool) -> Vec<(u8, u8)> {
    let mut out = Vec::new();
    for width in 1..=4u8 {
        // The values agreeing with `v` on the `width - 1` top bits and
        // differing in the next one.
        let keep = 0xfu8 << (4 - (width - 1)) & 0xf;
        let bit = 1u8 << (4 - width);
        let (val, mask) = ((v & keep) | (!v & bit), keep | bit);
        out.push(if high {
            (val << 4, mask << 4)
        } else {
            (val, mask)
        });
    }
    out
}

fn guard(ethertype: [u8; 2], val: u8, mask: u8) -> Rule {
    let mut p = Pattern::any();
    for (i, b) in ethertype.iter().enumerate() {
        for bit in 0..8 {
            p.set_bit((12 + i as u32) * 8 + bit, b >> bit & 1 == 1);
        }
    }
    for bit in 0..8 {
        if mask >> bit & 1 == 1 {
            p.set_bit(14 * 8 + bit, val >> bit & 1 == 1);
        }
    }
    // u32 reads the 32-bit word holding the byte.
    p.min_len = 18;
    Rule {
        prio: 0,
        pattern: p,
        action: RuleAction::Pass,
        paths: Vec::new(),
        ranges: Vec::new(),
        counts: Vec::new(),
        u32_guard: true,
    }
}

/// The guards for `rules` (empty when no rule decides IP frames).
pub fn guards(rules: &[Rule]) -> Vec<Rule> {
    // A rule deciding on the EtherType alone decides like the program
    // whatever the IP header says.
    let decides = |t: [u8; 2]| {
        rules.iter().any(|r| {
            r.action != RuleAction::Pass
                && r.pattern.value.get(12..14) == Some(&t[..])
                && r.pattern.mask.get(12..14) == Some(&[0xff; 2])
                && (r.pattern.mask.iter().skip(14).any(|&m| m != 0) || !r.ranges.is_empty())
        })
    };
    let mut out = Vec::new();
    if decides([8, 0]) {
        for (v, m) in other_than(4, true).into_iter().chain(other_than(5, false)) {
            out.push(guard([8, 0], v, m));
        }
    }
    if decides([0x86, 0xdd]) {
        for (v, m) in other_than(6, true) {
            out.push(guard([0x86, 0xdd], v, m));
        }
    }
    out
}

/// `rules` with their guards first, priorities renumbered from 1.
pub fn guarded(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out = guards(&rules);
    out.extend(rules);
    for (i, r) in out.iter_mut().enumerate() {
        r.prio = i as u32 + 1;
    }
    out
}

/// The guard's byte 14 as `(value, mask)`, and its EtherType.
pub fn key(r: &Rule) -> (u16, u8, u8) {
    let get = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    let t = u16::from_be_bytes([get(&r.pattern.value, 12), get(&r.pattern.value, 13)]);
    (t, get(&r.pattern.value, 14), get(&r.pattern.mask, 14))
}

/// `tc filter add dev DEV ingress prio N protocol ip u32 [SKIP] match u8
/// V M at 0 action pass`.
pub fn tc_line(r: &Rule, dev: &str, skip: &str) -> String {
    let (t, v, m) = key(r);
    let proto = if t == 0x86dd { "ipv6" } else { "ip" };
    let skip = if skip.is_empty() {
        String::new()
    } else {
        format!(" {skip}")
    };
    format!(
        "tc filter add dev {dev} ingress prio {} protocol {proto} u32{skip} match u8 {v:#04x} {m:#04x} at 0 action pass",
        r.prio
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibble_complements_cover_exactly_the_other_values() {
        for v in 0..16u8 {
            for high in [false, true] {
                let pats = other_than(v, high);
                for x in 0..16u8 {
                    let b = if high { x << 4 } else { x };
                    let hits = pats.iter().filter(|(pv, pm)| b & pm == *pv).count();
                    assert_eq!(hits, usize::from(x != v), "v {v} x {x} high {high}");
                }
            }
        }
    }
}
