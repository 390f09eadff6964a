def main(a) -> u32:
    return 0
