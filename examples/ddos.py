"""Two-level DDoS mitigation.

Every destination has a token bucket; while it is in profile, packets pass.
When a destination is out of profile, each source-destination pair gets its
own bucket; a source whose pair bucket is empty is an offender and goes into
an expiring blacklist. Blacklisted sources are dropped, except one packet in
SAMPLE that is redirected to a collector port for analysis.
"""
from nf.meter import tb_dst, tb_srcdst
from nf.sets import src_set, SET_LOOKUP, SET_ADD
from nf.sample import one_in
from nf.classify import every_packet

COLLECTOR = 7                 # ifindex of the collector port
SAMPLE = 10                   # one blacklisted packet in SAMPLE goes to it
BLACKLIST_NS = 10_000_000_000 # offenders stay blacklisted 10 s
DST_RATE = 100                # packets per second per destination
DST_BURST = 20
PAIR_RATE = 20                # per source-destination pair, when out of profile
PAIR_BURST = 5

PASSED = 0
DROPPED = 1
REDIRECTED = 2
counters = PercpuArrayMap(u64, 3)

def mitigate() -> u64:
    if src_set(SET_LOOKUP, 0) == 1:
        if one_in(SAMPLE) == 1:
            counters[REDIRECTED] += 1
            return REDIRECT(COLLECTOR)
        counters[DROPPED] += 1
        return DROP
    if tb_dst(DST_RATE, DST_BURST) == 0:
        counters[PASSED] += 1
        return PASS
    if tb_srcdst(PAIR_RATE, PAIR_BURST) == 1:
        src_set(SET_ADD, BLACKLIST_NS)
        counters[DROPPED] += 1
        return DROP
    counters[PASSED] += 1
    return PASS

every_packet(mitigate)
attach("eth0", "xdp")
