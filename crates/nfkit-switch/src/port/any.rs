//! Opening a port of any kind: pcap ports here ([`super::pcap`]), live
//! ones (AF_XDP, AF_PACKET, TAP) through [`super::open::open_live`].

use super::{pcap, OpenPort, PortError, PortSpec};
// The live port kinds (AF_XDP, AF_PACKET, TAP).
use super::open as live;

/// Opens `spec` for `workers` workers.
pub fn open(spec: &PortSpec, workers: usize) -> Result<OpenPort, PortError> {
    match spec {
        PortSpec::Pcap { .. } => pcap::open(spec, workers),
        _ => live::open_live(spec, workers),
    }
}

/// Opens every port of `specs`, in order, for `workers` workers (ports
/// already opened are closed again when one fails).
pub fn open_all(specs: &[PortSpec], workers: usize) -> Result<Vec<OpenPort>, PortError> {
    specs.iter().map(|s| open(s, workers)).collect()
}
