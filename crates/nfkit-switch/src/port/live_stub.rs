//! Placeholder for the live port kinds (AF_XDP, AF_PACKET, TAP), which
//! `open.rs` provides on the ports branch: at merge, [`super::any`]'s
//! `use ... as live` points at `open` and this file goes.

use super::{OpenPort, PortError, PortSpec};

/// Opens live port `spec` for `workers` workers: not in this build.
pub fn open_live(spec: &PortSpec, _workers: usize) -> Result<OpenPort, PortError> {
    Err(PortError::Other {
        port: spec.name().to_string(),
        why: format!("{spec}: not available in this build (live ports)"),
    })
}
