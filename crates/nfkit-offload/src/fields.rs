//! The header field model: which bits of a [`Pattern`] name flower keys,
//! the key text, and the frame length a rule implies.
//!
//! Untagged Ethernet, then IPv4 without options (`protocol ip`) or IPv6
//! without extension headers (`protocol ipv6`), then UDP or TCP ports
//! and TCP flags. IPv4:
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
//! | 20..22 | fragment bits: "not a fragment", "first fragment" | `ip_flags nofrag`, `ip_flags frag/firstfrag` | 0x3fff |
//! | 47 | TCP flags (low 8) | `tcp_flags` | any |
//!
//! IPv6: version 6 (implied), traffic class (`ip_tos`), next header
//! (`ip_proto`, exact), hop limit (`ip_ttl`), addresses at 22 and 38
//! (prefixes), ports at 54 and 56, TCP flags at 67.
//!
//! A rule matches only frames that hold every header it names (14; 34
//! or 54 for IPv4 or IPv6; 8 more for UDP, 20 for TCP): [`header_len`].
//! Everything else (VLAN tags, total or payload length, id, other
//! fragment tests, flow label, checksums, payload) is not expressible in
//! this slice.

use crate::pattern::Pattern;

const ETH_IP: [u8; 2] = [0x08, 0x00];
const ETH_IPV6: [u8; 2] = [0x86, 0xdd];

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

pub(crate) fn bytes(p: &Pattern, r: std::ops::Range<usize>) -> (Vec<u8>, Vec<u8>) {
    r.map(|i| byte(p, i)).unzip()
}

fn any(p: &Pattern, r: std::ops::Range<usize>) -> bool {
    r.into_iter().any(|i| byte(p, i).1 != 0)
}

pub(crate) fn exact(p: &Pattern, r: std::ops::Range<usize>) -> Option<Vec<u8>> {
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
        (u128::MAX >> (128 - n)) << (bits - n)
    };
    (v == want).then_some(n)
}

/// Where the L4 header starts and the IP protocol, when the pattern
/// fixes both: IPv4 with IHL 5 (offset 34) or IPv6 whose next header is
/// the protocol (offset 54).
pub(crate) fn l4_proto(p: &Pattern) -> Option<(usize, u8)> {
    let et = exact(p, 12..14)?;
    if et == ETH_IP {
        let (v14, m14) = byte(p, 14);
        if m14 & 0x0f != 0x0f || v14 & 0x0f != 5 {
            return None;
        }
        exact(p, 23..24).map(|v| (34, v[0]))
    } else if et == ETH_IPV6 {
        exact(p, 20..21).map(|v| (54, v[0]))
    } else {
        None
    }
}

/// The frame length a rule with these bits implies: the end of the
/// deepest header it names, at least the 14 bytes of Ethernet (the NIC
/// delivers no shorter frame to a filter: shorter ones are the
/// program's alone).
pub fn header_len(p: &Pattern) -> usize {
    let l3 = match exact(p, 12..14) {
        Some(t) if t == ETH_IPV6 => 54,
        _ => 34,
    };
    match l4_proto(p) {
        Some((at, proto)) if p.bytes_used() > at => at + if proto == 6 { 20 } else { 8 },
        _ if p.bytes_used() > 14 => l3,
        _ => 14,
    }
}

/// IPv6 next-header values of extension headers (hop-by-hop, routing,
/// fragment, AH, destination options): the field model's IPv6 has none
/// (flower's dissector skips some of them, so its `ip_proto` is then not
/// byte 20), and a program walking them computes offsets from them.
pub const IPV6_EXT_HEADERS: [u8; 5] = [0, 43, 44, 51, 60];

/// Why no rule can ever stand for a path whose pattern is `p`, whatever
/// bits it requires later: a VLAN-tagged frame, or an IPv6 frame whose
/// next header is an extension header. `None` when there is no such
/// reason. The executor ends such paths in software at once (their
/// rule is a widened `pass` either way), which keeps the classifier's
/// VLAN and extension-header loops from multiplying the paths.
pub fn outside_model(p: &Pattern) -> Option<String> {
    let et = exact(p, 12..14)?;
    if (et == [0x81, 0x00] || et == [0x88, 0xa8]) && p.bytes_used() > 14 {
        // No field of the model follows a VLAN tag (the EtherType
        // alone is a flower key).
        return Some(format!(
            "VLAN tag (EtherType 0x{:02x}{:02x}): not in the field model",
            et[0], et[1]
        ));
    }
    if et != ETH_IPV6 {
        return None;
    }
    let nh = exact(p, 20..21)?;
    IPV6_EXT_HEADERS.contains(&nh[0]).then(|| {
        format!(
            "IPv6 extension header (next header {}): not in the field model",
            nh[0]
        )
    })
}

type Refusal = (String, std::ops::Range<usize>);

fn refuse<T>(what: impl Into<String>, r: std::ops::Range<usize>) -> Result<T, Refusal> {
    Err((what.into(), r))
}

/// The flower keys for `p` when flower can match exactly its bits, or
/// why not.
pub fn express(p: &Pattern) -> Result<FlowerMatch, String> {
    express_at(p).map_err(|e| e.0)
}

fn prefix_key(
    p: &Pattern,
    name: &str,
    r: std::ops::Range<usize>,
) -> Result<Option<String>, Refusal> {
    let (v, m) = bytes(p, r.clone());
    let Some(n) = prefix_len(&m) else {
        return refuse(format!("{name} mask is not a prefix"), r);
    };
    if n == 0 {
        return Ok(None);
    }
    let addr = if v.len() == 4 {
        std::net::IpAddr::from([v[0], v[1], v[2], v[3]])
    } else {
        let mut a = [0u8; 16];
        a.copy_from_slice(&v);
        std::net::IpAddr::from(a)
    };
    Ok(Some(format!("{name} {addr}/{n}")))
}

fn express_at(p: &Pattern) -> Result<FlowerMatch, Refusal> {
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
    let et = if any(p, 12..14) {
        match exact(p, 12..14) {
            Some(t) => Some(t),
            None => return refuse("a partial EtherType mask", 12..14),
        }
    } else {
        None
    };
    let protocol = match &et {
        None => "all".to_string(),
        Some(t) if *t == ETH_IP => "ip".to_string(),
        Some(t) if *t == ETH_IPV6 => "ipv6".to_string(),
        Some(t) => format!("0x{:02x}{:02x}", t[0], t[1]),
    };
    let end = p.bytes_used();
    if end <= 14 {
        return Ok(FlowerMatch { protocol, keys });
    }
    let l4 = match et.as_deref() {
        Some(t) if t == ETH_IP => ipv4(p, &mut keys)?,
        Some(t) if t == ETH_IPV6 => ipv6(p, &mut keys)?,
        _ => {
            return refuse(
                "header bits after Ethernet without EtherType IPv4 or IPv6",
                14..end,
            )
        }
    };
    if end > l4 {
        ports(p, l4, &mut keys)?;
    }
    Ok(FlowerMatch { protocol, keys })
}

/// IPv4 keys; the L4 offset.
fn ipv4(p: &Pattern, keys: &mut Vec<String>) -> Result<usize, Refusal> {
    let (v14, m14) = byte(p, 14);
    if m14 & 0xf0 != 0 && (m14 & 0xf0 != 0xf0 || v14 & 0xf0 != 0x40) {
        return refuse("an IP version test other than == 4", 14..15);
    }
    if m14 & 0x0f != 0 && (m14 & 0x0f != 0x0f || v14 & 0x0f != 5) {
        return refuse("an IHL test other than == 5", 14..15);
    }
    if any(p, 16..20) {
        return refuse("IPv4 total length or id", 16..20);
    }
    let (v, m) = bytes(p, 20..22);
    let (v, m) = (
        u16::from_be_bytes([v[0], v[1]]),
        u16::from_be_bytes([m[0], m[1]]),
    );
    match (v & m, m) {
        (_, 0) => {}
        (0, 0x3fff) => keys.push("ip_flags nofrag".into()),
        (0x2000, 0x3fff) => keys.push("ip_flags frag/firstfrag".into()),
        _ => {
            return refuse(
                "fragment bits other than \"not a fragment\" or \"first fragment\"",
                20..22,
            )
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
    proto_key(p, 23, keys)?;
    if any(p, 24..26) {
        return refuse("IPv4 checksum", 24..26);
    }
    keys.extend(prefix_key(p, "src_ip", 26..30)?);
    keys.extend(prefix_key(p, "dst_ip", 30..34)?);
    Ok(34)
}

/// IPv6 keys (no extension headers); the L4 offset.
fn ipv6(p: &Pattern, keys: &mut Vec<String>) -> Result<usize, Refusal> {
    let (v14, m14) = byte(p, 14);
    let (v15, m15) = byte(p, 15);
    if m14 & 0xf0 != 0 && (m14 & 0xf0 != 0xf0 || v14 & 0xf0 != 0x60) {
        return refuse("an IP version test other than == 6", 14..15);
    }
    if m15 & 0x0f != 0 || any(p, 16..20) {
        return refuse("IPv6 flow label or payload length", 15..20);
    }
    let (tv, tm) = ((v14 & 0x0f) << 4 | v15 >> 4, (m14 & 0x0f) << 4 | m15 >> 4);
    if tm != 0 {
        keys.push(format!("ip_tos 0x{tv:02x}/0x{tm:02x}"));
    }
    proto_key(p, 20, keys)?;
    let (v, m) = byte(p, 21);
    if m != 0 {
        keys.push(format!("ip_ttl {v}/0x{m:02x}"));
    }
    keys.extend(prefix_key(p, "src_ip", 22..38)?);
    keys.extend(prefix_key(p, "dst_ip", 38..54)?);
    Ok(54)
}

fn proto_key(p: &Pattern, at: usize, keys: &mut Vec<String>) -> Result<(), Refusal> {
    if !any(p, at..at + 1) {
        return Ok(());
    }
    let Some(v) = exact(p, at..at + 1) else {
        return refuse("a partial IP protocol mask", at..at + 1);
    };
    keys.push(match v[0] {
        6 => "ip_proto tcp".into(),
        17 => "ip_proto udp".into(),
        1 => "ip_proto icmp".into(),
        58 => "ip_proto icmpv6".into(),
        n => format!("ip_proto {n}"),
    });
    Ok(())
}

/// UDP/TCP ports and TCP flags at `l4`.
fn ports(p: &Pattern, l4: usize, keys: &mut Vec<String>) -> Result<(), Refusal> {
    let end = p.bytes_used();
    let Some((at, proto)) = l4_proto(p).filter(|(at, _)| *at == l4) else {
        return refuse("L4 bits without IHL 5 and a fixed protocol", l4..end);
    };
    if proto != 6 && proto != 17 {
        return refuse(format!("L4 bits of IP protocol {proto}"), at..end);
    }
    for (name, r) in [("src_port", at..at + 2), ("dst_port", at + 2..at + 4)] {
        let (v, m) = bytes(p, r.clone());
        let Some(n) = prefix_len(&m) else {
            return refuse(format!("{name} mask is not a prefix"), r);
        };
        let lo = u16::from_be_bytes([v[0], v[1]]);
        if n == 16 {
            keys.push(format!("{name} {lo}"));
        } else if n > 0 {
            keys.push(format!("{name} {lo}-{}", lo | (u16::MAX >> n)));
        }
    }
    if any(p, at + 4..at + 13) {
        return refuse(
            "TCP/UDP header bits other than ports and flags",
            at + 4..at + 13,
        );
    }
    if end > at + 14 {
        return refuse("bits after the TCP flags", at + 14..end);
    }
    let (v, m) = byte(p, at + 13);
    if m != 0 {
        if proto != 6 {
            return refuse("UDP bytes after the ports", at + 13..at + 14);
        }
        keys.push(format!("tcp_flags 0x{v:02x}/0x{m:02x}"));
    }
    Ok(())
}

/// The widest expressible pattern that contains `p`: address and port
/// masks cut to their prefix, every bit flower cannot match dropped,
/// the length the remaining fields imply. Sound only for rules that
/// hand packets to software.
pub fn widen(p: &Pattern) -> Pattern {
    let mut w = p.clone();
    let v6 = exact(&w, 12..14).is_some_and(|t| t == ETH_IPV6);
    let prefixed: &[std::ops::Range<usize>] = if v6 {
        &[22..38, 38..54, 54..56, 56..58]
    } else {
        &[26..30, 30..34, 34..36, 36..38]
    };
    for r in prefixed {
        cut_to_prefix(&mut w, r.clone());
    }
    for _ in 0..64 {
        match express_at(&w) {
            Ok(_) => break,
            Err((_, r)) => {
                let r = if r.is_empty() { 0..w.mask.len() } else { r };
                for i in r {
                    for b in 0..8 {
                        w.clear_bit(i as u32 * 8 + b);
                    }
                }
            }
        }
    }
    if express_at(&w).is_err() {
        w = Pattern::any();
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

/// A byte range of a frame.
type Span = std::ops::Range<usize>;

/// The byte ranges of the keys flower reads from the IP header and
/// from the L4 header of a pattern (IPv4 or IPv6 by its EtherType; the
/// L4 header at 34 or 54).
fn key_levels(p: &Pattern) -> Option<(Vec<Span>, Vec<Span>)> {
    let et = exact(p, 12..14)?;
    if et == ETH_IP {
        Some((vec![15..16, 20..24, 26..34], vec![34..38, 47..48]))
    } else if et == ETH_IPV6 {
        Some((vec![14..16, 20..54], vec![54..58, 67..68]))
    } else {
        None
    }
}

/// Whether flower could match the pattern on a frame that lacks a
/// header it names. Flower reads an absent header (a frame cut short,
/// the L4 header of a fragment) as zeros: a pattern whose required
/// bits in a header's keys are all 0 (`ip_ttl 0/0xfe`, `tcp_flags
/// 0/0x3f`, `ip_flags nofrag` alone) matches frames without that
/// header, which the program's path never saw. `None` when safe, else
/// what is at fault.
pub fn matches_absent_header(p: &Pattern) -> Option<&'static str> {
    let (ip, l4) = key_levels(p)?;
    let ones = |rs: &[Span]| {
        rs.iter().any(|r| {
            let (v, m) = bytes(p, r.clone());
            v.iter().zip(&m).any(|(v, m)| v & m != 0)
        })
    };
    let named = |rs: &[Span]| rs.iter().any(|r| any(p, r.clone()));
    if named(&l4) && !ones(&l4) {
        return Some("its L4 keys require only zero bits, which flower also finds in frames without an L4 header (cut short, fragments)");
    }
    if (named(&ip) || named(&l4)) && !ones(&ip) && !ones(&l4) {
        return Some("its IP keys require only zero bits, which flower also finds in frames without an IP header (cut short)");
    }
    None
}

/// The frame as flower's keys see it, for the headers a pattern names,
/// as the kernel's flow dissector fills them: an IPv4 or IPv6 header the
/// frame does not hold entirely reads as zeros, and so does the L4
/// header of an IPv4 fragment. Of the L4 header, the ports are read
/// from its first 4 bytes whenever the frame holds them (the dissector
/// ignores the IP total length and the rest of the header); the TCP
/// flags only when the frame holds all 20 bytes of the TCP header and
/// its data offset is at least 5, else they read as zero. (Rules that
/// decide UDP frames on their ports are `u32` filters, which match only
/// frames holding the whole header: [`crate::u32match`].) `None` when
/// the view is the frame itself (then the pattern's own length check
/// applies).
pub fn absent_view(p: &Pattern, frame: &[u8]) -> Option<Vec<u8>> {
    let (ip, _) = key_levels(p)?;
    let v6 = ip[0].start == 14;
    let (l3_end, l4) = if v6 { (54, 54) } else { (34, 34) };
    let proto = l4_proto(p).map(|(_, x)| x);
    let l4_need = if proto == Some(6) { 20 } else { 8 };
    let used = p.bytes_used();
    let mut view = frame.to_vec();
    if view.len() < 14 {
        return None;
    }
    let mut changed = false;
    if frame.len() < l3_end {
        view.resize(used.max(l3_end), 0);
        for b in &mut view[14..] {
            *b = 0;
        }
        changed = true;
    } else if used > l4 {
        let frag = !v6 && u16::from_be_bytes([frame[20], frame[21]]) & 0x3fff != 0;
        if frag || frame.len() < l4 + 4 {
            view.resize(view.len().max(used), 0);
            for b in &mut view[l4..] {
                *b = 0;
            }
            changed = true;
        } else if frame.len() < l4 + l4_need {
            // The ports are there; nothing after them is read.
            view.resize(view.len().max(used), 0);
            for b in &mut view[l4 + 4..] {
                *b = 0;
            }
            changed = true;
        } else if proto == Some(6) && frame[l4 + 12] >> 4 < 5 {
            // A TCP data offset below 5: no flags key.
            view[l4 + 12] &= 0xf0;
            view[l4 + 13] = 0;
            changed = true;
        }
    }
    changed.then_some(view)
}

/// The frame as flower's keys see it: an IPv4 header with options is
/// read past them (the L4 header moved to offset 34, as if IHL were 5),
/// and one whose IHL is below 5 or that the frame does not hold gives
/// no IP keys at all (the frame cut after the Ethernet header).
pub fn flower_frame(frame: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    if frame.get(12..14) != Some(&[8, 0]) || frame.len() < 15 {
        return Cow::Borrowed(frame);
    }
    let ihl = usize::from(frame[14] & 0x0f);
    if ihl == 5 {
        return Cow::Borrowed(frame);
    }
    let end = 14 + ihl * 4;
    if ihl < 5 || frame.len() < end {
        return Cow::Owned(frame[..14].to_vec());
    }
    let mut v = frame[..34].to_vec();
    v.extend_from_slice(&frame[end..]);
    Cow::Owned(v)
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
    fn prefixes() {
        assert_eq!(prefix_len(&[0xff; 16]), Some(128));
        assert_eq!(prefix_len(&[0xff, 0xff, 0xf0, 0]), Some(20));
        assert_eq!(prefix_len(&[0xff, 0, 0xff, 0]), None);
        assert_eq!(prefix_len(&[0; 4]), Some(0));
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
