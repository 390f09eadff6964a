def main(a: int) -> u32:
    return 0
