"""Daemon tests: every UDP packet faults (a read far past its end gives
the fault action), every other packet passes."""
from nf.classify import every_packet
from nf.parse import l4_proto

UDP = 17

def check() -> u64:
    if l4_proto() == UDP:
        if Packet.read_u32(4000) == 1:
            return DROP
    return PASS

every_packet(check)
