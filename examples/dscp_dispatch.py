"""A ToS/DSCP dispatcher: the classifier picks a chain by DSCP; the chains
share a TTL-rewriting chain (inlined) that keeps the IPv4 checksum right
(RFC 1624 incremental update)."""
from nf.classify import by_dscp

EF = 46      # expedited forwarding (voice)
AF41 = 34    # video
CS1 = 8      # scavenger
IP = 14      # the IPv4 header in an untagged Ethernet frame
UPLINK = 3

per_class = ArrayMap(u64, 4)

def set_ttl(ttl: u8) -> u8:
    """Sets the TTL, fixes the checksum, gives the old TTL."""
    old: u8 = Packet.read_u8(IP + 8)
    word_old: u16 = Packet.read_u16(IP + 8)
    word_new: u16 = (u16(ttl) << 8) | (word_old & 0xff)
    csum: u32 = u32(~Packet.read_u16(IP + 10))
    csum += u32(~word_old) + u32(word_new)
    csum = (csum & 0xffff) + (csum >> 16)
    csum = (csum & 0xffff) + (csum >> 16)
    Packet.write_u16(IP + 10, ~u16(csum))
    Packet.write_u8(IP + 8, ttl)
    return old

def dec_ttl(by: u8) -> u64:
    t: u8 = Packet.read_u8(IP + 8)
    if t <= by:
        return 1
    set_ttl(t - by)
    return 0

def voice() -> u64:
    per_class[0] += 1
    if dec_ttl(1) == 1:
        return DROP
    return REDIRECT(UPLINK)

def video() -> u64:
    per_class[1] += 1
    if dec_ttl(1) == 1:
        return DROP
    return PASS

def scavenger() -> u64:
    per_class[2] += 1
    if Packet.len > 200:
        return DROP
    set_ttl(16)
    return PASS

by_dscp({EF: voice, AF41: video, CS1: scavenger}, default=PASS, fault=DROP)
attach("eth0", "xdp")
