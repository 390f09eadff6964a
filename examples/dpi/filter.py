"""Deep packet inspection from regular expressions: SQL injection in web
requests is dropped, BitTorrent handshakes are counted and dropped, SSH
banners are counted. The pattern sets are compiled to DFAs when the
script is compiled and travel with it (docs/dpi.md). P2P comes from a
pattern file, relative to the script.
Run: nfkit run examples/dpi/filter.py --pcap F"""
from nf.classify import every_packet
from nf.dpi import match

SQLI = Patterns([
    "(?i)union\\s+select",
    "(?i)\\bor\\s+1\\s*=\\s*1",
    "(?i)drop\\s+table",
    "'\\s*--",
])
P2P = Patterns(file="p2p.txt")
SSH = Patterns(["^SSH-2\\.0-"])

hits = ArrayMap(u64, 4)

def inspect() -> u64:
    if Packet.dport == 80:
        if match(SQLI, 1024) != 0:
            hits[0] += 1
            return DROP
    if match(P2P) != 0:
        hits[1] += 1
        return DROP
    if match(SSH, 16) != 0:
        hits[2] += 1
    return PASS

every_packet(inspect)
attach("eth0", "xdp")
