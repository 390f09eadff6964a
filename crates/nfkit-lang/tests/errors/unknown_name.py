def main() -> u32:
    return counter + 1
