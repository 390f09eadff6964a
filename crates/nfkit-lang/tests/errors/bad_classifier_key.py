from nf.classify import by_ipv4_dst

def a() -> u64:
    return PASS

by_ipv4_dst({"198.18.0.0/33": a})
