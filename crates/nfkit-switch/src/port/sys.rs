//! The switch's only `unsafe` code: sockets (AF_PACKET, AF_XDP,
//! netlink), their rings mapped into memory, TAP devices, a few
//! interface ioctls and the libbpf calls for the XDP redirect program.
//! Each function checks what the kernel returned and hands back safe
//! types; the port modules hold the policy.
//!
//! Audit notes: every pointer passed to the kernel points at a local
//! value (or a slice) of the size passed with it; descriptors are
//! [`OwnedFd`]s, closed on drop; mapped areas are [`Mmap`]s, unmapped on
//! drop and never handed out as references: ring slots and frame bytes
//! are read and written through bounds-checked raw copies, and ring
//! indexes through atomics (the kernel is the other side of each ring).

#![allow(unsafe_code)]

use super::OutFrame;
use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Duration;

fn last() -> io::Error {
    io::Error::last_os_error()
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(last())
    } else {
        Ok(rc)
    }
}

/// libbpf returns `-errno`.
fn check_bpf(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::from_raw_os_error(-rc))
    } else {
        Ok(rc)
    }
}

fn own(raw: libc::c_int) -> io::Result<OwnedFd> {
    let raw = check(raw)?;
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `CLOCK_MONOTONIC` now, in ns.
pub fn now_ns() -> u64 {
    // SAFETY: timespec is plain old data, written by the call.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: `ts` is a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The ifindex of `dev` in the calling thread's namespace.
pub fn if_index(dev: &str) -> io::Result<u32> {
    let name = CString::new(dev).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is a NUL-terminated string alive for the call.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 {
        return Err(last());
    }
    Ok(i)
}

fn ifreq_for(dev: &str) -> io::Result<libc::ifreq> {
    let bytes = dev.as_bytes();
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { zeroed() };
    if bytes.is_empty() || bytes.len() >= req.ifr_name.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{dev}` is not an interface name (1-15 bytes)"),
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// Sets `IFF_UP` on `dev`.
pub fn set_up(dev: &str) -> io::Result<()> {
    let sock = own(
        // SAFETY: plain syscall with constant arguments.
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
    )?;
    let mut req = ifreq_for(dev)?;
    // SAFETY: SIOCGIFFLAGS reads ifr_name and writes ifr_flags in `req`.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) })?;
    // SAFETY: the union member SIOCGIFFLAGS filled in.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads `req`.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS as _, &mut req) })?;
    Ok(())
}

/// The device's RX queue count as ethtool reports it (`rx` plus
/// `combined` channels), where the driver answers.
pub fn ethtool_rx_queues(dev: &str) -> io::Result<u32> {
    #[repr(C)]
    #[derive(Default)]
    struct Channels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx: u32,
        tx: u32,
        other: u32,
        combined: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;
    let sock = own(
        // SAFETY: plain syscall with constant arguments.
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
    )?;
    let mut ch = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Channels::default()
    };
    let mut req = ifreq_for(dev)?;
    req.ifr_ifru.ifru_data = (&mut ch as *mut Channels).cast();
    // SAFETY: SIOCETHTOOL reads ifr_name and the command in `ch`, and
    // writes `ch` (a local of the struct's size) through ifru_data.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL as _, &mut req) })?;
    Ok(ch.rx + ch.combined)
}

/// Sets an integer or struct socket option.
pub fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: the value is a live `T` of the size passed.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Reads a plain-data socket option (`T` must be valid all-zero).
fn getsockopt<T: Copy>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    // SAFETY: only used with C structs of integers, valid all-zero.
    let mut v: T = unsafe { zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// Waits until one of `fds` is readable or `timeout` passes (at most
/// [`super::BATCH`] descriptors). `Ok(false)` on timeout.
pub fn poll_in(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; super::BATCH];
    let n = fds.len().min(pfds.len());
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = *fd;
        p.events = libc::POLLIN;
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `pfds[..n]` is a live array of pollfd.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, ms) };
    if rc < 0 {
        let e = last();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0)
}

/// A memory area mapped into this process, unmapped on drop.
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the area is plain memory (or a ring shared with the kernel);
// all access goes through the bounds-checked methods below, which copy
// bytes or use atomics, never hand out references.
unsafe impl Send for Mmap {}
// SAFETY: as above.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Anonymous, zeroed memory (the AF_XDP UMEM).
    pub fn anon(len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh private anonymous mapping; no pointer given.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last());
        }
        Ok(Mmap {
            ptr: ptr.cast(),
            len,
        })
    }

    /// A socket's ring at page offset `off`.
    fn socket(fd: &OwnedFd, len: usize, off: libc::off_t) -> io::Result<Mmap> {
        // SAFETY: the kernel checks `len`/`off` against the ring it
        // set up; the mapping is shared with it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last());
        }
        Ok(Mmap {
            ptr: ptr.cast(),
            len,
        })
    }

    fn in_bounds(&self, off: usize, n: usize) -> bool {
        off.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// Replaces `dst`'s contents with `n` bytes at `off` (false and
    /// nothing copied when out of bounds). No allocation while `n` fits
    /// `dst`'s capacity.
    pub fn copy_out(&self, off: usize, n: usize, dst: &mut Vec<u8>) -> bool {
        if !self.in_bounds(off, n) {
            return false;
        }
        dst.clear();
        dst.reserve(n);
        // SAFETY: `off..off+n` is inside the mapping; `dst` has room for
        // `n` bytes; the regions cannot overlap (the mapping is not a
        // Rust allocation). The kernel does not write these bytes while
        // userspace owns the frame or block.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.add(off), dst.as_mut_ptr(), n);
            dst.set_len(n);
        }
        true
    }

    /// Writes `src` at `off` (false when out of bounds).
    pub fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if !self.in_bounds(off, src.len()) {
            return false;
        }
        // SAFETY: in bounds; the frame belongs to userspace until it is
        // put on a ring.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) };
        true
    }

    /// An atomic u32 at `off` (4-aligned, in bounds), or `None`.
    fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if off & 3 != 0 || !self.in_bounds(off, 4) {
            return None;
        }
        // SAFETY: aligned, in bounds, and the mapping lives as long as
        // `self`; the kernel accesses the word atomically too.
        Some(unsafe { &*(self.ptr.add(off) as *const AtomicU32) })
    }

    /// Reads a u32 at `off` with acquire ordering (0 out of bounds).
    pub fn load_u32(&self, off: usize) -> u32 {
        self.atomic_u32(off)
            .map(|a| a.load(Ordering::Acquire))
            .unwrap_or(0)
    }

    /// Stores a u32 at `off` with release ordering.
    pub fn store_u32(&self, off: usize, v: u32) {
        if let Some(a) = self.atomic_u32(off) {
            a.store(v, Ordering::Release);
        }
    }

    /// Reads a plain u16/u32/u64 at `off` (0 out of bounds).
    pub fn read_u64(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        if self.in_bounds(off, 8) {
            // SAFETY: in bounds; unaligned read of plain bytes.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), b.as_mut_ptr(), 8) };
        }
        u64::from_ne_bytes(b)
    }

    pub fn read_u32(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        if self.in_bounds(off, 4) {
            // SAFETY: in bounds; unaligned read of plain bytes.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), b.as_mut_ptr(), 4) };
        }
        u32::from_ne_bytes(b)
    }

    pub fn read_u16(&self, off: usize) -> u16 {
        let mut b = [0u8; 2];
        if self.in_bounds(off, 2) {
            // SAFETY: in bounds; unaligned read of plain bytes.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), b.as_mut_ptr(), 2) };
        }
        u16::from_ne_bytes(b)
    }

    pub fn write_u64(&self, off: usize, v: u64) {
        self.copy_in(off, &v.to_ne_bytes());
    }

    pub fn write_u32(&self, off: usize, v: u32) {
        self.copy_in(off, &v.to_ne_bytes());
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: the area was mapped by us with this length, and no
        // reference into it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

// ---------------------------------------------------------------- AF_PACKET

/// An AF_PACKET raw socket, no protocol yet (nothing is queued to it
/// before [`bind_packet`]).
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments.
    own(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
}

/// Binds a packet socket to `ifindex`; `proto` 0 receives nothing (a
/// transmit-only socket), `ETH_P_ALL` receives everything.
pub fn bind_packet(fd: &OwnedFd, ifindex: u32, proto: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data.
    let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto.to_be();
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: the address is a local sockaddr_ll of the size passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Puts the device in promiscuous mode for as long as `fd` is open.
pub fn packet_promisc(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: packet_mreq is plain old data.
    let mut mr: libc::packet_mreq = unsafe { zeroed() };
    mr.mr_ifindex = ifindex as libc::c_int;
    mr.mr_type = libc::PACKET_MR_PROMISC as libc::c_ushort;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)
}

/// `TPACKET_V3` of `enum tpacket_versions`.
const TPACKET_V3: libc::c_int = 2;

/// Sets up a TPACKET_V3 receive ring of `blocks` blocks of `block`
/// bytes, retired after `tov_ms` when not full, and maps it.
pub fn packet_rx_ring(fd: &OwnedFd, block: u32, blocks: u32, tov_ms: u32) -> io::Result<Mmap> {
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)?;
    // SAFETY: tpacket_req3 is plain old data.
    let mut req: libc::tpacket_req3 = unsafe { zeroed() };
    req.tp_block_size = block;
    req.tp_block_nr = blocks;
    req.tp_frame_size = super::FRAME_ROOM as u32;
    req.tp_frame_nr = block / super::FRAME_ROOM as u32 * blocks;
    req.tp_retire_blk_tov = tov_ms;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
    Mmap::socket(fd, block as usize * blocks as usize, 0)
}

/// Joins (with `id` `None`: creates) a hash fanout group that ignores
/// outgoing frames (the group's hook replaces the socket's, so
/// `PACKET_IGNORE_OUTGOING` must be asked of the group too); its id.
pub fn packet_fanout(fd: &OwnedFd, id: Option<u16>) -> io::Result<u16> {
    const FLAG_UNIQUEID: u32 = 0x2000;
    const FLAG_IGNORE_OUTGOING: u32 = 0x4000;
    let (gid, flags) = match id {
        Some(id) => (id as u32, FLAG_IGNORE_OUTGOING),
        None => (0, FLAG_UNIQUEID | FLAG_IGNORE_OUTGOING),
    };
    let arg: u32 = gid | ((libc::PACKET_FANOUT_HASH | flags) << 16);
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)?;
    let got: u32 = getsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT)?;
    Ok((got & 0xffff) as u16)
}

/// Kernel drop counters of a packet socket (reading resets them).
pub fn packet_drops(fd: &OwnedFd) -> io::Result<u64> {
    let st: libc::tpacket_stats_v3 = getsockopt(fd, libc::SOL_PACKET, libc::PACKET_STATISTICS)?;
    Ok(st.tp_drops as u64)
}

/// Sends `frames` with one `sendmmsg` (at most [`super::BATCH`]);
/// returns how many the kernel took (0 when its queue is full).
pub fn send_frames(fd: &OwnedFd, frames: &[OutFrame<'_>]) -> io::Result<usize> {
    let n = frames.len().min(super::BATCH);
    if n == 0 {
        return Ok(0);
    }
    // SAFETY: iovec and mmsghdr are plain old data; all-zero is valid.
    let mut iov: [libc::iovec; super::BATCH] = unsafe { zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; super::BATCH] = unsafe { zeroed() };
    for i in 0..n {
        iov[i].iov_base = frames[i].data.as_ptr() as *mut libc::c_void;
        iov[i].iov_len = frames[i].data.len();
    }
    for (i, m) in msgs.iter_mut().enumerate().take(n) {
        m.msg_hdr.msg_iov = &mut iov[i];
        m.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at the
    // frames' live slices; the kernel only reads them.
    let rc = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if rc < 0 {
        let e = last();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(0),
            _ => Err(e),
        };
    }
    Ok(rc as usize)
}

// ---------------------------------------------------------------- TAP

/// Opens one queue of TAP device `name` (created by the first call),
/// nonblocking, `IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE`.
pub fn tap_queue(name: &str) -> io::Result<OwnedFd> {
    let fd = own(
        // SAFETY: the path is a NUL-terminated literal.
        unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        },
    )?;
    let mut req = ifreq_for(name)?;
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_MULTI_QUEUE) as _;
    // SAFETY: TUNSETIFF reads ifr_name and ifr_flags from `req`.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF as _, &mut req) })?;
    Ok(fd)
}

/// Reads one frame into `buf` (its capacity bounds the read; no
/// allocation). `Ok(None)` when none is waiting.
pub fn read_frame(fd: &OwnedFd, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
    buf.clear();
    let cap = buf.capacity();
    // SAFETY: the kernel writes at most `cap` bytes into the vector's
    // spare capacity; the length is set to what it wrote.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), cap) };
    if n < 0 {
        let e = last();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    let n = (n as usize).min(cap);
    // SAFETY: the first `n` bytes were written by read().
    unsafe { buf.set_len(n) };
    Ok(Some(n))
}

/// Writes one frame; `Ok(false)` when the device cannot take it now.
pub fn write_frame(fd: &OwnedFd, frame: &[u8]) -> io::Result<bool> {
    // SAFETY: the buffer is a live slice of the length passed.
    let n = unsafe { libc::write(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
    if n < 0 {
        let e = last();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(false),
            _ => Err(e),
        };
    }
    Ok(true)
}

/// A netlink route socket in the calling thread's namespace (kept to
/// delete a device later from any thread).
pub fn netlink_route() -> io::Result<OwnedFd> {
    own(
        // SAFETY: plain syscall with constant arguments.
        unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        },
    )
}

/// Deletes the device `ifindex` in `nl`'s namespace (RTM_DELLINK).
pub fn delete_link(nl: &OwnedFd, ifindex: u32) -> io::Result<()> {
    #[repr(C)]
    struct Req {
        hdr: libc::nlmsghdr,
        info: libc::ifinfomsg,
    }
    // SAFETY: both headers are plain old data.
    let mut req: Req = unsafe { zeroed() };
    req.hdr.nlmsg_len = size_of::<Req>() as u32;
    req.hdr.nlmsg_type = libc::RTM_DELLINK;
    req.hdr.nlmsg_flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    req.hdr.nlmsg_seq = 1;
    req.info.ifi_family = libc::AF_UNSPEC as u8;
    req.info.ifi_index = ifindex as libc::c_int;
    // SAFETY: a local request of the size passed; the kernel address
    // is the default (pid 0).
    let n = unsafe {
        libc::send(
            nl.as_raw_fd(),
            (&req as *const Req).cast(),
            size_of::<Req>(),
            0,
        )
    };
    if n < 0 {
        return Err(last());
    }
    let mut buf = [0u8; 1024];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::recv(nl.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(last());
    }
    // An ack is an NLMSG_ERROR whose error field (after the 16-byte
    // header) is 0 or -errno.
    let n = n as usize;
    if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == libc::NLMSG_ERROR as u16 {
        let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
        if err < 0 {
            return Err(io::Error::from_raw_os_error(-err));
        }
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "no netlink acknowledgement",
    ))
}

// ---------------------------------------------------------------- AF_XDP

/// An AF_XDP ring: producer/consumer words and descriptors in one
/// mapping. `cached` is this side's index (producer for fill/TX,
/// consumer for RX/completion).
pub struct Ring {
    map: Mmap,
    prod: usize,
    cons: usize,
    flags: usize,
    desc: usize,
    mask: u32,
    size: u32,
    cached: u32,
}

impl Ring {
    fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        entries: u32,
        elem: usize,
        pgoff: libc::off_t,
    ) -> io::Result<Ring> {
        let len = off.desc as usize + entries as usize * elem;
        let map = Mmap::socket(fd, len, pgoff)?;
        let mut ring = Ring {
            map,
            prod: off.producer as usize,
            cons: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            mask: entries - 1,
            size: entries,
            cached: 0,
        };
        ring.cached = if pgoff == 0 || pgoff == libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t
        {
            ring.map.load_u32(ring.cons)
        } else {
            ring.map.load_u32(ring.prod)
        };
        Ok(ring)
    }

    /// Free slots a producer may fill.
    pub fn free(&self) -> u32 {
        let cons = self.map.load_u32(self.cons);
        self.size - self.cached.wrapping_sub(cons)
    }

    /// Entries a consumer may read.
    pub fn ready(&self) -> u32 {
        self.map.load_u32(self.prod).wrapping_sub(self.cached)
    }

    /// Producer: writes an address at slot `cached + i` (fill ring).
    pub fn put_addr(&self, i: u32, addr: u64) {
        let slot = (self.cached.wrapping_add(i) & self.mask) as usize;
        self.map.write_u64(self.desc + slot * 8, addr);
    }

    /// Producer: writes a descriptor at slot `cached + i` (TX ring).
    pub fn put_desc(&self, i: u32, addr: u64, len: u32) {
        let slot = (self.cached.wrapping_add(i) & self.mask) as usize;
        let off = self.desc + slot * 16;
        self.map.write_u64(off, addr);
        self.map.write_u32(off + 8, len);
        self.map.write_u32(off + 12, 0);
    }

    /// Producer: publishes `n` entries.
    pub fn submit(&mut self, n: u32) {
        self.cached = self.cached.wrapping_add(n);
        fence(Ordering::Release);
        self.map.store_u32(self.prod, self.cached);
    }

    /// Consumer: the address at slot `cached + i` (completion ring).
    pub fn addr(&self, i: u32) -> u64 {
        let slot = (self.cached.wrapping_add(i) & self.mask) as usize;
        self.map.read_u64(self.desc + slot * 8)
    }

    /// Consumer: the descriptor at slot `cached + i` (RX ring).
    pub fn desc(&self, i: u32) -> (u64, u32) {
        let slot = (self.cached.wrapping_add(i) & self.mask) as usize;
        let off = self.desc + slot * 16;
        (self.map.read_u64(off), self.map.read_u32(off + 8))
    }

    /// Consumer: gives `n` entries back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.cached = self.cached.wrapping_add(n);
        self.map.store_u32(self.cons, self.cached);
    }

    /// Does the kernel ask to be woken up (`XDP_USE_NEED_WAKEUP`)?
    pub fn needs_wakeup(&self) -> bool {
        self.map.load_u32(self.flags) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// Ring sizes and UMEM layout of one AF_XDP socket.
#[derive(Clone, Copy, Debug)]
pub struct XskConfig {
    pub frames: u32,
    pub frame_size: u32,
    pub fill: u32,
    pub comp: u32,
    pub rx: u32,
    pub tx: u32,
}

/// An AF_XDP socket bound to one queue, with its own UMEM and rings.
pub struct Xsk {
    pub fd: OwnedFd,
    pub umem: Mmap,
    pub fill: Ring,
    pub comp: Ring,
    pub rx: Ring,
    pub tx: Ring,
}

/// Creates an AF_XDP socket on `ifindex` queue `queue` and binds it in
/// zero-copy (`zero_copy`) or copy mode, with `XDP_USE_NEED_WAKEUP`.
pub fn xsk_open(ifindex: u32, queue: u32, cfg: XskConfig, zero_copy: bool) -> io::Result<Xsk> {
    let fd = own(
        // SAFETY: plain syscall with constant arguments.
        unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) },
    )?;
    let umem = Mmap::anon(cfg.frames as usize * cfg.frame_size as usize)?;
    // SAFETY: xdp_umem_reg is plain old data.
    let mut reg: libc::xdp_umem_reg = unsafe { zeroed() };
    reg.addr = umem.ptr as u64;
    reg.len = umem.len as u64;
    reg.chunk_size = cfg.frame_size;
    // The UMEM stays mapped as long as the socket: both live in `Xsk`,
    // and the kernel holds its own pin on the pages.
    setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)?;
    setsockopt(&fd, libc::SOL_XDP, libc::XDP_UMEM_FILL_RING, &cfg.fill)?;
    setsockopt(
        &fd,
        libc::SOL_XDP,
        libc::XDP_UMEM_COMPLETION_RING,
        &cfg.comp,
    )?;
    setsockopt(&fd, libc::SOL_XDP, libc::XDP_RX_RING, &cfg.rx)?;
    setsockopt(&fd, libc::SOL_XDP, libc::XDP_TX_RING, &cfg.tx)?;
    let off: libc::xdp_mmap_offsets = getsockopt(&fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)?;
    let rx = Ring::map(&fd, &off.rx, cfg.rx, 16, 0)?;
    let tx = Ring::map(&fd, &off.tx, cfg.tx, 16, libc::XDP_PGOFF_TX_RING)?;
    let fill = Ring::map(
        &fd,
        &off.fr,
        cfg.fill,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
    )?;
    let comp = Ring::map(
        &fd,
        &off.cr,
        cfg.comp,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
    )?;
    // SAFETY: sockaddr_xdp is plain old data.
    let mut sxdp: libc::sockaddr_xdp = unsafe { zeroed() };
    sxdp.sxdp_family = libc::AF_XDP as u16;
    sxdp.sxdp_ifindex = ifindex;
    sxdp.sxdp_queue_id = queue;
    sxdp.sxdp_flags = libc::XDP_USE_NEED_WAKEUP
        | if zero_copy {
            libc::XDP_ZEROCOPY
        } else {
            libc::XDP_COPY
        };
    // SAFETY: the address is a local sockaddr_xdp of the size passed.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sxdp as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })?;
    Ok(Xsk {
        fd,
        umem,
        fill,
        comp,
        rx,
        tx,
    })
}

/// Kicks the kernel to transmit what is on an AF_XDP TX ring (copy
/// mode sends up to 32 frames per kick). `Ok(false)` when it is busy.
pub fn xsk_kick(fd: &OwnedFd) -> io::Result<bool> {
    // SAFETY: a zero-length send with no buffer and no address.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        let e = last();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {
                Ok(false)
            }
            _ => Err(e),
        };
    }
    Ok(true)
}

/// Wakes the kernel to refill from the fill ring (need-wakeup mode).
pub fn xsk_wake_rx(fd: &OwnedFd) {
    // SAFETY: a zero-length, nonblocking receive with no buffer.
    unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// Drop counters of an AF_XDP socket: (rx dropped incl. RX ring full,
/// invalid TX descriptors).
pub fn xsk_drops(fd: &OwnedFd) -> io::Result<(u64, u64)> {
    let st: libc::xdp_statistics = getsockopt(fd, libc::SOL_XDP, libc::XDP_STATISTICS)?;
    Ok((st.rx_dropped + st.rx_ring_full, st.tx_invalid_descs))
}

/// Creates an XSKMAP with `entries` slots.
pub fn xskmap_create(entries: u32) -> io::Result<OwnedFd> {
    // SAFETY: the name is a NUL-terminated literal; no options.
    let rc = unsafe {
        libbpf_sys::bpf_map_create(
            libbpf_sys::BPF_MAP_TYPE_XSKMAP,
            c"nfkit_xsks".as_ptr(),
            4,
            4,
            entries,
            std::ptr::null(),
        )
    };
    own(check_bpf(rc)?)
}

/// Puts socket `xsk` in slot `queue` of XSKMAP `map`.
pub fn xskmap_set(map: &OwnedFd, queue: u32, xsk: &OwnedFd) -> io::Result<()> {
    let key = queue;
    let val = xsk.as_raw_fd() as u32;
    // SAFETY: key and value are local u32s, the map's key and value size.
    let rc = unsafe {
        libbpf_sys::bpf_map_update_elem(
            map.as_raw_fd(),
            (&key as *const u32).cast(),
            (&val as *const u32).cast(),
            0,
        )
    };
    check_bpf(rc)?;
    Ok(())
}

/// Loads the redirect program: `return bpf_redirect_map(&xsks,
/// ctx->rx_queue_index, XDP_PASS)` (frames of a queue without a socket
/// go on to the host stack).
pub fn xsk_redirect_prog(map: &OwnedFd) -> io::Result<OwnedFd> {
    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
        code as u64
            | ((dst | (src << 4)) as u64) << 8
            | (off as u16 as u64) << 16
            | (imm as u32 as u64) << 32
    }
    let insns: [u64; 6] = [
        insn(0x61, 2, 1, 16, 0), // r2 = *(u32 *)(r1 + 16)  rx_queue_index
        insn(0x18, 1, 1, 0, map.as_raw_fd()), // r1 = map (pseudo map fd)
        0,
        insn(0xb7, 3, 0, 0, 2),  // r3 = XDP_PASS
        insn(0x85, 0, 0, 0, 51), // call bpf_redirect_map
        insn(0x95, 0, 0, 0, 0),  // exit
    ];
    // SAFETY: bpf_prog_load_opts is plain old data, valid all-zero.
    let mut opts: libbpf_sys::bpf_prog_load_opts = unsafe { zeroed() };
    opts.sz = size_of::<libbpf_sys::bpf_prog_load_opts>() as _;
    opts.expected_attach_type = libbpf_sys::BPF_XDP;
    // SAFETY: `insns` has the layout of 6 `bpf_insn`s (8 bytes each,
    // little-endian fields as encoded above); strings are literals.
    let rc = unsafe {
        libbpf_sys::bpf_prog_load(
            libbpf_sys::BPF_PROG_TYPE_XDP,
            c"nfkit_xsk_redir".as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr().cast(),
            insns.len() as _,
            &mut opts,
        )
    };
    own(check_bpf(rc)?)
}

/// Attaches `prog` at `ifindex`'s XDP hook through a bpf_link (in the
/// driver with `native`, else in the generic path): closing the link
/// detaches it.
pub fn xdp_link(prog: &OwnedFd, ifindex: u32, native: bool) -> io::Result<OwnedFd> {
    const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
    const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
    // SAFETY: bpf_link_create_opts is plain old data, valid all-zero.
    let mut opts: libbpf_sys::bpf_link_create_opts = unsafe { zeroed() };
    opts.sz = size_of::<libbpf_sys::bpf_link_create_opts>() as _;
    opts.flags = if native {
        XDP_FLAGS_DRV_MODE
    } else {
        XDP_FLAGS_SKB_MODE
    };
    // SAFETY: plain fds and a local options struct.
    let rc = unsafe {
        libbpf_sys::bpf_link_create(
            prog.as_raw_fd(),
            ifindex as libc::c_int,
            libbpf_sys::BPF_XDP,
            &opts,
        )
    };
    own(check_bpf(rc)?)
}

/// Detaches link `link` now (`BPF_LINK_DETACH`), whoever else still
/// holds its file (a child process between fork and exec does, for a
/// moment, and closing our descriptor would then detach only later).
pub fn link_detach(link: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain call with a descriptor we own.
    check_bpf(unsafe { libbpf_sys::bpf_link_detach(link.as_raw_fd()) })?;
    Ok(())
}

/// The XDP program attached to `ifindex` in any mode: its id and name.
pub fn xdp_attached(ifindex: u32) -> io::Result<Option<(u32, String)>> {
    const XDP_FLAGS_SKB_MODE: libc::c_int = 1 << 1;
    const XDP_FLAGS_DRV_MODE: libc::c_int = 1 << 2;
    const XDP_FLAGS_HW_MODE: libc::c_int = 1 << 3;
    for flags in [XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, XDP_FLAGS_HW_MODE] {
        let mut id: u32 = 0;
        // SAFETY: `id` is a local u32 the call writes.
        check_bpf(unsafe { libbpf_sys::bpf_xdp_query_id(ifindex as libc::c_int, flags, &mut id) })?;
        if id != 0 {
            return Ok(Some((id, prog_name(id).unwrap_or_default())));
        }
    }
    Ok(None)
}

/// The name of BPF program `id`.
pub fn prog_name(id: u32) -> io::Result<String> {
    // SAFETY: plain call with an integer.
    let fd = own(check_bpf(unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) })?)?;
    // SAFETY: bpf_prog_info is plain old data, valid all-zero.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { zeroed() };
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: the kernel writes at most `len` bytes into `info`.
    check_bpf(unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) })?;
    let name: Vec<u8> = info
        .name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&name).into_owned())
}
