from nf.parse import dst_port

counts = HashMap(u32, u8, 16)

def small(p: u8) -> u8:
    return dst_port()

def main() -> u64:
    counts[1] = dst_port()
    counts[2] += dst_port()
    z: u8 = small(dst_port())
    w: u8 = u8(dst_port())
    v: u8 = 0
    v = dst_port() & 255
    big: u64 = small(1)
    return u64(z + w + v) + big
