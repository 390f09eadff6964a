"""Version 2 of the bag server's filter (docs/bag.md): the exact check of
filter.py, and also keys at or above KEY_LIMIT rejected (PUT, GET,
DELETE). Swapped in at runtime with `nfkit bag serve --swap-after N
--filter-v2 examples/bag/filter_v2.py`; the user-space twin is
`--key-limit 1000`."""
from nf.classify import every_packet

VALID = 0
INVALID = 1
OVER_LIMIT = 2
KEY_LIMIT = 1000
stats = PercpuArrayMap(u64, 4)      # 0 valid, 1 invalid, 2 key over the limit

def le_u32(off: u64) -> u64:
    """The little-endian u32 at `off` (the wire format's integers)."""
    return (u64(Packet.read_u8(off)) | u64(Packet.read_u8(off + 1)) << 8
            | u64(Packet.read_u8(off + 2)) << 16 | u64(Packet.read_u8(off + 3)) << 24)

def bag_check() -> u64:
    if Packet.l4_proto != 17:
        stats[INVALID] += 1
        return DROP
    udp: u64 = u64(Packet.l4_off)
    n: u64 = Packet.read_u16(udp + 4) - 8
    p: u64 = udp + 8
    ok: bool = False
    key_at: u64 = 0
    if n == 15:
        ok = Packet.read_u32(p) >> 8 == 0x505554            # "PUT" and a key byte
        key_at = p + 3
    elif n == 7:
        ok = Packet.read_u32(p) >> 8 == 0x474554            # "GET" and a key byte
        key_at = p + 3
    elif n == 10:
        ok = Packet.read_u64(p) >> 16 == 0x44454c455445     # "DELETE" and 2 key bytes
        key_at = p + 6
    elif n == 4:
        ok = Packet.read_u32(p) == 0x53544f50               # "STOP"
    if not ok:
        stats[INVALID] += 1
        return DROP
    if key_at != 0 and le_u32(key_at) >= KEY_LIMIT:
        stats[OVER_LIMIT] += 1
        return DROP
    stats[VALID] += 1
    return PASS

every_packet(bag_check)
attach("lo", "socket")
