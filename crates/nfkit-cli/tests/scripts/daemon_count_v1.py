"""Daemon tests, version 1 of 2: passes every packet and counts UDP
packets at index 0 of `seen` (both versions declare it alike, so a
redeploy keeps it)."""
from nf.classify import every_packet
from nf.parse import l4_proto

UDP = 17

seen = ArrayMap(u64, 4)

def count() -> u64:
    if l4_proto() == UDP:
        seen[0] += 1
    return PASS

every_packet(count)
