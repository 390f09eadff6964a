def main() -> u32:
    x = yield 1
    return 0
