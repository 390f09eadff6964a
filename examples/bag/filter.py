"""The bag server's validity check, run in the kernel as a socket filter
(docs/bag.md). A datagram is valid when its payload is exactly one
command of the wire format: "PUT" + u32 key + u64 value (15 bytes),
"GET" + u32 key (7), "DELETE" + u32 key (10), "STOP" (4); nothing more,
nothing less. Valid datagrams are kept, the rest dropped; per-CPU
counters of both for the server's report.

One packet read per datagram besides the UDP length (each read is a
helper call at this hook): the command is compared within one 4- or
8-byte big-endian read, whose low bytes (the key's) are shifted out.

A socket filter reads the packet from its IP header: the UDP header is
at Packet.l4_off, the payload 8 bytes further. The payload length comes
from the UDP length field, which the kernel has already checked against
the IP packet (a datagram's trailing bytes are covered by it)."""
from nf.classify import every_packet

VALID = 0
INVALID = 1
stats = PercpuArrayMap(u64, 4)      # 0 valid, 1 invalid, 2 key over the limit (v2)

def bag_check() -> u64:
    if Packet.l4_proto != 17:
        stats[INVALID] += 1
        return DROP
    udp: u64 = u64(Packet.l4_off)
    n: u64 = Packet.read_u16(udp + 4) - 8
    p: u64 = udp + 8
    ok: bool = False
    if n == 15:
        ok = Packet.read_u32(p) >> 8 == 0x505554            # "PUT" and a key byte
    elif n == 7:
        ok = Packet.read_u32(p) >> 8 == 0x474554            # "GET" and a key byte
    elif n == 10:
        ok = Packet.read_u64(p) >> 16 == 0x44454c455445     # "DELETE" and 2 key bytes
    elif n == 4:
        ok = Packet.read_u32(p) == 0x53544f50               # "STOP"
    if ok:
        stats[VALID] += 1
        return PASS
    stats[INVALID] += 1
    return DROP

every_packet(bag_check)
attach("lo", "socket")
