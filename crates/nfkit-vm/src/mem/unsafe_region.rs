//! The only module of the VM with `unsafe` code: guard-paged byte buffers
//! that programs' memory (stacks, packets, contexts, map values) lives in.
//!
//! # Audit notes
//!
//! * A [`GuardedBuf`] is one anonymous `mmap` of `len` bytes rounded up
//!   to pages, with one `PROT_NONE` page before and after it. Nothing but
//!   this module ever holds a raw pointer into it.
//! * Every method checks `offset + size <= len` itself (with overflow
//!   checks) before touching memory, so the module is sound on its own;
//!   the guard pages are a second line of defence should that check ever
//!   be wrong (an overrun faults instead of touching host memory).
//! * Buffers are shared between threads (map values of concurrently
//!   running programs), so every access is an atomic operation (relaxed
//!   for plain loads and stores, sequentially consistent for the eBPF
//!   atomics). Aligned accesses use the atomic type of their width;
//!   unaligned ones go byte by byte. Relaxed atomics compile to plain
//!   moves on x86-64 and aarch64. Accesses of different widths to the same
//!   bytes are what eBPF programs do; they are the same hardware
//!   operations every eBPF runtime performs.
//! * The mapping is released in `Drop`; `&self` borrows keep it alive.
//!   A buffer made by [`GuardedBuf::pooled`] (map values) goes back to a
//!   bounded pool instead, its mapping and guard pages unchanged, and is
//!   zeroed in full when the pool hands it out again: loading a new
//!   version's maps then costs no `mmap`/`mprotect`/`munmap` and no page
//!   faults (docs/update.md, "Swap time"). A buffer is in the pool only
//!   once nothing holds it (its `Drop` ran), so no two owners share one.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Read-modify-write operations of the eBPF atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rmw {
    Add,
    Or,
    And,
    Xor,
    Xchg,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

/// A zero-initialised byte buffer surrounded by inaccessible guard pages.
pub struct GuardedBuf {
    /// First usable byte (one page after the start of the mapping).
    data: NonNull<u8>,
    len: usize,
    /// Start and length of the whole mapping, guard pages included.
    map: NonNull<libc::c_void>,
    map_len: usize,
    /// Goes back to [`POOL`] when dropped.
    pooled: bool,
}

/// A mapping kept for reuse: start and length (guard pages included).
struct Spare {
    map: usize,
    map_len: usize,
}

/// Mappings of dropped pooled buffers, most recent last.
static POOL: std::sync::Mutex<Vec<Spare>> = std::sync::Mutex::new(Vec::new());
/// Buffers larger than this are not pooled (zeroing them on reuse would
/// cost more than a fresh mapping's page faults save).
const POOL_MAX_BODY: usize = 256 << 10;
/// At most this many bytes (bodies) are kept in the pool.
const POOL_MAX_BYTES: usize = 16 << 20;

// SAFETY: the buffer is plain memory owned by this value; all access goes
// through atomic operations on `&self`, so sharing between threads cannot
// produce a data race.
unsafe impl Send for GuardedBuf {}
// SAFETY: as above.
unsafe impl Sync for GuardedBuf {}

impl std::fmt::Debug for GuardedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GuardedBuf({} bytes)", self.len)
    }
}

/// A buffer body of `len` bytes (at least one) rounded up to whole pages.
fn body_len(len: usize, page: usize) -> io::Result<usize> {
    len.max(1)
        .checked_add(page - 1)
        .map(|v| v / page * page)
        .ok_or_else(|| io::Error::other("buffer size overflows"))
}

impl GuardedBuf {
    /// Maps `len` zeroed bytes (at least one page) between two guard pages.
    pub fn new(len: usize) -> io::Result<GuardedBuf> {
        let page = page_size();
        let body = body_len(len, page)?;
        let map_len = body
            .checked_add(2 * page)
            .ok_or_else(|| io::Error::other("buffer size overflows"))?;
        // SAFETY: an anonymous private mapping at an address of the
        // kernel's choice; no existing memory is affected.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `map` is the start of a mapping of `map_len` bytes, so
        // `map + page` .. `map + page + body` lies inside it.
        let data = unsafe { (map as *mut u8).add(page) };
        // SAFETY: the range is inside the mapping created above; only the
        // body becomes accessible, the first and last page stay PROT_NONE.
        let rc = unsafe {
            libc::mprotect(
                data as *mut libc::c_void,
                body,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping the mapping created above, never used.
            unsafe { libc::munmap(map, map_len) };
            return Err(e);
        }
        Ok(GuardedBuf {
            data: NonNull::new(data).ok_or_else(|| io::Error::other("mmap returned null"))?,
            len,
            map: NonNull::new(map).ok_or_else(|| io::Error::other("mmap returned null"))?,
            map_len,
            pooled: false,
        })
    }

    /// [`GuardedBuf::new`] from the pool of dropped pooled buffers where
    /// one of the same page count is there (its first `len` bytes, all
    /// that can be read through it, zeroed now), else mapped; either way
    /// it returns to the pool when dropped.
    pub fn pooled(len: usize) -> io::Result<GuardedBuf> {
        let page = page_size();
        let body = body_len(len, page)?;
        if body > POOL_MAX_BODY {
            return GuardedBuf::new(len);
        }
        let map_len = body + 2 * page;
        let spare = {
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            let at = pool.iter().rposition(|s| s.map_len == map_len);
            at.map(|i| pool.swap_remove(i))
        };
        let Some(spare) = spare else {
            let mut b = GuardedBuf::new(len)?;
            b.pooled = true;
            return Ok(b);
        };
        let map = spare.map as *mut libc::c_void;
        // SAFETY: `spare` is a mapping of `map_len` bytes made by `new`
        // (guard page, body read+write, guard page) whose owner was
        // dropped; taken out of the pool above, nothing else refers to
        // it, so writing its body is exclusive. Only `len` bytes are
        // zeroed: nothing reads past `len` (every access is checked
        // against it), and a later owner with a larger `len` zeroes its
        // own. (A small map in a whole page costs a few bytes, not 4 kB.)
        let data = unsafe {
            let data = (map as *mut u8).add(page);
            std::ptr::write_bytes(data, 0, len.min(body));
            data
        };
        Ok(GuardedBuf {
            data: NonNull::new(data).ok_or_else(|| io::Error::other("pooled mapping is null"))?,
            len,
            map: NonNull::new(map).ok_or_else(|| io::Error::other("pooled mapping is null"))?,
            map_len,
            pooled: true,
        })
    }

    /// Host address of the first usable byte: what the JIT's region
    /// windows hold (an address, not a pointer: dereferencing it is the
    /// JIT's business, after its window check).
    #[inline]
    pub fn host_addr(&self) -> usize {
        self.data.as_ptr() as usize
    }

    /// Usable length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pointer to `off`, if `off..off+size` lies inside the buffer.
    #[inline(always)]
    fn at(&self, off: usize, size: usize) -> Option<*mut u8> {
        let end = off.checked_add(size)?;
        if end > self.len {
            return None;
        }
        // SAFETY: off + size <= len, so the pointer stays inside the body.
        Some(unsafe { self.data.as_ptr().add(off) })
    }

    /// Loads `size` (1, 2, 4 or 8) bytes at `off`, little-endian,
    /// zero-extended.
    #[inline(always)]
    pub fn load(&self, off: usize, size: usize) -> Option<u64> {
        let p = self.at(off, size)?;
        // SAFETY (all arms): `p..p+size` is inside the buffer (checked by
        // `at`), alignment is checked before using a wide atomic, and the
        // memory is only ever accessed atomically.
        unsafe {
            Some(match size {
                1 => AtomicU8::from_ptr(p).load(Ordering::Relaxed) as u64,
                2 if off & 1 == 0 => {
                    AtomicU16::from_ptr(p as *mut u16).load(Ordering::Relaxed) as u64
                }
                4 if off & 3 == 0 => {
                    AtomicU32::from_ptr(p as *mut u32).load(Ordering::Relaxed) as u64
                }
                8 if off & 7 == 0 => AtomicU64::from_ptr(p as *mut u64).load(Ordering::Relaxed),
                2 | 4 | 8 => {
                    let mut v = 0u64;
                    for i in 0..size {
                        let b = AtomicU8::from_ptr(p.add(i)).load(Ordering::Relaxed);
                        v |= (b as u64) << (8 * i);
                    }
                    v
                }
                _ => return None,
            })
        }
    }

    /// Stores the low `size` (1, 2, 4 or 8) bytes of `v` at `off`,
    /// little-endian.
    #[inline(always)]
    pub fn store(&self, off: usize, size: usize, v: u64) -> Option<()> {
        let p = self.at(off, size)?;
        // SAFETY: as in `load`.
        unsafe {
            match size {
                1 => AtomicU8::from_ptr(p).store(v as u8, Ordering::Relaxed),
                2 if off & 1 == 0 => {
                    AtomicU16::from_ptr(p as *mut u16).store(v as u16, Ordering::Relaxed)
                }
                4 if off & 3 == 0 => {
                    AtomicU32::from_ptr(p as *mut u32).store(v as u32, Ordering::Relaxed)
                }
                8 if off & 7 == 0 => AtomicU64::from_ptr(p as *mut u64).store(v, Ordering::Relaxed),
                2 | 4 | 8 => {
                    for i in 0..size {
                        AtomicU8::from_ptr(p.add(i)).store((v >> (8 * i)) as u8, Ordering::Relaxed);
                    }
                }
                _ => return None,
            }
        }
        Some(())
    }

    /// Atomic read-modify-write of 4 or 8 aligned bytes at `off`; returns
    /// the old value (zero-extended). `None` when out of range, unaligned
    /// or of another size.
    pub fn rmw(&self, off: usize, size: usize, op: Rmw, v: u64) -> Option<u64> {
        let p = self.at(off, size)?;
        if off & (size - 1) != 0 {
            return None;
        }
        let sc = Ordering::SeqCst;
        // SAFETY: in range and aligned (checked above); atomic access only.
        unsafe {
            Some(match size {
                4 => {
                    let a = AtomicU32::from_ptr(p as *mut u32);
                    let v = v as u32;
                    (match op {
                        Rmw::Add => a.fetch_add(v, sc),
                        Rmw::Or => a.fetch_or(v, sc),
                        Rmw::And => a.fetch_and(v, sc),
                        Rmw::Xor => a.fetch_xor(v, sc),
                        Rmw::Xchg => a.swap(v, sc),
                    }) as u64
                }
                8 => {
                    let a = AtomicU64::from_ptr(p as *mut u64);
                    match op {
                        Rmw::Add => a.fetch_add(v, sc),
                        Rmw::Or => a.fetch_or(v, sc),
                        Rmw::And => a.fetch_and(v, sc),
                        Rmw::Xor => a.fetch_xor(v, sc),
                        Rmw::Xchg => a.swap(v, sc),
                    }
                }
                _ => return None,
            })
        }
    }

    /// Atomic compare-and-exchange of 4 or 8 aligned bytes at `off`;
    /// returns the old value (zero-extended).
    pub fn cmpxchg(&self, off: usize, size: usize, expected: u64, new: u64) -> Option<u64> {
        let p = self.at(off, size)?;
        if off & (size - 1) != 0 {
            return None;
        }
        let sc = Ordering::SeqCst;
        // SAFETY: in range and aligned (checked above); atomic access only.
        unsafe {
            Some(match size {
                4 => {
                    let a = AtomicU32::from_ptr(p as *mut u32);
                    match a.compare_exchange(expected as u32, new as u32, sc, sc) {
                        Ok(v) | Err(v) => v as u64,
                    }
                }
                8 => {
                    let a = AtomicU64::from_ptr(p as *mut u64);
                    match a.compare_exchange(expected, new, sc, sc) {
                        Ok(v) | Err(v) => v,
                    }
                }
                _ => return None,
            })
        }
    }

    /// Copies `out.len()` bytes from `off` into `out` (8 aligned bytes
    /// at a time where possible).
    pub fn read(&self, off: usize, out: &mut [u8]) -> Option<()> {
        let p = self.at(off, out.len())?;
        // Bytes up to the first 8-aligned offset (the body starts on a
        // page, so buffer offsets and addresses share their alignment).
        let head = ((8 - (off & 7)) & 7).min(out.len());
        let (first, rest) = out.split_at_mut(head);
        for (i, b) in first.iter_mut().enumerate() {
            // SAFETY: i < head <= out.len(): inside the checked range.
            *b = unsafe { AtomicU8::from_ptr(p.add(i)).load(Ordering::Relaxed) };
        }
        let mut words = rest.chunks_exact_mut(8);
        let mut i = head;
        for w in &mut words {
            // SAFETY: off + i is 8-aligned and i + 8 <= out.len(): an
            // aligned word inside the checked range.
            let v = unsafe { AtomicU64::from_ptr(p.add(i) as *mut u64).load(Ordering::Relaxed) };
            w.copy_from_slice(&v.to_ne_bytes());
            i += 8;
        }
        for b in words.into_remainder() {
            // SAFETY: i < out.len(): inside the checked range.
            *b = unsafe { AtomicU8::from_ptr(p.add(i)).load(Ordering::Relaxed) };
            i += 1;
        }
        Some(())
    }

    /// Copies `data` into the buffer at `off` (8 aligned bytes at a time
    /// where possible).
    pub fn write(&self, off: usize, data: &[u8]) -> Option<()> {
        let p = self.at(off, data.len())?;
        let head = ((8 - (off & 7)) & 7).min(data.len());
        let (first, rest) = data.split_at(head);
        for (i, b) in first.iter().enumerate() {
            // SAFETY: i < head <= data.len(): inside the checked range.
            unsafe { AtomicU8::from_ptr(p.add(i)).store(*b, Ordering::Relaxed) };
        }
        let mut words = rest.chunks_exact(8);
        let mut i = head;
        for w in &mut words {
            let mut v = [0u8; 8];
            v.copy_from_slice(w);
            // SAFETY: off + i is 8-aligned and i + 8 <= data.len(): an
            // aligned word inside the checked range.
            unsafe {
                AtomicU64::from_ptr(p.add(i) as *mut u64)
                    .store(u64::from_ne_bytes(v), Ordering::Relaxed)
            };
            i += 8;
        }
        for b in words.remainder() {
            // SAFETY: i < data.len(): inside the checked range.
            unsafe { AtomicU8::from_ptr(p.add(i)).store(*b, Ordering::Relaxed) };
            i += 1;
        }
        Some(())
    }

    /// [`GuardedBuf::write`] with a plain `memcpy` (several times faster
    /// on a 1500-byte frame than word-by-word atomic stores).
    ///
    /// # Safety
    ///
    /// No other thread may access the buffer during the call: it is a
    /// runner's own packet buffer, reached only through that runner,
    /// which the caller borrows mutably.
    #[inline(always)]
    pub(crate) unsafe fn write_unshared(&self, off: usize, data: &[u8]) -> Option<()> {
        let p = self.at(off, data.len())?;
        // SAFETY: `p..p+len` is inside the buffer (checked by `at`); `data`
        // is a distinct Rust slice (it cannot point into the mapping,
        // which only this module hands out as addresses); no concurrent
        // access by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Some(())
    }

    /// [`GuardedBuf::read`] with a plain `memcpy`.
    ///
    /// # Safety
    ///
    /// As [`GuardedBuf::write_unshared`].
    #[inline(always)]
    pub(crate) unsafe fn read_unshared(&self, off: usize, out: &mut [u8]) -> Option<()> {
        let p = self.at(off, out.len())?;
        // SAFETY: as in `write_unshared`.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Some(())
    }

    /// [`GuardedBuf::fill`] with a plain `memset` (the stack clear
    /// between runs: 512 bytes in a few instructions instead of 64
    /// atomic stores).
    ///
    /// # Safety
    ///
    /// As [`GuardedBuf::write_unshared`]: a runner's own buffer (its
    /// stack), reached only through that runner, borrowed mutably.
    #[inline(always)]
    pub(crate) unsafe fn fill_unshared(&self, off: usize, len: usize, byte: u8) -> Option<()> {
        let p = self.at(off, len)?;
        // SAFETY: `p..p+len` is inside the buffer (checked by `at`); no
        // concurrent access by the caller's contract.
        unsafe { std::ptr::write_bytes(p, byte, len) };
        Some(())
    }

    /// Sets `len` bytes at `off` to `byte` (8 aligned bytes at a time
    /// where possible).
    pub fn fill(&self, off: usize, len: usize, byte: u8) -> Option<()> {
        let p = self.at(off, len)?;
        let word = u64::from_ne_bytes([byte; 8]);
        let head = ((8 - (off & 7)) & 7).min(len);
        let words = (len - head) / 8;
        for i in 0..head {
            // SAFETY: i < head <= len: inside the checked range.
            unsafe { AtomicU8::from_ptr(p.add(i)).store(byte, Ordering::Relaxed) };
        }
        for k in 0..words {
            // SAFETY: head + 8k is 8-aligned (off + head is) and
            // head + 8k + 8 <= len: an aligned word inside the range.
            unsafe {
                AtomicU64::from_ptr(p.add(head + 8 * k) as *mut u64).store(word, Ordering::Relaxed)
            };
        }
        for i in head + 8 * words..len {
            // SAFETY: i < len: inside the checked range.
            unsafe { AtomicU8::from_ptr(p.add(i)).store(byte, Ordering::Relaxed) };
        }
        Some(())
    }

    /// Moves `len` bytes from `src` to `dst` inside the buffer (overlap
    /// allowed, like `memmove`).
    pub fn copy_within(&self, src: usize, dst: usize, len: usize) -> Option<()> {
        self.at(src, len)?;
        self.at(dst, len)?;
        let mut tmp = vec![0u8; len];
        self.read(src, &mut tmp)?;
        self.write(dst, &tmp)
    }

    /// The whole buffer's bytes (a copy).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // Cannot fail: the range is the whole buffer.
        let _ = self.read(0, &mut v);
        v
    }
}

impl Drop for GuardedBuf {
    fn drop(&mut self) {
        if self.pooled {
            let page = page_size();
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            let kept: usize = pool.iter().map(|s| s.map_len - 2 * page).sum();
            if kept + (self.map_len - 2 * page) <= POOL_MAX_BYTES {
                pool.push(Spare {
                    map: self.map.as_ptr() as usize,
                    map_len: self.map_len,
                });
                return;
            }
        }
        // SAFETY: `map`/`map_len` describe the mapping created in `new`,
        // which nothing references any more (we have `&mut self`).
        unsafe {
            libc::munmap(self.map.as_ptr(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        let b = GuardedBuf::new(10).expect("mmap");
        assert_eq!(b.load(8, 2), Some(0));
        assert_eq!(b.load(9, 2), None);
        assert_eq!(b.load(usize::MAX, 8), None);
        assert!(b.store(2, 8, 0x1122_3344_5566_7788).is_some());
        assert_eq!(b.load(2, 8), Some(0x1122_3344_5566_7788));
        assert_eq!(b.load(2, 1), Some(0x88));
        assert_eq!(b.rmw(2, 8, Rmw::Add, 1), None, "unaligned atomic refused");
        assert_eq!(b.rmw(0, 4, Rmw::Add, 5), Some(0x7788_0000));
        assert_eq!(b.cmpxchg(0, 4, 0x7788_0005, 9), Some(0x7788_0005));
        assert_eq!(b.load(0, 4), Some(9));
    }

    #[test]
    fn word_copies_at_every_alignment() {
        let b = GuardedBuf::new(64).expect("mmap");
        for off in 0..9 {
            for len in [0, 1, 7, 8, 9, 17, 40] {
                let data: Vec<u8> = (0..len).map(|i| (i * 31 + off + 1) as u8).collect();
                b.fill(0, 64, 0xee).expect("in range");
                b.write(off, &data).expect("in range");
                let mut back = vec![0u8; len];
                b.read(off, &mut back).expect("in range");
                assert_eq!(back, data, "off {off} len {len}");
                let all = b.to_vec();
                assert!(
                    all[..off].iter().all(|&x| x == 0xee),
                    "before: off {off} len {len}"
                );
                assert!(
                    all[off + len..].iter().all(|&x| x == 0xee),
                    "after: off {off} len {len}"
                );
                b.fill(off, len, 0x11).expect("in range");
                let all = b.to_vec();
                assert!(all[off..off + len].iter().all(|&x| x == 0x11));
                assert!(all[off + len..].iter().all(|&x| x == 0xee));
            }
        }
        assert!(b.read(60, &mut [0u8; 5]).is_none());
        assert!(b.write(57, &[0u8; 8]).is_none());
        assert!(b.fill(64, 1, 0).is_none());
    }

    #[test]
    fn pooled_buffers_come_back_zeroed() {
        let a = GuardedBuf::pooled(100).expect("mmap");
        a.fill(0, 100, 0xab).expect("in range");
        let addr = a.host_addr();
        drop(a);
        // Another thread's test may take the same mapping first: what
        // must hold is that whatever comes out is zeroed and bounded.
        let b = GuardedBuf::pooled(4000).expect("mmap");
        assert!(b.to_vec().iter().all(|&x| x == 0), "reused at {addr:#x}");
        assert_eq!(b.len(), 4000);
        assert!(b.load(3996, 8).is_none());
        let big = GuardedBuf::pooled(POOL_MAX_BODY + 1).expect("mmap");
        assert!(!big.pooled, "too large to pool");
    }

    #[test]
    fn copy_within_overlaps() {
        let b = GuardedBuf::new(8).expect("mmap");
        b.write(0, &[1, 2, 3, 4]).expect("in range");
        b.copy_within(0, 2, 4).expect("in range");
        assert_eq!(b.to_vec(), vec![1, 2, 1, 2, 3, 4, 0, 0]);
    }
}
