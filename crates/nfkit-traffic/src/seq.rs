//! Sequence stamps: the first 16 bytes of a UDP payload carry a magic,
//! a stream id (one per sender run) and a sequence number, so a receiver
//! counts received, missing and duplicated frames per stream.
//!
//! Layout (big-endian): `b"NFKQ"`, stream id `u32`, sequence `u64`.

use crate::frame::udp_offset;

pub const MAGIC: [u8; 4] = *b"NFKQ";
/// Bytes a stamp takes at the start of the UDP payload.
pub const STAMP_LEN: usize = 16;

/// Writes a stamp into `frame`'s UDP payload and updates the UDP
/// checksum (incrementally, RFC 1624). Returns false, leaving the frame
/// alone, when it is not UDP or its payload is shorter than
/// [`STAMP_LEN`].
pub fn stamp(frame: &mut [u8], stream: u32, seq: u64) -> bool {
    let Some((udp, v6)) = udp_offset(frame) else {
        return false;
    };
    let start = udp + 8;
    let Some(old) = frame.get(start..start + STAMP_LEN) else {
        return false;
    };
    let mut new = [0u8; STAMP_LEN];
    new[0..4].copy_from_slice(&MAGIC);
    new[4..8].copy_from_slice(&stream.to_be_bytes());
    new[8..16].copy_from_slice(&seq.to_be_bytes());
    let Some(csum) = frame.get(udp + 6..udp + 8) else {
        return false;
    };
    let old_csum = u16::from_be_bytes([csum[0], csum[1]]);
    // An IPv4 UDP checksum of zero means "not computed": keep it so.
    let new_csum = if old_csum == 0 && !v6 {
        0
    } else {
        let mut sum = u32::from(!old_csum);
        for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
            sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
            sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
        }
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        match !(sum as u16) {
            0 => 0xffff,
            c => c,
        }
    };
    if let Some(slot) = frame.get_mut(start..start + STAMP_LEN) {
        slot.copy_from_slice(&new);
    }
    if let Some(slot) = frame.get_mut(udp + 6..udp + 8) {
        slot.copy_from_slice(&new_csum.to_be_bytes());
    }
    true
}

/// The stream id and sequence number stamped in a UDP payload, if any.
pub fn read(udp_payload: &[u8]) -> Option<(u32, u64)> {
    let s = udp_payload.get(..STAMP_LEN)?;
    if s[0..4] != MAGIC {
        return None;
    }
    let stream = u32::from_be_bytes(s[4..8].try_into().ok()?);
    let seq = u64::from_be_bytes(s[8..16].try_into().ok()?);
    Some((stream, seq))
}
