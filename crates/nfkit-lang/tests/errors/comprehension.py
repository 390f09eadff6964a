def main() -> u32:
    xs = [i for i in range(3)]
    return 0
