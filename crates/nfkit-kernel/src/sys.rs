//! The crate's only `unsafe` code: thin wrappers over the libbpf calls
//! libbpf-rs does not expose for raw instructions (BTF load, program load
//! with func/line info, test runs on a bare program fd) and CPU pinning.
//!
//! Audit notes: every pointer handed to C points into a live Rust buffer
//! whose length is passed with it; every fd returned by C is checked
//! (>= 0) and owned by an `OwnedFd` at once; option structs are zeroed
//! (their `Default`) and carry their own `sz`.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The last OS error number.
fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Text of a C log buffer up to its first NUL.
fn log_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(buf.get(..end).unwrap_or_default()).into_owned()
}

/// Loads raw BTF bytes into the kernel. On failure: errno and the log.
pub(crate) fn btf_load(data: &[u8], log_size: usize) -> Result<OwnedFd, (i32, String)> {
    let mut log = vec![0u8; log_size.max(1)];
    let mut opts = libbpf_sys::bpf_btf_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_btf_load_opts>() as _,
        log_buf: log.as_mut_ptr().cast(),
        log_size: log.len() as u32,
        log_level: 0,
        ..Default::default()
    };
    // SAFETY: `data` and `log` outlive the call; their lengths are passed.
    let fd = unsafe { libbpf_sys::bpf_btf_load(data.as_ptr().cast(), data.len() as _, &mut opts) };
    if fd < 0 {
        return Err((errno(), log_text(&log)));
    }
    // SAFETY: a non-negative fd from bpf_btf_load is ours to own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Everything `bpf_prog_load` needs for one program.
pub(crate) struct ProgLoad<'a> {
    pub prog_type: u32,
    pub expected_attach_type: u32,
    pub prog_flags: u32,
    pub name: &'a str,
    pub license: &'a str,
    /// Encoded instructions, 8 bytes each.
    pub insns: &'a [u64],
    pub btf_fd: Option<RawFd>,
    /// `bpf_func_info` records (insn_off, type_id).
    pub func_info: &'a [[u32; 2]],
    /// `bpf_line_info` records (insn_off, file_name_off, line_off, line_col).
    pub line_info: &'a [[u32; 4]],
    pub log_level: u32,
    pub log_size: usize,
}

/// A failed program load.
pub(crate) struct LoadFailure {
    pub errno: i32,
    pub log: String,
}

/// Loads a program; on failure libbpf retries with a verbose log when
/// `log_level` is 0, so the log is the verifier's account of the error.
pub(crate) fn prog_load(p: &ProgLoad<'_>) -> Result<(OwnedFd, String), LoadFailure> {
    let bad = |what: &str| LoadFailure {
        errno: libc::EINVAL,
        log: format!("{what} contains a NUL byte"),
    };
    let name = CString::new(p.name).map_err(|_| bad("program name"))?;
    let license = CString::new(p.license).map_err(|_| bad("license"))?;
    let mut size = p.log_size.max(4096);
    loop {
        let mut log = vec![0u8; size];
        let mut opts = libbpf_sys::bpf_prog_load_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
            expected_attach_type: p.expected_attach_type,
            prog_flags: p.prog_flags,
            log_level: p.log_level,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr().cast(),
            ..Default::default()
        };
        if let Some(fd) = p.btf_fd {
            opts.prog_btf_fd = fd as u32;
            if !p.func_info.is_empty() {
                opts.func_info = p.func_info.as_ptr().cast();
                opts.func_info_cnt = p.func_info.len() as u32;
                opts.func_info_rec_size = 8;
            }
            if !p.line_info.is_empty() {
                opts.line_info = p.line_info.as_ptr().cast();
                opts.line_info_cnt = p.line_info.len() as u32;
                opts.line_info_rec_size = 16;
            }
        }
        // SAFETY: every pointer in `opts` and the arguments points into a
        // buffer (`name`, `license`, `insns`, `func_info`, `line_info`,
        // `log`) that lives until the call returns; counts match lengths.
        let fd = unsafe {
            libbpf_sys::bpf_prog_load(
                p.prog_type,
                name.as_ptr(),
                license.as_ptr(),
                p.insns.as_ptr().cast(),
                p.insns.len() as _,
                &mut opts,
            )
        };
        if fd >= 0 {
            // SAFETY: a non-negative fd from bpf_prog_load is ours to own.
            return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, log_text(&log)));
        }
        let e = errno();
        let want = opts.log_true_size as usize;
        if want >= size && size < (256 << 20) {
            size = (want + 1).min(256 << 20);
            continue;
        }
        return Err(LoadFailure {
            errno: e,
            log: log_text(&log),
        });
    }
}

/// Input and output of one `BPF_PROG_TEST_RUN`.
pub(crate) struct RawTestRun<'a> {
    pub data_in: &'a [u8],
    pub data_out: &'a mut [u8],
    pub ctx_in: Option<&'a [u8]>,
    pub ctx_out: Option<&'a mut [u8]>,
    pub repeat: u32,
    pub cpu: u32,
    pub flags: u32,
}

/// What the kernel reported: return value, bytes written to the data and
/// context buffers, mean duration.
pub(crate) struct RawTestOut {
    pub retval: u32,
    pub data_len: usize,
    pub ctx_len: usize,
    pub duration: u32,
}

/// Runs `BPF_PROG_TEST_RUN` on program `fd`; `Err(errno)` on failure.
pub(crate) fn test_run(fd: RawFd, t: RawTestRun<'_>) -> Result<RawTestOut, i32> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: t.data_in.as_ptr().cast(),
        data_size_in: t.data_in.len() as u32,
        data_out: t.data_out.as_mut_ptr().cast(),
        data_size_out: t.data_out.len() as u32,
        repeat: t.repeat as i32,
        cpu: t.cpu,
        flags: t.flags,
        ..Default::default()
    };
    if let Some(c) = t.ctx_in {
        opts.ctx_in = c.as_ptr().cast();
        opts.ctx_size_in = c.len() as u32;
    }
    let ctx_cap = t.ctx_out.as_ref().map_or(0, |c| c.len());
    if let Some(c) = t.ctx_out {
        opts.ctx_out = c.as_mut_ptr().cast();
        opts.ctx_size_out = c.len() as u32;
    }
    let out_cap = t.data_out.len();
    // SAFETY: data/ctx pointers point into the caller's live slices, with
    // their lengths; the kernel writes at most `*_size_out` bytes.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut opts) };
    if rc < 0 {
        return Err(errno());
    }
    Ok(RawTestOut {
        retval: opts.retval,
        data_len: (opts.data_size_out as usize).min(out_cap),
        ctx_len: (opts.ctx_size_out as usize).min(ctx_cap),
        duration: opts.duration,
    })
}

/// Pins the calling thread to CPU `cpu` (`sched_setaffinity`).
pub(crate) fn pin_thread_to_cpu(cpu: usize) -> Result<(), i32> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(libc::EINVAL);
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set; CPU_SET is
    // given an index below CPU_SETSIZE; the set outlives the call.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(errno());
    }
    Ok(())
}

/// The CPU the calling thread runs on now.
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// The effective user id of the process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// CLOCK_MONOTONIC now, in ns (bpf_ktime_get_ns reads the same clock).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Owns a non-negative fd returned by libbpf, or the errno.
fn own_fd(fd: i32) -> Result<OwnedFd, i32> {
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a non-negative fd returned by libbpf is a new fd that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `BPF_LINK_CREATE` of program `prog_fd` on `target` (an ifindex for
/// XDP and tcx) with `attach_type` and `flags` (XDP mode flags).
pub(crate) fn link_create(
    prog_fd: RawFd,
    target: i32,
    attach_type: u32,
    flags: u32,
) -> Result<OwnedFd, i32> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        flags,
        ..Default::default()
    };
    // SAFETY: `opts` is a zeroed option struct with its size, alive for the call.
    own_fd(unsafe { libbpf_sys::bpf_link_create(prog_fd, target, attach_type, &opts) })
}

/// `BPF_LINK_UPDATE`: link `link_fd` runs `prog_fd` from now on (atomically).
pub(crate) fn link_update(link_fd: RawFd, prog_fd: RawFd) -> Result<(), i32> {
    let opts = libbpf_sys::bpf_link_update_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_update_opts>() as _,
        ..Default::default()
    };
    // SAFETY: `opts` is a zeroed option struct with its size, alive for the call.
    let rc = unsafe { libbpf_sys::bpf_link_update(link_fd, prog_fd, &opts) };
    if rc < 0 {
        return Err(errno());
    }
    Ok(())
}

/// `BPF_OBJ_PIN` of any bpf fd at `path` (on bpffs).
pub(crate) fn obj_pin(fd: RawFd, path: &str) -> Result<(), i32> {
    let p = CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: `p` is a NUL-terminated string alive for the call.
    let rc = unsafe { libbpf_sys::bpf_obj_pin(fd, p.as_ptr()) };
    if rc < 0 {
        return Err(errno());
    }
    Ok(())
}

/// `BPF_OBJ_GET`: a new fd on the object pinned at `path`.
pub(crate) fn obj_get(path: &str) -> Result<OwnedFd, i32> {
    let p = CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: `p` is a NUL-terminated string alive for the call.
    own_fd(unsafe { libbpf_sys::bpf_obj_get(p.as_ptr()) })
}

/// `BPF_OBJ_GET_INFO_BY_FD` on a program: its id.
pub(crate) fn prog_id(fd: RawFd) -> Result<u32, i32> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a zeroed struct of `len` bytes, alive for the call.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if rc < 0 {
        return Err(errno());
    }
    Ok(info.id)
}

/// What the kernel says about a link.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LinkInfo {
    pub id: u32,
    pub prog_id: u32,
    /// The device of an XDP or tcx link (0 once the device is gone).
    pub ifindex: u32,
}

/// `BPF_OBJ_GET_INFO_BY_FD` on a link.
pub(crate) fn link_info(fd: RawFd) -> Result<LinkInfo, i32> {
    let mut info = libbpf_sys::bpf_link_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_link_info>() as u32;
    // SAFETY: `info` is a zeroed struct of `len` bytes, alive for the call.
    let rc = unsafe { libbpf_sys::bpf_link_get_info_by_fd(fd, &mut info, &mut len) };
    if rc < 0 {
        return Err(errno());
    }
    let ifindex = match info.type_ {
        // SAFETY: the kernel filled the union member of the link's type;
        // `xdp` and `tcx` both start with the u32 ifindex.
        libbpf_sys::BPF_LINK_TYPE_XDP => unsafe { info.__bindgen_anon_1.xdp.ifindex },
        // SAFETY: as above.
        libbpf_sys::BPF_LINK_TYPE_TCX => unsafe { info.__bindgen_anon_1.tcx.ifindex },
        _ => 0,
    };
    Ok(LinkInfo {
        id: info.id,
        prog_id: info.prog_id,
        ifindex,
    })
}

/// The ifindex of interface `name` in the calling thread's namespace.
pub(crate) fn if_nametoindex(name: &str) -> Option<u32> {
    let n = CString::new(name).ok()?;
    // SAFETY: `n` is a NUL-terminated string alive for the call.
    let i = unsafe { libc::if_nametoindex(n.as_ptr()) };
    (i != 0).then_some(i)
}

/// Moves the calling thread into the network namespace `fd` refers to.
pub(crate) fn setns_net(fd: RawFd) -> Result<(), i32> {
    // SAFETY: plain syscall on an fd the caller keeps open for the call.
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(errno());
    }
    Ok(())
}

/// `(xlated_prog_len, jited_prog_len, verified_insns)` of a loaded
/// program (`BPF_OBJ_GET_INFO_BY_FD`), or the errno.
pub(crate) fn prog_info(fd: RawFd) -> Result<(u32, u32, u32), i32> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a valid, writable bpf_prog_info of `len` bytes;
    // no pointer fields are set, so the kernel writes only into it.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if rc != 0 {
        return Err(-rc);
    }
    Ok((
        info.xlated_prog_len,
        info.jited_prog_len,
        info.verified_insns,
    ))
}
