//! Executable memory for native code, kept across program versions.
//!
//! A [`CodePages`] is one anonymous mapping. Code is copied in while
//! the mapping is read+write and then made read+execute: it is never
//! writable and executable at once. When a program is dropped (its
//! `Vm` gone: no runner can be inside its code any more), its mapping,
//! still read+execute, goes back to a process-wide pool instead of
//! being unmapped, and the next program of a size that fits takes it:
//! a new version then costs two `mprotect` calls and a copy, not a
//! fresh `mmap`, its page faults and the old version's `munmap`
//! (a hitless update's JIT stage, docs/update.md "Swap time").

use std::io;
use std::ptr::NonNull;
use std::sync::Mutex;

/// Mappings kept in the pool at most (each holds one program).
const POOL_MAPPINGS: usize = 32;
/// Bytes kept in the pool at most.
const POOL_BYTES: usize = 16 << 20;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// One anonymous mapping of `cap` bytes (a multiple of the page size),
/// `len` of them code; read+execute whenever code may run from it.
pub(crate) struct CodePages {
    ptr: NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone; it is only written
// through `&mut self` (while no code can run from it) and otherwise only
// executed or read.
unsafe impl Send for CodePages {}
unsafe impl Sync for CodePages {}

/// Mappings whose programs are gone, read+execute, by capacity.
static POOL: Mutex<Vec<CodePages>> = Mutex::new(Vec::new());

impl CodePages {
    /// A mapping of at least `len` bytes: the smallest of the pool that
    /// fits, or a new one. Its contents are the previous program's (or
    /// zeros) until [`CodePages::write`].
    pub(crate) fn take(len: usize) -> io::Result<CodePages> {
        let len = len.max(1);
        {
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            let best = pool
                .iter()
                .enumerate()
                .filter(|(_, p)| p.cap >= len)
                .min_by_key(|(_, p)| p.cap)
                .map(|(i, _)| i);
            if let Some(i) = best {
                return Ok(pool.swap_remove(i));
            }
        }
        CodePages::map(len)
    }

    fn map(len: usize) -> io::Result<CodePages> {
        let page = page_size();
        let cap = len
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::other("code too large"))?;
        // SAFETY: an anonymous private mapping at an address the kernel
        // picks; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(CodePages { ptr, cap, len: 0 })
    }

    /// Address of the first byte (where the code is assembled for).
    pub(crate) fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Bytes the mapping holds.
    pub(crate) fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes of code in it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn protect(&self, prot: libc::c_int) -> io::Result<()> {
        // SAFETY: the whole mapping, which this value owns.
        let r = unsafe { libc::mprotect(self.ptr.as_ptr().cast(), self.cap, prot) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Copies `code` in (read+write meanwhile, then read+execute), the
    /// rest of the mapping filled with `int3`. `&mut self`: nothing runs
    /// from the mapping while it is written.
    pub(crate) fn write(&mut self, code: &[u8]) -> io::Result<()> {
        if code.len() > self.cap {
            return Err(io::Error::other(format!(
                "{} bytes of code for a mapping of {}",
                code.len(),
                self.cap
            )));
        }
        self.protect(libc::PROT_READ | libc::PROT_WRITE)?;
        // SAFETY: the mapping is `cap` bytes, read+write now, and owned
        // by this value; `code` is another allocation.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) };
        dst[..code.len()].copy_from_slice(code);
        // What the previous program left past the new code traps.
        let old_end = self.len.max(code.len());
        dst[code.len()..old_end].fill(0xcc);
        self.len = code.len();
        self.protect(libc::PROT_READ | libc::PROT_EXEC)
    }
}

impl Drop for CodePages {
    fn drop(&mut self) {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        let held: usize = pool.iter().map(|p| p.cap).sum();
        if pool.len() < POOL_MAPPINGS && held + self.cap <= POOL_BYTES {
            // Kept read+execute, as it is; `write` makes it writable for
            // the next program.
            pool.push(CodePages {
                ptr: self.ptr,
                cap: self.cap,
                len: self.len,
            });
            // The copy in the pool owns the mapping now.
            self.cap = 0;
            return;
        }
        drop(pool);
        if self.cap > 0 {
            // SAFETY: the mapping this value owns, unmapped once.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.cap);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_mapping_is_reused_and_rewritten() {
        let mut a = CodePages::take(100).expect("map");
        a.write(&[0x90; 100]).expect("write");
        assert_eq!(a.len(), 100);
        let (addr, cap) = (a.addr(), a.capacity());
        assert!(cap >= 100 && cap % page_size() == 0);
        drop(a);
        // Other tests may take it first; take until it comes back.
        let mut held = Vec::new();
        let mut found = None;
        for _ in 0..POOL_MAPPINGS + 1 {
            let b = CodePages::take(cap).expect("take");
            if b.addr() == addr {
                found = Some(b);
                break;
            }
            held.push(b);
        }
        let mut b = found.expect("the dropped mapping came back from the pool");
        b.write(&[0xc3; 10]).expect("rewrite");
        // SAFETY: read+execute memory of `b` (readable).
        let bytes = unsafe { std::slice::from_raw_parts(b.addr() as *const u8, 100) };
        assert_eq!(&bytes[..10], &[0xc3; 10]);
        assert!(
            bytes[10..].iter().all(|&x| x == 0xcc),
            "old code left behind"
        );
        assert!(b.write(&vec![0; b.capacity() + 1]).is_err());
    }
}
