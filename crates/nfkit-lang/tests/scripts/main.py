from nf.classify import every_packet
from lib.common import bump, sampled as sample

def main() -> u64:
    if bump(0) > 2:
        return DROP
    if sample(1) == 1:
        bump(1)
    return PASS

every_packet(main)
