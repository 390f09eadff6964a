//! The VM's address space: every pointer a program holds is a plain `u64`
//! of the form `region id << 32 | offset`. The region table maps the id to
//! a VM-owned buffer and the window of it the program may touch; every load
//! and store is checked against that window. Host addresses never appear.
//!
//! Fixed ids: 0 is never valid (NULL and small integers fault), 1 holds map
//! handles and 2 function addresses (both valid values, never memory), then
//! the context, the packet (or the conformance suite's memory), one region
//! per call frame of the stack ([`STACK`]` + depth`), one per map, and after
//! those the dynamic regions: one per map value a run looked up, ring-buffer
//! reservations.
//!
//! Windows are what isolate: a frame's region covers that frame's 512 bytes
//! only while the frame is live, a looked-up value's region exactly one
//! value (one CPU's slot of one element), so a pointer can reach no further
//! than the object it was made for, however it is moved.

// No unsafe code here: the crate root denies it, and only the child
// module `unsafe_region` is allowed to hold it (a `forbid` here could not
// be relaxed for that child).
#[allow(unsafe_code)]
pub mod unsafe_region;

pub use unsafe_region::{GuardedBuf, Rmw};

use crate::config::FRAME_SIZE;
use std::collections::HashMap;
use std::sync::Arc;

/// Bits of an address below the region id.
pub const REGION_SHIFT: u32 = 32;
/// Region id of map handles (`lddw rX, map`): `MAP_HANDLES << 32 | map index`.
pub const MAP_HANDLES: u32 = 1;
/// Region id of function addresses (`lddw rX, func`): `FUNCS << 32 | op index`.
pub const FUNCS: u32 = 2;
/// Region id of the context.
pub const CTX: u32 = 3;
/// Region id of the packet (or the conformance suite's memory).
pub const PACKET: u32 = 4;
/// Region id of the entry's stack frame; the frame at call depth `d` is
/// `STACK + d`.
pub const STACK: u32 = 5;
/// Call frames the region table has room for (`VmConfig::max_frames` at most).
pub const MAX_FRAMES: u32 = 64;
/// Region id of map 0; map `i` is `MAP_BASE + i`.
pub const MAP_BASE: u32 = STACK + MAX_FRAMES;

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

/// What a region's window is: read by diagnostics and traces only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Context, packet, ring-buffer record, placeholder.
    Plain,
    /// The stack frame at call depth `d` (0: the entry's); `hi` is its
    /// frame pointer, and the window is empty while the frame is not live.
    Frame(u32),
    /// One value of map `i`.
    MapValue(u32),
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
    pub role: Role,
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
            role: Role::Plain,
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
            role: Role::Plain,
        }
    }

    /// The region of stack frame `depth` in `stack` (all frames, the
    /// entry's at the top), not live yet.
    pub fn frame(depth: u32, stack: &Arc<GuardedBuf>, name: &Arc<str>) -> Region {
        let top = stack.len().saturating_sub(depth as usize * FRAME_SIZE);
        Region {
            kind: RegionKind::Mem,
            buf: stack.clone(),
            lo: top,
            hi: top,
            writable: true,
            name: name.clone(),
            role: Role::Frame(depth),
        }
    }
}

/// Dynamic regions searched one by one before an index is built.
const SCAN: usize = 16;

/// The region table of one running program.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    pub regions: Vec<Region>,
    /// Where the dynamic regions start.
    base: usize,
    /// For runs that look up many values (made when first needed).
    index: Option<Box<ValueIndex>>,
}

/// Region ids of map values by `map << 32 | offset`; regions
/// `..indexed` are in it.
#[derive(Clone, Debug, Default)]
struct ValueIndex {
    ids: HashMap<u64, u32, crate::maps::KeyBuild>,
    indexed: usize,
}

impl Memory {
    /// A table of `regions`, all of them fixed.
    pub fn new(regions: Vec<Region>) -> Memory {
        let base = regions.len();
        Memory {
            regions,
            base,
            index: None,
        }
    }

    /// Drops the dynamic regions: back to the first `base` ones.
    #[inline]
    pub fn reset(&mut self, base: usize) {
        if self.regions.len() > base {
            self.regions.truncate(base);
        }
        self.base = base;
        if let Some(ix) = &mut self.index {
            ix.ids.clear();
            ix.indexed = 0;
        }
    }

    /// The region made for the value at `off` of map `map` in this run.
    fn find_value(&mut self, map: u32, off: usize) -> Option<u32> {
        let base = self.base.min(self.regions.len());
        let dynamic = &self.regions[base..];
        if dynamic.len() <= SCAN {
            let hit = |r: &Region| r.role == Role::MapValue(map) && r.lo == off;
            return dynamic.iter().rposition(hit).map(|i| (base + i) as u32);
        }
        let ix = self.index.get_or_insert_with(Box::default);
        ix.indexed = ix.indexed.max(base);
        while let Some(r) = self.regions.get(ix.indexed) {
            if let Role::MapValue(m) = r.role {
                ix.ids
                    .insert((m as u64) << 32 | r.lo as u64, ix.indexed as u32);
            }
            ix.indexed += 1;
        }
        ix.ids.get(&((map as u64) << 32 | off as u64)).copied()
    }

    /// Makes stack frame `depth` live (its 512 bytes accessible); its
    /// frame pointer, or `None` past the table's frames.
    #[inline]
    pub fn open_frame(&mut self, depth: usize) -> Option<u64> {
        let id = STACK as usize + depth.min(MAX_FRAMES as usize);
        let r = self.regions.get_mut(id)?;
        r.lo = r.hi.checked_sub(FRAME_SIZE)?;
        Some(addr(id as u32, r.hi as u64))
    }

    /// Makes stack frame `depth` inaccessible (it returned).
    #[inline]
    pub fn close_frame(&mut self, depth: usize) {
        if let Some(r) = self.regions.get_mut(STACK as usize + depth) {
            if r.role == Role::Frame(depth as u32) {
                r.lo = r.hi;
            }
        }
    }

    /// The address of the value at `off` of map `map` (`len` bytes of
    /// `buf`): a region of exactly that value, made once per run.
    pub fn value_addr(
        &mut self,
        map: u32,
        buf: &Arc<GuardedBuf>,
        off: usize,
        len: usize,
        writable: bool,
    ) -> u64 {
        if let Some(id) = self.find_value(map, off) {
            return addr(id, off as u64);
        }
        let id = self.regions.len() as u32;
        let name = match self.regions.get((MAP_BASE + map) as usize) {
            Some(r) => r.name.clone(),
            None => Arc::from("map"),
        };
        self.regions.push(Region {
            kind: RegionKind::Mem,
            buf: buf.clone(),
            lo: off,
            hi: off + len,
            writable,
            name,
            role: Role::MapValue(map),
        });
        addr(id, off as u64)
    }

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

    /// `region+offset` for diagnostics: frames as `stack frame 1 fp-8`,
    /// map values as `map 'x' value, value_size=4 off=8` (the kernel's
    /// words). An offset in the top half of the range is read as a
    /// negative one from the next region (a pointer moved below offset 0).
    pub fn describe(&self, addr: u64) -> String {
        let mut id = (addr >> REGION_SHIFT) as usize;
        let mut off = (addr & 0xffff_ffff) as i64;
        if off >= 1 << 31 && id + 1 < self.regions.len() {
            id += 1;
            off -= 1 << 32;
        }
        let Some(r) = self.regions.get(id).filter(|_| id != 0) else {
            return format!("{addr:#x} (no region)");
        };
        match r.role {
            Role::Plain if off < 0 => format!("{addr:#x} ({}-{:#x})", r.name, -off),
            Role::Plain => format!("{addr:#x} ({}+{off:#x})", r.name),
            Role::Frame(d) => {
                let live = if r.lo == r.hi { ", not live" } else { "" };
                let rel = off - r.hi as i64;
                format!("{addr:#x} (stack frame {d}{live}, fp{rel:+})")
            }
            Role::MapValue(_) => format!(
                "{addr:#x} ({} value, value_size={} off={})",
                r.name,
                r.hi - r.lo,
                off - r.lo as i64
            ),
        }
    }
}
