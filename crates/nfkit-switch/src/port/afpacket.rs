//! AF_PACKET ports, the fallback for any interface: per worker one
//! receive socket with a TPACKET_V3 ring (block-based; the sockets form
//! one `PACKET_FANOUT_HASH` group, so each flow goes to one worker) and
//! one transmit socket sending with `sendmmsg` (no TX ring: a batch is
//! one system call, and a socket per worker needs no lock).
//!
//! Receive sockets ignore outgoing frames (`PACKET_IGNORE_OUTGOING`, asked
//! of the fanout group too, whose hook stands in for the sockets'), so
//! the port never sees what the switch itself sent; the device is in
//! promiscuous mode while they are open. Frames longer than
//! [`FRAME_ROOM`] are dropped and counted in `rx_dropped`, with the
//! kernel's own ring drops.

use super::open::os_err;
use super::sys::{self, Mmap};
use super::{Batch, OpenPort, OutFrame, PortError, PortSpec, PortStats, RxQueue, TxQueue};
use super::{BATCH, FRAME_ROOM};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Ring block size and count per receive socket (4 MiB each).
const BLOCK: u32 = 1 << 15;
/// Many small blocks: at low rates each block is retired after
/// [`RETIRE_MS`] holding a few frames, so the ring's tolerance of a worker
/// that is not scheduled is about BLOCKS ms (128 ms); at high rates the
/// same 4 MiB.
const BLOCKS: u32 = 128;
/// A block not yet full is handed over after this long (ms): the
/// latency bound at low rates.
const RETIRE_MS: u32 = 1;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_KERNEL: u32 = 0;

/// Offsets in `tpacket_block_desc` and `tpacket3_hdr`.
const BLK_STATUS: usize = 8;
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST: usize = 16;
const PKT_NEXT: usize = 0;
const PKT_SNAPLEN: usize = 12;
const PKT_MAC: usize = 24;

/// One worker's receive socket and its ring.
pub struct PacketRx {
    port: String,
    fd: Arc<OwnedFd>,
    ring: Mmap,
    /// The block being read, the offset of its next packet and how many
    /// packets are left in it (0: the block is not ours yet).
    block: u32,
    off: usize,
    left: u32,
    oversize: Arc<AtomicU64>,
}

impl PacketRx {
    fn take(&mut self, batch: &mut Batch) {
        let now = sys::now_ns();
        while batch.len < BATCH {
            let base = self.block as usize * BLOCK as usize;
            if self.left == 0 {
                if self.ring.load_u32(base + BLK_STATUS) & TP_STATUS_USER == 0 {
                    return;
                }
                self.left = self.ring.read_u32(base + BLK_NUM_PKTS);
                self.off = self.ring.read_u32(base + BLK_FIRST) as usize;
                if self.left == 0 {
                    self.next_block(base);
                    continue;
                }
            }
            let pkt = base + self.off;
            let len = self.ring.read_u32(pkt + PKT_SNAPLEN) as usize;
            let mac = self.ring.read_u16(pkt + PKT_MAC) as usize;
            let i = batch.len;
            if len <= FRAME_ROOM && self.ring.copy_out(pkt + mac, len, &mut batch.frames[i]) {
                batch.arrival_ns[i] = now;
                batch.len += 1;
            } else {
                self.oversize.fetch_add(1, Ordering::Relaxed);
            }
            self.off += self.ring.read_u32(pkt + PKT_NEXT) as usize;
            self.left -= 1;
            if self.left == 0 {
                self.next_block(base);
            }
        }
    }

    fn next_block(&mut self, base: usize) {
        self.left = 0;
        self.ring.store_u32(base + BLK_STATUS, TP_STATUS_KERNEL);
        self.block = (self.block + 1) % BLOCKS;
    }
}

impl RxQueue for PacketRx {
    fn recv(&mut self, batch: &mut Batch, timeout: Duration) -> Result<usize, PortError> {
        batch.len = 0;
        self.take(batch);
        if batch.len == 0 && !timeout.is_zero() {
            sys::poll_in(&[self.fd.as_raw_fd()], timeout)
                .map_err(|e| os_err(&self.port, "waiting for frames", e))?;
            self.take(batch);
        }
        Ok(batch.len)
    }

    fn wait_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        out.push(self.fd.as_raw_fd());
        true
    }
}

/// One worker's transmit socket (bound with protocol 0: it receives
/// nothing).
pub struct PacketTx {
    port: String,
    fd: OwnedFd,
    dropped: Arc<AtomicU64>,
}

impl PacketTx {
    /// A transmit socket on `ifindex` for port `port`.
    pub fn open(port: &str, ifindex: u32, dropped: Arc<AtomicU64>) -> Result<PacketTx, PortError> {
        let fd = sys::packet_socket().map_err(|e| os_err(port, "opening a packet socket", e))?;
        sys::bind_packet(&fd, ifindex, 0)
            .map_err(|e| os_err(port, "binding a transmit socket", e))?;
        Ok(PacketTx {
            port: port.to_string(),
            fd,
            dropped,
        })
    }
}

/// How long one batch may wait for a device that refuses frames for now
/// (`EAGAIN`: the socket's send buffer is full; `ENOBUFS`: the veth
/// peer's backlog is full and the frame was dropped) before the rest of
/// the batch is dropped and counted. A worker that waits applies
/// back-pressure to its receive ring (128 ms of tolerance) instead of
/// losing frames to a next hop that is busy for a moment.
const TX_PATIENCE: Duration = Duration::from_millis(20);
/// The pause between attempts while waiting.
const TX_PAUSE: Duration = Duration::from_micros(50);

impl TxQueue for PacketTx {
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError> {
        let mut done = 0;
        let mut since: Option<std::time::Instant> = None;
        while done < frames.len() {
            match sys::send_frames(&self.fd, &frames[done..]) {
                Ok(0)
                    if since.get_or_insert_with(std::time::Instant::now).elapsed()
                        < TX_PATIENCE =>
                {
                    std::thread::sleep(TX_PAUSE);
                }
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    since = None;
                }
                // A frame the device refuses (too long, too short) is
                // dropped and counted; the rest go on.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMSGSIZE | libc::EINVAL)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    done += 1;
                }
                Err(e) => return Err(os_err(&self.port, "sending frames", e)),
            }
        }
        Ok(done)
    }
}

/// Opens `dev` for `workers` workers (in the calling thread's network
/// namespace).
pub fn open(spec: &PortSpec, dev: &str, workers: usize) -> Result<OpenPort, PortError> {
    let port = spec.to_string();
    let ifindex = sys::if_index(dev).map_err(|e| os_err(&port, "finding the interface", e))?;
    let oversize = Arc::new(AtomicU64::new(0));
    let tx_dropped = Arc::new(AtomicU64::new(0));
    let mut fds = Vec::with_capacity(workers);
    let mut rx: Vec<Box<dyn super::RxQueue>> = Vec::with_capacity(workers);
    let mut group = None;
    for _ in 0..workers {
        let fd = sys::packet_socket().map_err(|e| os_err(&port, "opening a packet socket", e))?;
        let ring = sys::packet_rx_ring(&fd, BLOCK, BLOCKS, RETIRE_MS)
            .map_err(|e| os_err(&port, "setting up the TPACKET_V3 ring", e))?;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32)
            .map_err(|e| os_err(&port, "ignoring outgoing frames", e))?;
        sys::bind_packet(&fd, ifindex, libc::ETH_P_ALL as u16)
            .map_err(|e| os_err(&port, "binding a receive socket", e))?;
        sys::packet_promisc(&fd, ifindex)
            .map_err(|e| os_err(&port, "turning promiscuous mode on", e))?;
        let id = sys::packet_fanout(&fd, group)
            .map_err(|e| os_err(&port, "joining the fanout group", e))?;
        group = Some(id);
        let fd = Arc::new(fd);
        fds.push(fd.clone());
        rx.push(Box::new(PacketRx {
            port: port.clone(),
            fd,
            ring,
            block: 0,
            off: 0,
            left: 0,
            oversize: oversize.clone(),
        }));
    }
    let mut tx: Vec<Box<dyn super::TxQueue>> = Vec::with_capacity(workers);
    for _ in 0..workers {
        tx.push(Box::new(PacketTx::open(
            &port,
            ifindex,
            tx_dropped.clone(),
        )?));
    }
    let close = move || -> Result<PortStats, PortError> {
        let mut rx_dropped = oversize.load(Ordering::Relaxed);
        for fd in &fds {
            rx_dropped += sys::packet_drops(fd).unwrap_or(0);
        }
        Ok(PortStats {
            rx_dropped,
            tx_dropped: tx_dropped.load(Ordering::Relaxed),
        })
    };
    Ok(OpenPort {
        spec: spec.clone(),
        ifindex,
        rx,
        tx,
        close: Some(Box::new(close)),
    })
}
