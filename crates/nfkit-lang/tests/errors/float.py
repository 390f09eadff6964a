def main() -> u32:
    x = 1.5
    return 0
