def main() -> u32:
    x += 1
    return 0
