//! `unsafe` wrappers over libbpf's netlink TC calls (`bpf_tc_*`): the
//! clsact qdisc and direct-action cls_bpf filters, for kernels without
//! tcx links (see [`crate::tc`]).
//!
//! Audit notes: as in `sys.rs` — option structs start zeroed (their
//! `Default`) with their own `sz`, live on the stack for the whole call,
//! and hold no pointers (`qdisc` stays null); libbpf returns a negative
//! errno on failure, which is turned into `Err(errno)`.

#![allow(unsafe_code)]

use std::os::fd::RawFd;

/// Where a filter goes: ingress or egress of the clsact qdisc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    Ingress,
    Egress,
    /// Both (only to destroy the qdisc itself).
    Qdisc,
}

fn hook(ifindex: u32, point: Point) -> libbpf_sys::bpf_tc_hook {
    libbpf_sys::bpf_tc_hook {
        sz: std::mem::size_of::<libbpf_sys::bpf_tc_hook>() as _,
        ifindex: ifindex as i32,
        attach_point: match point {
            Point::Ingress => libbpf_sys::BPF_TC_INGRESS,
            Point::Egress => libbpf_sys::BPF_TC_EGRESS,
            Point::Qdisc => libbpf_sys::BPF_TC_INGRESS | libbpf_sys::BPF_TC_EGRESS,
        },
        ..Default::default()
    }
}

fn opts(handle: u32, priority: u32) -> libbpf_sys::bpf_tc_opts {
    libbpf_sys::bpf_tc_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_tc_opts>() as _,
        handle,
        priority,
        ..Default::default()
    }
}

/// Runs `f` with libbpf's messages off: for calls whose failure is an
/// expected answer (the qdisc exists, the filter is gone), which libbpf
/// would otherwise print as kernel errors on stderr.
fn quiet<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: libbpf_set_print swaps a global function pointer; NULL
    // silences libbpf, and the previous printer is put back after.
    let old = unsafe { libbpf_sys::libbpf_set_print(None) };
    let r = f();
    // SAFETY: as above, restoring the pointer libbpf gave us.
    unsafe { libbpf_sys::libbpf_set_print(old) };
    r
}

fn check(rc: i32) -> Result<(), i32> {
    if rc < 0 {
        return Err(-rc);
    }
    Ok(())
}

/// Creates the clsact qdisc of `ifindex`: `Ok(true)` when this call made
/// it, `Ok(false)` when it was there already.
pub(crate) fn qdisc_create(ifindex: u32) -> Result<bool, i32> {
    let mut h = hook(ifindex, Point::Ingress);
    // SAFETY: `h` is a valid, zero-initialised hook with its size.
    match check(quiet(|| unsafe { libbpf_sys::bpf_tc_hook_create(&mut h) })) {
        Ok(()) => Ok(true),
        Err(libc::EEXIST) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes the clsact qdisc of `ifindex` (and every filter on it).
pub(crate) fn qdisc_destroy(ifindex: u32) -> Result<(), i32> {
    let mut h = hook(ifindex, Point::Qdisc);
    // SAFETY: as above.
    check(unsafe { libbpf_sys::bpf_tc_hook_destroy(&mut h) })
}

/// A filter as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    pub handle: u32,
    pub priority: u32,
    pub prog_id: u32,
}

/// Adds (or with `replace`, atomically replaces) the direct-action
/// cls_bpf filter `handle`/`priority` (priority 0: the kernel picks one
/// before the existing filters) running `prog_fd`.
pub(crate) fn filter_attach(
    ifindex: u32,
    point: Point,
    prog_fd: RawFd,
    handle: u32,
    priority: u32,
    replace: bool,
) -> Result<Filter, i32> {
    let h = hook(ifindex, point);
    let mut o = opts(handle, priority);
    o.prog_fd = prog_fd;
    if replace {
        o.flags = libbpf_sys::BPF_TC_F_REPLACE;
    }
    // SAFETY: `h` and `o` are valid option structs with their sizes,
    // alive for the call; libbpf writes back into `o` only.
    check(unsafe { libbpf_sys::bpf_tc_attach(&h, &mut o) })?;
    Ok(Filter {
        handle: o.handle,
        priority: o.priority,
        prog_id: o.prog_id,
    })
}

/// Deletes filter `handle`/`priority`.
pub(crate) fn filter_detach(
    ifindex: u32,
    point: Point,
    handle: u32,
    priority: u32,
) -> Result<(), i32> {
    let h = hook(ifindex, point);
    let o = opts(handle, priority);
    // SAFETY: as above; libbpf only reads `o`.
    check(unsafe { libbpf_sys::bpf_tc_detach(&h, &o) })
}

/// The program of filter `handle`/`priority` (`Err(ENOENT)` when absent).
pub(crate) fn filter_query(
    ifindex: u32,
    point: Point,
    handle: u32,
    priority: u32,
) -> Result<Filter, i32> {
    let h = hook(ifindex, point);
    let mut o = opts(handle, priority);
    // SAFETY: as above.
    check(quiet(|| unsafe { libbpf_sys::bpf_tc_query(&h, &mut o) }))?;
    Ok(Filter {
        handle: o.handle,
        priority: o.priority,
        prog_id: o.prog_id,
    })
}
