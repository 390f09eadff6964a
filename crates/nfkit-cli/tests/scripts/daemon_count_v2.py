"""Daemon tests, version 2 of 2: as version 1, counting at index 1."""
from nf.classify import every_packet
from nf.parse import l4_proto

UDP = 17

seen = ArrayMap(u64, 4)

def count() -> u64:
    if l4_proto() == UDP:
        seen[1] += 1
    return PASS

every_packet(count)
