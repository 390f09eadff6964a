"""A loop over header options: walks the TCP options of SYN packets and
clamps the MSS option to MSS_MAX (fixing the TCP checksum). The walk is a
'while' loop, so the compiler inserts an iteration cap (LOOP_CAP)."""
from nf.classify import every_packet

MSS_MAX = 1400
LOOP_CAP = 40
SYN = 0x02
seen = ArrayMap(u64, 4)     # 0: SYNs, 1: MSS found, 2: clamped, 3: options walked

def clamp_mss() -> u64:
    if Packet.l4_proto != 6 or Packet.l4_off == 0:
        return PASS
    if Packet.tcp_flags & SYN == 0:
        return PASS
    seen[0] += 1
    tcp: u64 = u64(Packet.l4_off)
    end: u64 = tcp + u64(Packet.read_u8(tcp + 12) >> 4) * 4
    off: u64 = tcp + 20
    while off < end:
        seen[3] += 1
        kind: u8 = Packet.read_u8(off)
        if kind == 0:
            break
        if kind == 1:
            off += 1
            continue
        size: u8 = Packet.read_u8(off + 1)
        if size < 2:
            return DROP
        if kind == 2 and size == 4:
            seen[1] += 1
            mss: u16 = Packet.read_u16(off + 2)
            if mss > MSS_MAX:
                seen[2] += 1
                # The checksum sums 16-bit words from the TCP header's start:
                # a field at an odd offset counts byte-swapped.
                old_w: u16 = mss
                new_w: u16 = MSS_MAX
                if (off - tcp) % 2 == 1:
                    old_w = (old_w >> 8) | (old_w << 8)
                    new_w = (new_w >> 8) | (new_w << 8)
                csum: u32 = u32(~Packet.read_u16(tcp + 16))
                csum += u32(~old_w) + u32(new_w)
                csum = (csum & 0xffff) + (csum >> 16)
                csum = (csum & 0xffff) + (csum >> 16)
                Packet.write_u16(tcp + 16, ~u16(csum))
                Packet.write_u16(off + 2, MSS_MAX)
            break
        off += u64(size)
    return PASS

every_packet(clamp_mss)
attach("eth0", "xdp")
