from nf.classify import every_packet, by_dscp

def a() -> u64:
    return PASS

every_packet(a)
by_dscp({1: a})
