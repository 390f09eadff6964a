//! Header rewrites: what a path stored into the packet, as `pedit` edits
//! and `csum` fix-ups that flower applies before its terminal action.
//!
//! The executor keeps every byte a path stores into the packet
//! ([`PCell`]). At a TX or redirect the bytes become a [`Rewrite`] when
//! each is a constant (some of its bits, the rest kept: `set ... retain`),
//! the byte it was plus a constant (`add`, as a TTL decrement), for the
//! IPv4 header checksum a value proven to be the header's checksum
//! after the other edits ([`crate::csum`]): `action csum ip4h`, or for
//! the TCP checksum of an IPv4 segment a value proven to be its
//! incremental update: `csum tcp`. Anything else (a byte copied from
//! elsewhere in the packet, a sum the forms cannot follow, a UDP
//! checksum fix-up) leaves the path to software, with the reason.

use crate::csum::{Form, Lin};
use crate::pattern::Pattern;
use crate::value::{literal, Bit, Bits, Val, ONE, ZERO};
use std::collections::BTreeMap;
use std::fmt;

/// One byte a path stored into the packet.
#[derive(Clone, Debug)]
pub enum PCell {
    /// Constants and packet bits (as the packet arrived).
    Bits([Bit; 8]),
    /// Byte `k` of an `n`-byte store at `at` of a sum or a field plus a
    /// constant; `id` names the store ([`crate::csum::Var::Stored`]).
    Val {
        v: Val,
        k: u8,
        n: u8,
        at: i64,
        id: u64,
    },
    /// Anything else (a pointer, an unknown value).
    Unknown,
}

/// A change flower makes to one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Edit {
    /// The bits of `mask` set to those of `val`, the others kept.
    Set { at: usize, val: u8, mask: u8 },
    /// The byte plus `add`, modulo 256 (pedit's `add` on one byte).
    Add { at: usize, add: u8 },
}

impl Edit {
    pub fn at(&self) -> usize {
        match self {
            Edit::Set { at, .. } | Edit::Add { at, .. } => *at,
        }
    }
}

/// The header rewrite of a path: byte edits, then the checksums redone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Rewrite {
    /// By offset in the frame, at most one per byte.
    pub edits: Vec<Edit>,
    /// The IPv4 header checksum recomputed (`action csum ip4h`).
    pub csum_ip4h: bool,
    /// The TCP checksum recomputed (`action csum ... tcp`), standing for
    /// the program's incremental fix-up of an IPv4 TCP segment's
    /// checksum after address or port edits: equal for segments whose
    /// checksum was right on arrival. act_csum drops a frame shorter
    /// than its IPv4 total length and leaves fragments alone, so such a
    /// rule is a `u32` filter that matches only unfragmented frames
    /// holding their total length ([`crate::u32match`]).
    pub csum_tcp: bool,
    /// The program's fix-up is incremental (RFC 1624): it equals the
    /// recomputed checksum for frames whose IPv4 header checksum was
    /// right, and keeps a wrong one wrong by the same amount.
    pub assumes_valid_csum: bool,
}

/// IPv4 header checksum bytes in an untagged frame.
const CSUM4: std::ops::Range<usize> = 24..26;
/// TCP checksum bytes after an IPv4 header without options.
pub const CSUM_TCP: std::ops::Range<usize> = 50..52;
/// UDP checksum bytes after an IPv4 header without options.
const CSUM_UDP: std::ops::Range<usize> = 40..42;
/// The IPv4 header (no options) in an untagged frame.
const IP4: std::ops::Range<usize> = 14..34;

impl Rewrite {
    /// The frame after the rewrite, as pedit and csum leave it; `false`
    /// when act_csum drops it instead (a TCP checksum it cannot redo).
    pub fn apply(&self, frame: &mut [u8]) -> bool {
        for e in &self.edits {
            match *e {
                Edit::Set { at, val, mask } => {
                    if let Some(b) = frame.get_mut(at) {
                        *b = (*b & !mask) | (val & mask);
                    }
                }
                Edit::Add { at, add } => {
                    if let Some(b) = frame.get_mut(at) {
                        *b = b.wrapping_add(add);
                    }
                }
            }
        }
        if self.csum_tcp && !fix_tcp_checksum(frame) {
            return false;
        }
        if self.csum_ip4h {
            fix_ipv4_checksum(frame);
        }
        true
    }

    /// The `tc` action words for `ethertype` (0x0800, 0x86dd or other),
    /// ending in `pipe` before the terminal action: `pedit ex munge ip
    /// ttl add 0xff pipe action csum ip4h pipe`.
    pub fn tc_actions(&self, ethertype: u16) -> Result<String, String> {
        let munges: Vec<String> = crate::pedit::munges(self, ethertype)?
            .into_iter()
            .map(|m| m.text)
            .collect();
        let mut out = String::new();
        if !munges.is_empty() {
            out.push_str("pedit ex ");
            out.push_str(&munges.join(" "));
            out.push_str(" pipe action ");
        }
        match (self.csum_ip4h, self.csum_tcp) {
            (true, true) => out.push_str("csum iph and tcp pipe action "),
            (true, false) => out.push_str("csum ip4h pipe action "),
            (false, true) => out.push_str("csum tcp pipe action "),
            (false, false) => {}
        }
        Ok(out)
    }
}

impl fmt::Display for Rewrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e: Vec<String> = self
            .edits
            .iter()
            .map(|e| match e {
                Edit::Set { at, val, mask } => format!("[{at}] = {val:#04x}/{mask:#04x}"),
                Edit::Add { at, add } => format!("[{at}] += {add:#04x}"),
            })
            .collect();
        write!(f, "{}", e.join(", "))?;
        if self.csum_ip4h {
            write!(f, ", csum ip4h")?;
        }
        if self.csum_tcp {
            write!(f, ", csum tcp")?;
        }
        Ok(())
    }
}

/// Recomputes the IPv4 header checksum of an untagged IPv4 frame, as
/// `act_csum` does (`ip_send_check`: over IHL words, the field zeroed).
pub fn fix_ipv4_checksum(frame: &mut [u8]) {
    if frame.get(12..14) != Some(&[8, 0]) || frame.len() < 34 {
        return;
    }
    let ihl = (frame[14] & 0xf) as usize * 4;
    if ihl < 20 || frame.len() < 14 + ihl {
        return;
    }
    frame[24] = 0;
    frame[25] = 0;
    let c = !fold(&frame[14..14 + ihl]);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}

/// The TCP checksum as act_csum redoes it in an untagged IPv4 frame
/// (`tcf_csum_ipv4_tcp`): none for a fragment with a non-zero offset or
/// a protocol other than TCP; else over the IP payload as the total
/// length gives it (padding ignored), with the pseudo-header. `false`
/// when act_csum drops the frame: it does not hold its total length, or
/// the total length does not cover the TCP header.
pub fn fix_tcp_checksum(frame: &mut [u8]) -> bool {
    match tcp_segment(frame) {
        TcpSegment::Untouched => true,
        TcpSegment::Dropped => false,
        TcpSegment::At { l4, len } => {
            frame[l4 + 16] = 0;
            frame[l4 + 17] = 0;
            let c = !tcp_sum(frame, l4, len);
            frame[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
            true
        }
    }
}

/// What act_csum (`tcf_csum_ipv4`) makes of an untagged frame's TCP
/// checksum.
enum TcpSegment {
    /// Not IPv4 TCP, or a fragment with a non-zero offset: left alone.
    Untouched,
    /// The frame does not hold its total length, or the total length
    /// does not cover the TCP header: dropped.
    Dropped,
    /// Recomputed over the `len` bytes at `l4` (the IP payload as the
    /// total length gives it).
    At { l4: usize, len: usize },
}

fn tcp_segment(frame: &[u8]) -> TcpSegment {
    if frame.get(12..14) != Some(&[8, 0]) || frame.len() < 34 {
        return TcpSegment::Untouched;
    }
    if u16::from_be_bytes([frame[20], frame[21]]) & 0x1fff != 0 || frame[23] != 6 {
        return TcpSegment::Untouched;
    }
    let ihl = (frame[14] & 0xf) as usize * 4;
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    if frame.len() < 14 + total || total < ihl + 20 {
        return TcpSegment::Dropped;
    }
    TcpSegment::At {
        l4: 14 + ihl,
        len: total - ihl,
    }
}

/// The folded sum of the TCP pseudo-header and the `len` bytes at `l4`.
fn tcp_sum(frame: &[u8], l4: usize, len: usize) -> u16 {
    let mut pseudo = [0u8; 12];
    pseudo[..8].copy_from_slice(&frame[26..34]);
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&(len as u16).to_be_bytes());
    let (a, b) = (fold(&pseudo), fold(&frame[l4..l4 + len]));
    fold(&[a.to_be_bytes(), b.to_be_bytes()].concat())
}

/// Whether a frame whose TCP checksum act_csum would recompute has a
/// right one (any other frame counts as right).
pub fn tcp_checksum_ok(frame: &[u8]) -> bool {
    match tcp_segment(frame) {
        TcpSegment::At { l4, len } => tcp_sum(frame, l4, len) == 0xffff,
        TcpSegment::Untouched | TcpSegment::Dropped => true,
    }
}

/// Whether an untagged IPv4 frame's header checksum is right (frames
/// that are not IPv4 count as right).
pub fn ipv4_checksum_ok(frame: &[u8]) -> bool {
    if frame.get(12..14) != Some(&[8, 0]) || frame.len() < 34 {
        return true;
    }
    let ihl = (frame[14] & 0xf) as usize * 4;
    if ihl < 20 || frame.len() < 14 + ihl {
        return true;
    }
    fold(&frame[14..14 + ihl]) == 0xffff
}

/// The ones'-complement sum of big-endian 16-bit words, folded.
fn fold(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for w in b.chunks(2) {
        s += u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The bits of `b` with the pattern's fixed bits as constants.
fn fixed_bits(b: &[Bit; 8], pat: &Pattern) -> [Bit; 8] {
    b.map(
        |x| match literal(x).and_then(|(p, n)| pat.bit(p).map(|v| v != n)) {
            Some(v) => v as Bit,
            None => x,
        },
    )
}

/// The value `v` as a [`Lin`] with the pattern's bits fixed.
pub fn lin_of(v: &Val, pat: &Pattern) -> Option<Lin> {
    let fixed = |p: u32| pat.bit(p);
    match v {
        Val::Scalar(b) => Lin::of_bits(b, &fixed),
        Val::Lin(l) => Some((**l).clone()),
        Val::Affine { bits, add, w } => Lin::of_bits(bits, &fixed)?.add_const(*add, *w),
        _ => None,
    }
}

/// The rewrite `pkt` (stored bytes by offset) makes of a frame matching
/// `pat`; `None` when no byte changes. Errors say what flower cannot do.
pub fn classify(pkt: &BTreeMap<i64, PCell>, pat: &Pattern) -> Result<Option<Rewrite>, String> {
    let mut edits = Vec::new();
    let mut csum = None;
    let mut csum_tcp = false;
    let ipv4 = pat.value.get(12..14) == Some(&[8, 0])
        && pat.mask.get(12..14) == Some(&[0xff; 2])
        && pat.mask.get(14).is_some_and(|m| m & 0x0f == 0x0f)
        && pat.value.get(14).is_some_and(|v| v & 0x0f == 5);
    let tcp = ipv4 && crate::fields::exact(pat, 23..24).as_deref() == Some(&[6]);
    let udp = ipv4 && crate::fields::exact(pat, 23..24).as_deref() == Some(&[17]);
    for (&at, cell) in pkt {
        let at = usize::try_from(at).map_err(|_| format!("writes packet byte {at}"))?;
        if ipv4 && CSUM4.contains(&at) {
            if let PCell::Val { .. } = cell {
                csum = Some(());
                continue;
            }
        }
        if tcp && CSUM_TCP.contains(&at) {
            if let PCell::Val { .. } = cell {
                csum_tcp = true;
                continue;
            }
        }
        if udp && CSUM_UDP.contains(&at) {
            if let PCell::Val { .. } = cell {
                return Err(
                    "fixes up the UDP checksum: act_csum zeroes the checksum of a datagram whose UDP length differs from the IP payload's, and neither flower nor u32 can compare the two fields, so no rule can do it exactly"
                        .into(),
                );
            }
        }
        let edit = match cell {
            PCell::Bits(b) => {
                let b = fixed_bits(b, pat);
                let (mut val, mut mask) = (0u8, 0u8);
                for (i, &x) in b.iter().enumerate() {
                    match x {
                        ZERO => mask |= 1 << i,
                        ONE => {
                            mask |= 1 << i;
                            val |= 1 << i;
                        }
                        x if literal(x) == Some(((at * 8 + i) as u32, false)) => {}
                        _ => {
                            return Err(format!(
                                "writes packet byte {at} with bits of the packet that the rule does not fix (not a constant rewrite)"
                            ))
                        }
                    }
                }
                (mask != 0).then_some(Edit::Set { at, val, mask })
            }
            PCell::Val {
                v: Val::Affine { bits, add, .. },
                k: 0,
                n: 1,
                ..
            } if *bits.as_ref() == Bits::packet(at as u32, 1) => {
                let add = (*add & 0xff) as u8;
                (add != 0).then_some(Edit::Add { at, add })
            }
            PCell::Val { .. } => {
                return Err(format!(
                    "writes packet byte {at} with a value computed from the packet (not a constant, nor the byte plus a constant)"
                ))
            }
            PCell::Unknown => {
                return Err(format!("writes packet byte {at} with a value not known now"));
            }
        };
        edits.extend(edit);
    }
    let mut rw = Rewrite {
        edits,
        csum_ip4h: false,
        csum_tcp: false,
        assumes_valid_csum: false,
    };
    if csum.is_some() {
        let relies = proven_ipv4_checksum(pkt, pat)?;
        // The checksum bytes themselves are csum's to write.
        rw.edits.retain(|e| !CSUM4.contains(&e.at()));
        rw.csum_ip4h = true;
        rw.assumes_valid_csum = relies;
    }
    if csum_tcp {
        proven_tcp_checksum(pkt, pat)?;
        rw.edits.retain(|e| !CSUM_TCP.contains(&e.at()));
        rw.csum_tcp = true;
    }
    if rw.edits.is_empty() && !rw.csum_ip4h && !rw.csum_tcp {
        return Ok(None);
    }
    Ok(Some(rw))
}

/// The checksum store at bytes 50..52 is the incremental update of the
/// TCP checksum for the other stores: for a segment whose checksum was
/// right, the checksum act_csum recomputes. The stores may change only
/// what the checksum covers and the sum can follow: the addresses (the
/// pseudo-header) and the TCP header, not the protocol, the total
/// length nor the payload.
fn proven_tcp_checksum(pkt: &BTreeMap<i64, PCell>, pat: &Pattern) -> Result<(), String> {
    let no = |why: &str| format!("TCP checksum fix-up not recognised: {why}");
    for &at in pkt.keys() {
        if (16..18).contains(&at) || at == 23 || at >= 54 {
            return Err(no(&format!(
                "it also writes byte {at} (total length, protocol or payload), which an incremental update over the header does not cover"
            )));
        }
    }
    // The addresses (the pseudo-header) and the TCP header.
    let words = (26..34).step_by(2).chain((34..54).step_by(2));
    let (total, old) = checksum_balance(pkt, pat, CSUM_TCP.start, words).map_err(|w| no(&w))?;
    if total.sub(&old).is_zero() {
        return Ok(());
    }
    Err(no(
        "the stored value is not the incremental update of the checksum for the rewrite",
    ))
}

/// The checksum store at bytes 24..26 is the IPv4 header's checksum
/// after the other stores: `Ok(false)` for every frame, `Ok(true)` for
/// frames whose checksum was right (an incremental update); else why
/// not.
fn proven_ipv4_checksum(pkt: &BTreeMap<i64, PCell>, pat: &Pattern) -> Result<bool, String> {
    let no = |why: &str| format!("IPv4 header checksum fix-up not recognised: {why}");
    let words = (0..10).map(|j| IP4.start + 2 * j);
    let (total, old) = checksum_balance(pkt, pat, CSUM4.start, words).map_err(|w| no(&w))?;
    if total.is_zero() {
        return Ok(false);
    }
    if total.sub(&old).is_zero() {
        return Ok(true);
    }
    Err(no(
        "the stored value is not the header's checksum after the rewrite",
    ))
}

/// The sums a checksum proof compares, for the checksum stored at
/// `csum` and the 16-bit words at `words` it covers (the checksum's
/// own among them): the stored checksum as the wire has it plus the
/// other words after the stores, and every word as it arrived, both
/// with the pattern's bits fixed. Equal totals (`total - old` zero) is
/// an incremental update, `total` zero one from scratch. Errors say
/// what the forms cannot follow.
fn checksum_balance(
    pkt: &BTreeMap<i64, PCell>,
    pat: &Pattern,
    csum: usize,
    words: impl Iterator<Item = usize>,
) -> Result<(Form, Form), String> {
    let fixed = |p: u32| pat.bit(p);
    let at = csum as i64;
    let stored = match (pkt.get(&at), pkt.get(&(at + 1))) {
        (
            Some(PCell::Val {
                v,
                k: 0,
                n: 2,
                at: a1,
                id,
            }),
            Some(PCell::Val {
                k: 1,
                n: 2,
                at: a2,
                id: i2,
                ..
            }),
        ) if id == i2 && *a1 == at && *a2 == at => v,
        _ => return Err("not one 16-bit store of a sum".into()),
    };
    let Some(c) = lin_of(stored, pat).and_then(|l| l.truncate(2)) else {
        return Err("a value the checksum forms cannot follow".into());
    };
    if c.hi > 0xfffe {
        return Err("the stored value may be 0xffff, which a recomputed checksum never is".into());
    }
    // As the wire has it (the store is little-endian): times 2^8.
    let wire = c.form.scale(256).substitute(&fixed);
    let mut sum_new = Form::default();
    let mut sum_old = Form::default();
    for at in words {
        let old =
            Lin::of_bits(&Bits::packet(at as u32, 2).bswap(16), &fixed).ok_or("a header word")?;
        sum_old = sum_old.add(&old.form);
        if at == csum {
            continue;
        }
        let word = match (pkt.get(&(at as i64)), pkt.get(&(at as i64 + 1))) {
            // One little-endian 16-bit store of the word: the wire has
            // it byte-swapped, times 2^8.
            (
                Some(PCell::Val {
                    v, k: 0, n: 2, id, ..
                }),
                Some(PCell::Val {
                    k: 1, n: 2, id: i2, ..
                }),
            ) if id == i2 => lin_of(v, pat)
                .and_then(|l| l.truncate(2))
                .map(|l| l.form.scale(256)),
            (hi, lo) => byte_form(hi, at, pat)
                .zip(byte_form(lo, at + 1, pat))
                .map(|(h, l)| h.scale(256).add(&l)),
        };
        let Some(word) = word else {
            return Err(format!(
                "bytes {at}..{} hold a value the forms cannot follow",
                at + 2
            ));
        };
        sum_new = sum_new.add(&word);
    }
    Ok((
        wire.add(&sum_new).substitute(&fixed),
        sum_old.substitute(&fixed),
    ))
}

/// Byte `at` after the stores (`cell`, or the byte as it arrived) as a
/// form, when it is one.
fn byte_form(cell: Option<&PCell>, at: usize, pat: &Pattern) -> Option<Form> {
    let fixed = |p: u32| pat.bit(p);
    match cell {
        None => Lin::of_bits(&Bits::packet(at as u32, 1), &fixed).map(|l| l.form),
        Some(PCell::Bits(x)) => {
            let mut bits = Bits::constant(0);
            bits.0[..8].copy_from_slice(x);
            Lin::of_bits(&bits, &fixed).map(|l| l.form)
        }
        Some(PCell::Val { k: 0, n: 1, id, .. }) => Some(Lin::stored_byte(*id).form),
        Some(_) => None,
    }
}
