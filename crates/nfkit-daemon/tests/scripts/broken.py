from nf.classify import every_packet

def count() -> u64:
    return no_such_nf()

every_packet(count)
