//! The host port: a TAP device the switch creates (`IFF_TAP |
//! IFF_NO_PI | IFF_MULTI_QUEUE`, one queue per worker). What the switch
//! transmits on it enters the host stack (PASS delivers to the host);
//! what the host sends out of it is received by the switch. Each
//! worker reads and writes its own queue's descriptor (nonblocking), so
//! no lock is shared. The device is deleted at close (and on drop).

use super::open::os_err;
use super::sys;
use super::BATCH;
use super::{Batch, OpenPort, OutFrame, PortError, PortSpec, PortStats, RxQueue, TxQueue};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One worker's TAP queue, read side.
pub struct TapRx {
    port: String,
    fd: Arc<OwnedFd>,
}

impl TapRx {
    fn take(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        let now = sys::now_ns();
        while batch.len < BATCH {
            let i = batch.len;
            match sys::read_frame(&self.fd, &mut batch.frames[i]) {
                Ok(Some(_)) => {
                    batch.arrival_ns[i] = now;
                    batch.len += 1;
                }
                Ok(None) => break,
                Err(e) => return Err(os_err(&self.port, "reading the TAP device", e)),
            }
        }
        Ok(())
    }
}

impl RxQueue for TapRx {
    fn recv(&mut self, batch: &mut Batch, timeout: Duration) -> Result<usize, PortError> {
        batch.len = 0;
        self.take(batch)?;
        if batch.len == 0 && !timeout.is_zero() {
            sys::poll_in(&[self.fd.as_raw_fd()], timeout)
                .map_err(|e| os_err(&self.port, "waiting for frames", e))?;
            self.take(batch)?;
        }
        Ok(batch.len)
    }

    fn wait_fds(&self, out: &mut Vec<std::os::fd::RawFd>) -> bool {
        out.push(self.fd.as_raw_fd());
        true
    }
}

/// One worker's TAP queue, write side (one `write` per frame).
pub struct TapTx {
    port: String,
    fd: Arc<OwnedFd>,
    dropped: Arc<AtomicU64>,
}

impl TxQueue for TapTx {
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError> {
        for (i, f) in frames.iter().enumerate() {
            match sys::write_frame(&self.fd, f.data) {
                Ok(true) => {}
                Ok(false) => return Ok(i),
                // A frame the device refuses is dropped and counted.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EMSGSIZE)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(os_err(&self.port, "writing to the TAP device", e)),
            }
        }
        Ok(frames.len())
    }
}

/// Creates TAP device `name` with one queue per worker and brings it
/// up. A device of that name that already exists is an error (the
/// switch deletes its TAP at close, so it must be its own).
pub fn open(spec: &PortSpec, name: &str, workers: usize) -> Result<OpenPort, PortError> {
    let port = spec.to_string();
    if sys::if_index(name).is_ok() {
        return Err(PortError::Other {
            port,
            why: format!("a device `{name}` already exists; a TAP port creates its own"),
        });
    }
    let nl = sys::netlink_route().map_err(|e| os_err(&port, "opening a netlink socket", e))?;
    // The device lives while one of its queues is open: an error below
    // drops them and so removes it.
    let mut fds = Vec::with_capacity(workers);
    for _ in 0..workers {
        let fd = sys::tap_queue(name).map_err(|e| os_err(&port, "creating the TAP device", e))?;
        fds.push(Arc::new(fd));
    }
    let ifindex = sys::if_index(name).map_err(|e| os_err(&port, "finding the TAP device", e))?;
    sys::set_up(name).map_err(|e| os_err(&port, "bringing the TAP device up", e))?;
    let dropped = Arc::new(AtomicU64::new(0));
    let rx = fds
        .iter()
        .map(|fd| {
            Box::new(TapRx {
                port: port.clone(),
                fd: fd.clone(),
            }) as Box<dyn RxQueue>
        })
        .collect();
    let tx = fds
        .into_iter()
        .map(|fd| {
            Box::new(TapTx {
                port: port.clone(),
                fd,
                dropped: dropped.clone(),
            }) as Box<dyn TxQueue>
        })
        .collect();
    let close_port = port.clone();
    let close = move || -> Result<PortStats, PortError> {
        match sys::delete_link(&nl, ifindex) {
            Ok(()) => {}
            // Already gone (deleted by someone else): nothing to undo.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
            Err(e) => return Err(os_err(&close_port, "deleting the TAP device", e)),
        }
        Ok(PortStats {
            rx_dropped: 0,
            tx_dropped: dropped.load(Ordering::Relaxed),
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
