//! Program contexts: what `r1` points at when a program starts, and the
//! rules for reading and writing it, as the kernel's verifier rewrites and
//! restricts context accesses.
//!
//! * XDP: `struct xdp_md` — every access is a 4-byte aligned load; `data`,
//!   `data_end` and `data_meta` load full 64-bit packet pointers; stores
//!   are refused; `egress_ifindex` only exists for devmap programs.
//! * Socket filter and TC: `struct __sk_buff` with the kernel's offsets.
//!   Narrow loads of 32-bit fields are allowed (they read the addressed
//!   bytes), `data`/`data_end`/`data_meta` only as 4-byte loads (TC only),
//!   writable fields per program type. Socket filters see the packet from
//!   the network header and have no direct packet access.
//! * Raw (the conformance suite's form): `r1` = memory, `r2` = its length.

#![forbid(unsafe_code)]

use nfkit_object::ProgType;

/// What a run starts with.
#[derive(Clone, Debug)]
pub enum Context<'a> {
    /// No context: r1 = 0.
    Empty,
    /// r1 = the address of a copy of these bytes, r2 = their length.
    Raw(&'a [u8]),
    /// XDP: the packet as an `xdp_md`.
    Xdp(XdpMd<'a>),
    /// Socket filter / TC: the packet as a `__sk_buff`.
    Skb(SkBuff<'a>),
}

/// The kernel's `XDP_PACKET_HEADROOM`.
pub const XDP_HEADROOM: usize = 256;
/// `sizeof(struct xdp_frame)`: the part of the headroom `adjust_head` and
/// `adjust_meta` may not use.
pub const XDP_FRAME_SIZE: usize = 40;
/// Ethernet header length.
pub const ETH_HLEN: usize = 14;

/// An XDP packet.
#[derive(Clone, Debug)]
pub struct XdpMd<'a> {
    /// The frame, from the Ethernet header.
    pub packet: &'a [u8],
    /// Metadata in front of the frame (`data_meta..data`), usually empty.
    pub meta: &'a [u8],
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    /// Only readable by devmap programs.
    pub egress_ifindex: u32,
    /// Bytes between the buffer start and `data` (metadata included).
    pub headroom: usize,
    /// Bytes after `data_end` that `bpf_xdp_adjust_tail` may grow into.
    pub tailroom: usize,
}

impl<'a> XdpMd<'a> {
    /// A packet with the kernel's usual headroom and room to grow the tail
    /// as far as a 4096-byte frame allows (as in `BPF_PROG_TEST_RUN`).
    pub fn new(packet: &'a [u8]) -> XdpMd<'a> {
        XdpMd {
            packet,
            meta: &[],
            ingress_ifindex: 1,
            rx_queue_index: 0,
            egress_ifindex: 0,
            headroom: XDP_HEADROOM,
            tailroom: 4096usize
                .saturating_sub(XDP_HEADROOM + 320)
                .saturating_sub(packet.len()),
        }
    }
}

/// A socket buffer, for socket filters and TC programs.
#[derive(Clone, Debug)]
pub struct SkBuff<'a> {
    /// The frame, from the Ethernet header (socket filters see it from
    /// the network header, as `BPF_PROG_TEST_RUN` gives it to them).
    pub packet: &'a [u8],
    pub pkt_type: u32,
    pub mark: u32,
    pub queue_mapping: u32,
    /// `skb->protocol` as the field reads (the EtherType in network order).
    pub protocol: u32,
    pub vlan_present: u32,
    pub vlan_tci: u32,
    pub vlan_proto: u32,
    pub priority: u32,
    pub ingress_ifindex: u32,
    pub ifindex: u32,
    pub tc_index: u32,
    pub cb: [u32; 5],
    pub hash: u32,
    pub tc_classid: u32,
    pub napi_id: u32,
    pub tstamp: u64,
    pub wire_len: u32,
    pub gso_segs: u32,
    pub gso_size: u32,
    pub hwtstamp: u64,
}

impl<'a> SkBuff<'a> {
    /// A socket buffer as `BPF_PROG_TEST_RUN` builds one on the loopback
    /// device (ifindex 1, address 00:00:00:00:00:00): protocol from the
    /// EtherType, packet type from the destination address.
    pub fn new(packet: &'a [u8]) -> SkBuff<'a> {
        let protocol = match packet.get(12..14) {
            Some(t) => u16::from_le_bytes([t[0], t[1]]) as u32,
            None => 0,
        };
        let pkt_type = match packet.get(0..6) {
            Some(d) if d[0] & 1 == 1 => {
                if d.iter().all(|&b| b == 0xff) {
                    1 // PACKET_BROADCAST
                } else {
                    2 // PACKET_MULTICAST
                }
            }
            Some(d) if d.iter().any(|&b| b != 0) => 3, // PACKET_OTHERHOST
            _ => 0,                                    // PACKET_HOST
        };
        SkBuff {
            packet,
            pkt_type,
            mark: 0,
            queue_mapping: 0,
            protocol,
            vlan_present: 0,
            vlan_tci: 0,
            vlan_proto: 0,
            priority: 0,
            ingress_ifindex: 0,
            ifindex: 1,
            tc_index: 0,
            cb: [0; 5],
            hash: 0,
            tc_classid: 0,
            napi_id: 0,
            tstamp: 0,
            wire_len: 0,
            gso_segs: 0,
            gso_size: 0,
            hwtstamp: 0,
        }
    }
}

/// The context of a run on the caller's own packet buffer
/// ([`Runner::run_packet`](crate::Runner::run_packet)): everything but
/// the packet, which is the buffer.
#[derive(Clone, Copy, Debug)]
pub enum PacketCtx<'a> {
    /// An `xdp_md` as [`XdpMd::new`] makes it.
    Xdp,
    /// This `xdp_md` (its `packet` is ignored).
    XdpWith(&'a XdpMd<'a>),
    /// A `__sk_buff` as [`SkBuff::new`] makes it for the packet.
    Skb,
    /// This `__sk_buff` (its `packet` is ignored).
    SkbWith(&'a SkBuff<'a>),
    /// The conformance suite's form: r1 = the buffer, r2 = its length.
    Raw,
}

impl<'a> PacketCtx<'a> {
    /// The full context with `packet` as its packet.
    pub fn context<'p>(&self, packet: &'p [u8]) -> Context<'p>
    where
        'a: 'p,
    {
        match *self {
            PacketCtx::Xdp => Context::Xdp(XdpMd::new(packet)),
            PacketCtx::XdpWith(x) => Context::Xdp(XdpMd {
                packet,
                ..x.clone()
            }),
            PacketCtx::Skb => Context::Skb(SkBuff::new(packet)),
            PacketCtx::SkbWith(s) => Context::Skb(SkBuff {
                packet,
                ..s.clone()
            }),
            PacketCtx::Raw => Context::Raw(packet),
        }
    }
}

/// The `__sk_buff` fields a program may change, as they are after a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkbFields {
    pub mark: u32,
    pub priority: u32,
    pub queue_mapping: u32,
    pub tc_index: u32,
    pub tc_classid: u32,
    pub cb: [u32; 5],
    pub hash: u32,
    pub tstamp: u64,
}

/// Context state during a run (packet pointers live in the machine).
#[derive(Clone, Debug)]
pub enum CtxState {
    None,
    Xdp {
        ingress_ifindex: u32,
        rx_queue_index: u32,
        egress_ifindex: u32,
    },
    Skb(Box<SkbState>),
}

/// The `__sk_buff` fields during a run.
#[derive(Clone, Debug)]
pub struct SkbState {
    pub out: SkbFields,
    pub pkt_type: u32,
    pub protocol: u32,
    pub vlan_present: u32,
    pub vlan_tci: u32,
    pub vlan_proto: u32,
    pub ingress_ifindex: u32,
    pub ifindex: u32,
    pub napi_id: u32,
    pub wire_len: u32,
    pub gso_segs: u32,
    pub gso_size: u32,
    pub hwtstamp: u64,
}

impl SkbState {
    pub fn from(s: &SkBuff) -> SkbState {
        SkbState {
            out: SkbFields {
                mark: s.mark,
                priority: s.priority,
                queue_mapping: s.queue_mapping,
                tc_index: s.tc_index,
                tc_classid: s.tc_classid,
                cb: s.cb,
                hash: s.hash,
                tstamp: s.tstamp,
            },
            pkt_type: s.pkt_type,
            protocol: s.protocol,
            vlan_present: s.vlan_present,
            vlan_tci: s.vlan_tci,
            vlan_proto: s.vlan_proto,
            ingress_ifindex: s.ingress_ifindex,
            ifindex: s.ifindex,
            napi_id: s.napi_id,
            wire_len: s.wire_len,
            gso_segs: s.gso_segs,
            gso_size: s.gso_size,
            hwtstamp: s.hwtstamp,
        }
    }
}

/// Packet pointers the context hands out, as offsets in the packet buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct PacketPtrs {
    pub meta: usize,
    pub data: usize,
    pub data_end: usize,
    /// Skb length as `__sk_buff.len` reads it.
    pub skb_len: usize,
}

/// What a context load yields.
pub enum CtxValue {
    /// A plain value.
    Value(u64),
    /// A pointer into the packet at this buffer offset.
    Packet(usize),
}

type Refused = &'static str;

// __sk_buff offsets (linux/bpf.h).
mod skb {
    pub const LEN: u64 = 0;
    pub const PKT_TYPE: u64 = 4;
    pub const MARK: u64 = 8;
    pub const QUEUE_MAPPING: u64 = 12;
    pub const PROTOCOL: u64 = 16;
    pub const VLAN_PRESENT: u64 = 20;
    pub const VLAN_TCI: u64 = 24;
    pub const VLAN_PROTO: u64 = 28;
    pub const PRIORITY: u64 = 32;
    pub const INGRESS_IFINDEX: u64 = 36;
    pub const IFINDEX: u64 = 40;
    pub const TC_INDEX: u64 = 44;
    pub const CB0: u64 = 48;
    pub const CB_END: u64 = 68;
    pub const HASH: u64 = 68;
    pub const TC_CLASSID: u64 = 72;
    pub const DATA: u64 = 76;
    pub const DATA_END: u64 = 80;
    pub const NAPI_ID: u64 = 84;
    pub const FAMILY: u64 = 88;
    pub const LOCAL_PORT_END: u64 = 140;
    pub const DATA_META: u64 = 140;
    pub const FLOW_KEYS: u64 = 144;
    pub const TSTAMP: u64 = 152;
    pub const WIRE_LEN: u64 = 160;
    pub const GSO_SEGS: u64 = 164;
    pub const SK: u64 = 168;
    pub const GSO_SIZE: u64 = 176;
    pub const TSTAMP_TYPE: u64 = 180;
    pub const HWTSTAMP: u64 = 184;
    pub const SIZE: u64 = 192;
}

/// Size of the context structure of `t` (bytes the context region spans).
pub fn ctx_size(state: &CtxState) -> usize {
    match state {
        CtxState::None => 0,
        CtxState::Xdp { .. } => 24,
        CtxState::Skb(_) => skb::SIZE as usize,
    }
}

fn is_tc(t: ProgType) -> bool {
    matches!(t, ProgType::SchedCls | ProgType::SchedAct)
}

/// A context load of `size` bytes at `off`.
pub fn load(
    state: &CtxState,
    t: ProgType,
    pkt: &PacketPtrs,
    off: u64,
    size: usize,
) -> Result<CtxValue, Refused> {
    match state {
        CtxState::None => Err("the program has no context"),
        CtxState::Xdp {
            ingress_ifindex,
            rx_queue_index,
            egress_ifindex,
        } => {
            if off >= 24 || !off.is_multiple_of(4) || size != 4 {
                return Err("xdp_md fields are read with aligned 4-byte loads");
            }
            Ok(match off {
                0 => CtxValue::Packet(pkt.data),
                4 => CtxValue::Packet(pkt.data_end),
                8 => CtxValue::Packet(pkt.meta),
                12 => CtxValue::Value(*ingress_ifindex as u64),
                16 => CtxValue::Value(*rx_queue_index as u64),
                _ => {
                    if t == ProgType::Xdp {
                        return Err("egress_ifindex is only readable by devmap programs");
                    }
                    CtxValue::Value(*egress_ifindex as u64)
                }
            })
        }
        CtxState::Skb(s) => skb_load(s, t, pkt, off, size),
    }
}

fn skb_common(off: u64, size: usize, write: bool) -> Result<(), Refused> {
    use skb::*;
    if off >= SIZE || !off.is_multiple_of(size as u64) {
        return Err("misaligned or out-of-range __sk_buff access");
    }
    let end = off + size as u64;
    if (CB0..CB_END).contains(&off) {
        if end > CB_END {
            return Err("access runs past cb[4]");
        }
        return Ok(());
    }
    match off {
        DATA | DATA_END | DATA_META => {
            if size != 4 {
                return Err("packet pointers are read with 4-byte loads");
            }
        }
        FLOW_KEYS..=151 => return Err("flow_keys is not accessible here"),
        HWTSTAMP..=191 => {
            if write || size != 8 {
                return Err("hwtstamp is read-only and read with 8-byte loads");
            }
        }
        TSTAMP..=159 => {
            if size != 8 {
                return Err("tstamp is accessed with 8-byte loads and stores");
            }
        }
        SK..=175 => {
            if write || size != 8 {
                return Err("sk is a read-only 8-byte pointer");
            }
        }
        TSTAMP_TYPE..=183 => return Err("tstamp_type and padding are not accessible"),
        _ => {
            if write {
                if size != 4 {
                    return Err("__sk_buff fields are written with 4-byte stores");
                }
            } else if size > 4 {
                return Err("narrow loads only: 32-bit fields cannot be read with 8-byte loads");
            }
        }
    }
    Ok(())
}

fn skb_load(
    s: &SkbState,
    t: ProgType,
    pkt: &PacketPtrs,
    off: u64,
    size: usize,
) -> Result<CtxValue, Refused> {
    use skb::*;
    let tc = is_tc(t);
    let socket = t == ProgType::SocketFilter;
    if socket {
        match off {
            TC_CLASSID..=75 | DATA..=87 | FAMILY..=151 | TSTAMP..=163 | HWTSTAMP..=191 => {
                return Err("socket filters cannot read this __sk_buff field")
            }
            _ => {}
        }
    }
    if tc && (FAMILY..LOCAL_PORT_END).contains(&off) {
        return Err("socket fields are not readable from TC programs");
    }
    skb_common(off, size, false)?;
    let field = off & !3;
    let v: u64 = match field {
        LEN => pkt.skb_len as u64,
        PKT_TYPE => s.pkt_type as u64,
        MARK => s.out.mark as u64,
        QUEUE_MAPPING => s.out.queue_mapping as u64,
        PROTOCOL => s.protocol as u64,
        VLAN_PRESENT => s.vlan_present as u64,
        VLAN_TCI => s.vlan_tci as u64,
        VLAN_PROTO => s.vlan_proto as u64,
        PRIORITY => s.out.priority as u64,
        INGRESS_IFINDEX => s.ingress_ifindex as u64,
        IFINDEX => s.ifindex as u64,
        TC_INDEX => s.out.tc_index as u64,
        HASH => s.out.hash as u64,
        TC_CLASSID => s.out.tc_classid as u64,
        DATA => return Ok(CtxValue::Packet(pkt.data)),
        DATA_END => return Ok(CtxValue::Packet(pkt.data_end)),
        DATA_META => return Ok(CtxValue::Packet(pkt.meta)),
        NAPI_ID => s.napi_id as u64,
        WIRE_LEN => s.wire_len as u64,
        GSO_SEGS => s.gso_segs as u64,
        GSO_SIZE => s.gso_size as u64,
        TSTAMP => return Ok(CtxValue::Value(s.out.tstamp)),
        HWTSTAMP => return Ok(CtxValue::Value(s.hwtstamp)),
        SK => return Ok(CtxValue::Value(0)),
        f if (CB0..CB_END).contains(&f) => {
            let i = ((f - CB0) / 4) as usize;
            if size == 8 {
                let lo = s.out.cb.get(i).copied().unwrap_or(0) as u64;
                let hi = s.out.cb.get(i + 1).copied().unwrap_or(0) as u64;
                return Ok(CtxValue::Value(lo | hi << 32));
            }
            s.out.cb.get(i).copied().unwrap_or(0) as u64
        }
        _ => 0,
    };
    // Narrow loads read the addressed bytes of the 32-bit field.
    let shift = (off & 3) * 8;
    let mask = if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    };
    Ok(CtxValue::Value((v >> shift) & mask))
}

/// A context store of `size` bytes of `v` at `off`.
pub fn store(
    state: &mut CtxState,
    t: ProgType,
    off: u64,
    size: usize,
    v: u64,
) -> Result<(), Refused> {
    use skb::*;
    let s = match state {
        CtxState::Skb(s) => s,
        CtxState::Xdp { .. } => return Err("xdp_md is read-only"),
        CtxState::None => return Err("the program has no context"),
    };
    let tc = is_tc(t);
    let in_cb = (CB0..CB_END).contains(&off);
    let allowed = in_cb
        || (tc
            && matches!(
                off,
                MARK | TC_INDEX | PRIORITY | TC_CLASSID | QUEUE_MAPPING | TSTAMP
            ));
    if !allowed {
        return Err("this __sk_buff field is not writable for the program type");
    }
    skb_common(off, size, true)?;
    match off {
        MARK => s.out.mark = v as u32,
        TC_INDEX => s.out.tc_index = v as u32,
        PRIORITY => s.out.priority = v as u32,
        TC_CLASSID => s.out.tc_classid = v as u32,
        QUEUE_MAPPING => {
            // The kernel ignores writes of NO_QUEUE_MAPPING (0xffff) and above.
            if (v as u32) < 0xffff {
                s.out.queue_mapping = v as u32
            }
        }
        TSTAMP => s.out.tstamp = v,
        _ => {
            let i = ((off - CB0) / 4) as usize;
            let shift = (off & 3) * 8;
            let bytes = size.min(4);
            let mask: u32 = if bytes == 4 {
                u32::MAX
            } else {
                ((1u32 << (bytes * 8)) - 1) << shift
            };
            if let Some(c) = s.out.cb.get_mut(i) {
                *c = (*c & !mask) | (((v as u32) << shift) & mask);
            }
            if size == 8 {
                if let Some(c) = s.out.cb.get_mut(i + 1) {
                    *c = (v >> 32) as u32;
                }
            }
        }
    }
    Ok(())
}
