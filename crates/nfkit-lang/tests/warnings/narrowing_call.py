from nf.classify import every_packet
from nf.parse import dst_port

def status() -> s64:
    return -1

def main() -> u64:
    x: u8 = status()
    y: u16 = dst_port()
    if x < 0:
        return DROP
    return u64(y)

every_packet(main)
