def main() -> u32:
    xs = [1, 2, 3]
    return 0
