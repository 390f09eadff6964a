"""One NF of the catalogue: nf/mark.c's set_dscp marks every IPv4/IPv6
packet EF (keeping ECN; IPv4's checksum updated incrementally, RFC 1624)
and the chain sends it back out."""
from nf.mark import set_dscp
from nf.classify import every_packet

def mark() -> u64:
    set_dscp(46)
    return TX

every_packet(mark)
