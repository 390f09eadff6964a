//! Errors of the traffic crate.

use thiserror::Error;

/// What went wrong while building, sending or receiving traffic.
#[derive(Debug, Error)]
pub enum TrafficError {
    /// A `--flows` specification that does not parse.
    #[error("flow spec {flow} (`{text}`): {msg}")]
    Spec {
        flow: usize,
        text: String,
        msg: String,
    },
    /// A frame that cannot be built (payload too large, mixed families).
    #[error("frame: {0}")]
    Frame(String),
    /// A system call failed.
    #[error("{what}: {cause}")]
    Os { what: String, cause: std::io::Error },
    /// Reading a pcap failed.
    #[error(transparent)]
    Pcap(#[from] nfkit_pcap::PcapError),
    /// Loading, attaching or reading an XDP program or map failed.
    #[error("{what}: {cause}")]
    Bpf { what: String, cause: String },
    /// The live-frame engine cannot send this (frames, kernel, device).
    #[error("live engine: {0}")]
    Live(String),
    /// Nothing to send.
    #[error("nothing to send: {0}")]
    Empty(String),
}

impl TrafficError {
    pub(crate) fn os(what: impl Into<String>, source: std::io::Error) -> TrafficError {
        TrafficError::Os {
            what: what.into(),
            cause: source,
        }
    }
}
