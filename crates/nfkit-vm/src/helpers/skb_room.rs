//! Helpers that change a TC program's socket buffer beyond its bytes, as
//! `net/core/filter.c` does: `bpf_skb_adjust_room` (room after the MAC or
//! the network header, with the encapsulation flags' checks),
//! `bpf_skb_change_proto` (IPv4 <-> IPv6 header room),
//! `bpf_skb_ecn_set_ce` (ECT -> CE with the IPv4 checksum fixed),
//! `bpf_skb_change_tail`, `bpf_skb_change_head` and `bpf_skb_change_type`.
//! The network header follows the MAC header by `NetRun::mac_len` bytes
//! (14, more after `bpf_skb_change_head`).
//!
//! The buffer keeps its MAC header where it is and grows or shrinks at
//! its end (the kernel pushes at the front); the bytes are the same.

#![forbid(unsafe_code)]

use super::{neg, EFAULT, EINVAL, ENOMEM, ENOTSUPP, ETH_HLEN};
use crate::ctx::CtxState;
use crate::interp::Machine;

const EALREADY: i64 = 114;

const IPV4_HLEN: usize = 20;
const IPV6_HLEN: usize = 40;

/// `skb->protocol` values as the field reads them (network order).
const P_IP: u32 = 0x0800u16.swap_bytes() as u32;
const P_IPV6: u32 = 0x86ddu16.swap_bytes() as u32;

mod room {
    pub const FIXED_GSO: u64 = 1;
    pub const ENCAP_L3_IPV4: u64 = 1 << 1;
    pub const ENCAP_L3_IPV6: u64 = 1 << 2;
    pub const ENCAP_L4_GRE: u64 = 1 << 3;
    pub const ENCAP_L4_UDP: u64 = 1 << 4;
    pub const NO_CSUM_RESET: u64 = 1 << 5;
    pub const ENCAP_L2_ETH: u64 = 1 << 6;
    pub const DECAP_L3_IPV4: u64 = 1 << 7;
    pub const DECAP_L3_IPV6: u64 = 1 << 8;
    pub const ENCAP_L2_SHIFT: u64 = 56;
    /// Every flag the kernel accepts (`BPF_F_ADJ_ROOM_MASK` and
    /// `NO_CSUM_RESET`), the inner L2 length in the top byte included.
    pub const ALLOWED: u64 = 0x1ff | (0xff << ENCAP_L2_SHIFT);
}

impl Machine {
    fn skb_protocol(&self) -> u32 {
        match &self.ctx {
            CtxState::Skb(s) => s.protocol,
            _ => 0,
        }
    }

    fn set_skb_protocol(&mut self, p: u32, clear_hash: bool) {
        if let CtxState::Skb(s) = &mut self.ctx {
            s.protocol = p;
            if clear_hash {
                s.out.hash = 0;
            }
        }
    }

    /// Bytes of the frame from the MAC header to the end (`skb->len`).
    pub(super) fn frame_len(&self) -> usize {
        self.pkt.data_end.saturating_sub(self.mac)
    }

    /// Inserts `len` zero bytes `off` bytes after the MAC header.
    pub(super) fn frame_insert(&mut self, off: usize, len: usize) -> Result<(), i64> {
        let Some(buf) = self.packet_buf() else {
            return Err(ENOMEM);
        };
        let at = self.mac + off;
        let end = self.pkt.data_end;
        if at > end || end + len > buf.len() {
            return Err(ENOMEM);
        }
        let _ = buf.copy_within(at, at + len, end - at);
        let _ = buf.fill(at, len, 0);
        self.pkt.data_end += len;
        self.pkt.skb_len += len;
        self.sync_packet_region();
        Ok(())
    }

    /// Removes `len` bytes `off` bytes after the MAC header.
    pub(super) fn frame_remove(&mut self, off: usize, len: usize) -> Result<(), i64> {
        let Some(buf) = self.packet_buf() else {
            return Err(ENOMEM);
        };
        if self.frame_len() < off + len {
            return Err(ENOMEM);
        }
        let at = self.mac + off;
        let end = self.pkt.data_end;
        let _ = buf.copy_within(at + len, at, end - at - len);
        self.pkt.data_end -= len;
        self.pkt.skb_len -= len;
        self.sync_packet_region();
        Ok(())
    }

    /// `bpf_skb_change_proto(skb, proto, flags)`.
    pub(super) fn skb_change_proto(&mut self, proto: u64, flags: u64) -> u64 {
        if flags != 0 {
            return neg(EINVAL);
        }
        let to = u32::from(proto as u16);
        let diff = IPV6_HLEN - IPV4_HLEN;
        let r = match (self.skb_protocol(), to) {
            (P_IP, P_IPV6) => self.frame_insert(self.net.mac_len, diff).map(|()| P_IPV6),
            (P_IPV6, P_IP) => self.frame_remove(self.net.mac_len, diff).map(|()| P_IP),
            _ => Err(ENOTSUPP),
        };
        match r {
            Ok(p) => {
                self.set_skb_protocol(p, true);
                0
            }
            Err(e) => neg(e),
        }
    }

    /// `bpf_skb_adjust_room(skb, len_diff, mode, flags)`.
    pub(super) fn skb_adjust_room(&mut self, len_diff: i32, mode: u64, flags: u64) -> u64 {
        match self.adjust_room(len_diff, mode as u32, flags) {
            Ok(()) => 0,
            Err(e) => neg(e),
        }
    }

    fn adjust_room(&mut self, len_diff: i32, mode: u32, flags: u64) -> Result<(), i64> {
        const NET: u32 = 0;
        const MAC: u32 = 1;
        let abs = len_diff.unsigned_abs() as usize;
        let shrink = len_diff < 0;
        let proto = self.skb_protocol();
        if flags & !room::ALLOWED != 0 {
            return Err(EINVAL);
        }
        if abs > 0xfff {
            return Err(EFAULT);
        }
        let mut len_min = match proto {
            P_IP => IPV4_HLEN,
            P_IPV6 => IPV6_HLEN,
            _ => return Err(ENOTSUPP),
        };
        let off = match mode {
            NET => self.net.mac_len + len_min,
            MAC => self.net.mac_len,
            _ => return Err(ENOTSUPP),
        };
        let decap = flags & (room::DECAP_L3_IPV4 | room::DECAP_L3_IPV6);
        if decap != 0 {
            if !shrink {
                return Err(EINVAL);
            }
            len_min = match decap {
                room::DECAP_L3_IPV4 => IPV4_HLEN,
                room::DECAP_L3_IPV6 => IPV6_HLEN,
                _ => return Err(EINVAL),
            };
        }
        let len_cur = self.frame_len().saturating_sub(self.net.mac_len);
        if shrink && (abs >= len_cur || len_cur - abs < len_min) {
            return Err(ENOTSUPP);
        }
        if shrink {
            self.room_shrink(off, abs, flags)?;
        } else {
            self.room_grow(off, abs, flags)?;
        }
        if flags & room::NO_CSUM_RESET == 0 {
            self.net.csum_unnecessary = None;
        }
        Ok(())
    }

    /// `bpf_csum_level(skb, level)`: query (0), increment (1), decrement
    /// (2) or reset (3) the `CHECKSUM_UNNECESSARY` level.
    pub(super) fn csum_level(&mut self, level: u64) -> u64 {
        const EACCES: i64 = 13;
        let cur = self.net.csum_unnecessary;
        self.net.csum_unnecessary = match (level, cur) {
            (0, Some(l)) => return u64::from(l),
            (0, None) => return neg(EACCES),
            (1, Some(l)) => Some(l.saturating_add(1).min(3)),
            (1, None) => Some(0),
            (2, Some(0)) | (3, _) => None,
            (2, Some(l)) => Some(l - 1),
            (2, None) => None,
            _ => return neg(EINVAL),
        };
        0
    }

    fn room_shrink(&mut self, off: usize, len: usize, flags: u64) -> Result<(), i64> {
        let ok = room::FIXED_GSO | room::DECAP_L3_IPV4 | room::DECAP_L3_IPV6 | room::NO_CSUM_RESET;
        if flags & !ok != 0 {
            return Err(EINVAL);
        }
        self.frame_remove(off, len)?;
        let proto = self.skb_protocol();
        if proto == P_IP && flags & room::DECAP_L3_IPV6 != 0 {
            self.set_skb_protocol(P_IPV6, false);
        } else if proto == P_IPV6 && flags & room::DECAP_L3_IPV4 != 0 {
            self.set_skb_protocol(P_IP, false);
        }
        Ok(())
    }

    fn room_grow(&mut self, off: usize, len: usize, flags: u64) -> Result<(), i64> {
        let l3 = flags & (room::ENCAP_L3_IPV4 | room::ENCAP_L3_IPV6);
        let encap = l3 != 0;
        if encap {
            let inner_mac_len = (flags >> room::ENCAP_L2_SHIFT) as usize;
            if l3 == room::ENCAP_L3_IPV4 | room::ENCAP_L3_IPV6 {
                return Err(EINVAL);
            }
            if flags & room::ENCAP_L4_GRE != 0 && flags & room::ENCAP_L4_UDP != 0 {
                return Err(EINVAL);
            }
            if self.net.encapsulated {
                return Err(EALREADY);
            }
            if inner_mac_len > len {
                return Err(EINVAL);
            }
            if flags & room::ENCAP_L2_ETH != 0 && inner_mac_len != ETH_HLEN {
                return Err(EINVAL);
            }
        }
        self.frame_insert(off, len)?;
        if encap {
            self.net.encapsulated = true;
            let proto = self.skb_protocol();
            if proto == P_IP && flags & room::ENCAP_L3_IPV6 != 0 {
                self.set_skb_protocol(P_IPV6, false);
            } else if proto == P_IPV6 && flags & room::ENCAP_L3_IPV4 != 0 {
                self.set_skb_protocol(P_IP, false);
            }
        }
        Ok(())
    }

    /// `bpf_skb_change_tail(skb, len, flags)`: the frame cut or grown
    /// (zeros) to `len` bytes, at least its MAC header, at most
    /// `SKB_MAX_ALLOC` (16064); not after an encapsulation.
    pub(super) fn skb_change_tail(&mut self, len: u32, flags: u64) -> u64 {
        const MAX_LEN: usize = 16064;
        let len = len as usize;
        if flags != 0 || !(self.net.mac_len..=MAX_LEN).contains(&len) {
            return neg(EINVAL);
        }
        if self.net.encapsulated {
            return neg(ENOTSUPP);
        }
        let cur = self.frame_len();
        let r = if len >= cur {
            self.frame_insert(cur, len - cur)
        } else {
            self.frame_remove(len, cur - len)
        };
        match r {
            Ok(()) => 0,
            Err(e) => neg(e),
        }
    }

    /// `bpf_skb_change_head(skb, head_room, flags)`: `head_room` zero
    /// bytes in front of the frame, which become part of its MAC header
    /// (the network header stays where it was).
    pub(super) fn skb_change_head(&mut self, head_room: u32, flags: u64) -> u64 {
        const MAX_LEN: u64 = 16064;
        let new_len = self.frame_len() as u64 + u64::from(head_room);
        if flags != 0 || new_len > MAX_LEN {
            return neg(EINVAL);
        }
        match self.frame_insert(0, head_room as usize) {
            Ok(()) => {
                self.net.mac_len += head_room as usize;
                0
            }
            Err(e) => neg(e),
        }
    }

    /// `bpf_skb_set_tstamp(skb, tstamp, type)`: IP packets only; clock
    /// types realtime (0), monotonic (1) and TAI (2), the last two with a
    /// non-zero time.
    pub(super) fn skb_set_tstamp(&mut self, tstamp: u64, ty: u64) -> u64 {
        const EOPNOTSUPP: i64 = 95;
        let proto = self.skb_protocol();
        if proto != P_IP && proto != P_IPV6 {
            return neg(EOPNOTSUPP);
        }
        if ty as u32 > 2 || (ty as u32 != 0 && tstamp == 0) {
            return neg(EINVAL);
        }
        if let CtxState::Skb(s) = &mut self.ctx {
            s.out.tstamp = tstamp;
        }
        0
    }

    /// `bpf_skb_change_type(skb, type)`: host, broadcast, multicast or
    /// other host (0..=3) only, from and to.
    pub(super) fn skb_change_type(&mut self, t: u32) -> u64 {
        match &mut self.ctx {
            CtxState::Skb(s) if s.pkt_type <= 3 && t <= 3 => {
                s.pkt_type = t;
                0
            }
            _ => neg(EINVAL),
        }
    }

    /// `bpf_skb_ecn_set_ce(skb)`: 1 when the packet is (now) marked CE, 0
    /// when it is not ECN-capable, not IP, or too short.
    pub(super) fn skb_ecn_set_ce(&mut self) -> u64 {
        let Some(buf) = self.packet_buf() else {
            return 0;
        };
        let mut proto = self.skb_protocol() as u16;
        // skb_protocol(skb, true): the EtherType after VLAN tags.
        let mut tag = self.mac + 12;
        while matches!(proto.swap_bytes(), 0x8100 | 0x88a8) {
            let mut b = [0u8; 2];
            if tag + 8 > self.pkt.data_end || buf.read(tag + 4, &mut b).is_none() {
                return 0;
            }
            proto = u16::from_le_bytes(b);
            tag += 4;
        }
        let nh = self.mac + self.net.mac_len;
        let end = self.pkt.data_end;
        match u32::from(proto) {
            P_IP if nh + IPV4_HLEN <= end => {
                let mut h = [0u8; 12];
                let _ = buf.read(nh, &mut h);
                let ecn = (u32::from(h[1]) + 1) & 3;
                if ecn & 2 == 0 {
                    return u64::from(ecn == 0);
                }
                // Checksum update as the kernel's IP_ECN_set_ce: add
                // 0xfffd (ECT(1)) or 0xfffe (ECT(0)) with end-around carry.
                let check = u16::from_be_bytes([h[10], h[11]]);
                let add: u16 = if ecn == 2 { 0xfffd } else { 0xfffe };
                let (mut sum, carry) = check.overflowing_add(add);
                if carry {
                    sum = sum.wrapping_add(1);
                }
                let _ = buf.write(nh + 1, &[h[1] | 3]);
                let _ = buf.write(nh + 10, &sum.to_be_bytes());
                1
            }
            P_IPV6 if nh + IPV6_HLEN <= end => {
                let mut h = [0u8; 2];
                let _ = buf.read(nh, &mut h);
                // The traffic class straddles bytes 0 and 1: ECN is bits
                // 4-5 of byte 1.
                if (h[1] >> 4) & 3 == 0 {
                    return 0;
                }
                let _ = buf.write(nh + 1, &[h[1] | 0x30]);
                1
            }
            _ => 0,
        }
    }
}
