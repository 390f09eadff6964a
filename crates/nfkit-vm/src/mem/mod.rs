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

/// What a region is: its kind, buffer, name and role. Where a program
/// may touch it is its [`Window`], kept apart in [`Memory`]'s window
/// table (the one source of truth the interpreter, the helpers and the
/// JIT's native code all check against).
#[derive(Clone, Debug)]
pub struct Region {
    pub kind: RegionKind,
    pub buf: Arc<GuardedBuf>,
    /// For diagnostics: what the region is ("stack", "packet", "map 'x'").
    pub name: Arc<str>,
    pub role: Role,
    /// Programs may write through the window.
    pub writable: bool,
}

/// The accessible window of one region, laid out for native code: an
/// access of `size` bytes at offset `off` is allowed when `lo <= off` and
/// `off + size <= hi` (reads) or `<= whi` (writes; 0 when read-only), at
/// host address `base + off`. Closed windows (opaque and context regions,
/// frames not live) have `lo = hi = whi = 0`, or `lo = hi`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Host address of the region buffer's byte 0.
    pub base: usize,
    pub lo: u64,
    pub hi: u64,
    /// `hi` if the window is writable, else 0.
    pub whi: u64,
}

/// Byte offsets of [`Window`]'s fields (for the JIT).
pub const WIN_BASE: i32 = 0;
pub const WIN_LO: i32 = 8;
pub const WIN_HI: i32 = 16;
pub const WIN_WHI: i32 = 24;
/// `log2(size_of::<Window>())`.
pub const WIN_SHIFT: u8 = 5;
const _: () = assert!(std::mem::size_of::<Window>() == 1 << WIN_SHIFT);

impl Window {
    /// `[lo, hi)` of `buf`, writable or not.
    pub fn of(buf: &GuardedBuf, lo: usize, hi: usize, writable: bool) -> Window {
        Window {
            base: buf.host_addr(),
            lo: lo as u64,
            hi: hi as u64,
            whi: if writable { hi as u64 } else { 0 },
        }
    }

    /// An inaccessible window.
    pub const CLOSED: Window = Window {
        base: 0,
        lo: 0,
        hi: 0,
        whi: 0,
    };

    pub fn lo(&self) -> usize {
        self.lo as usize
    }

    pub fn hi(&self) -> usize {
        self.hi as usize
    }

    /// True if `off..off+size` is inside (for a write: and writable).
    #[inline(always)]
    pub fn allows(&self, off: u64, size: u64, write: bool) -> bool {
        let end = if write { self.whi } else { self.hi };
        off >= self.lo && off + size <= end
    }
}

impl Region {
    /// An inaccessible region.
    pub fn opaque(name: &str, empty: &Arc<GuardedBuf>) -> Region {
        Region {
            kind: RegionKind::Opaque,
            buf: empty.clone(),
            name: name.into(),
            role: Role::Plain,
            writable: false,
        }
    }

    /// A memory region of `buf`.
    pub fn mem(name: &str, buf: Arc<GuardedBuf>, writable: bool) -> Region {
        Region {
            kind: RegionKind::Mem,
            buf,
            name: name.into(),
            role: Role::Plain,
            writable,
        }
    }

    /// The region of stack frame `depth` in `stack` (all frames, the
    /// entry's at the top) and its window, not live yet (`lo = hi` = the
    /// frame's top).
    pub fn frame(depth: u32, stack: &Arc<GuardedBuf>, name: &Arc<str>) -> (Region, Window) {
        let top = stack.len().saturating_sub(depth as usize * FRAME_SIZE);
        let r = Region {
            kind: RegionKind::Mem,
            buf: stack.clone(),
            name: name.clone(),
            role: Role::Frame(depth),
            writable: true,
        };
        (r, Window::of(stack, top, top, true))
    }
}

/// Dynamic regions searched one by one before an index is built.
const SCAN: usize = 16;

/// Map-value regions kept for reuse across runs, at most.
const SPARE_MAX: usize = 64;

/// The region table of one running program.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    regions: Vec<Region>,
    /// Window of each region, same index.
    win: Vec<Window>,
    /// Where the dynamic regions start.
    base: usize,
    /// For runs that look up many values (made when first needed).
    index: Option<Box<ValueIndex>>,
    /// Map-value regions earlier runs made, kept (closed, out of the
    /// table) for later lookups to reuse: a lookup then takes no
    /// reference counts (their buffer and name are usually the same).
    spare: Vec<Region>,
    /// The CPU whose slots the per-CPU arrays' static value regions show
    /// (`vm::StaticValues`; CPU 0 as made at load).
    pub statics_cpu: u32,
}

/// Region ids of map values by `map << 32 | offset`; regions
/// `..indexed` are in it.
#[derive(Clone, Debug, Default)]
struct ValueIndex {
    ids: HashMap<u64, u32, crate::maps::KeyBuild>,
    indexed: usize,
}

impl Memory {
    /// A table of `regions` with their windows, all of them fixed.
    pub fn new(regions: Vec<(Region, Window)>) -> Memory {
        let (regions, win): (Vec<Region>, Vec<Window>) = regions.into_iter().unzip();
        Memory {
            base: regions.len(),
            regions,
            win,
            index: None,
            spare: Vec::new(),
            statics_cpu: 0,
        }
    }

    /// The regions, by id.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Region `id`.
    #[inline]
    pub fn region(&self, id: u32) -> Option<&Region> {
        self.regions.get(id as usize)
    }

    /// Window of region `id`.
    #[inline]
    pub fn window(&self, id: u32) -> Option<&Window> {
        self.win.get(id as usize)
    }

    /// The window table (for native code: [`Window`] is `repr(C)`); it
    /// moves when a region is added.
    pub fn windows(&self) -> &[Window] {
        &self.win
    }

    /// The window table, writable in place (the JIT's native code opens
    /// and closes frames there).
    pub fn windows_mut(&mut self) -> &mut [Window] {
        &mut self.win
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.regions.len()
    }

    /// True if the table is empty.
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Adds a region with window `[lo, hi)`; its id.
    pub fn push(&mut self, mut region: Region, lo: usize, hi: usize, writable: bool) -> u32 {
        let id = self.regions.len() as u32;
        region.writable = writable;
        self.win.push(Window::of(&region.buf, lo, hi, writable));
        self.regions.push(region);
        id
    }

    /// Replaces region `id` (kind, buffer, name kept as shared strings)
    /// and sets its window; context and opaque regions get a closed
    /// window (their accesses never reach memory directly).
    pub fn place(
        &mut self,
        id: u32,
        kind: RegionKind,
        buf: &Arc<GuardedBuf>,
        window: (usize, usize, bool),
        name: &Arc<str>,
    ) {
        let (Some(r), Some(w)) = (
            self.regions.get_mut(id as usize),
            self.win.get_mut(id as usize),
        ) else {
            return;
        };
        r.kind = kind;
        r.writable = window.2;
        if !Arc::ptr_eq(&r.buf, buf) {
            r.buf = buf.clone();
        }
        if !Arc::ptr_eq(&r.name, name) {
            r.name = name.clone();
        }
        *w = match kind {
            RegionKind::Mem => Window::of(buf, window.0, window.1, window.2),
            _ => Window::CLOSED,
        };
    }

    /// Replaces region `id` and its window.
    pub fn replace(&mut self, id: u32, region: Region, window: Window) {
        if let (Some(r), Some(w)) = (
            self.regions.get_mut(id as usize),
            self.win.get_mut(id as usize),
        ) {
            *r = region;
            *w = window;
        }
    }

    /// Moves region `id`'s window to `[lo, hi)` (writability kept).
    #[inline]
    pub fn set_window(&mut self, id: u32, lo: usize, hi: usize) {
        if let (Some(r), Some(w)) = (self.regions.get(id as usize), self.win.get_mut(id as usize)) {
            let writable = r.writable && r.kind == RegionKind::Mem;
            w.lo = lo as u64;
            w.hi = hi as u64;
            w.whi = if writable { hi as u64 } else { 0 };
        }
    }

    /// Makes region `id` inaccessible for the rest of the run (a retired
    /// ring-buffer record).
    pub fn retire(&mut self, id: u32) {
        if let (Some(r), Some(w)) = (
            self.regions.get_mut(id as usize),
            self.win.get_mut(id as usize),
        ) {
            r.kind = RegionKind::Opaque;
            *w = Window::CLOSED;
        }
    }

    /// Drops the dynamic regions: back to the first `base` ones.
    #[inline(always)]
    pub fn reset(&mut self, base: usize) {
        if self.regions.len() > base || self.base != base || self.index.is_some() {
            self.reset_slow(base);
        }
    }

    #[cold]
    fn reset_slow(&mut self, base: usize) {
        if self.regions.len() > base {
            // Map values go to the spare list (moved, no reference
            // counting); the rest are dropped.
            for r in self.regions.drain(base..) {
                if matches!(r.role, Role::MapValue(_)) && self.spare.len() < SPARE_MAX {
                    self.spare.push(r);
                }
            }
            self.win.truncate(base);
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
            let wins = &self.win[base..];
            let hit = |(r, w): (&Region, &Window)| r.role == Role::MapValue(map) && w.lo() == off;
            return dynamic
                .iter()
                .zip(wins)
                .rposition(hit)
                .map(|i| (base + i) as u32);
        }
        let ix = self.index.get_or_insert_with(Box::default);
        ix.indexed = ix.indexed.max(base);
        while let (Some(r), Some(w)) = (self.regions.get(ix.indexed), self.win.get(ix.indexed)) {
            if let Role::MapValue(m) = r.role {
                ix.ids.insert((m as u64) << 32 | w.lo, ix.indexed as u32);
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
        let w = self.win.get_mut(id)?;
        w.lo = w.hi.checked_sub(FRAME_SIZE as u64)?;
        Some(addr(id as u32, w.hi))
    }

    /// Makes stack frame `depth` inaccessible (it returned).
    #[inline]
    pub fn close_frame(&mut self, depth: usize) {
        let id = STACK as usize + depth;
        if let (Some(r), Some(w)) = (self.regions.get(id), self.win.get_mut(id)) {
            if r.role == Role::Frame(depth as u32) {
                w.lo = w.hi;
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
        let region = match self.spare.pop() {
            Some(mut r) => {
                if !Arc::ptr_eq(&r.buf, buf) {
                    r.buf = buf.clone();
                }
                let same_map = r.role == Role::MapValue(map);
                if !same_map {
                    r.name = self.map_name(map);
                }
                r.kind = RegionKind::Mem;
                r.role = Role::MapValue(map);
                r
            }
            None => Region {
                kind: RegionKind::Mem,
                buf: buf.clone(),
                name: self.map_name(map),
                role: Role::MapValue(map),
                writable,
            },
        };
        let id = self.push(region, off, off + len, writable);
        addr(id, off as u64)
    }

    /// The name of map `map`'s base region (for value regions).
    fn map_name(&self, map: u32) -> Arc<str> {
        match self.regions.get((MAP_BASE + map) as usize) {
            Some(r) => r.name.clone(),
            None => Arc::from("map"),
        }
    }

    /// The buffer and offset behind `addr..addr+size`, if the whole range
    /// is inside one memory region's window (and it is writable, for
    /// writes).
    #[inline(always)]
    pub fn resolve(&self, addr: u64, size: usize, write: bool) -> Option<(&GuardedBuf, usize)> {
        let id = (addr >> REGION_SHIFT) as usize;
        let w = self.win.get(id)?;
        let off = addr & 0xffff_ffff;
        if w.allows(off, size as u64, write) {
            Some((&self.regions.get(id)?.buf, off as usize))
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
        let (Some(r), Some(w)) = (self.regions.get(id).filter(|_| id != 0), self.win.get(id))
        else {
            return format!("{addr:#x} (no region)");
        };
        match r.role {
            Role::Plain if off < 0 => format!("{addr:#x} ({}-{:#x})", r.name, -off),
            Role::Plain => format!("{addr:#x} ({}+{off:#x})", r.name),
            Role::Frame(d) => {
                let live = if w.lo == w.hi { ", not live" } else { "" };
                let rel = off - w.hi as i64;
                format!("{addr:#x} (stack frame {d}{live}, fp{rel:+})")
            }
            Role::MapValue(_) => format!(
                "{addr:#x} ({} value, value_size={} off={})",
                r.name,
                w.hi - w.lo,
                off - w.lo as i64
            ),
        }
    }
}
