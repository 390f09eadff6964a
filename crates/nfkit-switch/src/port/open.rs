//! Opening a live port (AF_XDP, AF_PACKET, TAP) by its spec.
//!
//! Every kind opens in the calling thread's network namespace: a caller
//! that serves a namespace enters it first. What an open port changed
//! (an XDP program, a TAP device) is undone by its `close`, which also
//! runs when the [`OpenPort`] is dropped; a failed open undoes what it
//! had done before it returns.

use super::{afpacket, afxdp, tap, OpenPort, PortError, PortSpec};

/// Opens `spec` for `workers` workers: exactly `workers` transmit
/// queues and up to `workers` receive queues.
pub fn open_live(spec: &PortSpec, workers: usize) -> Result<OpenPort, PortError> {
    if workers == 0 {
        return Err(PortError::Other {
            port: spec.to_string(),
            why: "a port needs at least one worker".into(),
        });
    }
    match spec {
        PortSpec::AfXdp { dev } => afxdp::open(spec, dev, workers),
        PortSpec::AfPacket { dev } => afpacket::open(spec, dev, workers),
        PortSpec::Tap { name } => tap::open(spec, name, workers),
        PortSpec::Pcap { .. } => Err(PortError::Other {
            port: spec.to_string(),
            why: "pcap ports are opened by the pcap module".into(),
        }),
    }
}

/// A system error of port `port` while doing `what`.
pub(crate) fn os_err(port: &str, what: &str, source: std::io::Error) -> PortError {
    PortError::Os {
        port: port.to_string(),
        what: what.to_string(),
        source,
    }
}
