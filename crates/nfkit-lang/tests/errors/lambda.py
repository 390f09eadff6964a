def main() -> u32:
    f = lambda x: x
    return 0
