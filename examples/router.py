"""An L3 router as a match-action pipeline: `pre` checks the packet, an LPM
routes table picks the output port and next-hop MAC (rewriting the
Ethernet header and decrementing the TTL), a ternary ACL drops, permits or
rate-limits per entry through an eBPF extern (nf.meter's token bucket),
and `post` runs per output port before transmission (a per-port counter).
Ports are the software switch's port numbers, ifindexes in the kernel
(2 and 3; `nfkit map set ROUTES_lpm ...` re-points routes at runtime, and
`nfkit map set ACL_default 0 0x0100000000000000` makes the ACL drop what
no rule matches: action 1 of its actions, docs/language.md "Pipelines")."""
from nf.meter import tb_src

IP = 14                    # the IPv4 header in an untagged Ethernet frame
ROUTER_MAC = 0x02_00_00_00_00_fe
NH2 = 0x02_00_00_00_02_01  # next hop behind port 2
NH3 = 0x02_00_00_00_03_01  # next hop behind port 3
P2 = 2 << 48               # port 2 in a route's argument
P3 = 3 << 48

stats = ArrayMap(u64, 8)   # 0 not IPv4, 1 TTL expired, 2 rate-limited, 3 routed out

def sanity() -> u64:
    if Packet.ip_version != 4:
        stats[0] += 1
        return DROP
    if Packet.read_u8(IP + 8) <= 1:
        stats[1] += 1
        return DROP
    return 0

def route(arg: u64) -> u64:
    """arg = port << 48 | next-hop MAC: rewrite MACs, TTL - 1 (RFC 1624)."""
    nh: u64 = arg & 0xffff_ffff_ffff
    Packet.write_u32(0, u32(nh >> 16))
    Packet.write_u16(4, u16(nh & 0xffff))
    Packet.write_u32(6, u32(ROUTER_MAC >> 16))
    Packet.write_u16(10, u16(ROUTER_MAC & 0xffff))
    word_old: u16 = Packet.read_u16(IP + 8)
    word_new: u16 = word_old - 0x100
    csum: u32 = u32(~Packet.read_u16(IP + 10))
    csum += u32(~word_old) + u32(word_new)
    csum = (csum & 0xffff) + (csum >> 16)
    csum = (csum & 0xffff) + (csum >> 16)
    Packet.write_u16(IP + 10, ~u16(csum))
    Packet.write_u16(IP + 8, word_new)
    return arg >> 48

def rate_limit(rate: u64) -> u64:
    """The extern: a token bucket per source address at this entry's rate."""
    if tb_src(rate, rate) == 1:
        stats[2] += 1
        return DROP
    return 0

def count_out() -> u64:
    stats[3] += 1
    return PASS

ROUTES = Table(
    keys={"ip.dst": "lpm"},
    actions=[route, DROP],
    size=256,
    default=DROP,
    entries=[
        ("198.18.1.0/24", route, P2 | NH2),
        ("198.18.2.0/24", route, P3 | NH3),
        ("198.18.2.128/25", route, P2 | NH2),   # more specific: back to port 2
    ],
)

ACL = Table(
    keys={"ip.src": "ternary", "ip.proto": "ternary", "l4.dport": "ternary"},
    actions=[NoAction, DROP, rate_limit],
    size=64,
    default=NoAction,
    entries=[
        (("198.18.0.66", "*", "*"), rate_limit, 5),       # 5 packets/s, burst 5
        (("198.18.0.0/24", 17, 53), NoAction),            # DNS permitted ...
        (("198.18.0.0/24", 17, (0, 0xff00)), DROP),       # ... other UDP ports below 256 not
        (("*", 6, 23), DROP),                             # telnet from anywhere
    ],
)

pipeline(pre=sanity, tables=[ROUTES, ACL], post=count_out, miss=DROP)
attach("eth0", "xdp")
