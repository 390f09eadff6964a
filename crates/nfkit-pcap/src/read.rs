//! Parsing a pcap file: [`Capture::parse`] (any link type), [`read`] and
//! [`read_file`] (Ethernet only).

use crate::error::PcapError;
use crate::format::*;
use crate::Packet;
use std::path::Path;

/// A parsed capture: the file header's facts and every record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    pub byte_order: ByteOrder,
    pub resolution: Resolution,
    pub linktype: u32,
    pub snaplen: u32,
    pub packets: Vec<Packet>,
    /// Each record's original (on-the-wire) length, by index.
    pub orig_lens: Vec<u32>,
}

fn arr<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

impl Capture {
    /// Parses a whole classic pcap file.
    pub fn parse(bytes: &[u8]) -> Result<Capture, PcapError> {
        let Some(magic) = arr::<4>(bytes, 0) else {
            return Err(PcapError::ShortHeader { len: bytes.len() });
        };
        let (byte_order, resolution) = match (u32::from_le_bytes(magic), u32::from_be_bytes(magic))
        {
            (MAGIC_US, _) => (ByteOrder::Little, Resolution::Micros),
            (MAGIC_NS, _) => (ByteOrder::Little, Resolution::Nanos),
            (_, MAGIC_US) => (ByteOrder::Big, Resolution::Micros),
            (_, MAGIC_NS) => (ByteOrder::Big, Resolution::Nanos),
            (PCAPNG_MAGIC, _) => return Err(PcapError::Pcapng),
            (_, m) => return Err(PcapError::BadMagic { magic: m }),
        };
        let (Some(major), Some(minor), Some(snaplen), Some(linktype)) = (
            arr::<2>(bytes, 4),
            arr::<2>(bytes, 6),
            arr::<4>(bytes, 16),
            arr::<4>(bytes, 20),
        ) else {
            return Err(PcapError::ShortHeader { len: bytes.len() });
        };
        let (major, minor) = (byte_order.u16(major), byte_order.u16(minor));
        if major != 2 {
            return Err(PcapError::Version { major, minor });
        }
        let snaplen = byte_order.u32(snaplen);
        // The upper bits of the link-type field carry FCS information.
        let linktype = byte_order.u32(linktype) & 0x0fff_ffff;

        let mut packets = Vec::new();
        let mut orig_lens = Vec::new();
        let mut at = FILE_HEADER_LEN;
        while at < bytes.len() {
            let index = packets.len();
            let available = bytes.len() - at;
            let field = |k: usize| arr::<4>(bytes, at + 4 * k).map(|b| byte_order.u32(b));
            let (Some(sec), Some(frac), Some(caplen), Some(orig_len)) =
                (field(0), field(1), field(2), field(3))
            else {
                return Err(PcapError::TruncatedHeader {
                    index,
                    offset: at,
                    available,
                });
            };
            let start = at + RECORD_HEADER_LEN;
            let data = start
                .checked_add(caplen as usize)
                .and_then(|end| bytes.get(start..end))
                .ok_or(PcapError::TruncatedData {
                    index,
                    offset: at,
                    caplen,
                    available: available - RECORD_HEADER_LEN,
                })?;
            let ts_ns = (sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add((frac as u64).saturating_mul(resolution.unit_ns()));
            packets.push(Packet {
                ts_ns,
                data: data.to_vec(),
            });
            orig_lens.push(orig_len);
            at = start + data.len();
        }
        Ok(Capture {
            byte_order,
            resolution,
            linktype,
            snaplen,
            packets,
            orig_lens,
        })
    }
}

/// The packets of a pcap file of Ethernet frames, given as bytes.
pub fn read(bytes: &[u8]) -> Result<Vec<Packet>, PcapError> {
    let c = Capture::parse(bytes)?;
    if c.linktype != LINKTYPE_ETHERNET {
        return Err(PcapError::LinkType {
            linktype: c.linktype,
        });
    }
    Ok(c.packets)
}

/// The packets of the pcap file of Ethernet frames at `path`.
pub fn read_file(path: impl AsRef<Path>) -> Result<Vec<Packet>, PcapError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| PcapError::Io {
        path: path.to_path_buf(),
        cause: source,
    })?;
    read(&bytes)
}
