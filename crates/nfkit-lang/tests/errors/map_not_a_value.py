m = HashMap(u32, u64, 16)

def main() -> u64:
    return m
