//! The crate's only `unsafe` code: raw AF_PACKET sockets, `setns`, two
//! interface ioctls, the thread's timer slack, the SIGINT/SIGTERM
//! handler, live-frame XDP test runs (`bpf_prog_test_run_opts`, which
//! libbpf-rs wraps without a batch size), `if_nametoindex`, CPU
//! affinity and `bpf_enable_stats`, each a thin wrapper that checks the
//! return value and hands back safe types.
//!
//! Audit notes: every pointer passed to the kernel points at a local
//! value of the size passed with it; file descriptors are owned by
//! [`OwnedFd`] and closed on drop; buffers are Rust slices whose length
//! bounds what the kernel writes. The signal handler only loads a
//! `OnceLock` already set and stores to an atomic (async-signal-safe).

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Sets the calling thread's timer slack to 1 ns, so its sleeps end when
/// asked rather than up to 50 µs later (the default slack).
pub fn fine_timer_slack() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; affects this thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The flag the SIGINT/SIGTERM handler sets (set before the handler is
/// installed, never changed afterwards).
static SIGNAL_FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_signal(_sig: libc::c_int) {
    if let Some(flag) = SIGNAL_FLAG.get() {
        flag.store(true, Ordering::SeqCst);
    }
}

/// Installs a handler for SIGINT and SIGTERM that sets the returned flag
/// (the same flag on every call). The handler resets itself to the
/// default action, so a second signal ends the process as usual.
pub fn stop_on_signals() -> io::Result<Arc<AtomicBool>> {
    let flag = SIGNAL_FLAG
        .get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone();
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain old data; all-zero is a valid value
        // (empty mask, no flags) before the fields below are set.
        let mut sa: libc::sigaction = unsafe { zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART | libc::SA_RESETHAND;
        // SAFETY: `sa` is a local, fully initialised sigaction; the old
        // action is not asked for. The handler is async-signal-safe.
        let rc = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(flag)
}

/// Moves the calling thread into the network namespace `name` (as made
/// by `ip netns add`, i.e. `/run/netns/NAME`).
pub fn enter_netns(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a namespace name"),
        ));
    }
    let file = File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns takes an open namespace fd (kept alive by `file`) and
    // a flag; it only changes the calling thread's namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn ifreq_for(dev: &str) -> io::Result<libc::ifreq> {
    let name = CString::new(dev)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
    let bytes = name.as_bytes_with_nul();
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { zeroed() };
    if bytes.len() > req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name `{dev}` is longer than 15 bytes"),
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// A raw packet socket bound to one interface (all protocols).
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens an AF_PACKET/SOCK_RAW socket bound to `dev` in the calling
    /// thread's namespace; with `incoming_only`, frames the host sends
    /// itself are not delivered to it.
    pub fn open(dev: &str, incoming_only: bool) -> io::Result<PacketSocket> {
        // Protocol 0 at creation: nothing is queued before the bind below
        // narrows the socket to one interface.
        // SAFETY: plain syscall with constant arguments.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = ifreq_for(dev)?;
        // SAFETY: SIOCGIFINDEX reads ifr_name and writes ifr_ifindex in `req`.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFINDEX as _, &mut req) } < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("interface {dev}: {e}")));
        }
        // SAFETY: the union member SIOCGIFINDEX filled in.
        let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
        if incoming_only {
            let one: libc::c_int = 1;
            // SAFETY: option value is a local c_int of the size passed.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_PACKET,
                    libc::PACKET_IGNORE_OUTGOING,
                    (&one as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            let size: libc::c_int = 8 << 20;
            // SAFETY: as above. Failure only means a smaller buffer.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    (&size as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
        // SAFETY: sockaddr_ll is plain old data.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: the address is a local sockaddr_ll of the size passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PacketSocket { fd })
    }

    /// The hardware address of `dev`.
    pub fn hwaddr(&self, dev: &str) -> io::Result<[u8; 6]> {
        let mut req = ifreq_for(dev)?;
        // SAFETY: SIOCGIFHWADDR reads ifr_name and writes ifr_hwaddr.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the union member SIOCGIFHWADDR filled in.
        let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
        let mut mac = [0u8; 6];
        for (m, d) in mac.iter_mut().zip(data.iter()) {
            *m = *d as u8;
        }
        Ok(mac)
    }

    /// Sends one frame; `Ok(false)` when the queue is full (retry later).
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: the buffer is a live slice of the length passed.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
                _ => Err(e),
            };
        }
        Ok(true)
    }

    /// Waits at most `timeout` for a frame; its length (the whole frame,
    /// even if longer than `buf`), or `None` on timeout.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one local pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EINTR) {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if rc == 0 {
            return Ok(None);
        }
        // SAFETY: the buffer is a live mutable slice of the length passed.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }
}

/// `BPF_F_TEST_XDP_LIVE_FRAMES`: test runs of an XDP program whose
/// redirected frames really go out.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// Runs XDP program `prog` `repeat` times in live-frame mode on frames
/// initialised from `data`, as if received on `ifindex` (an interface of
/// the calling thread's namespace), `batch` frames per kernel batch (0:
/// the kernel's default).
pub fn xdp_live_run(
    prog: std::os::fd::BorrowedFd<'_>,
    data: &[u8],
    ifindex: u32,
    repeat: u32,
    batch: u32,
) -> io::Result<()> {
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex,
    // rx_queue_index, egress_ifindex (u32 each).
    let ctx: [u32; 6] = [0, data.len() as u32, 0, ifindex, 0, 0];
    let opts = libbpf_sys::bpf_test_run_opts {
        sz: size_of::<libbpf_sys::bpf_test_run_opts>() as libbpf_sys::size_t,
        data_in: data.as_ptr().cast(),
        data_size_in: data.len() as u32,
        ctx_in: ctx.as_ptr().cast(),
        ctx_size_in: size_of::<[u32; 6]>() as u32,
        repeat: repeat.min(i32::MAX as u32) as libc::c_int,
        flags: BPF_F_TEST_XDP_LIVE_FRAMES,
        batch_size: batch,
        ..Default::default()
    };
    let mut opts = opts;
    // SAFETY: `data` and `ctx` are live buffers of the sizes given in
    // `opts`; no output buffers are passed (live mode takes none); the
    // kernel only reads the inputs.
    let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog.as_raw_fd(), &mut opts) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc.abs()));
    }
    Ok(())
}

/// The index of interface `dev` in the calling thread's namespace.
pub fn ifindex(dev: &str) -> io::Result<u32> {
    let name = CString::new(dev)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
    // SAFETY: a valid NUL-terminated string, read only.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("interface {dev}: {e}")));
    }
    Ok(idx)
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns a CPU number or -1.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// Keeps the calling thread on CPU `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: CPU_SET writes one bit of the local set (bounds-checked
    // against the set's size by the macro's implementation).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the set is a local of the
    // size passed.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Turns on the kernel's run-time statistics of BPF programs
/// (`run_time_ns`, `run_cnt`) while the returned fd is open.
pub fn enable_bpf_stats() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall wrapper with an enum argument; returns a
    // new fd or a negative error.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(fd.abs()));
    }
    // SAFETY: a fresh fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
