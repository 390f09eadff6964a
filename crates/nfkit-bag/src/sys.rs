//! Every `unsafe` call of the crate, through libc: CPU pinning, the
//! calling thread's CPU time, socket options (receive buffer, drop
//! counter), the number of possible CPUs.
//!
//! Audit notes: each call passes stack values with their sizes; file
//! descriptors are borrowed from the caller for the call.

#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::time::Duration;

fn last_errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity(0, ...)`).
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `set` is a valid cpu_set_t and cpu is in range (checked).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pointer and size of `set` on the stack.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(last_errno());
    }
    Ok(())
}

/// User and system CPU time of the calling thread
/// (`getrusage(RUSAGE_THREAD)`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTime {
    pub user: Duration,
    pub sys: Duration,
}

impl CpuTime {
    /// The calling thread's CPU time so far.
    pub fn thread() -> CpuTime {
        // SAFETY: rusage is plain data, filled by the call.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pointer to `ru` on the stack.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        if rc != 0 {
            return CpuTime::default();
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        CpuTime {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
        }
    }

    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
        }
    }
}

/// `setsockopt(fd, SOL_SOCKET, opt, &value, sizeof(int))`.
fn set_int(fd: RawFd, opt: i32, value: i32) -> std::io::Result<()> {
    // SAFETY: `value` lives on the stack for the call; its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(last_errno());
    }
    Ok(())
}

/// Sets the socket's receive buffer: `SO_RCVBUFFORCE` (root: above
/// `net.core.rmem_max`), else `SO_RCVBUF` (capped at it). The kernel
/// doubles the value for its bookkeeping.
pub fn set_rcvbuf(fd: RawFd, bytes: i32) -> std::io::Result<()> {
    set_int(fd, libc::SO_RCVBUFFORCE, bytes).or_else(|_| set_int(fd, libc::SO_RCVBUF, bytes))
}

/// The socket's drop counter (`sk_drops`, from `SO_MEMINFO`): datagrams
/// the socket refused, both by its filter and for a full receive queue.
pub fn socket_drops(fd: RawFd) -> std::io::Result<u64> {
    // SK_MEMINFO_VARS is 9; SK_MEMINFO_DROPS is the last.
    let mut vals = [0u32; 9];
    let mut len = std::mem::size_of_val(&vals) as libc::socklen_t;
    // SAFETY: pointer and length of `vals` on the stack; the kernel
    // writes at most `len` bytes and updates it.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            vals.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(last_errno());
    }
    if (len as usize) < std::mem::size_of_val(&vals) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(u64::from(vals[8]))
}
