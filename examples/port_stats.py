"""Maps as dictionaries: packets and bytes per destination port, a block
list of ports filled when a port gets more than BLOCK_AFTER packets, and
the first packet length seen on each port."""
from nf.classify import every_packet

BLOCK_AFTER = 5

packets = HashMap(u16, u64, 1024)
bytes_ = HashMap(u16, u64, 1024)
blocked = HashMap(u16, u8, 64)
first_len = HashMap(u16, u32, 1024)

def account() -> u64:
    if Packet.l4_off == 0:
        return PASS
    port: u16 = Packet.dport
    if port in blocked:
        blocked[port] += 1
        return DROP
    packets[port] += 1
    bytes_[port] += u64(Packet.len)
    if port not in first_len:
        first_len[port] = Packet.len
    if packets.get(port, 0) > BLOCK_AFTER:
        blocked[port] = 0
        del packets[port]
    return PASS

every_packet(account)
attach("eth0", "xdp")
