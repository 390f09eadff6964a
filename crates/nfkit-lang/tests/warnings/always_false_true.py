from nf.parse import dst_port

def main(x: u8, y: s8, n: u32) -> u64:
    k: u32 = 0
    if x < 0:
        k += 1
    if x >= 0:
        k += 2
    if x > 255:
        k += 4
    if x == 300:
        k += 8
    if 0 > x:
        k += 16
    if x != -1:
        k += 32
    if y < -128:
        k += 64
    if u32(x) > 1000:
        k += 128
    if n < 0 or n == 4294967296:
        k += 256
    if x < 10 and y > -5 and n >= 1:
        k += 512
    return u64(k)
