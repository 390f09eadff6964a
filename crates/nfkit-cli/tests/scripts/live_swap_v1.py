"""Live-swap test, version 1 of 2: passes every packet and counts the
numbered UDP flow (destination port FLOW_PORT) at index 0 of `seen`,
a map both versions declare alike, so a redeploy keeps it."""
from nf.classify import every_packet
from nf.parse import l4_proto

FLOW_PORT = 7709
UDP = 17

seen = ArrayMap(u64, 2)

def count() -> u64:
    # An NF call, so that dynamic mode goes through a tail call too.
    if l4_proto() == UDP and Packet.dport == FLOW_PORT:
        seen[0] += 1
    return PASS

every_packet(count)
attach("eth0", "xdp")
