//! Ports: where frames enter and leave the switch.
//!
//! A port is opened for a number of workers and gives each worker its
//! own receive queue(s) and its own transmit queue (the crossbar: every
//! worker can transmit on every port without a lock). A port whose
//! device has fewer receive queues than there are workers gives fewer
//! [`RxQueue`]s; the engine then dispatches that port's frames to the
//! other workers itself.
//!
//! Frames travel in [`Batch`]es whose buffers are allocated once and
//! reused, so nothing is allocated on the packet path.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub mod afpacket;
pub mod afxdp;
pub mod any;
pub mod open;
pub mod pcap;
pub(crate) mod sys;
pub mod tap;

/// Frames one batch holds (issue 16: batches of 32-64 frames).
pub const BATCH: usize = 64;
/// Room for one frame: an Ethernet frame of MTU 1500 plus VLAN tags,
/// with headroom for programs that grow it.
pub const FRAME_ROOM: usize = 2048;

/// What a port was opened as (`IFACE[:afxdp|afpacket|pcap=FILE|tap]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// AF_XDP sockets on a Linux interface (copy mode where zero-copy is
    /// not offered), with the switch's own XDP redirect program.
    AfXdp { dev: String },
    /// AF_PACKET sockets with TPACKET_V3 rings (fanout across workers).
    AfPacket { dev: String },
    /// Input read from a pcap file, output written to one.
    Pcap {
        name: String,
        input: Option<PathBuf>,
        output: Option<PathBuf>,
    },
    /// A TAP device the switch creates: the host stack's port.
    Tap { name: String },
}

impl PortSpec {
    /// The port's name as the switch shows it.
    pub fn name(&self) -> &str {
        match self {
            PortSpec::AfXdp { dev } | PortSpec::AfPacket { dev } => dev,
            PortSpec::Pcap { name, .. } | PortSpec::Tap { name } => name,
        }
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortSpec::AfXdp { dev } => write!(f, "{dev}:afxdp"),
            PortSpec::AfPacket { dev } => write!(f, "{dev}:afpacket"),
            PortSpec::Pcap {
                name,
                input,
                output,
            } => {
                write!(f, "{name}:pcap")?;
                if let Some(i) = input {
                    write!(f, "={}", i.display())?;
                }
                if let Some(o) = output {
                    write!(f, ",out={}", o.display())?;
                }
                Ok(())
            }
            PortSpec::Tap { name } => write!(f, "{name}:tap"),
        }
    }
}

impl FromStr for PortSpec {
    type Err = PortError;

    /// `IFACE` (AF_XDP), `IFACE:afxdp`, `IFACE:afpacket`, `NAME:tap`,
    /// `NAME:pcap=IN.pcap`, `NAME:pcap=IN.pcap,out=OUT.pcap`,
    /// `NAME:pcap,out=OUT.pcap` (output only).
    fn from_str(s: &str) -> Result<PortSpec, PortError> {
        let bad = |why: &str| PortError::Spec {
            spec: s.to_string(),
            why: why.to_string(),
        };
        let (name, kind) = match s.split_once(':') {
            Some((n, k)) => (n, k),
            None => (s, "afxdp"),
        };
        if name.is_empty() {
            return Err(bad("the port has no name"));
        }
        let name = name.to_string();
        match kind {
            "afxdp" => Ok(PortSpec::AfXdp { dev: name }),
            "afpacket" => Ok(PortSpec::AfPacket { dev: name }),
            "tap" => Ok(PortSpec::Tap { name }),
            k if k == "pcap" || k.starts_with("pcap=") || k.starts_with("pcap,") => {
                let mut input = None;
                let mut output = None;
                let rest = k.strip_prefix("pcap").unwrap_or_default();
                for part in rest.split(',').filter(|p| !p.is_empty()) {
                    if let Some(file) = part.strip_prefix("out=") {
                        output = Some(PathBuf::from(file));
                    } else if let Some(file) = part.strip_prefix('=') {
                        input = Some(PathBuf::from(file));
                    } else {
                        return Err(bad("pcap ports take `=IN.pcap` and `,out=OUT.pcap`"));
                    }
                }
                if input.is_none() && output.is_none() {
                    return Err(bad("a pcap port needs `=IN.pcap`, `,out=OUT.pcap` or both"));
                }
                Ok(PortSpec::Pcap {
                    name,
                    input,
                    output,
                })
            }
            _ => Err(bad("port kinds: afxdp (default), afpacket, pcap=FILE, tap")),
        }
    }
}

/// A port's problem, naming the port.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("port `{spec}`: {why}")]
    Spec { spec: String, why: String },
    #[error("port `{port}`: {what}: {source}")]
    Os {
        port: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("port `{port}`: {why}")]
    Other { port: String, why: String },
}

/// A batch of frames: [`BATCH`] buffers allocated once and reused.
/// `frames[..len]` hold the frames of the batch; each buffer's length is
/// its frame's length.
pub struct Batch {
    pub frames: Vec<Vec<u8>>,
    /// Arrival time of each frame (ns, `CLOCK_MONOTONIC`, or the pcap
    /// record's time for pcap input).
    pub arrival_ns: Vec<u64>,
    pub len: usize,
}

impl Batch {
    pub fn new() -> Batch {
        Batch {
            frames: (0..BATCH).map(|_| Vec::with_capacity(FRAME_ROOM)).collect(),
            arrival_ns: vec![0; BATCH],
            len: 0,
        }
    }
}

impl Default for Batch {
    fn default() -> Batch {
        Batch::new()
    }
}

/// A frame to transmit.
#[derive(Clone, Copy, Debug)]
pub struct OutFrame<'a> {
    pub data: &'a [u8],
    /// The arrival time of the frame it came from (pcap output is
    /// written in this order).
    pub arrival_ns: u64,
}

/// One worker's receive queue on a port.
pub trait RxQueue: Send {
    /// Fills `batch` (from `batch.len = 0`) with up to [`BATCH`] frames,
    /// waiting at most `timeout` when none is there. Returns the count.
    fn recv(&mut self, batch: &mut Batch, timeout: Duration) -> Result<usize, PortError>;
    /// True once the queue will never give another frame (end of a pcap).
    fn finished(&self) -> bool {
        false
    }
    /// Adds to `out` the descriptors that become readable when a frame
    /// arrives (an idle worker waits on them); false when the queue has
    /// none (a pcap), and the worker sleeps instead.
    fn wait_fds(&self, _out: &mut Vec<std::os::fd::RawFd>) -> bool {
        false
    }
}

/// One worker's transmit queue on a port.
pub trait TxQueue: Send {
    /// Queues `frames` for transmission and returns how many the port
    /// took (the rest are the caller's to count as dropped).
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError>;
    /// Pushes out what is queued (kick the kernel, flush a file).
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }
}

/// Counters a port keeps itself (frames the kernel or device dropped
/// before the switch saw them, where known).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PortStats {
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

/// A port opened for `workers` workers.
pub struct OpenPort {
    pub spec: PortSpec,
    /// The device's ifindex (0 for pcap ports).
    pub ifindex: u32,
    /// Receive queues, at most one per worker (none for output-only
    /// ports).
    pub rx: Vec<Box<dyn RxQueue>>,
    /// Transmit queues, exactly one per worker.
    pub tx: Vec<Box<dyn TxQueue>>,
    /// Undoes what opening did (XDP programs, TAP devices, files
    /// finished) when the switch stops; also run on drop.
    pub close: Option<Box<dyn FnOnce() -> Result<PortStats, PortError> + Send>>,
}

impl OpenPort {
    /// Closes the port (see [`OpenPort::close`]); later calls do nothing.
    pub fn shut(&mut self) -> Result<PortStats, PortError> {
        match self.close.take() {
            Some(close) => close(),
            None => Ok(PortStats::default()),
        }
    }
}

impl Drop for OpenPort {
    fn drop(&mut self) {
        let _ = self.shut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print() {
        let cases = [
            ("veth0", "veth0:afxdp"),
            ("veth0:afpacket", "veth0:afpacket"),
            ("h:tap", "h:tap"),
            ("p0:pcap=in.pcap", "p0:pcap=in.pcap"),
            ("p0:pcap=in.pcap,out=o.pcap", "p0:pcap=in.pcap,out=o.pcap"),
            ("p1:pcap,out=o.pcap", "p1:pcap,out=o.pcap"),
        ];
        for (text, shown) in cases {
            let spec: PortSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), shown);
            assert_eq!(spec.to_string().parse::<PortSpec>().unwrap(), spec);
        }
        for bad in [":afxdp", "x:nope", "p:pcap", "p:pcap=a,foo"] {
            let e = bad.parse::<PortSpec>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
