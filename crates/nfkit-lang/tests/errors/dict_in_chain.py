def main() -> u32:
    d = {1: 2}
    return 0
