def main() -> u32:
    break
