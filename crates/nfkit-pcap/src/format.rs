//! The classic pcap layout: a 24-byte file header, then records of a
//! 16-byte header and the captured bytes.

/// Magic of microsecond-resolution files (as written in the file's byte order).
pub const MAGIC_US: u32 = 0xa1b2_c3d4;
/// Magic of nanosecond-resolution files.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// First four bytes of a pcapng file (Section Header Block type).
pub const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;
/// Size of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Ethernet link type.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snapshot length written by default (the one tcpdump uses).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Byte order of a file's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    pub(crate) fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    pub(crate) fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }

    pub(crate) fn put_u32(self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
    }

    pub(crate) fn put_u16(self, out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        });
    }
}

/// Resolution of record timestamps' fractional part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    Micros,
    Nanos,
}

impl Resolution {
    /// Nanoseconds per unit of the fractional field.
    pub fn unit_ns(self) -> u64 {
        match self {
            Resolution::Micros => 1_000,
            Resolution::Nanos => 1,
        }
    }

    pub(crate) fn magic(self) -> u32 {
        match self {
            Resolution::Micros => MAGIC_US,
            Resolution::Nanos => MAGIC_NS,
        }
    }
}
