"""A per-flow rate limiter: a token bucket per UDP/TCP flow (IPv4 source
address and both ports) kept in a map, refilled by the time since the
flow's previous packet (nf.monitor.last_seen)."""
from nf.monitor import last_seen, LAST_SEEN_NEVER
from nf.classify import every_packet

RATE = 10        # packets per second per flow
BURST = 4        # bucket size (tokens)
SCALE = 1000     # tokens are counted in thousandths

tokens = LruHashMap(u64, u64, 4096)
verdicts = ArrayMap(u64, 2)

def limit() -> u64:
    if Packet.ip_version != 4 or Packet.l4_off == 0:
        return PASS
    src: u64 = u64(Packet.read_u32(u64(Packet.l3_off) + 12))
    flow: u64 = (src << 32) | (u64(Packet.sport) << 16) | u64(Packet.dport)
    gap: u64 = last_seen()
    t: u64 = BURST * SCALE
    if gap != LAST_SEEN_NEVER:
        t = tokens.get(flow, BURST * SCALE)
        refill: u64 = gap // (1_000_000_000 // (RATE * SCALE))
        if refill > BURST * SCALE:
            refill = BURST * SCALE
        t += refill
        if t > BURST * SCALE:
            t = BURST * SCALE
    if t < SCALE:
        tokens[flow] = t
        verdicts[1] += 1
        return DROP
    tokens[flow] = t - SCALE
    verdicts[0] += 1
    return PASS

every_packet(limit)
attach("eth0", "xdp")
