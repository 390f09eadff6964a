from nf.classify import every_packet

def main() -> u64:
    Packet.write_u8(8, 1)
    return PASS

every_packet(main)
attach("eth0", "socket")
