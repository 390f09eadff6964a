//! `unsafe` wrapper of the one socket option nfkit sets on sockets it
//! does not own: `SO_ATTACH_BPF` / `SO_DETACH_BPF` (see [`crate::socket`]).
//!
//! Audit notes: the option value is a `c_int` on the stack, passed with
//! its size; the socket fd is borrowed from the caller for the call.

#![allow(unsafe_code)]

use std::os::fd::RawFd;

/// `setsockopt(fd, SOL_SOCKET, opt, &value, sizeof(int))`.
pub(crate) fn set_int(fd: RawFd, opt: i32, value: i32) -> Result<(), i32> {
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
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    Ok(())
}
