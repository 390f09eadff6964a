//! The core's memories as `rtl/ebpf_core.sv` lays them out.
//!
//! Data memory (128 KiB, byte indices): metadata `[0, 64)`, packet
//! `[64, 7680)`, stack `[7680, 8192)`, map value slots `[65536, 131072)`.
//! Programs address it as nfkit's VM does, `region << 32 | offset`: region
//! 3 the metadata, 4 the packet (window `[pkt_lo, pkt_hi)` set per run), 5
//! the stack (`r10 = 5 << 32 | 512`, window `[0, 512)`), 69 the value
//! slots (line `i`'s value at offset `i * VAL_BYTES`; the VM's region of
//! map 0). Anything else faults.

/// Instruction memory slots (8 bytes each).
pub const IMEM_SLOTS: usize = 4096;
/// Bytes of the metadata, packet and stack area of the data memory.
pub const DMEM_BYTES: usize = 8192;
/// Data memory index of the value slots.
pub const VALUE_BASE: usize = 65536;
/// Metadata bytes, at data memory index 0.
pub const META_BYTES: usize = 64;
/// Packet buffer's data memory index.
pub const PKT_BASE: usize = META_BYTES;
/// Stack bytes (one frame).
pub const STACK_BYTES: usize = 512;
/// Stack's data memory index.
pub const STACK_BASE: usize = DMEM_BYTES - STACK_BYTES;
/// Largest packet the buffer holds.
pub const PKT_MAX: usize = STACK_BASE - PKT_BASE;

/// Address region of the metadata.
pub const REGION_META: u64 = 3;
/// Address region of the packet (the VM's too).
pub const REGION_PACKET: u64 = 4;
/// Address region of the stack.
pub const REGION_STACK: u64 = 5;
/// Address region of the map value slots.
pub const REGION_VALUE: u64 = 69;
/// Address region of map handles (`lddw rX, map`: `1 << 32 | index`).
pub const REGION_MAP_HANDLES: u64 = 1;

/// The simulated coprocessor's parameters (`build.rs`; `rtl/ebpf_top.sv`
/// defaults smaller for synthesis): maps, lines shared by them, key bytes
/// of a line, LPM data bytes (after the 4-byte prefix length: prefix
/// lengths are 8 bits) and value bytes of a line.
pub const NMAPS: usize = 32;
pub const LINES: usize = 1024;
pub const KEY_BYTES: usize = 48;
pub const LPM_DATA_BYTES: usize = 16;
pub const VAL_BYTES: usize = 64;
/// 32-bit words of a line's key.
pub const KEY_WORDS: usize = KEY_BYTES / 4;

/// The address a program sees for `off` in `region`.
pub const fn addr(region: u64, off: u64) -> u64 {
    (region << 32) | (off & 0xffff_ffff)
}

/// Bytes in front of an XDP packet (the kernel's `XDP_PACKET_HEADROOM`,
/// as in the VM: the same packet pointers).
pub const XDP_HEADROOM: usize = 256;

/// Metadata offsets of an XDP run: `struct xdp_md` (data, data_end and
/// data_meta hold packet offsets; a 4-byte load of them gives the packet
/// pointer), then eBPFlow's fields the engine adds.
pub mod meta {
    pub const DATA: usize = 0;
    pub const DATA_END: usize = 4;
    pub const DATA_META: usize = 8;
    pub const INGRESS_IFINDEX: usize = 12;
    pub const RX_QUEUE_INDEX: usize = 16;
    pub const EGRESS_IFINDEX: usize = 20;
    /// Capture timestamp (ns), u64.
    pub const TIMESTAMP: usize = 32;
    /// Packet length, u32.
    pub const LEN: usize = 40;
}

/// `r10` at the start of a run.
pub const FRAME_POINTER: u64 = addr(REGION_STACK, STACK_BYTES as u64);
