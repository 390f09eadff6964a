def main() -> u32:
    x: u32 = 1
    x: u8 = 2
    return 0
