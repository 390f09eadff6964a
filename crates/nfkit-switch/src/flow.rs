//! The flow hash that dispatch uses to pick a worker for a frame of a
//! port with fewer receive queues than workers: the same flow always
//! goes to the same worker, so a flow's frames keep their order.
//! Fields: IPv4/IPv6 addresses, the L4 protocol and, for TCP, UDP and
//! SCTP (not IPv4 fragments after the first), the ports; after up to two
//! VLAN tags. Other frames hash their MAC addresses and EtherType.

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

fn fnv(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h ^= u32::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

/// The frame's flow hash.
pub fn flow_hash(f: &[u8]) -> u32 {
    let mut off = 12;
    let mut proto = be16(f, off).unwrap_or(0);
    for _ in 0..2 {
        if proto != 0x8100 && proto != 0x88a8 {
            break;
        }
        off += 4;
        proto = be16(f, off).unwrap_or(0);
    }
    let l3 = off + 2;
    let l2 = || fnv(FNV_OFFSET, f.get(..14).unwrap_or(f));
    let (addrs, l4proto, l4, first) = match proto {
        0x0800 => {
            let Some(ihl) = f.get(l3).map(|b| usize::from(b & 0x0f) * 4) else {
                return l2();
            };
            let frag = be16(f, l3 + 6).unwrap_or(0) & 0x1fff;
            (
                f.get(l3 + 12..l3 + 20),
                f.get(l3 + 9).copied().unwrap_or(0),
                l3 + ihl,
                frag == 0,
            )
        }
        0x86dd => (
            f.get(l3 + 8..l3 + 40),
            f.get(l3 + 6).copied().unwrap_or(0),
            l3 + 40,
            true,
        ),
        _ => return l2(),
    };
    let Some(addrs) = addrs else {
        return l2();
    };
    let mut h = fnv(FNV_OFFSET, addrs);
    h = fnv(h, &[l4proto]);
    if first && matches!(l4proto, 6 | 17 | 132) {
        if let Some(ports) = f.get(l4..l4 + 4) {
            h = fnv(h, ports);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(src: [u8; 4], sport: u16, payload: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&[10, 0, 0, 1]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[42] = payload;
        f
    }

    #[test]
    fn same_flow_same_hash() {
        assert_eq!(
            flow_hash(&udp4([1, 2, 3, 4], 5, 1)),
            flow_hash(&udp4([1, 2, 3, 4], 5, 2))
        );
        assert_ne!(
            flow_hash(&udp4([1, 2, 3, 4], 5, 1)),
            flow_hash(&udp4([1, 2, 3, 4], 6, 1))
        );
        // Short and odd frames hash too.
        let _ = flow_hash(&[]);
        let _ = flow_hash(&[0u8; 15]);
    }
}
