//! Serialising packets as a classic pcap file.

use crate::error::PcapError;
use crate::format::*;
use crate::Packet;
use std::path::Path;

/// How to write a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    pub byte_order: ByteOrder,
    /// Microsecond files truncate timestamps to whole microseconds.
    pub resolution: Resolution,
    pub linktype: u32,
    /// Written in the header; packets are never cut to it.
    pub snaplen: u32,
}

impl Default for WriteOptions {
    /// Little-endian, nanoseconds, Ethernet, snapshot length 262144.
    fn default() -> Self {
        WriteOptions {
            byte_order: ByteOrder::Little,
            resolution: Resolution::Nanos,
            linktype: LINKTYPE_ETHERNET,
            snaplen: DEFAULT_SNAPLEN,
        }
    }
}

/// The bytes of a capture of `packets` written with `opts`.
pub fn write_with(packets: &[Packet], opts: &WriteOptions) -> Result<Vec<u8>, PcapError> {
    let bo = opts.byte_order;
    let total: usize = packets
        .iter()
        .map(|p| p.data.len() + RECORD_HEADER_LEN)
        .sum();
    let mut out = Vec::with_capacity(FILE_HEADER_LEN + total);
    bo.put_u32(&mut out, opts.resolution.magic());
    bo.put_u16(&mut out, 2);
    bo.put_u16(&mut out, 4);
    bo.put_u32(&mut out, 0); // thiszone
    bo.put_u32(&mut out, 0); // sigfigs
    bo.put_u32(&mut out, opts.snaplen);
    bo.put_u32(&mut out, opts.linktype);
    for (index, p) in packets.iter().enumerate() {
        let sec = u32::try_from(p.ts_ns / 1_000_000_000).map_err(|_| PcapError::Timestamp {
            index,
            ts_ns: p.ts_ns,
        })?;
        let frac = (p.ts_ns % 1_000_000_000 / opts.resolution.unit_ns()) as u32;
        let len = u32::try_from(p.data.len()).map_err(|_| PcapError::TooLarge {
            index,
            len: p.data.len(),
        })?;
        bo.put_u32(&mut out, sec);
        bo.put_u32(&mut out, frac);
        bo.put_u32(&mut out, len);
        bo.put_u32(&mut out, len);
        out.extend_from_slice(&p.data);
    }
    Ok(out)
}

/// The bytes of an Ethernet capture of `packets` (little-endian,
/// nanosecond timestamps).
pub fn write(packets: &[Packet]) -> Result<Vec<u8>, PcapError> {
    write_with(packets, &WriteOptions::default())
}

/// Writes an Ethernet capture of `packets` to `path` (replacing it).
pub fn write_file(path: impl AsRef<Path>, packets: &[Packet]) -> Result<(), PcapError> {
    let path = path.as_ref();
    let bytes = write(packets)?;
    std::fs::write(path, bytes).map_err(|source| PcapError::Io {
        path: path.to_path_buf(),
        cause: source,
    })
}
