def main() -> u32:
    return len(3)
