"""One NF of the catalogue: nf/mark.c's set_ttl sets the TTL / hop limit
to 64 (IPv4's checksum updated incrementally) and the chain redirects the
packet to ifindex 5."""
from nf.mark import set_ttl
from nf.classify import every_packet

def mark() -> u64:
    set_ttl(64)
    return REDIRECT(5)

every_packet(mark)
