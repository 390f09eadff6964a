//! AF_XDP ports: one XDP socket per device RX queue, each with its own
//! UMEM (4096 frames of 2 KiB: half for receiving, half for sending) and
//! rings, bound in zero-copy mode where the driver offers it, else in
//! copy mode (veth). The switch loads its own XDP program
//! (`bpf_redirect_map(xsks, rx_queue_index, XDP_PASS)` over an XSKMAP)
//! and attaches it through a bpf_link, native mode first, generic mode
//! where the driver has none; closing the port (or dropping it, or the
//! process ending) closes the link and so removes the program. A device
//! that already has an XDP program is refused, naming that program.
//!
//! Receive: worker `r` of `R = min(queues, workers)` receive queues
//! serves sockets `r, r + R, ...`; frames are copied out of the UMEM into
//! the batch's buffers and their UMEM frames go straight back to the
//! fill ring, which is kept full. Transmit: worker `w < queues` sends on
//! socket `w`'s TX ring (its TX frames and completion ring are that
//! worker's alone, the RX side uses other frames and rings, so no lock);
//! workers beyond the queue count send through their own AF_PACKET
//! socket ([`PacketTx`]): several sockets on one queue would need a
//! shared UMEM, whose single completion ring would need a lock.
//!
//! The rings are driven directly (in `sys`, libc's `if_xdp.h` types)
//! rather than through a crate: `xsk-rs` 0.11 goes through `libxdp-sys`,
//! which pins `libbpf-sys =1.5.1` (and `afxdp` 0.4 pins 0.3); cargo
//! allows one crate linking `bpf`, so either would pull the whole
//! workspace off libbpf 1.7, and `libxdp-sys` builds xdp-tools with its
//! own configure/make (plus m4 and bindgen) inside the cargo registry.

use super::afpacket::PacketTx;
use super::open::os_err;
use super::sys::{self, Mmap, Ring, XskConfig};
use super::BATCH;
use super::{Batch, OpenPort, OutFrame, PortError, PortSpec, PortStats, RxQueue, TxQueue};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// UMEM frame (chunk) size; frames longer than this are dropped.
const FRAME: u32 = 2048;
/// Frames per socket for receiving (all on the fill ring) and sending.
const RX_FRAMES: u32 = 2048;
const TX_FRAMES: u32 = 2048;
const CONFIG: XskConfig = XskConfig {
    frames: RX_FRAMES + TX_FRAMES,
    frame_size: FRAME,
    fill: RX_FRAMES,
    comp: TX_FRAMES,
    rx: RX_FRAMES,
    tx: TX_FRAMES,
};
/// Copy mode transmits at most this many frames per kick.
const KICK_BUDGET: usize = 32;

/// How an AF_XDP port was set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpMode {
    /// Sockets bound in zero-copy mode (else copy mode).
    pub zero_copy: bool,
    /// Program attached in the driver (else in the generic path).
    pub native: bool,
    /// Device RX queues, one socket each.
    pub queues: u32,
}

/// The program's bpf_link: detached when this is dropped (at close, on
/// drop of the port, on a failed open), not only when the last holder
/// of the link's file closes it.
struct Attached(OwnedFd);

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = sys::link_detach(&self.0);
    }
}

/// What both halves of a socket share: the socket and its UMEM.
struct Shared {
    fd: OwnedFd,
    umem: Mmap,
}

/// The receive half of one socket: fill and RX rings, RX frames.
struct SockRx {
    shared: Arc<Shared>,
    fill: Ring,
    rx: Ring,
}

impl SockRx {
    /// Puts every RX frame on the fill ring.
    fn prime(&mut self) {
        let n = self.fill.free().min(RX_FRAMES);
        for i in 0..n {
            self.fill.put_addr(i, u64::from(i) * u64::from(FRAME));
        }
        self.fill.submit(n);
    }

    /// Moves up to the batch's room of frames into `batch`.
    fn take(&mut self, batch: &mut Batch, now: u64, oversize: &AtomicU64) {
        let n = self.rx.ready().min((BATCH - batch.len) as u32);
        if n == 0 {
            return;
        }
        for i in 0..n {
            let (addr, len) = self.rx.desc(i);
            let j = batch.len;
            if self
                .shared
                .umem
                .copy_out(addr as usize, len as usize, &mut batch.frames[j])
            {
                batch.arrival_ns[j] = now;
                batch.len += 1;
            } else {
                oversize.fetch_add(1, Ordering::Relaxed);
            }
            // Back to the kernel at once: the fill ring holds every RX
            // frame we do not hold, so it always has room for these.
            self.fill.put_addr(i, addr & !u64::from(FRAME - 1));
        }
        self.rx.release(n);
        self.fill.submit(n);
        if self.fill.needs_wakeup() {
            sys::xsk_wake_rx(&self.shared.fd);
        }
    }
}

/// One worker's receive queue: one or more sockets.
pub struct XdpRx {
    port: String,
    socks: Vec<SockRx>,
    fds: Vec<RawFd>,
    next: usize,
    bad: Arc<AtomicU64>,
}

impl XdpRx {
    fn take(&mut self, batch: &mut Batch) {
        let now = sys::now_ns();
        let n = self.socks.len();
        for k in 0..n {
            if batch.len == BATCH {
                break;
            }
            let s = (self.next + k) % n;
            self.socks[s].take(batch, now, &self.bad);
        }
        self.next = (self.next + 1) % n.max(1);
    }
}

impl RxQueue for XdpRx {
    fn recv(&mut self, batch: &mut Batch, timeout: Duration) -> Result<usize, PortError> {
        batch.len = 0;
        self.take(batch);
        if batch.len == 0 && !timeout.is_zero() {
            sys::poll_in(&self.fds, timeout)
                .map_err(|e| os_err(&self.port, "waiting for frames", e))?;
            self.take(batch);
        }
        Ok(batch.len)
    }

    fn wait_fds(&self, out: &mut Vec<RawFd>) -> bool {
        out.extend_from_slice(&self.fds);
        true
    }
}

/// One worker's transmit queue on its own socket's TX ring.
pub struct XdpTx {
    port: String,
    shared: Arc<Shared>,
    tx: Ring,
    comp: Ring,
    /// TX frames (UMEM offsets) not on a ring.
    free: Vec<u64>,
    dropped: Arc<AtomicU64>,
    zero_copy: bool,
}

impl XdpTx {
    fn reap(&mut self) {
        let n = self.comp.ready();
        for i in 0..n {
            if self.free.len() < self.free.capacity() {
                self.free.push(self.comp.addr(i) & !u64::from(FRAME - 1));
            }
        }
        self.comp.release(n);
    }

    /// Kicks until the kernel has taken `queued` frames or says busy.
    fn kick(&mut self, queued: usize) -> Result<(), PortError> {
        for _ in 0..queued / KICK_BUDGET + 2 {
            match sys::xsk_kick(&self.shared.fd) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return Err(os_err(&self.port, "kicking the TX ring", e)),
            }
        }
        Ok(())
    }
}

impl TxQueue for XdpTx {
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError> {
        self.reap();
        let room = (self.tx.free() as usize).min(self.free.len());
        let mut queued = 0u32;
        let mut taken = 0;
        for f in frames {
            if f.data.len() > FRAME as usize {
                // Taken and dropped: it can never fit a UMEM frame.
                self.dropped.fetch_add(1, Ordering::Relaxed);
                taken += 1;
                continue;
            }
            if queued as usize == room {
                break;
            }
            let Some(addr) = self.free.pop() else { break };
            self.shared.umem.copy_in(addr as usize, f.data);
            self.tx.put_desc(queued, addr, f.data.len() as u32);
            queued += 1;
            taken += 1;
        }
        self.tx.submit(queued);
        // Copy mode transmits only from a kick; zero-copy drivers ask
        // for one when they need it.
        if queued > 0 && (!self.zero_copy || self.tx.needs_wakeup()) {
            self.kick(queued as usize)?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.reap();
        let outstanding = TX_FRAMES as usize - self.free.len();
        if outstanding > 0 {
            self.kick(outstanding)?;
        }
        Ok(())
    }
}

/// The device's RX queue count: ethtool's channel count (asked in the
/// thread's namespace), else `/sys/class/net/DEV/queues/rx-*` when that
/// entry has our ifindex (sysfs shows the namespace it was mounted in,
/// not the thread's), else 1.
fn rx_queues(dev: &str, ifindex: u32) -> u32 {
    let from_sysfs = || {
        let base = std::path::Path::new("/sys/class/net").join(dev);
        let same = std::fs::read_to_string(base.join("ifindex"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            == Some(ifindex);
        if !same {
            return 0;
        }
        std::fs::read_dir(base.join("queues"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count() as u32
            })
            .unwrap_or(0)
    };
    let n = match sys::ethtool_rx_queues(dev) {
        Ok(n) if n > 0 => n,
        _ => from_sysfs(),
    };
    n.clamp(1, BATCH as u32)
}

/// Binds a socket to queue `q`. The kernel releases a closed socket's
/// hold on its queue shortly after the close, so a port reopened at
/// once may find the queue busy for a moment: retried for up to 2 s.
fn bind(ifindex: u32, q: u32, zero_copy: bool) -> std::io::Result<sys::Xsk> {
    let t0 = std::time::Instant::now();
    loop {
        match sys::xsk_open(ifindex, q, CONFIG, zero_copy) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && t0.elapsed() < Duration::from_secs(2) =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// Opens `dev` for `workers` workers (see the module doc).
pub fn open(spec: &PortSpec, dev: &str, workers: usize) -> Result<OpenPort, PortError> {
    open_mode(spec, dev, workers).map(|(p, _)| p)
}

/// [`open`], also telling how the port was set up.
pub fn open_mode(
    spec: &PortSpec,
    dev: &str,
    workers: usize,
) -> Result<(OpenPort, XdpMode), PortError> {
    let port = spec.to_string();
    let ifindex = sys::if_index(dev).map_err(|e| os_err(&port, "finding the interface", e))?;
    let refuse = |id: u32, name: &str| PortError::Other {
        port: port.clone(),
        why: format!(
            "{dev} already has an XDP program `{name}` (id {id}); \
             the switch does not replace it"
        ),
    };
    if let Some((id, name)) =
        sys::xdp_attached(ifindex).map_err(|e| os_err(&port, "querying the XDP hook", e))?
    {
        return Err(refuse(id, &name));
    }
    let queues = rx_queues(dev, ifindex);
    let map = sys::xskmap_create(queues).map_err(|e| os_err(&port, "creating the XSKMAP", e))?;
    let prog = sys::xsk_redirect_prog(&map)
        .map_err(|e| os_err(&port, "loading the XDP redirect program", e))?;

    // Sockets: zero-copy when the first one binds so, else copy mode.
    let mut zero_copy = true;
    let mut socks = Vec::with_capacity(queues as usize);
    for q in 0..queues {
        let xsk = match bind(ifindex, q, zero_copy) {
            Ok(x) => x,
            Err(_) if zero_copy && q == 0 => {
                zero_copy = false;
                bind(ifindex, q, false)
            }
            .map_err(|e| os_err(&port, &format!("binding an AF_XDP socket to queue {q}"), e))?,
            Err(e) => {
                return Err(os_err(
                    &port,
                    &format!("binding an AF_XDP socket to queue {q}"),
                    e,
                ))
            }
        };
        sys::xskmap_set(&map, q, &xsk.fd)
            .map_err(|e| os_err(&port, "putting a socket in the XSKMAP", e))?;
        let shared = Arc::new(Shared {
            fd: xsk.fd,
            umem: xsk.umem,
        });
        let mut rx = SockRx {
            shared: shared.clone(),
            fill: xsk.fill,
            rx: xsk.rx,
        };
        rx.prime();
        let mut free = Vec::with_capacity(TX_FRAMES as usize);
        free.extend((RX_FRAMES..RX_FRAMES + TX_FRAMES).map(|i| u64::from(i) * u64::from(FRAME)));
        socks.push((rx, xsk.tx, xsk.comp, free));
    }

    let mut native = true;
    let link = Attached(match sys::xdp_link(&prog, ifindex, true) {
        Ok(l) => l,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => {
            native = false;
            sys::xdp_link(&prog, ifindex, false)
                .map_err(|e| os_err(&port, "attaching the XDP program (generic mode)", e))?
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST)) => {
            // Someone attached a program since we looked.
            return Err(match sys::xdp_attached(ifindex) {
                Ok(Some((id, name))) => refuse(id, &name),
                _ => os_err(&port, "attaching the XDP program", e),
            });
        }
        Err(e) => return Err(os_err(&port, "attaching the XDP program", e)),
    });

    let bad = Arc::new(AtomicU64::new(0));
    let tx_dropped = Arc::new(AtomicU64::new(0));
    let n_rx = (queues as usize).min(workers);
    let mut rxq: Vec<XdpRx> = (0..n_rx)
        .map(|_| XdpRx {
            port: port.clone(),
            socks: Vec::new(),
            fds: Vec::new(),
            next: 0,
            bad: bad.clone(),
        })
        .collect();
    let mut fds = Vec::with_capacity(socks.len());
    let mut tx: Vec<Box<dyn TxQueue>> = Vec::with_capacity(workers);
    for (q, (rx, txr, comp, free)) in socks.into_iter().enumerate() {
        fds.push(rx.shared.clone());
        if q < workers {
            tx.push(Box::new(XdpTx {
                port: port.clone(),
                shared: rx.shared.clone(),
                tx: txr,
                comp,
                free,
                dropped: tx_dropped.clone(),
                zero_copy,
            }));
        }
        let r = &mut rxq[q % n_rx];
        r.fds.push(rx.shared.fd.as_raw_fd());
        r.socks.push(rx);
    }
    while tx.len() < workers {
        tx.push(Box::new(PacketTx::open(
            &port,
            ifindex,
            tx_dropped.clone(),
        )?));
    }
    let rx = rxq
        .into_iter()
        .map(|r| Box::new(r) as Box<dyn RxQueue>)
        .collect();

    let close = move || -> Result<PortStats, PortError> {
        // Detaching the link removes the program; the XSKMAP goes with it.
        drop(link);
        drop(prog);
        drop(map);
        let mut stats = PortStats {
            rx_dropped: bad.load(Ordering::Relaxed),
            tx_dropped: tx_dropped.load(Ordering::Relaxed),
        };
        for s in &fds {
            if let Ok((rx, tx)) = sys::xsk_drops(&s.fd) {
                stats.rx_dropped += rx;
                stats.tx_dropped += tx;
            }
        }
        Ok(stats)
    };
    let mode = XdpMode {
        zero_copy,
        native,
        queues,
    };
    Ok((
        OpenPort {
            spec: spec.clone(),
            ifindex,
            rx,
            tx,
            close: Some(Box::new(close)),
        },
        mode,
    ))
}
