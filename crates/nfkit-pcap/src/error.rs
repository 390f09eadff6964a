//! [`PcapError`]: what can be wrong with a pcap file, saying where.

use std::path::PathBuf;

/// A pcap file could not be read or written. Record indices are 0-based;
/// offsets are bytes from the start of the file.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("{}: {cause}", path.display())]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("file header truncated: {len} bytes, a pcap file header has 24")]
    ShortHeader { len: usize },
    #[error(
        "this is a pcapng file; only classic pcap is supported (convert with `editcap -F pcap`)"
    )]
    Pcapng,
    #[error("not a pcap file: magic {magic:#010x} at offset 0")]
    BadMagic { magic: u32 },
    #[error("unsupported pcap version {major}.{minor} (2.4 expected)")]
    Version { major: u16, minor: u16 },
    #[error("link type {linktype} is not Ethernet (1)")]
    LinkType { linktype: u32 },
    #[error(
        "record {index} at offset {offset}: record header truncated ({available} of 16 bytes)"
    )]
    TruncatedHeader {
        index: usize,
        offset: usize,
        available: usize,
    },
    #[error("record {index} at offset {offset}: {caplen} captured bytes announced, {available} left in the file")]
    TruncatedData {
        index: usize,
        offset: usize,
        caplen: u32,
        available: usize,
    },
    #[error("packet {index}: {len} bytes do not fit a pcap record")]
    TooLarge { index: usize, len: usize },
    #[error("packet {index}: timestamp {ts_ns} ns is past what classic pcap can hold (year 2106)")]
    Timestamp { index: usize, ts_ns: u64 },
}
