def main() -> u64:
    x: u8 = -1
    return x
