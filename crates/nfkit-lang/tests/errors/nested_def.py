def main() -> u32:
    def inner() -> u32:
        return 1
    return 0
