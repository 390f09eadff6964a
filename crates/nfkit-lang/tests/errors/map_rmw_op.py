m = HashMap(u32, u64, 16)

def main() -> u64:
    m[1] *= 2
    return 0
