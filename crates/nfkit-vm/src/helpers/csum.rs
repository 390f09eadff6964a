//! Internet checksum arithmetic (RFC 1071 ones' complement sums) as the
//! kernel's checksum helpers compute it. Values are kept in the byte order
//! they have in memory, loaded little-endian, as the kernel does on a
//! little-endian host; ones' complement sums do not depend on the order.

#![forbid(unsafe_code)]

/// 32-bit ones' complement addition (end-around carry): `csum_add`.
pub fn add32(a: u32, b: u32) -> u32 {
    let (s, c) = a.overflowing_add(b);
    s.wrapping_add(c as u32)
}

/// `csum_sub`.
pub fn sub32(a: u32, b: u32) -> u32 {
    add32(a, !b)
}

/// Folds 32 bits to 16 without inverting (`csum_from32to16`).
pub fn from32to16(x: u32) -> u16 {
    let x = (x & 0xffff) + (x >> 16);
    let x = (x & 0xffff) + (x >> 16);
    x as u16
}

/// `csum_fold`: fold to 16 bits and invert.
pub fn fold(x: u32) -> u16 {
    !from32to16(x)
}

/// `csum_partial`: ones' complement sum of `data` (as little-endian 32-bit
/// words, a short tail padded with zeros) added to `seed`.
pub fn partial(data: &[u8], seed: u32) -> u32 {
    let mut acc = seed;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc = add32(acc, u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 4];
        w[..rest.len()].copy_from_slice(rest);
        acc = add32(acc, u32::from_le_bytes(w));
    }
    acc
}

/// `bpf_csum_diff` (kernel 6.13 and later: the result folded to 16 bits
/// on every architecture).
pub fn bpf_csum_diff(from: &[u8], to: &[u8], seed: u32) -> u32 {
    match (from.is_empty(), to.is_empty()) {
        (false, false) => from32to16(sub32(partial(to, seed), partial(from, 0))) as u32,
        (true, false) => from32to16(partial(to, seed)) as u32,
        (false, true) => from32to16(!partial(from, !seed)) as u32,
        (true, true) => seed,
    }
}

/// `csum_replace4` / `inet_proto_csum_replace4` without CHECKSUM_PARTIAL:
/// the checksum `sum` after a 32-bit field changes from `from` to `to`.
pub fn replace4(sum: u16, from: u32, to: u32) -> u16 {
    fold(add32(sub32(!(sum as u32), from), to))
}

/// `csum_replace_by_diff`: the checksum after adding a precomputed diff.
pub fn replace_by_diff(sum: u16, diff: u32) -> u16 {
    fold(add32(diff, !(sum as u32)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checksum(data: &[u8]) -> u16 {
        // RFC 1071 over big-endian 16-bit words, in network order.
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = (c[0] as u32) << 8 | c.get(1).copied().unwrap_or(0) as u32;
            s += w;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn replace_keeps_checksum_valid() {
        let mut hdr: Vec<u8> = vec![
            0x45, 0, 0, 0x54, 0, 0, 0x40, 0, 0x40, 1, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ];
        let c = checksum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(checksum(&hdr), 0);
        // Change the destination address; update the checksum incrementally.
        let old = u32::from_le_bytes([hdr[16], hdr[17], hdr[18], hdr[19]]);
        let new_addr = [198u8, 19, 7, 9];
        let new = u32::from_le_bytes(new_addr);
        let sum = u16::from_le_bytes([hdr[10], hdr[11]]);
        let upd = replace4(sum, old, new);
        hdr[16..20].copy_from_slice(&new_addr);
        hdr[10..12].copy_from_slice(&upd.to_le_bytes());
        assert_eq!(checksum(&hdr), 0);
        // The same through csum_diff + replace_by_diff.
        let diff = bpf_csum_diff(&new_addr, &[198, 20, 0, 1], 0);
        let sum = u16::from_le_bytes([hdr[10], hdr[11]]);
        hdr[16..20].copy_from_slice(&[198, 20, 0, 1]);
        hdr[10..12].copy_from_slice(&replace_by_diff(sum, diff).to_le_bytes());
        assert_eq!(checksum(&hdr), 0);
    }
}
