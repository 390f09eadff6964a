//! `bpf_skb_vlan_push` / `bpf_skb_vlan_pop` (TC), as `skb_vlan_push` /
//! `skb_vlan_pop` in `net/core/skbuff.c`: the outermost tag lives out of
//! band (the `__sk_buff` fields `vlan_present`, `vlan_tci`, `vlan_proto`,
//! as hardware acceleration keeps it); pushing over a present tag moves
//! that one into the frame, popping takes the out-of-band tag or the
//! frame's own, and moves the next tag of the frame out of band.

#![forbid(unsafe_code)]

use super::{neg, EINVAL, ENOMEM};
use crate::ctx::CtxState;
use crate::interp::Machine;

/// `ETH_P_8021Q` / `ETH_P_8021AD` as the skb fields hold them (network
/// order read as a little-endian word).
const Q: u16 = 0x8100u16.swap_bytes();
const AD: u16 = 0x88a8u16.swap_bytes();
/// Bytes of the two MAC addresses, where tags go.
const MACS: usize = 12;
const VLAN_HLEN: usize = 4;

fn is_vlan(p: u32) -> bool {
    p == u32::from(Q) || p == u32::from(AD)
}

impl Machine {
    /// `bpf_skb_vlan_push(skb, proto, tci)`: an unknown `proto` becomes
    /// 802.1Q.
    pub(super) fn skb_vlan_push(&mut self, proto: u64, tci: u64) -> u64 {
        let p = proto as u16;
        let p = if p == Q || p == AD { p } else { Q };
        let (present, old_proto, old_tci) = match &self.ctx {
            CtxState::Skb(s) => (s.vlan_present != 0, s.vlan_proto, s.vlan_tci),
            _ => return neg(EINVAL),
        };
        if present {
            if let Err(e) = self.frame_insert(MACS, VLAN_HLEN) {
                return neg(e);
            }
            let mut tag = [0u8; 4];
            tag[..2].copy_from_slice(&(old_proto as u16).to_le_bytes());
            tag[2..].copy_from_slice(&(old_tci as u16).to_be_bytes());
            if let Some(buf) = self.packet_buf() {
                let _ = buf.write(self.mac + MACS, &tag);
            }
        }
        if let CtxState::Skb(s) = &mut self.ctx {
            if present {
                s.protocol = old_proto;
            }
            s.vlan_present = 1;
            s.vlan_proto = u32::from(p);
            s.vlan_tci = u32::from(tci as u16);
        }
        0
    }

    /// `bpf_skb_vlan_pop(skb)`.
    pub(super) fn skb_vlan_pop(&mut self) -> u64 {
        let (present, proto) = match &self.ctx {
            CtxState::Skb(s) => (s.vlan_present != 0, s.protocol),
            _ => return neg(EINVAL),
        };
        if present {
            if let CtxState::Skb(s) = &mut self.ctx {
                s.vlan_present = 0;
                s.vlan_tci = 0;
                s.vlan_proto = 0;
            }
        } else {
            if !is_vlan(proto) {
                return 0;
            }
            if let Err(e) = self.frame_vlan_pop() {
                return neg(e);
            }
        }
        // The frame's next tag goes out of band.
        let proto = match &self.ctx {
            CtxState::Skb(s) => s.protocol,
            _ => 0,
        };
        if !is_vlan(proto) {
            return 0;
        }
        match self.frame_vlan_pop() {
            Ok(tci) => {
                if let CtxState::Skb(s) = &mut self.ctx {
                    s.vlan_present = 1;
                    s.vlan_proto = proto;
                    s.vlan_tci = u32::from(tci);
                }
                0
            }
            Err(e) => neg(e),
        }
    }

    /// Takes the tag after the MAC addresses out of the frame; the
    /// protocol becomes the one it carried. Its TCI.
    fn frame_vlan_pop(&mut self) -> Result<u16, i64> {
        let Some(buf) = self.packet_buf() else {
            return Err(ENOMEM);
        };
        if self.frame_len() < MACS + VLAN_HLEN + 2 {
            return Err(ENOMEM);
        }
        let mut h = [0u8; 8];
        let _ = buf.read(self.mac + MACS, &mut h);
        let tci = u16::from_be_bytes([h[2], h[3]]);
        let inner = u16::from_be_bytes([h[4], h[5]]);
        // vlan_set_encap_proto: a length field means 802.3 raw (0xffff
        // next) or 802.2.
        let proto: u16 = if inner >= 0x600 {
            inner
        } else if self.frame_len() >= MACS + VLAN_HLEN + 4 && h[6] == 0xff && h[7] == 0xff {
            0x0001
        } else {
            0x0004
        };
        self.frame_remove(MACS, VLAN_HLEN)?;
        if let CtxState::Skb(s) = &mut self.ctx {
            s.protocol = u32::from(proto.swap_bytes());
        }
        Ok(tci)
    }
}
