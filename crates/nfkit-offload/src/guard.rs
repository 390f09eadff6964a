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
//!
//! One guard is a flower rule: for rule sets that decide TCP frames on
//! their ports or flags, `ip_proto tcp tcp_flags 0/0xff action pass`
//! hands TCP frames cut short of their 20-byte header (whose ports the
//! dissector reads but whose flags it leaves zero) to the program.

use crate::pattern::Pattern;
use crate::rules::{Rule, RuleAction};

/// A `u32` filter's keys (`(value, mask, offset)` from the network
/// header, as [`crate::netlink::Filter::u32_keys`] reads them back) as
/// `tc`'s byte matches, `u8 0x40 0xf0 at 0`, one per byte the mask
/// covers, with what nfkit's guards test there: `(text, meaning)`.
pub fn describe_u32(keys: &[(u32, u32, i32)], protocol: u16) -> (String, String) {
    let mut text = Vec::new();
    let mut meaning = Vec::new();
    for &(val, mask, off) in keys {
        for i in 0..4i32 {
            let shift = 24 - 8 * i;
            let (v, m) = ((val >> shift) as u8, (mask >> shift) as u8);
            if m == 0 {
                continue;
            }
            let at = off + i;
            text.push(format!("u8 {v:#04x} {m:#04x} at {at}"));
            if at == 0 {
                let (hv, hm) = (v >> 4, m >> 4);
                let (lv, lm) = (v & 0xf, m & 0xf);
                if hm != 0 {
                    let want = if protocol == 0x86dd { 6 } else { 4 };
                    meaning.push(format!("IP version {hv:#x}/{hm:#x} (not {want})"));
                }
                if lm != 0 {
                    meaning.push(format!("IHL {lv:#x}/{lm:#x} (not 5)"));
                }
            }
        }
    }
    (text.join(" "), meaning.join(", "))
}

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
    p.set_byte(12, ethertype[0], 0xff);
    p.set_byte(13, ethertype[1], 0xff);
    p.set_byte(14, val, mask);
    // u32 reads the 32-bit word holding the byte.
    p.min_len = 18;
    pass_guard(p, true)
}

/// A guard: `pattern` handed to the program (`pass`), as a `u32`
/// filter or a flower rule.
fn pass_guard(pattern: Pattern, u32_filter: bool) -> Rule {
    Rule {
        prio: 0,
        pattern,
        action: RuleAction::Pass,
        paths: Vec::new(),
        ranges: Vec::new(),
        counts: Vec::new(),
        u32_filter,
        rewrite: None,
    }
}

/// Whether every frame `p` matches is one a guard takes: an IPv4
/// EtherType with a version/IHL byte the pattern requires to differ from
/// 0x45, or an IPv6 one with a version other than 6. Returns the
/// EtherType. Such a path needs no flower rule of its own once the
/// guards are in (the classifier's `ihl < 5` test would otherwise put a
/// `protocol ip ... pass` widened to all of IPv4 before every rule).
pub fn taken_by_guards(p: &Pattern) -> Option<[u8; 2]> {
    let et = crate::fields::exact(p, 12..14)?;
    let (want, nibble_only) = match et.as_slice() {
        [8, 0] => (0x45u8, false),
        [0x86, 0xdd] => (0x60u8, true),
        _ => return None,
    };
    let conflict = (0..8u32).any(|b| {
        if nibble_only && b < 4 {
            return false;
        }
        p.bit(14 * 8 + b).is_some_and(|v| v != (want >> b & 1 == 1))
    });
    conflict.then(|| [et[0], et[1]])
}

/// The guards for `rules` (empty when no rule decides IP frames).
pub fn guards(rules: &[Rule]) -> Vec<Rule> {
    guards_forced(rules, false, false)
}

/// [`guards`], with the IPv4 (`v4`) or IPv6 (`v6`) guards also when no
/// rule decides such frames on more than their EtherType.
pub fn guards_forced(rules: &[Rule], v4: bool, v6: bool) -> Vec<Rule> {
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
    if v4 || decides([8, 0]) {
        for (v, m) in other_than(4, true).into_iter().chain(other_than(5, false)) {
            out.push(guard([8, 0], v, m));
        }
    }
    if v6 || decides([0x86, 0xdd]) {
        for (v, m) in other_than(6, true) {
            out.push(guard([0x86, 0xdd], v, m));
        }
    }
    for et in [[8, 0], [0x86, 0xdd]] {
        if rules.iter().any(|r| reads_tcp_ports(r, et)) {
            out.push(tcp_cut_guard(et));
        }
    }
    if rules
        .iter()
        .any(|r| r.rewrite.as_ref().is_some_and(|rw| rw.csum_tcp))
    {
        out.extend(short_tcp_guards());
    }
    out
}

/// `u32` guards for IPv4 TCP frames whose total length does not cover
/// a 20-byte IP and a 20-byte TCP header (act_csum drops those, the
/// program may not): total length below 40, as the two ternaries
/// `& 0xffe0 = 0` and `& 0xfff8 = 0x20`. Added when a rule fixes up a
/// TCP checksum (`csum tcp`).
fn short_tcp_guards() -> Vec<Rule> {
    [(0x00u8, 0xe0u8), (0x20, 0xf8)]
        .into_iter()
        .map(|(v, m)| {
            let mut p = Pattern::any();
            p.set_byte(12, 8, 0xff);
            p.set_byte(13, 0, 0xff);
            p.set_byte(14, 0x45, 0xff);
            p.set_byte(16, 0, 0xff);
            p.set_byte(17, v, m);
            p.set_byte(23, 6, 0xff);
            // The words u32 reads: 14..18 and 22..26.
            p.min_len = 26;
            pass_guard(p, true)
        })
        .collect()
}

/// Whether `r` decides TCP frames of EtherType `et` on their L4 header
/// (ports, flags, port ranges).
fn reads_tcp_ports(r: &Rule, et: [u8; 2]) -> bool {
    if r.action == RuleAction::Pass || r.u32_filter {
        return false;
    }
    if crate::fields::exact(&r.pattern, 12..14).as_deref() != Some(&et[..]) {
        return false;
    }
    match crate::fields::l4_proto(&r.pattern) {
        Some((l4, 6)) => !r.ranges.is_empty() || r.pattern.mask.iter().skip(l4).any(|&m| m != 0),
        _ => false,
    }
}

/// Whether `r` is the guard [`tcp_cut_guard`] makes (as generated, or
/// as read back from the kernel).
pub fn is_tcp_cut_guard(r: &Rule) -> bool {
    if r.u32_filter || r.action != RuleAction::Pass || !r.ranges.is_empty() || r.rewrite.is_some() {
        return false;
    }
    let keyed = |p: &Pattern| {
        let mut p = p.clone();
        p.min_len = 0;
        for b in 0..8 {
            p.clear_bit(14 * 8 + b);
        }
        p.trim();
        p
    };
    let mine = keyed(&r.pattern);
    [[8, 0], [0x86, 0xdd]].into_iter().any(|et| {
        let g = keyed(&tcp_cut_guard(et).pattern);
        g.mask == mine.mask && g.value == mine.value
    })
}

/// The flower guard for TCP headers cut short: `ip_proto tcp tcp_flags
/// 0/0xff action pass`. The kernel's flow dissector reads the ports
/// from the first 4 bytes of the L4 header but the flags only when all
/// 20 bytes are there (with a data offset of at least 5), else it
/// leaves them zero; a TCP path of the program needs the whole header.
/// So a frame holding the ports but not the whole TCP header would meet
/// the port rules with keys the program never read: the guard, before
/// them, hands every TCP frame whose flags key is zero (those, and the
/// rare segment with no flags at all) to the program.
fn tcp_cut_guard(et: [u8; 2]) -> Rule {
    let v6 = et == [0x86, 0xdd];
    let mut p = Pattern::any();
    p.set_byte(12, et[0], 0xff);
    p.set_byte(13, et[1], 0xff);
    if v6 {
        p.set_byte(14, 0x60, 0xf0);
        p.set_byte(20, 6, 0xff);
        p.set_byte(67, 0, 0xff);
    } else {
        p.set_byte(14, 0x45, 0xff);
        p.set_byte(23, 6, 0xff);
        p.set_byte(47, 0, 0xff);
    }
    p.min_len = crate::fields::header_len(&p);
    pass_guard(p, false)
}

/// `rules` with their guards first, priorities renumbered from 1.
pub fn guarded(rules: Vec<Rule>) -> Vec<Rule> {
    guarded_forced(rules, false, false)
}

/// [`guarded`] with [`guards_forced`].
pub fn guarded_forced(rules: Vec<Rule>, v4: bool, v6: bool) -> Vec<Rule> {
    let mut out = guards_forced(&rules, v4, v6);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u32_keys_described() {
        // IPv4, IHL 6/7 (low nibble 0110 under mask 1110).
        let (t, m) = describe_u32(&[(0x06 << 24, 0x0e << 24, 0)], 0x0800);
        assert_eq!(t, "u8 0x06 0x0e at 0");
        assert_eq!(m, "IHL 0x6/0xe (not 5)");
        let (t, m) = describe_u32(&[(0x80 << 24, 0xc0 << 24, 0)], 0x86dd);
        assert_eq!(t, "u8 0x80 0xc0 at 0");
        assert_eq!(m, "IP version 0x8/0xc (not 6)");
        let (t, _) = describe_u32(&[(0x0000_1100, 0x0000_ff00, 4)], 0x0800);
        assert_eq!(t, "u8 0x11 0xff at 6");
    }

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
