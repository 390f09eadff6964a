//! Socket filters: a `BPF_PROG_TYPE_SOCKET_FILTER` program (a chain
//! script compiled for hook `socket`, or an NF's `sock_*` export)
//! attached to a socket with `SO_ATTACH_BPF`. The kernel runs it on
//! every packet queued to that socket; its result is how many bytes to
//! keep (the chain's PASS keeps the whole packet) or 0 to drop it
//! (docs/abi.md 1). Socket filters read the packet from its network
//! header and cannot change it.
//!
//! A socket belongs to the process that holds it, so there is nothing
//! for `nfkit deploy` to pin or swap here: the program that owns the
//! socket loads the chain ([`crate::load_image`]) and attaches it with
//! [`attach_socket_filter`]. Attaching again replaces the filter
//! atomically; the filter goes with the socket.

use crate::error::KernelError;
use crate::load::Prog;
use nfkit_object::ProgType;
use std::os::fd::{AsFd, AsRawFd};

/// Attaches socket-filter program `prog` to socket `sock` (replacing
/// any filter it had).
pub fn attach_socket_filter(sock: impl AsFd, prog: &Prog) -> Result<(), KernelError> {
    if prog.prog_type() != ProgType::SocketFilter {
        return Err(KernelError::WrongProgType {
            prog: prog.name().to_string(),
            prog_type: format!("{:?}", prog.prog_type()),
            wanted: "a socket filter (compile the script for hook `socket`)",
        });
    }
    crate::sys_sock::set_int(sock.as_fd().as_raw_fd(), libc::SO_ATTACH_BPF, prog.fd()).map_err(
        |errno| KernelError::Os {
            what: format!("attach socket filter `{}`", prog.name()),
            errno,
        },
    )
}

/// Removes the filter of socket `sock`.
pub fn detach_socket_filter(sock: impl AsFd) -> Result<(), KernelError> {
    // SO_DETACH_BPF is SO_DETACH_FILTER; the value is ignored.
    crate::sys_sock::set_int(sock.as_fd().as_raw_fd(), libc::SO_DETACH_FILTER, 0).map_err(|errno| {
        KernelError::Os {
            what: "detach socket filter".into(),
            errno,
        }
    })
}
