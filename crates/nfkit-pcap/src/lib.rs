//! Classic pcap files (the libpcap format, not pcapng): what nfkit reads
//! packets from and writes them to.
//!
//! * Reading accepts both byte orders and both timestamp resolutions
//!   (microseconds, magic `a1b2c3d4`; nanoseconds, magic `a1b23c4d`);
//!   [`read`] / [`read_file`] want Ethernet frames (`LINKTYPE_ETHERNET`),
//!   [`Capture::parse`] takes any link type.
//! * Writing ([`write`], [`write_file`]) produces little-endian,
//!   nanosecond-resolution Ethernet captures by default
//!   ([`WriteOptions`] picks otherwise).
//! * Bad input never panics: every problem is a [`PcapError`] naming the
//!   record (0-based) and its byte offset in the file.
//!
//! Modules: [`format`] (header constants), [`read`](mod@read) (parsing),
//! [`write`](mod@write) (serialising), [`error`].

#![forbid(unsafe_code)]

pub mod error;
pub mod format;
pub mod read;
pub mod write;

pub use error::PcapError;
pub use format::{ByteOrder, Resolution, LINKTYPE_ETHERNET};
pub use read::{read, read_file, Capture};
pub use write::{write, write_file, write_with, WriteOptions};

/// One captured packet: when (nanoseconds since the Unix epoch) and its
/// bytes (as captured: at most the snapshot length).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Packet {
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

impl Packet {
    /// A packet captured at `ts_ns`.
    pub fn new(ts_ns: u64, data: Vec<u8>) -> Packet {
        Packet { ts_ns, data }
    }
}
