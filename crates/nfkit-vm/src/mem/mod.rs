//! The VM's address space: every pointer a program holds is a plain `u64`
//! of the form `region id << 32 | offset`. The region table maps the id to
//! a VM-owned buffer and the window of it the program may touch; every load
//! and store is checked against that window. Host addresses never appear.
//!
//! Fixed ids: 0 is never valid (NULL and small integers fault), 1 holds map
//! handles and 2 function addresses (both valid values, never memory), then
//! the stack, the context, the packet (or the conformance suite's memory),
//! one region per map, and after those the dynamic regions (ring-buffer
//! reservations).

// No unsafe code here: the crate root denies it, and only the child
// module `unsafe_region` is allowed to hold it (a `forbid` here could not
// be relaxed for that child).
#[allow(unsafe_code)]
pub mod unsafe_region;

pub use unsafe_region::{GuardedBuf, Rmw};

use std::sync::Arc;

/// Bits of an address below the region id.
pub const REGION_SHIFT: u32 = 32;
/// Region id of map handles (`lddw rX, map`): `MAP_HANDLES << 32 | map index`.
pub const MAP_HANDLES: u32 = 1;
/// Region id of function addresses (`lddw rX, func`): `FUNCS << 32 | op index`.
pub const FUNCS: u32 = 2;
/// Region id of the stack (all frames).
pub const STACK: u32 = 3;
/// Region id of the context.
pub const CTX: u32 = 4;
/// Region id of the packet (or the conformance suite's memory).
pub const PACKET: u32 = 5;
/// Region id of map 0; map `i` is `MAP_BASE + i`.
pub const MAP_BASE: u32 = 6;

/// The address of `off` in region `id`.
#[inline(always)]
pub const fn addr(id: u32, off: u64) -> u64 {
    ((id as u64) << REGION_SHIFT) | (off & 0xffff_ffff)
}

/// What a region holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// Plain memory in `buf`.
    Mem,
    /// The program's context: loads and stores go through the context's
    /// field rules, not to memory.
    Ctx,
    /// Addresses that are valid values but never memory (map handles,
    /// function addresses, retired ring-buffer records, unused ids).
    Opaque,
}

/// One entry of the region table.
#[derive(Clone, Debug)]
pub struct Region {
    pub kind: RegionKind,
    pub buf: Arc<GuardedBuf>,
    /// Accessible window `[lo, hi)` of `buf`.
    pub lo: usize,
    pub hi: usize,
    pub writable: bool,
    /// For diagnostics: what the region is ("stack", "packet", "map 'x'").
    pub name: Arc<str>,
}

impl Region {
    /// An inaccessible region.
    pub fn opaque(name: &str, empty: &Arc<GuardedBuf>) -> Region {
        Region {
            kind: RegionKind::Opaque,
            buf: empty.clone(),
            lo: 0,
            hi: 0,
            writable: false,
            name: name.into(),
        }
    }

    /// A memory region covering all of `buf`.
    pub fn mem(name: &str, buf: Arc<GuardedBuf>, writable: bool) -> Region {
        let hi = buf.len();
        Region {
            kind: RegionKind::Mem,
            buf,
            lo: 0,
            hi,
            writable,
            name: name.into(),
        }
    }
}

/// The region table of one running program.
#[derive(Clone, Debug)]
pub struct Memory {
    pub regions: Vec<Region>,
}

impl Memory {
    /// The buffer and offset behind `addr..addr+size`, if the whole range
    /// is inside one memory region's window (and it is writable, for
    /// writes).
    #[inline(always)]
    pub fn resolve(&self, addr: u64, size: usize, write: bool) -> Option<(&GuardedBuf, usize)> {
        let r = self.regions.get((addr >> REGION_SHIFT) as usize)?;
        let off = (addr & 0xffff_ffff) as usize;
        if r.kind == RegionKind::Mem && off >= r.lo && off + size <= r.hi && (r.writable || !write)
        {
            Some((&r.buf, off))
        } else {
            None
        }
    }

    /// True if `addr` lies in the context region.
    #[inline]
    pub fn is_ctx(&self, addr: u64) -> bool {
        (addr >> REGION_SHIFT) as u32 == CTX
    }

    /// Copies `out.len()` bytes from program memory at `addr`.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Option<()> {
        if out.is_empty() {
            return Some(());
        }
        let (buf, off) = self.resolve(addr, out.len(), false)?;
        buf.read(off, out)
    }

    /// Copies `data` to program memory at `addr`.
    pub fn write(&self, addr: u64, data: &[u8]) -> Option<()> {
        if data.is_empty() {
            return Some(());
        }
        let (buf, off) = self.resolve(addr, data.len(), true)?;
        buf.write(off, data)
    }

    /// `region+offset` for diagnostics.
    pub fn describe(&self, addr: u64) -> String {
        let id = (addr >> REGION_SHIFT) as usize;
        let off = addr & 0xffff_ffff;
        match self.regions.get(id) {
            Some(r) if id != 0 => format!("{addr:#x} ({}+{off:#x})", r.name),
            _ => format!("{addr:#x} (no region)"),
        }
    }
}
