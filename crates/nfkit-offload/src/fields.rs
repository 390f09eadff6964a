//! The header field model: which bits of a [`Pattern`] name flower keys,
//! the key text, and the frame length a rule implies.
//!
//! Untagged Ethernet, then (with `protocol ip`) IPv4 without options,
//! then UDP or TCP ports and TCP flags:
//!
//! | bytes | field | flower key | mask |
//! |---|---|---|---|
//! | 0..6, 6..12 | dst / src MAC | `dst_mac`, `src_mac` | any |
//! | 12..14 | EtherType | `protocol` | exact |
//! | 14 (high nibble) | IP version 4 | implied by `protocol ip` | exact |
//! | 14 (low nibble) | IHL = 5 | none: the no-options assumption | exact |
//! | 15 | ToS / DSCP+ECN | `ip_tos` | any |
//! | 22 | TTL | `ip_ttl` | any |
//! | 23 | protocol | `ip_proto` | exact |
//! | 26..30, 30..34 | addresses | `src_ip`, `dst_ip` | prefix |
//! | 34..36, 36..38 | ports (UDP/TCP, IHL 5) | `src_port`, `dst_port` | prefix (a range) |
//! | 47 | TCP flags (low 8) | `tcp_flags` | any |
//!
//! A rule matches only frames that hold every header it names (14, 34,
//! 42 for UDP, 54 for TCP bytes): [`header_len`]. Everything else (VLAN
//! tags, IPv6, total length, id, fragment bits, checksums, payload) is
//! not expressible in this slice.

use crate::pattern::Pattern;

const ETH_IP: [u8; 2] = [0x08, 0x00];

/// The flower form of a pattern: `protocol` and the keys after `flower`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowerMatch {
    /// `all`, `ip` or `0xNNNN`.
    pub protocol: String,
    pub keys: Vec<String>,
}

fn byte(p: &Pattern, i: usize) -> (u8, u8) {
    (
        p.value.get(i).copied().unwrap_or(0),
        p.mask.get(i).copied().unwrap_or(0),
    )
}

fn bytes(p: &Pattern, r: std::ops::Range<usize>) -> (Vec<u8>, Vec<u8>) {
    r.map(|i| byte(p, i)).unzip()
}

fn any(p: &Pattern, r: std::ops::Range<usize>) -> bool {
    r.into_iter().any(|i| byte(p, i).1 != 0)
}

fn exact(p: &Pattern, r: std::ops::Range<usize>) -> Option<Vec<u8>> {
    let (v, m) = bytes(p, r);
    m.iter().all(|&x| x == 0xff).then_some(v)
}

/// Number of leading one bits of a big-endian mask, if it is a prefix.
fn prefix_len(mask: &[u8]) -> Option<u32> {
    let n: u32 = mask.iter().map(|m| m.count_ones()).sum();
    let v = mask.iter().fold(0u128, |a, &m| a << 8 | m as u128);
    let bits = mask.len() as u32 * 8;
    let want = if n == 0 {
        0
    } else {
        ((1u128 << n) - 1) << (bits - n)
    };
    (v == want).then_some(n)
}

/// The IP protocol the pattern fixes (only when it is IPv4 with IHL 5).
fn l4_proto(p: &Pattern) -> Option<u8> {
    let (v14, m14) = byte(p, 14);
    if exact(p, 12..14)? != ETH_IP || m14 & 0x0f != 0x0f || v14 & 0x0f != 5 {
        return None;
    }
    exact(p, 23..24).map(|v| v[0])
}

/// The frame length a rule with these bits implies: the end of the
/// deepest header it names, at least the 14 bytes of Ethernet (the NIC
/// delivers no shorter frame to a filter: shorter ones are the
/// program's alone).
pub fn header_len(p: &Pattern) -> usize {
    if any(p, 38..64) || (any(p, 34..38) && l4_proto(p) == Some(6)) {
        54
    } else if any(p, 34..38) {
        42
    } else if any(p, 14..34) {
        34
    } else {
        14
    }
}

/// The flower keys for `p` when flower can match exactly its bits, or
/// why not.
pub fn express(p: &Pattern) -> Result<FlowerMatch, String> {
    let mut keys = Vec::new();
    let mac = |name: &str, r| -> Option<String> {
        let (v, m) = bytes(p, r);
        if m.iter().all(|&x| x == 0) {
            return None;
        }
        let hex = |b: &[u8]| {
            b.iter()
                .map(|x| format!("{x:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        Some(if m.iter().all(|&x| x == 0xff) {
            format!("{name} {}", hex(&v))
        } else {
            format!("{name} {}/{}", hex(&v), hex(&m))
        })
    };
    keys.extend(mac("dst_mac", 0..6));
    keys.extend(mac("src_mac", 6..12));
    let protocol = if any(p, 12..14) {
        let t = exact(p, 12..14).ok_or("a partial EtherType mask")?;
        if t == ETH_IP {
            "ip".to_string()
        } else {
            format!("0x{:02x}{:02x}", t[0], t[1])
        }
    } else {
        "all".to_string()
    };
    if p.bytes_used() <= 14 {
        return Ok(FlowerMatch { protocol, keys });
    }
    if protocol != "ip" {
        return Err("header bits after Ethernet without EtherType IPv4".into());
    }
    let (v14, m14) = byte(p, 14);
    if m14 & 0xf0 != 0 && (m14 & 0xf0 != 0xf0 || v14 & 0xf0 != 0x40) {
        return Err("an IP version test other than == 4".into());
    }
    if m14 & 0x0f != 0 && (m14 & 0x0f != 0x0f || v14 & 0x0f != 5) {
        return Err("an IHL test other than == 5".into());
    }
    for (i, what) in [
        (16..22, "IPv4 total length, id or fragment bits"),
        (24..26, "IPv4 checksum"),
    ] {
        if any(p, i) {
            return Err(what.into());
        }
    }
    let (v, m) = byte(p, 15);
    if m != 0 {
        keys.push(format!("ip_tos 0x{v:02x}/0x{m:02x}"));
    }
    let (v, m) = byte(p, 22);
    if m != 0 {
        keys.push(format!("ip_ttl {v}/0x{m:02x}"));
    }
    if any(p, 23..24) {
        let v = exact(p, 23..24).ok_or("a partial IP protocol mask")?;
        keys.push(match v[0] {
            6 => "ip_proto tcp".into(),
            17 => "ip_proto udp".into(),
            1 => "ip_proto icmp".into(),
            n => format!("ip_proto {n}"),
        });
    }
    for (name, r) in [("src_ip", 26..30), ("dst_ip", 30..34)] {
        let (v, m) = bytes(p, r);
        let n = prefix_len(&m).ok_or_else(|| format!("{name} mask is not a prefix"))?;
        if n > 0 {
            keys.push(format!("{name} {}.{}.{}.{}/{n}", v[0], v[1], v[2], v[3]));
        }
    }
    if p.bytes_used() <= 34 {
        return Ok(FlowerMatch { protocol, keys });
    }
    let proto = l4_proto(p).ok_or("L4 bits without IPv4, IHL 5 and a fixed protocol")?;
    if proto != 6 && proto != 17 {
        return Err(format!("L4 bits of IP protocol {proto}"));
    }
    for (name, r) in [("src_port", 34..36), ("dst_port", 36..38)] {
        let (v, m) = bytes(p, r);
        let n = prefix_len(&m).ok_or_else(|| format!("{name} mask is not a prefix"))?;
        if n == 16 {
            keys.push(format!("{name} {}", u16::from_be_bytes([v[0], v[1]])));
        } else if n > 0 {
            let lo = u16::from_be_bytes([v[0], v[1]]);
            let hi = lo | (u16::MAX >> n);
            keys.push(format!("{name} {lo}-{hi}"));
        }
    }
    if any(p, 38..47) || p.bytes_used() > 48 {
        return Err("TCP/UDP header bits other than ports and flags".into());
    }
    let (v, m) = byte(p, 47);
    if m != 0 {
        if proto != 6 {
            return Err("UDP bytes after the ports".into());
        }
        keys.push(format!("tcp_flags 0x{v:02x}/0x{m:02x}"));
    }
    Ok(FlowerMatch { protocol, keys })
}

/// The widest expressible pattern that contains `p`: bits flower cannot
/// match dropped (prefix masks cut to their prefix), the length the
/// remaining fields imply. Sound only for rules that hand packets to
/// software.
pub fn widen(p: &Pattern) -> Pattern {
    let mut w = p.clone();
    let clear = |w: &mut Pattern, r: std::ops::Range<usize>| {
        for i in r {
            for b in 0..8 {
                w.clear_bit(i as u32 * 8 + b);
            }
        }
    };
    if exact(&w, 12..14).is_none() {
        clear(&mut w, 12..64);
    } else if exact(&w, 12..14) != Some(ETH_IP.to_vec()) {
        clear(&mut w, 14..64);
    }
    if express(&w).is_err() {
        let (v14, m14) = byte(&w, 14);
        if (m14 & 0xf0 != 0 && (m14 & 0xf0 != 0xf0 || v14 & 0xf0 != 0x40))
            || (m14 & 0x0f != 0 && (m14 & 0x0f != 0x0f || v14 & 0x0f != 5))
        {
            clear(&mut w, 14..15);
        }
        clear(&mut w, 16..22);
        clear(&mut w, 24..26);
        if exact(&w, 23..24).is_none() {
            clear(&mut w, 23..24);
        }
        for r in [26..30, 30..34, 34..36, 36..38] {
            cut_to_prefix(&mut w, r);
        }
        match l4_proto(&w) {
            Some(6) => clear(&mut w, 38..47),
            Some(17) => clear(&mut w, 38..47),
            _ => clear(&mut w, 34..47),
        }
        if l4_proto(&w) != Some(6) {
            clear(&mut w, 47..48);
        }
        let end = w.mask.len().max(48);
        clear(&mut w, 48..end);
    }
    w.min_len = header_len(&w);
    w.trim();
    w
}

fn cut_to_prefix(w: &mut Pattern, r: std::ops::Range<usize>) {
    let mut on = true;
    for i in r {
        for b in (0..8).rev() {
            let pos = i as u32 * 8 + b;
            match w.bit(pos) {
                Some(_) if on => {}
                Some(_) => w.clear_bit(pos),
                None => on = false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(p: &mut Pattern, at: usize, v: &[u8]) {
        for (i, b) in v.iter().enumerate() {
            for k in 0..8 {
                p.set_bit(((at + i) * 8 + k) as u32, b >> k & 1 == 1);
            }
        }
    }

    #[test]
    fn udp_port_rule() {
        let mut p = Pattern::any();
        set(&mut p, 12, &[8, 0]);
        set(&mut p, 14, &[0x45]);
        set(&mut p, 23, &[17]);
        set(&mut p, 36, &[0, 53]);
        let f = express(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.protocol, "ip");
        assert_eq!(f.keys, vec!["ip_proto udp", "dst_port 53"]);
        assert_eq!(header_len(&p), 42);
        set(&mut p, 18, &[0, 1]);
        assert!(express(&p).is_err());
        let w = widen(&p);
        assert!(express(&w).is_ok());
        assert!(w.specificity() < p.specificity());
    }
}
